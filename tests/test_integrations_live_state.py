"""The live adapter's guarantees every integration relies on: an update that raises changes nothing, a
repeated step is not counted twice, one policy for NaN and inf scores, mode from the metric name, and a state
that restores every decision."""

import json
import math
import pickle

import numpy as np
import pytest

from evalstop_gym.baselines import STOPPERS
from evalstop_gym.config import ConfigError
from evalstop_gym.integrations import live_stopper
from evalstop_gym.integrations.live import Best, resolve_mode


def test_an_update_that_raises_changes_nothing():
    s = live_stopper("evalstop", k=2)
    s.update("j", 0.5, step=100)
    for bad in (dict(step="abc"), dict(progress=2.0), dict(eval_items=-3), dict(job_type="sft")):
        with pytest.raises(ConfigError):
            s.update("j", 0.9, **bad)
    with pytest.raises(ConfigError, match="score='high'"):
        s.update("j", "high", step=200)
    s.update("j", 0.4, step=300)
    assert list(s.view("j").eval_scores) == [0.5, 0.4]
    assert s.best("j") == Best(0, 100.0, 0.5)          # not the rejected 0.9, not at step 300
    assert s.state()["evals"][1][7] == 300.0 and len(s.state()["evals"]) == 2


def test_a_repeated_step_is_not_counted_twice():
    s = live_stopper("evalstop", k=2)
    assert not s.update("t", 0.5, step=1) and not s.update("t", 0.4, step=2)
    # a restarted trial reports step 2 again (with another value): ignored, so the next decline is the second
    assert not s.update("t", 0.1, step=2)
    assert s.view("t").consecutive_declines == 1 and list(s.view("t").eval_scores) == [0.5, 0.4]
    assert s.update("t", 0.3, step=3)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float32("nan")])
def test_a_non_finite_score_stops_the_job_at_its_best_finite_eval(bad):
    s = live_stopper("evalstop", k=5)
    s.update("j", 0.3, step=1)
    s.update("j", 0.5, step=2)
    assert s.update("j", bad, step=3) and s.stopped("j")
    assert s.best("j") == Best(1, 2.0, 0.5) and len(s.view("j").eval_scores) == 2
    assert s.update("j", 0.9, step=4)                 # stopped stays stopped


def test_a_non_finite_first_score_stops_a_job_with_no_best():
    s = live_stopper("evalstop")
    assert s.update("j", math.nan) and s.stopped("j")
    with pytest.raises(ConfigError, match="no eval recorded"):
        s.best("j")


def test_skip_ignores_a_non_finite_score_and_raise_rejects_it():
    s = live_stopper("evalstop", k=2, on_nonfinite="skip")
    s.update("j", 0.5)
    s.update("j", 0.4)
    assert not s.update("j", math.nan) and not s.stopped("j")
    assert s.update("j", 0.3)                          # the second decline: NaN was no eval
    r = live_stopper("evalstop", on_nonfinite="raise")
    r.update("j", 0.5)
    with pytest.raises(ConfigError, match="score=inf is invalid: is not finite"):
        r.update("j", math.inf)
    assert list(r.view("j").eval_scores) == [0.5] and not r.ended("j")
    with pytest.raises(ConfigError, match="on_nonfinite='ignore'"):
        live_stopper("evalstop", on_nonfinite="ignore")


def test_mode_auto_and_the_loss_warning():
    assert resolve_mode("auto", "eval_loss") == "min" and resolve_mode("auto", "eval_rewards/margins") == "max"
    with pytest.raises(ConfigError, match="mode='auto'.*'eval_thing'"):
        resolve_mode("auto", "eval_thing")
    with pytest.warns(UserWarning, match="reads as a loss"):
        s = live_stopper("evalstop", mode="max", metric="eval_loss")
    assert s.mode == "max"
    s = live_stopper("evalstop", mode="auto", metric="val_wer", k=1)
    s.update("j", 0.30)
    s.update("j", 0.20)
    assert s.update("j", 0.25) and s.best("j").score == 0.20    # a rise of WER is a decline


@pytest.mark.parametrize("stopper", [s for s in STOPPERS if s != "none"])
def test_a_restored_stopper_decides_as_the_original_from_then_on(stopper):
    """Half the evals of 6 noisy jobs, interleaved; the state through JSON into a fresh stopper; the rest fed to
    both: the same decisions, bests, views and arrival times."""
    rng = np.random.default_rng(5)
    peak = np.sin(np.linspace(0.3, 3.0, 12))
    jobs = {f"t{j}": 0.4 + 0.3 * peak * (j % 2) + 0.03 * rng.standard_normal(12) for j in range(6)}
    order = [(i, name) for i in range(12) for name in jobs]
    params = {"p": 0.5} if stopper == "stopat" else {}
    now = [0.0]
    a = live_stopper(stopper, clock=lambda: now[0], **params)

    def feed(s, part):
        out = []
        for i, name in part:
            now[0] = 60.0 * (i * 6 + int(name[1:]))
            out.append(s.update(name, float(jobs[name][i]), loss=2.0 - 0.1 * i, proxy=0.1 * i,
                                progress=(i + 1) / 12, step=10 * (i + 1)))
        return out

    feed(a, order[:36])
    b = live_stopper(stopper, clock=lambda: now[0], **params)
    b.restore(json.loads(json.dumps(a.state())))
    assert [b.stopped(n) for n in jobs] == [a.stopped(n) for n in jobs]
    assert feed(b, order[36:]) == feed(a, order[36:])
    assert b.arrivals() == a.arrivals()
    for n in jobs:
        assert b.best(n) == a.best(n)
        va, vb = a.view(n), b.view(n)
        assert list(va.eval_scores) == list(vb.eval_scores) and va.consecutive_declines == vb.consecutive_declines
        np.testing.assert_array_equal(np.asarray(va.proxy_rewards), np.asarray(vb.proxy_rewards))


class Clock:
    """A settable clock that, unpickled, reads 5 s: another process's monotonic clock has another origin."""

    def __init__(self, now: float = 0.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def __reduce__(self):
        return Clock, (5.0,)


def test_a_pickled_stopper_goes_on_from_its_saved_times_on_another_clock():
    a = live_stopper("evalstop", k=2, mode="min", metric="wer", clock=Clock())
    for t, x in ((0, 1.0), (60, 0.8), (120, 0.9)):
        a.clock.now = 1000.0 + t
        assert not a.update("j", x, step=t)
    b = pickle.loads(pickle.dumps(a))
    assert (b.metric, b.mode, b.stopped("j"), b.best("j")) == ("wer", "min", False, Best(1, 60.0, 0.8))
    a.clock.now, b.clock.now = 1180.0, 65.0   # 60 s after the last eval on each clock
    assert a.update("j", 0.95, step=180) and b.update("j", 0.95, step=180)   # the second rise of WER
    assert b.arrivals() == a.arrivals() == {"j": [0.0, 60.0, 120.0, 180.0]}


def test_restore_refuses_another_stoppers_state():
    a = live_stopper("evalstop", k=2)
    a.update("j", 0.5)
    with pytest.raises(ConfigError, match="was saved by another stopper"):
        live_stopper("evalstop", k=3).restore(a.state())
    b = live_stopper("evalstop", k=2)
    b.update("x", 0.1)
    with pytest.raises(ConfigError, match="fresh"):
        b.restore(a.state())


def test_the_shared_options_reach_the_stopper_through_every_integration():
    """``min_delta`` and ``warmup`` are the stoppers' own parameters; each integration hands them over."""
    from evalstop_gym.integrations import EvalStopPruner, EvalStopCallback

    cb = EvalStopCallback(k=2, min_delta=0.05, warmup=3)
    assert (cb.live.policy.min_delta, cb.live.policy.warmup) == (0.05, 3)
    pruner = EvalStopPruner("patience", patience=1, warmup=2)
    assert pruner.params["warmup"] == 2
    s = live_stopper("evalstop", k=1, min_delta=0.05, warmup=2)
    assert not s.update("j", 0.5) and not s.update("j", 0.3)      # eval 2 is in the warm-up
    assert not s.update("j", 0.27)                                 # a fall of 0.03 is no decline
    assert s.update("j", 0.2)                                      # a fall of 0.07 is
