"""A live platform and its replay: the stop step Ray Tune's EvalStopScheduler gives each trial is the stop
step the simulator gives the same logged run replayed with noise 0 (examples/live_platform.py)."""

import dataclasses
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

import numpy as np  # noqa: E402

from evalstop_gym.baselines import STOPPERS  # noqa: E402
from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.curvelog import read_curve_log, write_curve_log  # noqa: E402
from evalstop_gym.integrations import replay_runs  # noqa: E402
from evalstop_gym.integrations.replay import arrival_ticks  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = runpy.run_path(str(ROOT / "examples" / "live_platform.py"), run_name="example")
STEPS = [0, 8, 16, 24, 32, 40, 48]
# per run: eval scores at STEPS; gold is the score less a small offset, the proxy rises in every run
SCORES = {
    "peak": [0.30, 0.40, 0.50, 0.60, 0.55, 0.50, 0.45],   # best at step 24, declines at 32 and 40: stop at 40
    "rise": [0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60],   # never stops
    "wobble": [0.30, 0.40, 0.35, 0.45, 0.42, 0.50, 0.52],   # single declines only: never stops (k=2)
    "early": [0.50, 0.60, 0.55, 0.52, 0.50, 0.48, 0.40],   # best at step 8, declines at 16 and 24: stop at 24
    "late": [0.30, 0.40, 0.50, 0.60, 0.70, 0.65, 0.60],    # 2nd decline is the final eval: not judged
    "flat": [0.50, 0.50, 0.50, 0.50, 0.50, 0.50, 0.50],
    "crash": [0.30, 0.45, 0.60, 0.75, 0.50, 0.30, 0.20],   # best at step 24, falls 5 binomial sds: stop at 40
}
BY_HAND = {"peak": 40, "rise": None, "wobble": None, "early": 24, "late": None, "flat": None,
           "crash": 40}   # EvalStop k=2


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    rows = [{"job": name, "step": step, "eval_score": s, "train_loss": 2.0 - 0.02 * i,
             "proxy_reward": 0.1 * i, "gold": s - 0.01}
            for name, scores in SCORES.items() for i, (step, s) in enumerate(zip(STEPS, scores))]
    path = tmp_path_factory.mktemp("log") / "runs.csv"
    write_curve_log(path, rows)
    return read_curve_log(path)


def tune_stops(runs, stopper, order=None, **params):
    return EXAMPLE["scheduler_stops"](runs, stopper, params, order)


def test_evalstop_stops_the_hand_computed_runs_at_the_hand_computed_steps(runs):
    assert tune_stops(runs, "evalstop", k=2) == BY_HAND
    assert EXAMPLE["simulated_stops"](runs, "evalstop", k=2)[0] == BY_HAND


@pytest.mark.parametrize("stopper", ["evalstop", "patience"])
def test_rules_of_a_jobs_own_evals_decide_alike_in_any_order(runs, stopper):
    """EvalStop and patience read one job's evals only: Tune's arrival order cannot change a decision."""
    sim, order = EXAMPLE["simulated_stops"](runs, stopper)
    by_step = sorted(order, key=lambda e: (e[1], e[0]))   # another order: every job's n-th eval, then the next
    assert tune_stops(runs, stopper) == sim == tune_stops(runs, stopper, by_step)


@pytest.mark.parametrize("stopper", ["evalstop", "divergence", "droptest", "cusum"])
def test_the_tune_scheduler_decides_as_the_simulator_given_its_order_of_evals(runs, stopper):
    """The noise-aware rules pool their noise estimate over every job's evals so far, so a decision depends
    on the order the evals of all jobs arrive in; given the simulator's order the Tune path agrees."""
    sim, order = EXAMPLE["simulated_stops"](runs, stopper)
    assert sorted(order) == sorted((n, int(s)) for n, r in runs.items() for s in r.step[1:-1]
                                   if sim[n] is None or s <= sim[n])   # every eval asked once, but the last
    live = tune_stops(runs, stopper, order)
    assert live == sim
    # the comparison covers stops and runs to the end alike
    assert any(step is None for step in live.values()) and any(step is not None for step in live.values())


def live_orders(runs):
    """Two orders a platform might deliver the evals in, ``[(run, step, arrival second), ...]``: run by run
    (one slot), and at seeded random times keeping each run's evals in step order (slots at uneven speeds)."""
    evals = [(name, int(step)) for name, run in runs.items() for step in run.step[1:]]
    rng = np.random.default_rng(7)
    timed = [(name, int(s), float(t)) for name, run in runs.items()
             for s, t in zip(run.step[1:], np.sort(rng.uniform(0.0, 100.0, run.step.size - 1)))]
    return {"run by run": [(n, s, 10.0 * i + 3) for i, (n, s) in enumerate(evals)],
            "random times": sorted(timed, key=lambda e: e[2])}


@pytest.mark.parametrize("stopper", [s for s in STOPPERS if s != "none"])
def test_the_replay_at_the_live_arrival_times_decides_as_the_live_scheduler(runs, stopper):
    """Every registered stopper, the pooled-noise detectors included: the simulator's checkpoints at the
    evals' live arrival times make its order the live one, so it stops each run at the eval Tune's scheduler
    stopped it at, in whatever order the evals came."""
    params = {"p": 0.5} if stopper == "stopat" else {}
    for order in live_orders(runs).values():
        live = tune_stops(runs, stopper, order, **params)
        logged = [e for e in order if live[e[0]] is None or e[1] <= live[e[0]]]   # no result after a stop
        sim, asked = EXAMPLE["simulated_stops"](runs, stopper, logged, **params)
        assert sim == live
        assert asked == [(n, s) for n, s, _ in logged if s < STEPS[-1]]   # the last eval is never judged


@pytest.mark.parametrize("stopper", ["cusum", "smoothed", "droptest", "divergence"])
def test_the_live_order_changes_a_pooled_detectors_stops_and_the_replay_follows(runs, stopper):
    """The fix pinned: the two orders give each pooled-noise detector different stops live (run by run, the
    estimate forms only at the 5th run: fewer stops), and the replay follows each order."""
    orders = live_orders(runs)
    live = {k: tune_stops(runs, stopper, o) for k, o in orders.items()}
    assert live["run by run"] != live["random times"]
    for k, o in orders.items():
        assert EXAMPLE["simulated_stops"](runs, stopper, o)[0] == live[k]


def test_arrival_ticks_keep_the_arrival_order_and_fill_evals_after_a_stop():
    # job a evals at 1 s, 2 s (stopped there: 2 more at its 1 s interval, 3 s and 4 s), job b at 1 s, 1.5 s,
    # 2 s, 4 s; each tie (1 s, 2 s, 4 s) goes to the lower job id, the other one tick (1 ms) later
    ticks = arrival_ticks([[1.0, 2.0], [1.0, 1.5, 2.0, 4.0]], 4, ["a", "b"])
    assert ticks.tolist() == [[1000, 2000, 3000, 4000], [1001, 1500, 2001, 4001]]
    for bad in ([], [2.0, 1.0], [1.0, float("nan")], [-1.0], [1.0, 2.0, 3.0, 4.0, 5.0]):
        with pytest.raises(ConfigError, match=r"arrivals\['a'\]"):
            arrival_ticks([bad, [1.0]], 4, ["a", "b"])


def test_replay_names_a_bad_run_set(runs):
    short = dataclasses.replace(runs["peak"], **{c: getattr(runs["peak"], c)[:3] for c in
                                                 ("step", "eval_score", "train_loss", "proxy_reward")})
    with pytest.raises(ConfigError, match="same number"):
        replay_runs({**runs, "short": short}, "evalstop")
    no_proxy = dataclasses.replace(runs["peak"], proxy_reward=np.full(len(STEPS), np.nan))
    with pytest.raises(ConfigError, match="proxy"):
        replay_runs({"peak": no_proxy}, "evalstop")
    assert replay_runs({"peak": no_proxy}, "evalstop", job_type="lora").stops == {"peak": 40}


@pytest.mark.slow   # 387 s here at load 3-6 (156 s at load about 4 before), Ray start-up and SFT included
@pytest.mark.timeout(1800)
def test_the_live_platform_replays_in_the_simulator(tmp_path):
    """Four tiny TRL jobs (GRPO, DPO; one of each over-optimises at seed 0) as Ray Tune trials on 2 CPUs, in
    the example's three arms; EvalStop's live stop steps are the simulator's replay of the full runs."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, str(ROOT / "examples" / "live_platform.py"), "--out", str(tmp_path),
                    "--jobs", "4"], check=True, env=env, capture_output=True, timeout=1800)
    out = json.load(open(tmp_path / "table.json"))
    rows = {r["arm"]: r for r in out["table"]}
    assert rows["none"]["stopped"] == 0 and len(out["labels"]) == 4
    assert any(out["labels"].values()) and not all(out["labels"].values())
    assert rows["evalstop"]["stopped"] > 0
    for arm in ("evalstop", "divergence"):
        rep = out["replay"][arm]
        assert rep["prefix"] and rep["live_order"]   # deterministic runs; the rule decided on exactly the logs
        # the simulator, its checkpoints at the live arrival times, asked in Tune's order and stopped alike
        assert rep["same_order"] and rep["same"]
    # a stopped trial ends early: it costs less than the same job run to its end
    for name, job in out["arms"]["evalstop"]["jobs"].items():
        if job["stop_step"] is not None:
            assert job["last_step"] < 48
