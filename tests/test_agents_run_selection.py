"""A recipe with ``run_seeds`` trains several runs and keeps the one that detects best on validation seeds
(:mod:`evalstop_gym.agents.run_selection`); ``--calibration`` overrides a recipe that names its world."""

import json
import shutil

import pytest

from evalstop_gym.agents.hparams import load_recipe
from evalstop_gym.agents.run_selection import choose
from evalstop_gym.config import ConfigError
from evalstop_gym.envs.adapter import CLUSTER_ID, STOP_CONTROL_ID


def row(seed, f1, waste):
    return {"seed": seed, "f1": f1, "compute_waste_gpu_h": waste}


# -- the rule, on hand-made rows ---------------------------------------------------------------

def test_keeps_the_best_f1_among_runs_within_the_detectors_waste():
    rows = [row(0, 0.90, 100.0), row(1, 0.95, 120.0), row(2, 0.97, 200.0)]
    assert choose(rows, 150.0) == 1          # seed 2 detects best but wastes more than the detector
    assert choose(rows, 200.0) == 2          # at the detector's waste exactly: eligible
    assert choose(rows, 99.0) == 0           # none eligible: the least waste


def test_ties_go_to_less_waste_then_the_lower_seed():
    assert choose([row(0, 0.9, 120.0), row(1, 0.9, 110.0)], 150.0) == 1
    assert choose([row(5, 0.9, 110.0), row(3, 0.9, 110.0)], 150.0) == 1       # seed 3, listed second
    assert choose([row(5, 0.9, 130.0), row(3, 0.8, 130.0)], 100.0) == 1       # none eligible, equal waste


def test_an_undefined_f1_ranks_below_any_defined_one():
    assert choose([row(0, None, 10.0), row(1, 0.0, 50.0)], 100.0) == 1
    with pytest.raises(ValueError):
        choose([], 1.0)


# -- the recipe keys ---------------------------------------------------------------------------

def test_run_seeds_is_checked_and_needs_a_stop_policy():
    with pytest.raises(ConfigError, match=r"run_seeds=0 .*\[1, 64\]"):
        load_recipe("ppo", STOP_CONTROL_ID, overrides={"run_seeds": 0})
    with pytest.raises(ConfigError, match=r"run_seeds=2 .*stop-policy"):
        load_recipe("maskable-ppo", CLUSTER_ID, overrides={"run_seeds": 2})
    with pytest.raises(ConfigError, match=r"select_seeds=1.5"):
        load_recipe("ppo", STOP_CONTROL_ID, overrides={"run_seeds": 2, "select_seeds": 1.5})
    r = load_recipe("ppo", STOP_CONTROL_ID)
    assert (r.run_seeds, r.select_seeds) == (1, 10)


# -- training and keeping one run (tiny budgets) ---------------------------------------------------

pytest.importorskip("stable_baselines3")

from evalstop_gym import WorkloadConfig  # noqa: E402
from evalstop_gym.agents.evaluate import learned_on  # noqa: E402
from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.agents.seeds import VALIDATION_FIRST  # noqa: E402
from evalstop_gym.agents.selection import select  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.workload import generate  # noqa: E402

DETECT = "evalstop_gym/agents/hyperparams/ppo-realistic-detect.yml"
VALIDATION = {"calibration": "realistic", "jobs": 24}
TINY = {"n_steps": 64, "batch_size": 32, "n_epochs": 1, "n_envs": 1, "eval_freq": 10**6, "n_eval_episodes": 1,
        "eval_workload": VALIDATION, "run_seeds": 3, "select_seeds": 3, "policy_kwargs": {"net_arch": [8]}}


@pytest.fixture(scope="module", autouse=True)
def few_trials():
    """Each recipe here tunes the hand-coded detectors it is held to (``best_detector``) at the bench's default
    budget (``FAMILY_BUDGET``, read when a tuning starts): at 100 trials a family that tuning (about half of it TPE
    sampling, the rest the trials' plays) took longer than the three tiny trainings, 6.7 against 4.5 s. The tests
    check which run the rule keeps against whichever detector the tuning chose, and that it is the detector the
    targets protocol's selection chooses at the same budget: 3 trials."""
    import evalstop_gym.bench.tune as tune

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tune, "FAMILY_BUDGET", 3)
        yield


def tiny_train(out, **kw):
    messages = []
    config = train(STOP_CONTROL_ID, "ppo", out=out, hyperparams=DETECT, timesteps=256, seed=kw.pop("seed", 4),
                   overrides={**TINY, **kw.pop("overrides", {})}, echo=messages.append, progress=False, **kw)
    return config, "\n".join(messages)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    out = tmp_path_factory.mktemp("three-runs")
    config, said = tiny_train(out)
    return out, config, said


def test_every_run_is_trained_validated_and_the_rule_keeps_one(kept):
    out, config, _ = kept
    sel = config["run_selection"]
    assert [r["seed"] for r in sel["runs"]] == [4, 5, 6]
    assert sel["validation_seeds"] == [VALIDATION_FIRST, VALIDATION_FIRST + 1, VALIDATION_FIRST + 2]
    # each run's figures, recomputed here: its stop-policy over srtf-est on the validation workloads
    base = WorkloadConfig(**VALIDATION)
    for r in sel["runs"]:
        runs = [learned_on("srtf-est", {"model": str(out / r["dir"])}, generate(base.replace(seed=s)))
                for s in sel["validation_seeds"]]
        f1s = [2 * m["true_positives"] / d for m in runs
               if (d := 2 * m["true_positives"] + m["false_positives"] + m["false_negatives"])]
        assert r["f1"] == pytest.approx(sum(f1s) / len(f1s) if f1s else None)
        assert r["compute_waste_gpu_h"] == pytest.approx(sum(m["compute_waste_gpu_h"] for m in runs) / len(runs))
    # the detector is the one the targets protocol's selection chooses on the same workloads
    best = select(base, seeds=3, out=out / "select-check").best_detector
    assert sel["detector"]["arm"] == best["arm"]
    assert sel["detector"]["compute_waste_gpu_h"] == pytest.approx(best["compute_waste_gpu_h"])
    # the rule, written out plainly
    cap = sel["detector"]["compute_waste_gpu_h"]
    eligible = [r for r in sel["runs"] if r["compute_waste_gpu_h"] <= cap]
    want = (max(eligible, key=lambda r: (-1 if r["f1"] is None else r["f1"], -r["compute_waste_gpu_h"], -r["seed"]))
            if eligible else min(sel["runs"], key=lambda r: (r["compute_waste_gpu_h"], r["seed"])))
    assert sel["kept_seed"] == want["seed"] == config["seed"]
    assert [r["kept"] for r in sel["runs"]] == [r is want for r in sel["runs"]]
    assert [r["eligible"] for r in sel["runs"]] == [r["compute_waste_gpu_h"] <= cap for r in sel["runs"]]


def test_the_kept_runs_model_is_the_recipes_output(kept):
    out, config, said = kept
    run_dir = out / "runs" / f"seed-{config['seed']}"
    for name in ("model.zip", "final_model.zip"):
        assert (out / name).read_bytes() == (run_dir / name).read_bytes()
    run_cfg = json.loads((run_dir / "config.json").read_text())
    totals = ("cpu_seconds", "wall_seconds")   # the whole recipe's in the kept config
    assert {k: v for k, v in config.items() if k not in ("run_selection", *totals)} == \
           {k: v for k, v in run_cfg.items() if k not in totals}
    assert config["cpu_seconds"] >= sum(r["cpu_seconds"] for r in config["run_selection"]["runs"])
    runs_wall = [json.loads((out / r["dir"] / "config.json").read_text())["wall_seconds"]
                 for r in config["run_selection"]["runs"]]
    assert config["wall_seconds"] >= sum(runs_wall)
    assert LearnedPolicy.load(out).env_id == STOP_CONTROL_ID
    assert f"kept run seed {config['seed']}" in said


def test_an_interrupted_recipe_resumes_without_retraining(kept, tmp_path):
    out, config, _ = kept
    copy = tmp_path / "resumed"
    for f in out.rglob("*"):
        if f.is_file() and f.parent != out and "select" not in f.parts[-2]:   # runs only: as if cut off after them
            (copy / f.relative_to(out)).parent.mkdir(parents=True, exist_ok=True)
            (copy / f.relative_to(out)).write_bytes(f.read_bytes())
    (copy / "runs" / "seed-6" / "config.json").unlink()     # the last run did not finish
    stamps = {p: p.stat().st_mtime_ns for p in copy.rglob("model.zip")}
    again, said = tiny_train(copy)
    assert "run seed 4: reusing" in said and "run seed 5: reusing" in said and "run seed 6 (3 of 3)" in said
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if "seed-6" not in str(p))
    assert [r["seed"] for r in again["run_selection"]["runs"]] == [4, 5, 6]
    for a, b in zip(again["run_selection"]["runs"][:2], config["run_selection"]["runs"][:2]):
        assert a["f1"] == b["f1"] and a["compute_waste_gpu_h"] == b["compute_waste_gpu_h"]


@pytest.mark.parametrize("changed,named", [({"overrides": {"n_epochs": 2}}, "hyperparams"),
                                           ({"calibration": "paper"}, "train_workload"),   # train's own
                                           ({"n_envs": 2}, "n_envs")])                     # arguments too
def test_a_run_of_other_settings_is_never_reused(kept, tmp_path, changed, named):
    out, _, _ = kept
    copy = tmp_path / "other"
    shutil.copytree(out / "runs" / "seed-4", copy / "runs" / "seed-4")
    with pytest.raises(ConfigError, match=rf"seed-4.*other settings \(.*{named}.*--force"):
        tiny_train(copy, **changed)


def test_choosing_again_reuses_the_runs(kept, tmp_path):
    """A recipe cut off after copying the kept model (no config.json yet) resumes without --force, and the
    selection's own keys (how many validation workloads choose) are not settings of a run."""
    out, _, _ = kept
    copy = tmp_path / "again"
    for f in out.rglob("*"):
        if f.is_file() and f.name != "config.json" or f.parent != out and f.is_file():
            (copy / f.relative_to(out)).parent.mkdir(parents=True, exist_ok=True)
            (copy / f.relative_to(out)).write_bytes(f.read_bytes())
    assert (copy / "model.zip").exists() and not (copy / "config.json").exists()
    config, said = tiny_train(copy, overrides={"select_seeds": 2})
    assert said.count("reusing the finished run") == 3
    assert len(config["run_selection"]["validation_seeds"]) == 2


def test_a_finished_recipe_is_not_overwritten(kept):
    out, _, _ = kept
    with pytest.raises(ConfigError, match="already holds a model"):
        tiny_train(out)


def test_calibration_overrides_a_recipe_that_names_its_world(tmp_path):
    """The detect recipe trains in the realistic world; ``--calibration paper`` trains and validates in the
    paper's (it used to pass ``calibration`` to gym.make twice and stop with a TypeError)."""
    config, _ = tiny_train(tmp_path / "m", calibration="paper", overrides={"run_seeds": 1})
    assert config["train_workload"]["calibration"] == config["eval_workload"]["calibration"] == "paper"
    env = LearnedPolicy.load(tmp_path / "m").make_env()
    assert env.unwrapped.config.calibration == "paper"


def test_selection_reads_every_run_from_disk(monkeypatch, tmp_path):
    """A run retrained in the same process (``force``) is validated as saved, never as a cached copy."""
    import evalstop_gym.agents.evaluate as evaluate

    class Stale:
        def __getattr__(self, name):
            raise AssertionError("selection used a model cached before the run was retrained")

    monkeypatch.setattr(evaluate, "_LOADED", {str(tmp_path / "m" / "runs" / f"seed-{s}"): Stale() for s in (4, 5)})
    config, _ = tiny_train(tmp_path / "m", overrides={"run_seeds": 2, "select_seeds": 1})
    assert [r["seed"] for r in config["run_selection"]["runs"]] == [4, 5]
