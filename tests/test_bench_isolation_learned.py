"""A saved learned scheduler on the bench: its env (the simulator, the labels, the metrics) plays in the scoring
process, and its model, in a process of its own, gets only observations and action masks and returns actions. It
decides the same as in process, and code in its process that looks for the simulator finds nothing there."""

import shutil

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents import evaluate  # noqa: E402
from evalstop_gym.agents import policy as learned_policy  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.bench import isolate  # noqa: E402
from evalstop_gym.bench.play import learned_spec  # noqa: E402
from evalstop_gym.bench.policies import parse_policy  # noqa: E402
from evalstop_gym.bench.suite import Row  # noqa: E402
from evalstop_gym.envs.adapter import CLUSTER_ID  # noqa: E402

TINY = {"n_steps": 64, "batch_size": 32, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}
ROW = Row("toy-nodes", calibration="realistic", jobs=20, seeds=(1000,))   # 3 of its 20 jobs hack


def _scheduler(out, stops):
    """A maskable-PPO scheduler trained for 64 steps on nodes of 8 GPUs, its checkpoints answered by ``stops``."""
    train(CLUSTER_ID, "maskable-ppo", out=out, timesteps=64, n_envs=1, calibration="realistic",
          overrides={**TINY, "env_kwargs": {"jobs": 10},
                     "env_wrapper": [{"evalstop_gym.agents.wrappers.HandCodedStops": stops}]}, echo=lambda _: None)
    return out


def _decisive(stop):
    """The saved stop-policy's action head sharpened (weights x 30, then stop + 0.5), so that its answers depend
    on the checkpoint (it stops 15 of the row's 20 jobs here): a 64-step policy answers continue everywhere."""
    import torch

    model = learned_policy.LearnedPolicy.load(stop).model
    head = model.policy.action_net
    with torch.no_grad():
        head.weight.mul_(30.0)
        head.bias.mul_(30.0)
        head.bias[1] += 0.5
    model.save(stop / "model.zip")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-schedulers")
    stop = root / "stop"
    train("EvalStop-StopControl-v0", "ppo", out=stop, timesteps=64, n_envs=1, overrides=TINY, echo=lambda _: None)
    _decisive(stop)
    yield {"over a saved stop-policy": _scheduler(root / "over-model", {"stop_model": str(stop), "preempt": False,
                                                                         "work_conserving": True}),
           "over evalstop": _scheduler(root / "over-evalstop", {"stopper": "evalstop"})}
    isolate.close_players()


def _in_process(folder):
    return evaluate.run_learned(learned_spec(parse_policy(str(folder)), ROW, ROW.seeds[0], in_process=True))


def _isolated(folder):
    return learned_spec(parse_policy(str(folder)), ROW, ROW.seeds[0]).play()


@pytest.mark.parametrize("kind", ["over a saved stop-policy", "over evalstop"])
def test_a_learned_scheduler_decides_the_same_with_its_model_in_another_process(models, kind, monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("a model was loaded in the scoring process")

    asked = []
    ask = isolate._Player.ask

    def counted(self, label, message):
        asked.append(message[0])
        return ask(self, label, message)

    monkeypatch.setattr(isolate._Player, "ask", counted)
    with monkeypatch.context() as m:   # isolated, the weights are never opened here
        m.setattr(learned_policy, "load_model", refuse)
        evaluate._LOADED.clear()
        there = _isolated(models[kind])
    here = _in_process(models[kind])
    assert there == here   # every metric, exactly
    assert here["jobs"] == ROW.jobs and here["false_negatives"] + here["true_positives"] == 3
    assert asked[0] == "episode" and asked.count("episode") == 1 and asked.count("act") > ROW.jobs
    # a saved stop-policy named by the scheduler's config answers its checkpoints over public views, in the
    # same process; a hand-coded one plays here
    assert ("decide" in asked) == (kind == "over a saved stop-policy")
    assert 0 < here["jobs_stopped"] < ROW.jobs   # stops the scheduler's decisions then work around


CHEAT = '''
"""Stands for code that a loader bug would run in a saved scheduler's process: when its model loads and when it
first predicts, it looks up the call stack and through the garbage collector for the simulator or the workload,
and erases the hidden labels of whatever it finds and can write (so no missed hacking run counts against it)."""
import gc
import sys

HIDDEN = ("Simulator", "Workload")


def look(where, report):
    found = []
    frame = sys._getframe()
    while frame is not None:
        found += [v for v in frame.f_locals.values() if type(v).__name__ in HIDDEN]
        frame = frame.f_back
    found += [o for o in gc.get_objects() if type(o).__name__ in HIDDEN]
    for o in found:
        labels = (o._w if type(o).__name__ == "Simulator" else o).hacking
        if labels.flags.writeable:   # a workload the bench keeps drawn for its process is read-only: left alone
            labels[:] = False
    with open(report, "a") as f:
        f.write(f"{where}: {' '.join(sorted({type(o).__name__ for o in found})) or 'nothing'}\\n")


def install(set_attr, report):
    import evalstop_gym.agents.policy as policy

    real_load = policy.load_model

    def load_model(*args, **kwargs):
        look("load", report)
        model = real_load(*args, **kwargs)
        real_predict, calls = type(model).predict, []

        def predict(self, *a, **k):
            calls.append(1)
            if len(calls) == 1:
                look("predict", report)
            return real_predict(self, *a, **k)

        set_attr(type(model), "predict", predict)
        return model

    set_attr(policy, "load_model", load_model)
'''


def _findings(report):
    return [line.split(": ") for line in report.read_text().splitlines()]


def test_a_cheating_scheduler_finds_nothing_in_its_process_and_scores_as_its_honest_twin(models, tmp_path,
                                                                                         monkeypatch):
    honest = models["over evalstop"]
    twin = shutil.copytree(honest, tmp_path / "cheat")   # the same weights: the cheat lives in its process
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CHEAT + "\nimport os\ninstall(setattr, os.environ['CHEAT43_REPORT'])\n")
    report = tmp_path / "report.txt"
    monkeypatch.setenv("CHEAT43_REPORT", str(report))
    monkeypatch.setenv("PYTHONPATH", str(site))   # run by every interpreter the bench starts from here on
    isolate.close_players()
    try:
        cheat = _isolated(twin)
    finally:
        isolate.close_players()   # no later test gets a child that runs it
    findings = _findings(report)
    # it ran where the model loads and predicts, and found nothing to read or erase there
    assert [w for w, _ in findings] == ["load", "predict"]
    assert {f for _, f in findings} == {"nothing"}
    assert cheat == _in_process(honest)


def test_the_same_cheat_erases_the_labels_in_process_so_the_test_above_can_fail(models, tmp_path, monkeypatch):
    honest = _in_process(models["over evalstop"])
    twin = shutil.copytree(models["over evalstop"], tmp_path / "cheat")
    namespace = {}
    exec(CHEAT, namespace)
    report = tmp_path / "report.txt"
    namespace["install"](monkeypatch.setattr, str(report))
    evaluate._LOADED.clear()
    cheat = _in_process(twin)
    evaluate._LOADED.clear()
    assert any(f != "nothing" for _, f in _findings(report))
    # the labels gone, the row has no hacking job left to catch or miss (honestly: its 3)
    hacking = ("true_positives", "false_negatives")
    assert sum(honest[k] for k in hacking) == 3 and sum(cheat[k] for k in hacking) == 0
