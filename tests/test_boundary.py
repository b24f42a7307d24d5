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


@pytest.mark.parametrize("calibration", CALIBRATIONS)
def test_no_hidden_object_is_reachable_from_views(calibration):
    sim = Simulator(generate(WorkloadConfig(jobs=30, seed=2, calibration=calibration)))
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
