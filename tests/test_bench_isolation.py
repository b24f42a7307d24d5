"""Outside policies play in their own process: the stack-walk, garbage-collector and import-time-patch cheats
that win beside the simulator get nothing there, and an honest policy plays the same either way."""

import sys
import textwrap

import pytest

from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.arms import NO_STOPPER
from evalstop_gym.bench.run import run_bench
from evalstop_gym.bench.suite import Row, suite_hash

# every decision of an isolated policy is a round trip to its process, which a loaded machine makes slow: one
# small workload (about 800 round trips; 40 jobs on two seeds took 3300), on which the cheats, run in-process,
# do beat their honest twin (the second test): on seeds 1000-1005 at 16 or 20 jobs only 1003 is such a one
TOY = (Row("toy-paper", jobs=20, gpus=16, seeds=(1003,)),)

HONEST = """
from evalstop_gym.policy import Stopper


class Honest(Stopper):
    rule_name = "honest"

    def rule(self, job, cluster):
        return job.consecutive_declines >= 2
"""

# each cheat stops a job exactly when it is a hacking job past its true peak, if it can find the simulator;
# otherwise it plays its honest twin's rule
CHEATS = {
    "cheat_stack": """
import inspect
import sys

from evalstop_gym.policy import Stopper


def simulator(cluster):
    frame = sys._getframe()
    while frame is not None:
        for value in frame.f_locals.values():
            if type(value).__name__ == "Simulator":
                return value
        frame = frame.f_back
    for info in inspect.stack():
        for value in info.frame.f_locals.values():
            if type(value).__name__ == "Simulator":
                return value
    return None
""",
    "cheat_gc": """
import gc

from evalstop_gym.policy import Stopper


_found = []


def simulator(cluster):
    if not (_found and _found[0].cluster is cluster):   # one walk through the heap per episode
        _found[:] = [o for o in gc.get_objects() if type(o).__name__ == "Simulator" and o.cluster is cluster][:1]
    return _found[0] if _found else None
""",
    "cheat_patch": """
import evalstop_gym.metrics as metrics
from evalstop_gym.policy import Stopper

_real = metrics.compute_metrics


def _halved(out):
    m = _real(out)
    m["avg_jct_h"] /= 2
    return m


metrics.compute_metrics = _halved


def simulator(cluster):
    return None
""",
}
RULE = """

class Cheat(Stopper):
    rule_name = "cheat"

    def rule(self, job, cluster):
        sim = simulator(cluster)
        if sim is None:
            return job.consecutive_declines >= 2
        j = job.job_id
        return bool(sim._w.hacking[j]) and len(job.eval_scores) - 1 >= sim._peak[j]
"""


@pytest.fixture
def cheats(tmp_path, monkeypatch):
    import evalstop_gym.metrics as metrics

    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    monkeypatch.setattr(metrics, "compute_metrics", metrics.compute_metrics)   # restored whatever a cheat does
    (tmp_path / "honest43.py").write_text(textwrap.dedent(HONEST))
    for name, head in CHEATS.items():
        (tmp_path / f"{name}43.py").write_text(head + RULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ["honest43", *(f"{n}43" for n in CHEATS)]:
        sys.modules.pop(name, None)
    suite_hash.cache_clear()


def _bench(out, in_process):
    policies = ["honest43:Honest", *(f"{n}43:Cheat" for n in CHEATS)]
    result = run_bench(policies, suite_name="toy", out=out, progress=False, echo=lambda _t: None,
                       in_process=in_process)
    return result, {c["policy"].partition(":")[0]: c for c in result["policies"]}


def test_isolated_cheats_score_exactly_as_their_honest_twin(cheats):
    result, cards = _bench(cheats / "isolated", in_process=False)
    honest = cards["honest43"]
    assert honest["process"] == "isolated"
    for name in CHEATS:
        card = cards[f"{name}43"]
        assert card["process"] == "isolated"
        assert card["per_seed"] == honest["per_seed"], name   # every metric of every workload: no better, no worse
    # the reference arm is untouched by the patch (never imported here): the same as a clean run of it
    assert "cheat_patch43" not in sys.modules
    assert result["reference_values"][NO_STOPPER][TOY[0].name]["avg_jct_h"][0] == _clean_jct(TOY[0])


def _clean_jct(row):
    from evalstop_gym.bench.play import BenchSpec
    from evalstop_gym.bench.policies import builtin

    return BenchSpec.make(builtin("srtf-est"), row, row.seeds[0]).play()["avg_jct_h"]


def test_the_same_cheats_win_in_process_so_the_test_above_can_fail(cheats):
    clean = _clean_jct(TOY[0])
    result, cards = _bench(cheats / "inproc", in_process=True)
    honest = cards["honest43"]
    assert honest["process"] == "in-process"
    for name in ("cheat_stack", "cheat_gc"):
        agg = cards[f"{name}43"]["aggregate"]
        assert agg["precision"] == 1.0 and agg["f1"] > honest["aggregate"]["f1"], name
    # imported in the bench's process, the patch halves every arm's JCT, the references' included
    assert result["reference_values"][NO_STOPPER][TOY[0].name]["avg_jct_h"][0] == clean / 2


@pytest.mark.parametrize("world", [dict(calibration="paper"), dict(calibration="realistic", cluster="8x8-first-fit"),
                                   dict(calibration="realistic", cluster="two-types")])
def test_an_honest_policy_decides_the_same_in_its_own_process(world):
    # the child's mirror of the public views is exact: every metric equal, on the flat pool and on nodes
    from evalstop_gym.baselines import make_policy
    from evalstop_gym.bench.isolate import Remote
    from evalstop_gym.metrics import compute_metrics
    from evalstop_gym.policy import drive
    from evalstop_gym.simulator import Simulator
    from evalstop_gym.workload import generate

    w = generate(Row("w", jobs=60, **world).config(1000))
    for sched, stop, params in (("srtf-est", "evalstop", {"k": 2}), ("tiresias", "cusum", {}),
                                ("max-throughput", "divergence", {})):
        here = compute_metrics(drive(Simulator(w), make_policy(sched, stop, **params)))
        there = compute_metrics(drive(Simulator(w), Remote(sched, stop, tuple(params.items()))))
        assert here == there, (sched, stop)


def test_a_failing_or_lying_child_is_one_clear_error(cheats):
    from evalstop_gym.bench.isolate import PolicyProcessError, Remote, _plan_in
    from evalstop_gym.policy import drive
    from evalstop_gym.simulator import Simulator
    from evalstop_gym.workload import generate

    (cheats / "broken43.py").write_text("from evalstop_gym.policy import Stopper\n\n\nclass Broken(Stopper):\n"
                                        "    def rule(self, job, cluster):\n        raise KeyError('oops')\n")
    with pytest.raises(PolicyProcessError, match="broken43:Broken failed in its process:(.|\n)*KeyError: 'oops'"):
        drive(Simulator(generate(TOY[0].config(1000))), Remote("srtf-est", "broken43:Broken"))
    sys.modules.pop("broken43", None)
    for bad in ([[1], [2]], [["1"], [], None, None], [[], [], True, None], [[], [2], None, [[2, [[0, "8"]]]]]):
        with pytest.raises(PolicyProcessError, match="answered"):
            _plan_in("x", bad)
    assert _plan_in("x", [[3], [2], 1.5, [[2, [[0, 8]]]]]) == ((3,), (2,), 1.5, {2: ((0, 8),)})
