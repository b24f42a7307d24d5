"""The information boundary: hidden state is unreachable from what a policy receives."""

import gc

import numpy as np
import pytest

from baselines import FIFO
from evalstop_gym import WorkloadConfig, generate
from evalstop_gym.curves import Curves
from evalstop_gym.policy import Policy, drive
from evalstop_gym.simulator import Simulator
from evalstop_gym.view import ClusterView, JobView
from evalstop_gym.workload import Workload

HIDDEN = ("length_h", "true_length_h", "hacking", "gold", "curves", "peak_progress", "eval_z", "workload",
          "_w", "sim", "simulator")


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


def test_policy_cannot_read_hidden_attributes():
    snoop = Snoop()
    drive(Simulator(generate(WorkloadConfig(jobs=20, seed=1))), snoop)
    assert snoop.views, "the policy saw no eval checkpoint"
    assert snoop.found == []
    with pytest.raises(AttributeError):
        snoop.views[0].hacking  # noqa: B018
    with pytest.raises(AttributeError):
        snoop.views[0].length_h  # noqa: B018


def test_no_hidden_object_is_reachable_from_views():
    sim = Simulator(generate(WorkloadConfig(jobs=30, seed=2)))
    drive(sim, FIFO())
    for root in (sim.cluster, sim.views[0], sim.views[-1]):
        for o in reachable(root):
            assert not isinstance(o, (Simulator, Workload, Curves, np.ndarray)), type(o)
            assert isinstance(o, (JobView, ClusterView, dict, list, tuple, str, int, float, type(None))), type(o)


def test_views_cannot_grow_new_attributes():
    v = Simulator(generate(WorkloadConfig(jobs=3, seed=0)))
    drive(v, FIFO())
    with pytest.raises(AttributeError):
        v.views[0].secret = 1


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
    for s in spy.seen:
        j, i = s["job"], s["evals_done"]
        assert s["est_length_h"] == w.est_length_h[j]                 # the estimate ...
        assert s["est_length_h"] != w.length_h[j]                     # ... never the truth
        assert (s["tenant"], s["gpus"], s["submit_h"]) == (w.tenant[j], w.gpus[j], w.submit_h[j])
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
        assert s["attained_h"] == pytest.approx(w.length_h[s["job"]] * s["evals_done"] / e)
        assert s["attained_h"] == pytest.approx(s["now"] - s["start_h"])


def test_a_new_cluster_starts_at_time_zero_with_every_gpu_free():
    sim = Simulator(generate(WorkloadConfig(jobs=3, seed=0)))
    c = sim.cluster
    assert (c.now_h, c.total_gpus, c.free_gpus, c.used_gpus, c.finished) == (0.0, 64, 64, 0, 0)
    assert c.waiting == {} and c.running == {} and sim.views == [None, None, None]
