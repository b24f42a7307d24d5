"""The information boundary: hidden state is unreachable from what a policy receives."""

import gc
from array import array

import numpy as np
import pytest

from fractions import Fraction

from evalstop_gym.baselines import FIFO
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.cluster import ClusterSpec, two_types
from evalstop_gym.curves import Curves
from evalstop_gym.placement import FlatPool, Nodes, Placer
from evalstop_gym.policy import Policy, drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.view import ClusterView, JobView
from evalstop_gym.workload import Workload

HIDDEN = ("length_h", "true_length_h", "hacking", "gold", "curves", "peak_progress", "eval_z", "workload",
          "_w", "sim", "simulator", "eval_sd", "eval_factor", "ckpt_service_h", "checkpoint_service_h",
          "restart_h", "eval_h")
CALIBRATIONS = ("paper", "realistic")


class Snoop(Policy):
    """A policy that tries to read hidden state from what it is given."""

    def __init__(self):
        self.base = FIFO()
        self.found = []
        self.views = []

    def schedule(self, cluster):
        return self.base.schedule(cluster)

    def should_stop(self, job, cluster):
        self.views.append(job)
        for name in HIDDEN:
            for obj in (job, cluster):
                try:
                    getattr(obj, name)
                    self.found.append(name)
                except AttributeError:
                    pass
        return False


def reachable(root, limit=200_000):
    seen, stack, out = set(), [root], []
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type):
            continue
        seen.add(id(o))
        out.append(o)
        stack.extend(gc.get_referents(o))
    return out


@pytest.mark.parametrize("calibration", CALIBRATIONS)
def test_policy_cannot_read_hidden_attributes(calibration):
    snoop = Snoop()
    drive(Simulator(generate(WorkloadConfig(jobs=20, seed=1, calibration=calibration))), snoop)
    assert snoop.views, "the policy saw no eval checkpoint"
    assert snoop.found == []
    with pytest.raises(AttributeError):
        snoop.views[0].hacking  # noqa: B018
    with pytest.raises(AttributeError):
        snoop.views[0].length_h  # noqa: B018


@pytest.mark.parametrize("calibration,cluster", [(c, None) for c in CALIBRATIONS] + [("paper", two_types())],
                         ids=[*CALIBRATIONS, "two-types"])
def test_no_hidden_object_is_reachable_from_views(calibration, cluster):
    # the cluster spec (nodes, GPU types, speeds, placement policy) is public by design
    sim = Simulator(generate(WorkloadConfig(jobs=30, seed=2, calibration=calibration, cluster=cluster)))
    drive(sim, FIFO())
    # array: the histories (doubles only: an array of type "d" can hold no object)
    public = (JobView, ClusterView, ClusterSpec, Placer, Nodes, FlatPool, Fraction, frozenset, dict, list, tuple, str, int, float,
              array, type(None))
    for root in (sim.cluster, sim.views[0], sim.views[-1]):
        for o in reachable(root):
            assert not isinstance(o, (Simulator, Workload, Curves, np.ndarray)), type(o)
            assert isinstance(o, public), type(o)


def test_views_cannot_grow_new_attributes():
    v = Simulator(generate(WorkloadConfig(jobs=3, seed=0)))
    drive(v, FIFO())
    with pytest.raises(AttributeError):
        v.views[0].secret = 1


def test_eval_set_size_is_public_and_plain():
    """The eval-set size is a public int per job: 0 in the paper's world, drawn from the sizes in the realistic one."""
    for calibration, allowed in (("paper", {0}), ("realistic", set(WorkloadConfig(calibration="realistic")
                                                                   .world.eval_items))):
        w = generate(WorkloadConfig(jobs=40, seed=3, calibration=calibration))
        sim = Simulator(w)
        drive(sim, FIFO())
        sizes = [v.eval_items for v in sim.views]
        assert all(type(n) is int for n in sizes)
        assert set(sizes) <= allowed
        assert sizes == w.items.tolist()
    assert len(set(sizes)) > 1  # realistic: jobs differ in eval-set size


class Witness(Policy):
    """FIFO that copies, at every decision, what each public field of a view holds."""

    def __init__(self):
        self.base = FIFO()
        self.seen = []

    def reset(self):
        self.base.reset()

    def _copy(self, v, cluster, at):
        return dict(at=at, job=v.job_id, tenant=v.tenant, job_type=v.job_type, gpus=v.gpus, submit_h=v.submit_h,
                    est_length_h=v.est_length_h, evals_total=v.evals_total, eval_scores=list(v.eval_scores),
                    train_losses=list(v.train_losses), proxy_rewards=list(v.proxy_rewards),
                    declines=v.consecutive_declines, status=v.status, attained_h=v.attained_h,
                    attained_gpu_h=v.attained_gpu_h, progress=v.progress, evals_done=v.evals_done,
                    remaining_est_h=v.remaining_est_h, waiting_h=v.waiting_h, start_h=v.start_h,
                    now=cluster.now_h)

    def should_stop(self, job, cluster):
        self.seen.append(self._copy(job, cluster, "eval"))
        return False

    def schedule(self, cluster):
        self.seen.extend(self._copy(v, cluster, "schedule") for v in (*cluster.waiting.values(), *cluster.running.values()))
        used = sum(v.gpus for v in cluster.running.values())
        assert cluster.free_gpus == cluster.total_gpus - used == cluster.total_gpus - cluster.used_gpus
        assert all(v.status == "waiting" for v in cluster.waiting.values())
        assert all(v.status == "running" for v in cluster.running.values())
        return self.base.schedule(cluster)


def test_public_fields_hold_the_public_values_not_the_hidden_ones():
    """Each field holds what its docstring says: the user's estimate (not the true length), the observed
    noisy scores (not the true ones), the observed loss and proxy histories, the attained service."""
    from evalstop_gym.config import JOB_TYPES

    w = generate(WorkloadConfig(jobs=25, seed=5, noise=0.05))
    assert not np.allclose(w.est_length_h, w.length_h) and not np.allclose(w.observed, w.curves.gold)
    spy = Witness()
    drive(Simulator(w), spy)
    evals = [s for s in spy.seen if s["at"] == "eval"]
    assert len(evals) > 50 and len({s["job"] for s in spy.seen}) == w.n
    e = w.evals_per_job
    tick = 1e-6   # hours: a view may hold times rounded to the simulator's clock (1 ms is 2.8e-7 h)
    for s in spy.seen:
        j, i = s["job"], s["evals_done"]
        assert s["est_length_h"] == pytest.approx(w.est_length_h[j], abs=tick)    # the estimate ...
        assert abs(s["est_length_h"] - w.length_h[j]) > tick                      # ... never the truth
        assert (s["tenant"], s["gpus"]) == (w.tenant[j], w.gpus[j])
        assert s["submit_h"] == pytest.approx(w.submit_h[j], abs=tick)
        assert s["job_type"] == JOB_TYPES[w.job_type[j]] and s["evals_total"] == e
        assert s["eval_scores"] == w.observed[j, :i].tolist()         # observed, noisy ...
        if i:
            assert s["eval_scores"] != w.curves.gold[j, :i].tolist()  # ... not the true scores
        assert s["train_losses"] == w.curves.loss[j, :i].tolist()
        is_rlhf = s["job_type"] == "rlhf"
        assert s["proxy_rewards"] == (w.curves.proxy[j, :i].tolist() if is_rlhf else [])
        # consecutive declines: the trailing run of strict declines of the observed scores
        run = 0
        for a, b in zip(s["eval_scores"], s["eval_scores"][1:]):
            run = run + 1 if b < a else 0
        assert s["declines"] == run
        assert s["progress"] == pytest.approx(i / e)
        assert s["attained_gpu_h"] == pytest.approx(s["attained_h"] * s["gpus"])
        assert s["remaining_est_h"] == pytest.approx(max(s["est_length_h"] - s["attained_h"], 0.0))
        assert s["waiting_h"] == pytest.approx(s["now"] - s["submit_h"] - s["attained_h"])
    # at its own checkpoint a job has run exactly (checkpoint / evals) of its true length (FIFO never
    # preempts: that is also the time since it started); the service is public, the length is not
    for s in evals:
        assert s["attained_h"] == pytest.approx(w.length_h[s["job"]] * s["evals_done"] / e, abs=tick)
        assert s["attained_h"] == pytest.approx(s["now"] - s["start_h"], abs=tick)


class Scribbler(Policy):
    """SRTF-Est + EvalStop(k=2) that rewrites every history of the job at each of its checkpoints (in place:
    the simulator appends to the view's arrays)."""

    def __init__(self):
        from evalstop_gym.baselines import make_policy

        self.base = make_policy("srtf-est", "evalstop", k=2)

    def reset(self):
        self.base.reset()

    def schedule(self, cluster):
        return self.base.schedule(cluster)

    def should_stop(self, job, cluster):
        stop = self.base.should_stop(job, cluster)  # decided on the fields as the simulator wrote them
        for h in (job.eval_scores, job.eval_attained_h):
            del h[:]
        job.train_losses[:] = array("d", [9.0] * 30)
        job.proxy_rewards.append(1.0)
        return stop


def test_a_policy_rewriting_histories_changes_only_its_own_picture():
    """The simulator keeps its own checkpoint count and last score: emptied or padded histories on the
    views change no checkpoint time, no decline count and no result."""
    from evalstop_gym.baselines import make_policy

    w = generate(WorkloadConfig(jobs=60, seed=3, gpus=16, noise=0.05))
    plain, scribbled = Simulator(w), Simulator(w)
    a, b = drive(plain, make_policy("srtf-est", "evalstop", k=2)), drive(scribbled, Scribbler())
    for f in ("finish_ticks", "service_ticks", "stopped", "evals_seen", "delivered_ckpt", "first_start_ticks"):
        assert getattr(a, f).tolist() == getattr(b, f).tolist(), f
    assert a.preemptions == b.preemptions and a.stopped.any() and a.preemptions > 0
    # the scribbler's own picture: what it wrote at the last decision, plus the final checkpoint
    done = [v for v in scribbled.views if v.status == "completed"]
    assert done and all(list(v.eval_scores) == list(plain.views[v.job_id].eval_scores[-1:]) for v in done)
    assert all(list(v.train_losses[:-1]) == [9.0] * 30 for v in done)


class Keeper(Policy):
    """SRTF-Est + EvalStop(k=2) that keeps, at each checkpoint, numpy and memoryview windows on the job's
    histories (``np.asarray`` of an array shares its memory; while it lives, the array cannot grow)."""

    def __init__(self):
        from evalstop_gym.baselines import make_policy

        self.base = make_policy("srtf-est", "evalstop", k=2)

    def reset(self):
        self.base.reset()
        self.kept = []

    def schedule(self, cluster):
        return self.base.schedule(cluster)

    def should_stop(self, job, cluster):
        if job.job_id % 2:  # only the later histories: the scores' append succeeds, the losses' raises
            self.kept.append((len(job.eval_scores), list(job.eval_scores), memoryview(job.train_losses),
                              list(job.proxy_rewards), np.asarray(job.eval_attained_h)))
        else:
            self.kept.append((len(job.eval_scores), np.asarray(job.eval_scores), memoryview(job.train_losses),
                              np.asarray(job.proxy_rewards), np.asarray(job.eval_attained_h)))
        return self.base.should_stop(job, cluster)


def test_a_policy_keeping_buffers_on_histories_runs_and_keeps_its_snapshots():
    """Buffers a policy keeps on the histories neither break the run nor change it, and each stays the
    snapshot it was when taken (as a copy would)."""
    from evalstop_gym.baselines import make_policy

    w = generate(WorkloadConfig(jobs=60, seed=3, gpus=16, noise=0.05))
    plain, kept = Simulator(w), Simulator(w)
    keeper = Keeper()
    a, b = drive(plain, make_policy("srtf-est", "evalstop", k=2)), drive(kept, keeper)
    for f in ("finish_ticks", "service_ticks", "stopped", "evals_seen", "delivered_ckpt"):
        assert getattr(a, f).tolist() == getattr(b, f).tolist(), f
    assert len(keeper.kept) > 100
    for n, scores, losses, proxy, attained in keeper.kept:
        assert len(scores) == len(losses) == len(attained) == n and len(proxy) in (0, n)
    for v, u in zip(kept.views, plain.views):  # the views still hold every checkpoint, as arrays
        for h in ("eval_scores", "eval_attained_h", "train_losses", "proxy_rewards"):
            assert type(getattr(v, h)) is array and list(getattr(v, h)) == list(getattr(u, h)), h


def test_histories_hold_no_object_for_the_garbage_collector_to_walk():
    """A view's histories are arrays of doubles: the collector's passes, which walk every view of a big
    episode, find no float in them (a list of floats hands it every float)."""
    sim = Simulator(generate(WorkloadConfig(jobs=40, seed=1)))
    drive(sim, FIFO())
    for v in sim.views:
        for h in (v.eval_scores, v.eval_attained_h, v.train_losses, v.proxy_rewards):
            assert type(h) is array and h.typecode == "d"
            assert not any(isinstance(r, float) for r in gc.get_referents(h))
    assert all(len(v.eval_scores) == v.evals_total for v in sim.views)  # FIFO stops nothing
    assert sum(len(v.proxy_rewards) > 0 for v in sim.views) > 0


def test_a_new_cluster_starts_at_time_zero_with_every_gpu_free():
    sim = Simulator(generate(WorkloadConfig(jobs=3, seed=0)))
    c = sim.cluster
    assert (c.now_ticks, c.now_h, c.total_gpus, c.free_gpus, c.used_gpus, c.finished) == (0, 0.0, 64, 64, 0, 0)
    assert c.waiting == {} and c.running == {} and sim.views == [None, None, None]


# -- the driver's side of the boundary: decisions the simulator refuses say which and why --------------

def _one_gpu_sim(jobs=2):
    from evalstop_gym.workload import workload_from_jobs

    sim = Simulator(workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=2.0)] * jobs, total_gpus=1))
    sim.advance()
    return sim


def test_refused_decisions_name_the_action_and_the_job():
    from evalstop_gym.simulator import SimulationError

    sim = _one_gpu_sim()
    sim.start(0)
    sim.stop(1)
    with pytest.raises(SimulationError, match=r"^cannot stop job 1: it is not an active job \(status stopped\)$"):
        sim.stop(1)
    with pytest.raises(SimulationError, match=r"^cannot preempt job 1: it is not an active job"):
        sim.preempt(1)
    with pytest.raises(SimulationError, match=r"^cannot start job 7: it is not an active job \(status not arrived\)"):
        sim.start(7)
    with pytest.raises(SimulationError, match=r"^wake-up at 0.0 h is not after now \(0.0 h\)$"):
        sim.request_wakeup(0.0)                 # now is not after now
    with pytest.raises(SimulationError, match=r"^episode not finished: 1 jobs still active$"):
        sim.outcome()


def test_a_running_job_stopped_between_checkpoints_is_charged_the_time_it_ran():
    # J0 (2 h, 4 evals) runs from 0; the driver stops it at a wake-up at t=0.75, between checkpoints
    sim = _one_gpu_sim(jobs=1)
    sim.start(0)
    sim.request_wakeup(0.75)
    while sim.cluster.now_h < 0.75:
        sim.advance()
    sim.stop(0)
    v = sim.views[0]
    assert v.attained_h == 0.75 and v.status == "stopped"
    sim.advance()
    out = sim.outcome()
    assert out.service_h.tolist() == [0.75] and out.finish_h.tolist() == [0.75] and out.evals_seen.tolist() == [1]
    assert v.attained_h == 0.75                 # a finished job's view keeps its service


def test_a_job_never_started_has_no_first_start_time():
    sim = _one_gpu_sim()
    sim.start(0)
    sim.stop(1)
    while not sim.done:
        sim.advance()
    out = sim.outcome()
    assert out.first_start_h[0] == 0.0 and np.isnan(out.first_start_h[1])
    assert sim.views[0].attained_h == 2.0 and sim.views[1].attained_h == 0.0


@pytest.mark.parametrize("preemptive", [True, False])
@pytest.mark.parametrize("static_key", [True, False])
def test_a_scheduler_key_receives_the_cluster_view_for_running_and_waiting_jobs(preemptive, static_key):
    """``key(job, cluster)`` is called with the public cluster view, on every allocation path."""
    from evalstop_gym.policy import Scheduler
    from evalstop_gym.view import ClusterView as CV

    class Checked(Scheduler):
        name = "checked"

        def key(self, job, cluster):
            assert isinstance(cluster, CV)
            return (job.submit_h, job.job_id)

    from evalstop_gym.api import run_policy

    Checked.preemptive, Checked.static_key = preemptive, static_key
    m = run_policy(generate(WorkloadConfig(jobs=20, seed=3)), Checked())
    assert m["jobs"] == 20


def test_stoppers_compose_and_every_rule_sees_the_job_and_the_cluster():
    from evalstop_gym.baselines import EvalStop
    from evalstop_gym.policy import Stopper

    class Spy(Stopper):
        rule_name = "spy"

        def __init__(self, base):
            super().__init__(base)
            self.calls = []

        def rule(self, job, cluster):
            self.calls.append((type(job), type(cluster)))
            return job.job_id == 0 and job.evals_done == 2

    w = generate(WorkloadConfig(jobs=6, seed=1, noise=0.0))
    inner = Spy(FIFO())
    out = drive(Simulator(w), EvalStop(inner, k=50))           # the wrapped stopper's rule still stops job 0
    assert out.stopped[0] and out.evals_seen[0] == 2
    outer = Spy(EvalStop(FIFO(), k=1))                           # and the wrapped EvalStop still stops declines
    both = drive(Simulator(w), outer).stopped
    alone = drive(Simulator(w), EvalStop(FIFO(), k=1)).stopped
    assert alone[1:].any() and both[0] and (both[1:] == alone[1:]).all()
    assert set(inner.calls) == set(outer.calls) == {(JobView, ClusterView)}
    assert EvalStop(inner, k=50).name == "fifo+spy+evalstop"
    with pytest.raises(TypeError, match=r"^base must be a Policy, got str$"):
        EvalStop("fifo")
