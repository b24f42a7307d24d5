"""One rule, two drivers: every registered stopper decides the same at every eval whether the simulator
replays a curve log or the live adapter is fed the same history, eval by eval."""

import dataclasses

import numpy as np
import pytest

from evalstop_gym.baselines import STOPPERS, make_policy
from evalstop_gym.config import JOB_TYPES, ConfigError, WorkloadConfig
from evalstop_gym.curvelog import apply_curve_log, read_curve_log, write_curve_log
from evalstop_gym.integrations import live_stopper
from evalstop_gym.integrations.live import LiveJobView
from evalstop_gym.policy import Policy, drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.view import JobView
from evalstop_gym.workload import generate

EVALS = 16          # a power of two: checkpoint i reads logged step 50 i exactly (i / 16 * 800 is exact)
STEP = 50


def curve_library(path):
    """Logged runs of four shapes (peak then decline, rising, flat, late dip), each with its own noise,
    written and read back as a CSV curve log."""
    rng = np.random.default_rng(7)
    x = np.arange(EVALS + 1) / EVALS
    shapes = {"hack": 0.2 + 0.5 * np.sin(np.pi * x), "rise": 0.2 + 0.6 * x, "flat": 0.5 + 0 * x,
              "late": 0.2 + 0.6 * np.minimum(x, 0.8) - 0.4 * np.maximum(x - 0.8, 0)}
    rows = []
    for name, gold in shapes.items():
        for noise in (0.01, 0.04):
            score = np.clip(gold + noise * rng.standard_normal(x.size), 0, 1)
            loss = 2.0 - (1.5 * x if name != "flat" else 0 * x) + 0.01 * rng.standard_normal(x.size)
            proxy = (0.1 + 0.8 * x) if name != "flat" else 0.3 + 0.01 * rng.standard_normal(x.size)
            for k in range(EVALS + 1):
                rows.append({"job": f"{name}-{noise}", "step": STEP * k, "eval_score": float(score[k]),
                             "train_loss": float(loss[k]), "proxy_reward": float(proxy[k])})
    write_curve_log(path, rows)
    return read_curve_log(path)


class Recorder(Policy):
    """Passes every decision through and records what the stopper saw and said."""

    name = "recorder"

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def reset(self):
        self.inner.reset()

    def schedule(self, cluster):
        return self.inner.schedule(cluster)

    def should_stop(self, job, cluster):
        decision = self.inner.should_stop(job, cluster)
        self.calls.append((job.job_id, list(job.eval_scores), decision))
        return decision


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    runs = curve_library(tmp_path_factory.mktemp("log") / "runs.csv")
    w = apply_curve_log(generate(WorkloadConfig(jobs=40, seed=3, noise=0.0, evals_per_job=EVALS)), runs,
                        job_types=JOB_TYPES, seed=2)
    items = np.random.default_rng(1).choice([40, 400, 4000], size=w.n)
    sized = dataclasses.replace(w, eval_items=items)   # eval-set sizes, no sampling error added
    sized.validate()
    return runs, {"unsized": w, "sized": sized}


def test_noise_free_replay_shows_detectors_the_logged_evals_exactly(worlds):
    runs, ws = worlds
    logged = [r.eval_score[1:] for r in runs.values()]   # checkpoints 1..16 are logged steps 50..800
    for w in ws.values():
        for j in range(w.n):
            assert any(np.array_equal(w.observed[j], s) for s in logged)


@pytest.mark.parametrize("world", ["unsized", "sized"])
@pytest.mark.parametrize("stopper", list(STOPPERS))
def test_every_stopper_decides_alike_in_the_simulator_and_live(worlds, stopper, world):
    w = worlds[1][world]
    rec = Recorder(make_policy("fifo", stopper))
    drive(Simulator(w), rec)
    live = live_stopper(stopper)   # one object for every job: the platform form (pooled noise)
    rlhf = JOB_TYPES.index("rlhf")
    seen = dict.fromkeys(range(w.n), 0)
    for j, sim_scores, sim_decision in rec.calls:
        i = seen[j]
        assert len(sim_scores) == i + 1   # the simulator asks at every eval of a job, in order
        seen[j] += 1
        decision = live.update(j, w.observed[j, i], eval_items=int(w.items[j]), loss=w.curves.loss[j, i],
                               proxy=w.curves.proxy[j, i] if w.job_type[j] == rlhf else None,
                               progress=(i + 1) / EVALS, step=STEP * (i + 1), job_type=JOB_TYPES[w.job_type[j]])
        assert list(live.view(j).eval_scores) == sim_scores
        assert decision == sim_decision, (stopper, world, j, i)
    stopped = {j for j, _, d in rec.calls if d}
    assert stopped == {j for j in range(w.n) if live.stopped(j)}
    for j in range(w.n):   # the last eval of a job that ran to the end: recorded, not asked
        if j not in stopped:
            assert seen[j] == EVALS - 1
            assert live.update(j, w.observed[j, -1], progress=1.0) is False
    if stopper == "none":
        assert not stopped
    else:   # the library has runs every rule stops: the comparison covers stops, not only continues
        assert stopped


def test_the_best_eval_is_the_first_maximum_and_mode_min_negates():
    s = live_stopper("evalstop", k=2)
    decisions = [s.update("a", x, step=10 * i) for i, x in enumerate([0.1, 0.5, 0.5, 0.4, 0.3, 0.2])]
    assert decisions == [False, False, False, False, True, True]   # two declines after the bests
    assert s.best("a") == (1, 10.0, 0.5)
    assert len(s.view("a").eval_scores) == 5   # a stopped job records nothing more
    m = live_stopper("evalstop", k=2, mode="min")
    assert [m.update("b", x) for x in [3.0, 2.0, 2.5, 2.7]] == [False, False, False, True]
    assert m.best("b") == (1, None, 2.0)


def test_the_view_is_the_public_jobview_with_one_entry_per_eval():
    s = live_stopper("lossplateau", window=2, tolerance=0.01)
    s.update("j", 0.3, loss=2.0)
    s.update("j", 0.4, proxy=0.1, eval_items=100)
    s.update("j", 0.5, loss=float("nan"), progress=0.25)
    v = s.view("j")
    assert isinstance(v, JobView) and isinstance(v, LiveJobView)
    assert v.progress == 0.25 and v.eval_items == 100 and v.job_type == "rlhf"
    assert np.isnan(v.train_losses[1]) and np.isnan(v.train_losses[2]) and v.train_losses[0] == 2.0
    assert np.isnan(v.proxy_rewards[0]) and v.proxy_rewards[1] == pytest.approx(0.1) and len(v.proxy_rewards) == 3
    assert s.jobs == ["j"]


def test_declines_and_attained_hours_follow_the_simulators_definitions():
    now = [0.0]
    s = live_stopper("evalstop", k=3, clock=lambda: now[0])
    for t, x in ((0, 0.5), (1800, 0.4), (3600, 0.4), (5400, 0.3)):   # seconds; a tie is not a decline
        now[0] = t
        s.update("j", x)
    v = s.view("j")
    assert list(v.eval_attained_h) == [0.0, 0.5, 1.0, 1.5] and v.attained_h == 1.5
    assert v.consecutive_declines == 1


def test_pooled_noise_is_shared_by_the_jobs_of_one_live_stopper():
    rng = np.random.default_rng(0)
    shared = live_stopper("cusum")
    for j in range(4):
        for x in 0.5 + 0.05 * rng.standard_normal(8):
            shared.update(j, x)
    own = live_stopper("cusum")
    for x in 0.5 + 0.05 * rng.standard_normal(8):
        own.update("x", x)
    assert shared.policy.noise.sigma(shared.view(0)) is not None   # 4 jobs x 6 second differences >= 20
    assert own.policy.noise.sigma(own.view("x")) is None           # one job alone has 6


@pytest.mark.parametrize("call,field", [
    (lambda s: s.update("a", float("nan")), "score"),
    (lambda s: s.update("a", "high"), "score"),
    (lambda s: s.update("a", 0.5, eval_items=-1), "eval_items"),
    (lambda s: s.update("a", 0.5, progress=1.5), "progress"),
    (lambda s: s.update("a", 0.5, job_type="sft"), "job_type"),
    (lambda s: s.update("a", 0.5, step="abc"), "step"),
    (lambda s: s.update("a", 0.5, step=float("inf")), "step"),
    (lambda s: s.best("nobody"), "job_key"),
])
def test_bad_live_input_names_the_field(call, field):
    s = live_stopper("evalstop", on_nonfinite="raise")
    with pytest.raises(ConfigError) as e:
        call(s)
    assert e.value.field == field
    assert s.jobs == []   # a rejected eval leaves no trace


def test_bad_stopper_names_and_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="stopper"):
        live_stopper("nope")
    with pytest.raises(ConfigError, match="k=0"):
        live_stopper("evalstop", k=0)
    with pytest.raises(ConfigError, match="mode"):
        live_stopper("evalstop", mode="up")
    s = live_stopper("evalstop")
    s.update("a", 0.1, progress=1.0)
    with pytest.raises(ConfigError, match="has finished"):
        s.update("a", 0.2)


@pytest.mark.parametrize("stopper", [s for s in STOPPERS if s != "none"])
def test_a_live_stoppers_arrival_times_replay_its_decisions_in_the_simulator(tmp_path, stopper):
    """The live side records when each eval arrived (``LiveStopper.arrivals``); the simulator's replay at
    those times asks in the live order, so even the pooled-noise detectors stop each run where it stopped
    live. Evals come at seeded uneven times, as on a platform whose jobs run at different speeds."""
    from evalstop_gym.integrations import replay_runs

    runs = curve_library(tmp_path / "log.csv")
    rng = np.random.default_rng(3)
    times = {n: np.sort(rng.uniform(0, 1000, EVALS)) for n in runs}
    order = sorted(((t, n, i) for n in runs for i, t in enumerate(times[n])))
    now = [0.0]
    params = {"p": 0.5} if stopper == "stopat" else {}
    live = live_stopper(stopper, clock=lambda: now[0], **params)
    stops = dict.fromkeys(runs)
    for t, name, i in order:
        if stops[name] is not None:
            continue
        now[0] = t
        run = runs[name]
        if live.update(name, run.eval_score[i + 1], loss=run.train_loss[i + 1], proxy=run.proxy_reward[i + 1],
                       progress=(i + 1) / EVALS, step=run.step[i + 1]):
            stops[name] = int(run.step[i + 1])
    arrivals = live.arrivals()
    # seconds from the first eval of any job: every recorded eval, none after a stop
    first = order[0][0]
    assert arrivals == {n: [t - first for t in times[n][:len(live.view(n).eval_scores)]] for n in runs}
    assert replay_runs(runs, stopper, arrivals, **params).stops == stops
