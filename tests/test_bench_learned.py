"""A saved model on the bench: loaded and played in its own process (or by the learned layer's provider in this one),
on the synthetic rows whose cluster it runs on."""

import json

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.bench import suite as suite_mod  # noqa: E402
from evalstop_gym.bench.policies import LEARNED_KIND, parse_policies, parse_policy  # noqa: E402
from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.bench.arms import NO_STOPPER, specs_of  # noqa: E402
from evalstop_gym.bench import results as res  # noqa: E402
from evalstop_gym.bench.run import run_bench  # noqa: E402
from evalstop_gym.bench.suite import PHILLY, Row, suite_hash  # noqa: E402

TINY = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}
TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-stop-model")
    train("EvalStop-StopControl-v0", "ppo", out=out, timesteps=256, n_envs=1, overrides=TINY, echo=lambda _: None)
    return out


def test_a_saved_model_is_scored_against_the_references(model_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    p = parse_policy(str(model_dir))
    assert p.kind == LEARNED_KIND and p.scheduler == "srtf-est"
    import shutil  # two models of one kind are two policies, told apart by their folders' names

    other = shutil.copytree(model_dir, tmp_path / "another-recipe")
    assert parse_policy(str(other)).label == p.label.replace(f"[{model_dir.name}]", "[another-recipe]") != p.label
    namesake = shutil.copytree(model_dir, tmp_path / "elsewhere" / model_dir.name)   # one name, two folders
    a, b = parse_policies([str(model_dir), str(namesake)])
    assert (a.label, b.label) == (f"{p.label} [{model_dir}]", f"{p.label} [{namesake}]")
    with pytest.raises(ConfigError, match="lists the same policy twice"):   # one model, named twice
        parse_policies([str(model_dir), str(model_dir / "model.zip")])
    trace_row = Row("trace", trace=PHILLY, seeds=(1200,))
    assert specs_of(p, (TOY[0], trace_row)) and all(s.config.seed != 1200 for s in specs_of(p, (TOY[0], trace_row)))
    out = run_bench([str(model_dir)], suite_name="toy", out=tmp_path, progress=False, echo=lambda _t: None)
    suite_hash.cache_clear()
    (card,) = out["policies"]
    assert card["kind"] == LEARNED_KIND and list(card["per_row"]) == ["toy-paper"]
    assert card["vs"][NO_STOPPER]["aggregate"]["avg_jct_h"]["n"] == 2


@pytest.mark.slow
def test_leaderboard_run_learned_trains_a_recipe_once_and_lists_it(tmp_path, monkeypatch):
    # measured: 160 s wall on 2 cores at a load average of 15-20 (the training subprocess imports torch)
    import yaml

    from evalstop_gym.bench import regenerate as regen
    from evalstop_gym.bench import tune

    shipped = regen.Path(regen.__file__).resolve().parents[1] / "agents" / "hyperparams" / "ppo-realistic.yml"
    recipe = yaml.safe_load(shipped.read_text())
    env = recipe["EvalStop-StopControl-v0"]
    env.update(n_timesteps=128, n_envs=1, n_steps=128, batch_size=64, n_epochs=1)
    recipe["evalstop-gym"]["EvalStop-StopControl-v0"].update(eval_freq=10**9, n_eval_episodes=1)
    tiny = tmp_path / "tiny.yml"
    tiny.write_text(yaml.safe_dump(recipe))
    monkeypatch.setattr(regen, "LEARNED_RECIPES", (regen.Recipe("tiny-stop", "EvalStop-StopControl-v0", "ppo",
                                                                str(tiny)),))
    monkeypatch.setattr(regen, "LEARNED_FAMILY", regen.LEARNED_RECIPES[0])  # tuned with the same budget: 1 trial
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    real = tune.tune_families
    monkeypatch.setattr(tune, "tune_families", lambda *a, **k: real(*a, **{**k, "families": ["none"]}))
    monkeypatch.setattr(regen, "builtin_pairs", lambda: ["fifo"])
    kw = dict(suite_name="toy", budget=1, learned=True, progress=False, echo=lambda _t: None)
    board = regen.regenerate(tmp_path / "lb", **kw)
    model = tmp_path / "lb" / regen.LEARNED / "models" / "runs" / "tiny-stop"
    assert (model / "model.zip").is_file() and "No learned policy is listed" not in board
    assert "--policy runs/tiny-stop " in board   # named by the folder its training command writes
    # the learned family's one trial: the recipe retrained at the tuner's time weight, scored on the test seeds
    (trial,) = (tmp_path / "lb" / regen.LEARNED / "models" / "runs").glob("tiny-stop-w*")
    weight = float(trial.name.removeprefix("tiny-stop-w"))
    assert tune.LEARNED_SPACE["time_weight"][0] <= weight <= tune.LEARNED_SPACE["time_weight"][1]
    hp = yaml.safe_load((tmp_path / "lb" / regen.LEARNED / "models" / "tuning" / f"{trial.name}.yml").read_text())
    assert hp["EvalStop-StopControl-v0"]["env_kwargs"]["reward_weights"] == {"queue_h": -weight, "jct_h": -weight}
    assert "Learned family **tiny-stop**: its time_weight tuned" in board and f"[{trial.name}]" in board
    # the tuning is kept in the stage's results file: the page regenerates from the files alone
    files = [tmp_path / "lb" / stage / "results.json" for stage in (regen.SCORED, regen.LEARNED)]
    assert res.leaderboard(files) == board   # (regenerate was given no command)
    stamp = (model / "model.zip").stat().st_mtime_ns
    import re   # the rerun plays nothing and trains nothing; its files are written again, with a new date

    def undated(page):
        return re.sub(r"played \d{4}-\d\d-\d\dT[\d:]+Z", "played DATE", page)

    assert undated(regen.regenerate(tmp_path / "lb", **kw)) == undated(board)
    assert (model / "model.zip").stat().st_mtime_ns == stamp
    suite_hash.cache_clear()


def test_a_learned_scheduler_plays_the_rows_whose_cluster_it_runs_on(model_dir, tmp_path, monkeypatch):
    """A scheduler trained on nodes of 8 GPUs (the realistic world's cluster) is refused by the flat pool (its
    observations lack the node block); the bench plays it on the nodes rows only, and the page says how many."""
    from evalstop_gym.bench.arms import rows_of
    from evalstop_gym.envs.adapter import CLUSTER_ID

    sched = tmp_path / "tiny-scheduler"
    train(CLUSTER_ID, "maskable-ppo", out=sched, timesteps=64, n_envs=1, calibration="realistic",
          overrides={**TINY, "n_steps": 64, "batch_size": 32, "env_kwargs": {"jobs": 10}}, echo=lambda _: None)
    rows = (TOY[0], Row("toy-nodes", calibration="realistic", jobs=20, seeds=(1000,)))
    p, stop = parse_policy(str(sched)), parse_policy(str(model_dir))
    assert p.scheduler == "learned" and [r.name for r in rows_of(p, rows)] == ["toy-nodes"]
    assert [r.name for r in rows_of(stop, rows)] == ["toy-paper", "toy-nodes"]   # a stop-policy runs on both
    assert {s.config.seed for s in specs_of(p, rows)} == {1000} and len(specs_of(p, rows)) == 1
    monkeypatch.setitem(suite_mod.SUITES, "toy2", rows)
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    out = run_bench([str(sched), str(model_dir)], suite_name="toy2", out=tmp_path / "b", progress=False,
                    echo=lambda _t: None)
    # isolated, a learned scheduler plays its whole episode in its model's process: the same metrics as here
    (here,) = run_bench([str(sched)], suite_name="toy2", out=tmp_path / "here", progress=False, in_process=True,
                        echo=lambda _t: None)["policies"]
    suite_hash.cache_clear()
    cards = {c["label"]: c for c in out["policies"]}
    assert cards[p.label]["process"] == "isolated" and cards[p.label]["per_seed"] == here["per_seed"]
    assert list(cards[p.label]["per_row"]) == ["toy-nodes"]
    assert cards[p.label]["vs"][NO_STOPPER]["aggregate"]["avg_jct_h"]["n"] == 1
    assert list(cards[stop.label]["per_row"]) == ["toy-paper", "toy-nodes"]
    board = res.leaderboard([tmp_path / "b" / "results.json"])
    assert "Rows played: " in board and f"{p.label}: 1" in board and f"{stop.label}: 3" not in board
    assert f"{stop.label}: 2" in board
    assert f"| - | {p.label} (*1 of 2 rows*)" in board and f"| {stop.label} (*2 of" not in board   # marked, unranked
    table = [ln for ln in board.splitlines() if ln.startswith("| ") and " | `evalstop-gym bench" in ln]
    ranks = [ln.split(" | ")[0][2:] for ln in table]
    assert ranks == [*map(str, range(1, len(table))), "-"], ranks   # full-suite policies ranked, then the subset
    assert f"| {stop.label} |" in "".join(table[:-1])
    # on the flat pool alone it plays nothing: one error naming the model and the learned layer's reason
    with pytest.raises(ConfigError, match=r"plays none of the rows \['toy-paper'\]: .*node"):
        run_bench([str(sched)], suite_name="toy", out=tmp_path / "c", progress=False, echo=lambda _t: None)


def test_a_saved_model_plays_in_its_own_process_with_the_same_decisions(model_dir, tmp_path, monkeypatch):
    """Isolated (the default) the model is loaded and asked only in a child process, over public views; it makes
    the same decisions as in this process, so every per-seed metric is identical; --in-process is recorded."""
    from evalstop_gym.agents import evaluate

    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    evaluate._LOADED.clear()
    kw = dict(suite_name="toy", progress=False, echo=lambda _t: None)
    (alone,) = run_bench([str(model_dir)], out=tmp_path / "isolated", **kw)["policies"]
    assert evaluate._LOADED == {}   # never loaded here
    (here,) = run_bench([str(model_dir)], out=tmp_path / "here", in_process=True, **kw)["policies"]
    suite_hash.cache_clear()
    assert list(evaluate._LOADED) == [str((model_dir / "model.zip").resolve())]
    assert (alone["process"], here["process"]) == ("isolated", "in-process")
    assert alone["per_seed"] == here["per_seed"]
    runs = [json.loads(line) for line in (tmp_path / "isolated" / "runs.jsonl").read_text().splitlines()]
    assert {r["spec"].get("process") for r in runs if r["spec"]["stopper"] == "learned"} == {"isolated"}


def _with_payload(model_dir, dest, code):
    """A copy of ``model_dir`` whose model.zip carries a pickled entry that runs ``code`` when unpickled."""
    import base64
    import pickle
    import shutil
    import zipfile

    class Payload:
        def __reduce__(self):
            return exec, (code,)

    shutil.copytree(model_dir, dest)
    with zipfile.ZipFile(model_dir / "model.zip") as z:
        entries = {n: z.read(n) for n in z.namelist()}
    data = json.loads(entries["data"])
    data["evil"] = {":type:": "<class 'object'>", ":serialized:": base64.b64encode(pickle.dumps(Payload())).decode()}
    entries["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(dest / "model.zip", "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    return dest


def test_a_model_whose_load_would_run_code_gets_nothing(model_dir, tmp_path, monkeypatch):
    """A zip whose pickled entry walks the stack to the simulator and patches compute_metrics when loaded: it is
    refused in the model's process with one line, and neither the file's code nor its patch reached this one."""
    import evalstop_gym.metrics as metrics

    marker = tmp_path / "ran"
    code = ("import sys, pathlib, evalstop_gym.metrics as m\n"
            "f = sys._getframe()\n"
            "while f is not None and not any(type(v).__name__ == 'Simulator' for v in f.f_locals.values()):\n"
            "    f = f.f_back\n"
            f"pathlib.Path({str(marker)!r}).write_text('simulator found' if f else 'ran')\n"
            "m.compute_metrics = lambda out: {}\n")
    evil = _with_payload(model_dir, tmp_path / "evil-model", code)
    original = metrics.compute_metrics
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    with pytest.raises(ConfigError, match=r"plays none of the rows .*pickled entries 'evil'.*nothing from the file "
                                          "was run"):
        run_bench([str(evil)], suite_name="toy", out=tmp_path / "out", progress=False, echo=lambda _t: None)
    suite_hash.cache_clear()
    assert not marker.exists() and metrics.compute_metrics is original
