"""Nodes, placement and GPU types: hand-checked toys, exact slowed-down event times,
invariants under random legal decisions, and the flat pool kept exactly."""

import json
import random
from fractions import Fraction

import pytest

from evalstop_gym.baselines import SCHEDULERS, MaxThroughput, make_policy
from evalstop_gym import WorkloadConfig, compute_metrics, generate, simulate
from evalstop_gym.cluster import ClusterSpec, load_cluster, two_types, uniform
from evalstop_gym.config import ConfigError, UsageError
from evalstop_gym.placement import Placer, place_preemptive
from evalstop_gym.policy import drive
from evalstop_gym.simulator import DONE, EVAL, SimulationError, Simulator
from evalstop_gym.timebase import TICKS_PER_HOUR
from evalstop_gym.workload import workload_from_jobs

H = TICKS_PER_HOUR


def spec(nodes=4, per=8, placement="consolidate", penalty=0.5, **kw):
    return ClusterSpec(nodes=nodes, gpus_per_node=per, placement=placement,
                       spread_penalty=(("dpo", penalty), ("lora", penalty), ("rlhf", penalty)), **kw)


# -- which nodes: free GPUs per node [8, 3, 5, 8], 8 GPUs per node ---------------------
FREE = [8, 3, 5, 8]


@pytest.mark.parametrize("gpus,where", [
    (2, ((1, 2),)),               # best fit: node 1 has the fewest free GPUs (3) that hold 2
    (4, ((2, 4),)),               # node 2 (5 free) is the tightest that holds 4
    (8, ((0, 8),)),               # a whole node, the lowest-numbered
    (12, ((0, 8), (2, 4))),       # one whole node + 4 on the tightest other node that holds 4 (5 free)
    (17, ((0, 8), (1, 1), (3, 8))),  # two whole nodes + 1 on the tightest (3 free)
    (22, None),                   # 2 whole nodes + 6 needs a node with 6 free: none; consolidate waits
])
def test_consolidate_is_best_fit_on_the_fewest_nodes(gpus, where):
    assert Placer(spec()).place(FREE, gpus) == where


def test_consolidate_capacity_is_whole_nodes_plus_the_fullest_partial_node():
    p = Placer(spec())
    assert p.cap(FREE) == 2 * 8 + 5  # 21: every demand up to 21 fits, 22 does not
    assert all(p.place(FREE, g) is not None for g in range(1, 22))
    assert p.cap([3, 2, 0, 1]) == 3 and p.place([3, 2, 0, 1], 4) is None


@pytest.mark.parametrize("gpus,where", [
    (2, ((0, 2),)),                        # the lowest-numbered node with room
    (3, ((0, 3),)),
    (16, ((0, 8), (3, 8))),                # two whole nodes
    (24, ((0, 8), (1, 3), (2, 5), (3, 8))),  # no consolidated placement: spread in node order
])
def test_first_fit(gpus, where):
    p = Placer(spec(placement="first-fit"))
    assert p.place(FREE, gpus) == where
    assert p.cap(FREE) == 24


@pytest.mark.parametrize("gpus,where", [
    (2, ((0, 2),)),                 # the node with the most free GPUs (8; the lower of nodes 0 and 3)
    (5, ((0, 5),)),
    (12, ((0, 8), (3, 4))),         # a whole node + 4 on the emptiest other node (node 3, 8 free)
])
def test_spread_is_worst_fit(gpus, where):
    assert Placer(spec(placement="spread")).place(FREE, gpus) == where


def test_spread_spills_over_the_emptiest_nodes_when_nothing_consolidated_fits():
    # 8 GPUs, no whole node: 5 + 3 from the two nodes with most free GPUs
    assert Placer(spec(placement="spread")).place([5, 5, 2, 0], 8) == ((0, 5), (1, 3))
    assert Placer(spec(placement="consolidate")).place([5, 5, 2, 0], 8) is None


@pytest.mark.parametrize("placement", ["consolidate", "first-fit", "spread"])
def test_the_fast_search_chooses_as_the_general_one(placement):
    # a preference that ranks the only GPU type first changes no choice but takes the general path
    p = Placer(spec(nodes=6, per=4, placement=placement))
    rng = random.Random(7)
    for _ in range(300):
        free = [rng.randint(0, 4) for _ in range(6)]
        for gpus in range(1, 25):
            assert p.place(free, gpus) == p.place(free, gpus, {"gpu": 0}), (free, gpus)


def test_best_fit_on_node_counts_follows_the_placements_it_stands_for():
    # the allocator plans consolidate on node counts alone; placing each job for real must pass through
    # the same counts and capacities
    from evalstop_gym.placement import BestFitPool, NodePool, Nodes

    class Job:
        def __init__(self, i, gpus):
            self.job_id, self.gpus = i, gpus

    p = Placer(spec(nodes=6, per=4))
    rng = random.Random(3)
    for _ in range(200):
        nodes = Nodes([rng.randint(0, 4) for _ in range(6)], 4, True)
        counts, real = BestFitPool(nodes), NodePool(p, nodes.copy())
        assert counts.cap == real.cap
        for i in range(8):
            if counts.cap == 0:
                break
            job = Job(i, rng.randint(1, counts.cap))
            counts.take(job)
            real.take(job)
            assert (counts.counts, counts.cap) == (real.nodes.counts, real.cap)


def test_type_preference_ranks_nodes_before_the_policy_does():
    s = two_types(4, 8)   # nodes 0-1 "new", 2-3 "old"
    p = Placer(s)
    assert p.place([8, 8, 8, 8], 2) == ((0, 2),)
    assert p.place([8, 8, 8, 8], 2, {"old": 0, "new": 1}) == ((2, 2),)
    assert p.place([8, 8, 0, 8], 16, {"old": 0, "new": 1}) == ((0, 8), (3, 8))  # old node 3 first, then new


# -- speeds: exact fractions -------------------------------------------------------------
def test_rates_are_the_slowest_type_times_the_penalty_exactly():
    s = two_types(4, 8)
    p = Placer(s)
    assert p.rate("rlhf", ((0, 8),)) is None                        # new type, consolidated: speed 1
    assert Fraction(*p.rate("rlhf", ((2, 8),))) == Fraction(55, 100)  # old type
    assert Fraction(*p.rate("rlhf", ((0, 4), (1, 4)))) == Fraction(23, 100)  # spread 8 GPUs on new
    assert Fraction(*p.rate("rlhf", ((1, 4), (2, 4)))) == Fraction(55, 100) * Fraction(23, 100)  # both
    assert Fraction(*p.rate("lora", ((0, 8), (2, 8)))) == Fraction(80, 100)  # 16 GPUs on 2 nodes: not spread


def one_node_speed(speed):
    """One node of 4 GPUs of type ``old`` running every job type at ``speed``."""
    return ClusterSpec(nodes=1, gpus_per_node=4, node_types=("old",),
                       throughput=(("old", (("dpo", speed), ("lora", speed), ("rlhf", speed))),))


@pytest.mark.parametrize("speed,expect", [
    # length 7 ticks, 2 evals: checkpoints at work 3 and 7
    (0.25, (12, 28)),   # ceil(3 / (1/4)) = 12; then ceil(4 * 4) = 16 more
    (0.4, (8, 18)),     # ceil(3 * 5/2) = 8 (8 * 2 // 5 = 3 work); ceil(4 * 5/2) = 10 more
    (3.0, (1, 3)),      # ceil(3 / 3) = 1; then ceil(4 / 3) = 2 more
])
def test_event_times_of_a_slowed_job_are_exact_ceilings(speed, expect):
    w = workload_from_jobs([dict(submit_h=0.0, gpus=2, length_h=7 / H)], total_gpus=4, evals_per_job=2,
                           cluster=one_node_speed(speed))
    sim = Simulator(w)
    sim.advance()
    sim.start(0)
    assert sim.advance() == EVAL and sim.cluster.now_ticks == expect[0]
    while sim.advance() != DONE:  # the completion frees GPUs: a scheduling point, then the end
        pass
    assert sim.outcome().finish_ticks[0] == expect[1]


# -- a whole toy episode, by hand ------------------------------------------------------------
def toy(placement):
    # 2 nodes x 4 GPUs, spread penalty 1/2. A and B (2 GPUs, 1 h) and C (4 GPUs, 1 h) arrive at t=0.
    return workload_from_jobs([dict(submit_h=0.0, gpus=2, length_h=1.0),
                               dict(submit_h=0.0, gpus=2, length_h=1.0),
                               dict(submit_h=0.0, gpus=4, length_h=1.0)], total_gpus=8, evals_per_job=4,
                              cluster=spec(nodes=2, per=4, placement=placement))


def test_spread_placement_slows_a_job_by_exactly_the_penalty():
    # worst fit: A on node 0, B on node 1 (most free), C has no whole node: 2 + 2, spread, speed 1/2
    out = drive(Simulator(toy("spread")), make_policy("fifo"))
    assert out.finish_ticks.tolist() == [H, H, 2 * H]
    assert out.spread_ticks.tolist() == [0, 0, 2 * H]
    m = compute_metrics(out)
    assert m["avg_jct_h"] == (1 + 1 + 2) / 3
    assert m["spread_lost_gpu_h"] == 2 * 4 * (1 - 0.5)      # 2 h x 4 GPUs at half speed
    assert m["utilization"] == (2 + 2 + 8) / (8 * 2)
    assert m["fragmentation_gpus"] == 0.0                      # nothing ever waited


def test_consolidate_packs_and_nobody_is_slowed():
    # best fit: A on node 0, B on node 0 (2 free is the tightest), C on the whole node 1
    out = drive(Simulator(toy("consolidate")), make_policy("fifo"))
    assert out.finish_ticks.tolist() == [H, H, H]
    assert compute_metrics(out)["spread_lost_gpu_h"] == 0.0


def test_fragmentation_counts_free_gpus_no_waiting_job_can_use():
    # 2 nodes x 4. A (3 GPUs, 2 h) and B (3 GPUs, 1 h) take a node each; C (2 GPUs, 1 h) waits though
    # 2 GPUs are free (1 per node) until B ends at 1 h, then runs 1 h on node 1. Makespan 2 h.
    jobs = [dict(submit_h=0.0, gpus=3, length_h=2.0), dict(submit_h=0.0, gpus=3, length_h=1.0),
            dict(submit_h=0.0, gpus=2, length_h=1.0)]
    w = workload_from_jobs(jobs, total_gpus=8, cluster=spec(nodes=2, per=4))
    out = drive(Simulator(w), make_policy("fifo"))
    assert out.finish_ticks.tolist() == [2 * H, H, 2 * H]
    m = compute_metrics(out)
    assert m["fragmentation_gpus"] == 2 * 1 / 2               # 2 GPUs for 1 h, averaged over 2 h
    assert m["fragmentation"] == 1.0 / 8
    # first fit spreads C over the two single free GPUs at once, at half speed: done at 2 h
    w = workload_from_jobs(jobs, total_gpus=8, cluster=spec(nodes=2, per=4, placement="first-fit"))
    out = drive(Simulator(w), make_policy("fifo"))
    assert out.finish_ticks.tolist() == [2 * H, H, 2 * H] and out.spread_ticks[2] == 2 * H
    assert compute_metrics(out)["fragmentation_gpus"] == 0.0


def test_per_type_utilization_and_the_heterogeneity_aware_baseline():
    # 1 new + 1 old node of 4 GPUs, the default matrix (old: lora 0.80, dpo 0.65, rlhf 0.55).
    # One 4-GPU lora job of 1 h. FIFO: best fit ties -> node 0 (new); the old node idles.
    s = ClusterSpec(nodes=2, gpus_per_node=4, node_types=("new", "old"),
                    throughput=(("old", (("dpo", 0.65), ("lora", 0.8), ("rlhf", 0.55))),))
    w = workload_from_jobs([dict(submit_h=0.0, gpus=4, length_h=1.0, job_type="lora")], total_gpus=8, cluster=s)
    out = drive(Simulator(w), make_policy("fifo"))
    m = compute_metrics(out)
    assert (m["utilization_new"], m["utilization_old"]) == (1.0, 0.0) and out.finish_ticks[0] == H
    # MaxThroughput: lora's advantage on old is 0.8 / mean(0.8, 0.65, 0.55) = 1.2 > 1 (on new: 1),
    # so it goes to the old node and runs at 0.8: 1 h of work takes 1.25 h
    out = drive(Simulator(w), MaxThroughput())
    m = compute_metrics(out)
    assert (m["utilization_new"], m["utilization_old"]) == (0.0, 1.0) and out.finish_ticks[0] == 5 * H // 4
    # an rlhf job (advantage on old 0.55 / 0.667 = 0.825 < 1) stays on the new node
    w = workload_from_jobs([dict(submit_h=0.0, gpus=4, length_h=1.0, job_type="rlhf")], total_gpus=8, cluster=s)
    assert compute_metrics(drive(Simulator(w), MaxThroughput()))["utilization_new"] == 1.0


# -- preemptive plans on nodes: decided on the GPU count, placed without moving running jobs ------
def preemptive_plan(per_node, nodes, running, waiting, placement="consolidate"):
    """SRTF-Est's plan once ``running`` jobs run where given and ``waiting`` jobs have arrived.

    ``running``: ``(gpus, est_h, where)``, started at t=0 on ``where``; ``waiting``:
    ``(gpus, est_h)``, arriving at t=0.5 h. Lengths are 100 h (nothing ends first).
    """
    jobs = [dict(submit_h=0.0, gpus=g, length_h=100.0, est_length_h=e) for g, e, _ in running]
    jobs += [dict(submit_h=0.5, gpus=g, length_h=100.0, est_length_h=e) for g, e in waiting]
    s = spec(nodes=nodes, per=per_node, placement=placement)
    sim = Simulator(workload_from_jobs(jobs, total_gpus=nodes * per_node, cluster=s))
    assert sim.advance() != DONE
    for j, (_, _, where) in enumerate(running):
        sim.start(j, where)
    sim.advance()  # the arrivals at 0.5 h
    assert sim.cluster.now_h == 0.5
    policy = make_policy("srtf-est")
    policy.reset()
    plan = policy.schedule(sim.cluster)
    return sorted(plan.preempt), sorted(plan.start), dict(plan.placed or {})


def test_a_start_takes_free_gpus_rather_than_displace_a_running_job():
    # 2 nodes x 4. R (3 GPUs, est 10 h) runs on node 0; W (3 GPUs, est 1 h) arrives. 6 <= 8 GPUs: both
    # are kept, and W goes to node 1, the only node with 3 free GPUs. (Planned from an empty cluster,
    # best fit would have put W on node 0 and displaced R.)
    assert preemptive_plan(4, 2, [(3, 10.0, ((0, 3),))], [(3, 1.0)]) == ([], [1], {1: ((1, 3),)})


def test_a_start_displaces_the_candidate_whose_gpus_it_needs():
    # 3 nodes x 4. A (3 GPUs, est 5 h) on node 0, B (3, est 9 h) on node 1, C (4, est 7 h) on node 2;
    # free: 1 on node 0, 1 on node 1. W (4 GPUs, est 1 h) arrives. On the GPU count (12):
    # W 4, A 3, C 4 keep 11; B (3) does not fit in the 1 left, so B is the candidate. W fits in no
    # node's free GPUs; with B's GPUs node 1 has 4: W goes there and B is preempted.
    running = [(3, 5.0, ((0, 3),)), (3, 9.0, ((1, 3),)), (4, 7.0, ((2, 4),))]
    assert preemptive_plan(4, 3, running, [(4, 1.0)]) == ([1], [3], {3: ((1, 4),)})


def test_a_start_that_cannot_be_placed_waits_and_the_candidate_keeps_running():
    # 3 nodes x 4. A (3, est 5 h) on node 0, B (2, est 9 h) and D (2, est 6 h) on node 1, C (3, est 7 h)
    # on node 2; free: 1 on node 0, 1 on node 2. W (3 GPUs, est 1 h) arrives. On the count: W 3, A 3,
    # D 2, C 3 keep 11; B (2) is the candidate. Even with B's 2 GPUs no node has 3 free (1, 2, 1):
    # W waits and B, whose GPUs nobody took, keeps running. Nothing changes.
    running = [(3, 5.0, ((0, 3),)), (2, 9.0, ((1, 2),)), (2, 6.0, ((1, 2),)), (3, 7.0, ((2, 3),))]
    assert preemptive_plan(4, 3, running, [(3, 1.0)]) == ([], [], {})


def test_a_start_across_free_and_candidate_gpus_takes_the_free_ones_first():
    # 4 nodes x 4. B (4 GPUs, est 9 h) on node 0, A (1, est 8 h) on node 1 (3 free), R (3, est 2 h) on node 2
    # (1 free), Q (2, est 3 h) on node 3 (2 free). S1 (7, est 1 h), S2 (1, est 1.5 h), S3 (3, est 4 h) arrive.
    # Remaining at 0.5 h: S1 1, R 1.5, S2 1.5, Q 2.5, S3 4, A 7.5, B 8.5; on the count (16) S1 7 + R 3 + S2 1
    # + Q 2 + S3 3 = 16 are kept, A and B are candidates. S1 needs a whole node plus 3: only with B's node 0,
    # plus node 1's 3 free GPUs (not A's). Node 1 is then full, so S2 takes node 2's free GPU; S3 finds no
    # node with 3 (free or A's): it waits. A's GPU was not taken: A keeps running; only B is preempted.
    running = [(4, 9.0, ((0, 4),)), (1, 8.0, ((1, 1),)), (3, 2.0, ((2, 3),)), (2, 3.0, ((3, 2),))]
    assert preemptive_plan(4, 4, running, [(7, 1.0), (1, 1.5), (3, 4.0)]) == (
        [0], [4, 5], {4: ((0, 4), (1, 3)), 5: ((2, 1),)})


def test_consolidate_refuses_an_explicit_spread_placement():
    s = spec(nodes=4, per=8, placement="consolidate")
    sim = Simulator(workload_from_jobs([dict(submit_h=0.0, gpus=8, length_h=1.0)], total_gpus=32, cluster=s))
    assert sim.advance() != DONE
    with pytest.raises(SimulationError, match="'consolidate' never spreads"):
        sim.start(0, ((0, 4), (1, 4)))
    sim.start(0, ((2, 8),))   # one whole node is fine
    assert sim.cluster.node_free == [8, 8, 0, 8]


def test_a_start_that_cannot_be_placed_is_backfilled_by_a_lower_ranked_job_that_can():
    # 3 nodes x 8. A (5 GPUs, est 2 h) on node 0, B (5, est 3 h) on node 1, C (6, est 4 h) on node 2;
    # free: 3, 3, 2. H (8 GPUs, est 5 h) and S (1 GPU, est 10 h) arrive. On the count (24): A, B, C and
    # H keep all 24 GPUs; S is left out. H fits in no node (no candidate to displace): it waits, and
    # S, which can be placed, backfills its GPUs, on the tightest node that holds it: node 2.
    running = [(5, 2.0, ((0, 5),)), (5, 3.0, ((1, 5),)), (6, 4.0, ((2, 6),))]
    assert preemptive_plan(8, 3, running, [(8, 5.0), (1, 10.0)]) == ([], [4], {4: ((2, 1),)})


def test_backfilling_leaves_wholly_free_nodes_to_the_start_that_waits():
    # 3 nodes x 4. A (1 GPU, est 1 h) on node 0, B (1, est 2 h) on node 1; node 2 is free. H (8 GPUs,
    # est 3 h), S1 (4, est 10 h), S2 (1, est 11 h) and S3 (2, est 12 h) arrive. On the count (12): A 1,
    # B 1, H 8, S2 1 keep 11; S1 (4) and S3 (2) are left out. H needs two free nodes, there is one: it
    # waits. S2 starts on node 0 (best fit). Backfilling then sees nodes 0 and 1 (2 and 3 free), not
    # node 2, which is kept for H: S1 fits nowhere there, S3 goes to node 0.
    running = [(1, 1.0, ((0, 1),)), (1, 2.0, ((1, 1),))]
    assert preemptive_plan(4, 3, running, [(8, 3.0), (4, 10.0), (1, 11.0), (2, 12.0)]) == (
        [], [4, 5], {4: ((0, 1),), 5: ((0, 2),)})


def test_a_backfilled_job_runs_and_the_start_that_waits_takes_the_first_node_that_frees():
    # The first backfilling example over time (SRTF-Est; lengths equal estimates, S runs 5 h). H
    # arrives at 0.5 h and waits; S arrives at 0.6 h and backfills node 2 at once (with H's GPUs
    # reserved it would wait for A to end at 2 h). A ends at 2 h: node 0 is wholly free, and H, still
    # ranked before S, starts there at 2 h (done 3 h) while S runs on; B ends at 3 h, C at 4 h, S at 5.6 h.
    jobs = [dict(submit_h=0.0, gpus=5, length_h=2.0, est_length_h=2.0),
            dict(submit_h=0.0, gpus=5, length_h=3.0, est_length_h=3.0),
            dict(submit_h=0.0, gpus=6, length_h=4.0, est_length_h=4.0),
            dict(submit_h=0.5, gpus=8, length_h=1.0, est_length_h=5.0),
            dict(submit_h=0.6, gpus=1, length_h=5.0, est_length_h=10.0)]
    sim = Simulator(workload_from_jobs(jobs, total_gpus=24, cluster=spec(nodes=3, per=8)))
    assert sim.advance() != DONE
    for j, where in enumerate([((0, 5),), ((1, 5),), ((2, 6),)]):
        sim.start(j, where)
    out = drive(sim, make_policy("srtf-est"))
    assert out.finish_ticks.tolist() == [2 * H, 3 * H, 4 * H, 3 * H, 56 * H // 10]


class Held:
    """A job for ``place_preemptive``: id, demand and (if running) its nodes."""

    def __init__(self, job_id, gpus, nodes=None):
        self.job_id, self.gpus, self.nodes = job_id, gpus, nodes


@pytest.mark.parametrize("placement", ["consolidate", "first-fit"])
@pytest.mark.parametrize("seed", range(40))
def test_preemption_and_free_gpus_after_a_placed_plan_match_a_plain_reference(placement, seed):
    # Random running jobs on 4 nodes x 4; some are candidates. The reference: give every candidate's
    # GPUs back, take the placed starts', then keep candidates in key order while their GPUs are all
    # there; the GPUs left are free after the plan. (place_preemptive looks only at nodes starts took
    # candidates' GPUs on.)
    rng = random.Random(seed)
    per, n_nodes = 4, 4
    free = [per] * n_nodes
    running = []
    for j in range(rng.randint(1, 10)):
        g = rng.choice([1, 1, 2, 3, 4, 6])
        where = Placer(spec(nodes=n_nodes, per=per, placement=placement)).place(free, g)
        if where is None:
            continue
        for n, c in where:
            free[n] -= c
        running.append(Held(j, g, where))
    candidates = [v for v in running if rng.random() < 0.5]
    starts = [Held(100 + i, rng.choice([1, 2, 3, 4, 8])) for i in range(rng.randint(1, 3))]
    placer = Placer(spec(nodes=n_nodes, per=per, placement=placement))
    nodes = placer.nodes(list(free))
    rank = lambda v: -v.gpus  # noqa: E731  (any key: larger jobs first)
    placed, preempted, after = place_preemptive(placer, nodes, starts, candidates, rank=rank)
    assert nodes.free == free  # not changed
    room = list(free)
    for v in candidates:
        for n, c in v.nodes:
            room[n] += c
    for where in placed.values():
        for n, c in where:
            room[n] -= c
            assert room[n] >= 0
    kept = set()
    for v in sorted(candidates, key=rank):
        if all(room[n] >= c for n, c in v.nodes):
            kept.add(v.job_id)
            for n, c in v.nodes:
                room[n] -= c
    assert set(preempted) == {v.job_id for v in candidates} - kept
    if len(placed) < len(starts):  # a start waits: after is what backfilling plans on
        assert after.free == room and after.total == sum(room) and after.cap() == placer.cap(room)


def test_starts_are_placed_in_key_order():
    # 2 nodes x 4; R (1 GPU, est 0.5 h) on node 0, so 3 + 4 GPUs are free. X (1 GPU, est 9 h), Y (3, est 2 h)
    # and Z (3, est 3 h) arrive in that order; on the count all start (1 + 1 + 3 + 3 = 8). In key order
    # Y takes node 0 (the tightest that holds 3), Z node 1, X the last GPU of node 1. (In queue order
    # X would have taken node 0's tightest spot and Z found no node with 3 free.)
    assert preemptive_plan(4, 2, [(1, 0.5, ((0, 1),))], [(1, 9.0), (3, 2.0), (3, 3.0)]) == (
        [], [1, 2, 3], {1: ((1, 1),), 2: ((0, 3),), 3: ((1, 3),)})


def test_a_start_is_consolidated_on_a_candidates_gpus_before_it_is_spread():
    # first fit, 3 nodes x 4. A (1 GPU, est 5 h) on node 0, B (1, est 5.5 h) on node 1, C (4, est 9 h) on
    # node 2; 3 + 3 GPUs free. W1 (4 GPUs, est 1 h) and W2 (3, est 2 h) arrive. On the count (12): W1 4,
    # W2 3, A 1, B 1 keep 9; C (4) is the candidate. W1 has no node with 4 free GPUs, but node 2 has
    # with C's: it goes there rather than spread over nodes 0 and 1; W2 then takes node 0's 3 free GPUs.
    running = [(1, 5.0, ((0, 1),)), (1, 5.5, ((1, 1),)), (4, 9.0, ((2, 4),))]
    assert preemptive_plan(4, 3, running, [(4, 1.0), (3, 2.0)], "first-fit") == (
        [2], [3, 4], {3: ((2, 4),), 4: ((0, 3),)})


def test_fifo_on_nodes_lets_small_jobs_pass_a_job_that_cannot_be_consolidated():
    # 4 GPUs: flat, or 2 nodes x 2 (consolidate). At t=0 four 1-GPU jobs start, by best fit A, B on
    # node 0 and C, F on node 1; A and C end at 1 h, B and F at 3 h. D (2 GPUs, 2 h) is submitted at
    # 0.5 h, then E and G (1 GPU, 1 h) at 0.6 h and 0.7 h. At 1 h two GPUs are free, one per node.
    # Flat: D starts at 1 h (done 3 h), E and G at 3 h (done 4 h).
    # Nodes: D fits in no node and is skipped (FIFO is first-fit); E and G run 1-2 h; D waits, with
    # two GPUs idle from 2 h, until B and F end at 3 h (done 5 h).
    jobs = [dict(submit_h=0.0, gpus=1, length_h=1.0), dict(submit_h=0.0, gpus=1, length_h=3.0),
            dict(submit_h=0.0, gpus=1, length_h=1.0), dict(submit_h=0.0, gpus=1, length_h=3.0),
            dict(submit_h=0.5, gpus=2, length_h=2.0), dict(submit_h=0.6, gpus=1, length_h=1.0),
            dict(submit_h=0.7, gpus=1, length_h=1.0)]
    flat = drive(Simulator(workload_from_jobs(jobs, total_gpus=4)), make_policy("fifo"))
    nodes = drive(Simulator(workload_from_jobs(jobs, total_gpus=4, cluster=spec(nodes=2, per=2))),
                  make_policy("fifo"))
    assert flat.finish_ticks[4:].tolist() == [3 * H, 4 * H, 4 * H]
    assert nodes.finish_ticks[4:].tolist() == [5 * H, 2 * H, 2 * H]
    # D, E, G: JCT (2.5 + 3.4 + 3.3) h flat against (4.5 + 1.4 + 1.3) h on nodes: the mean falls by
    # 2/3 h a job while the nodes idle 2 GPU-hours more (utilization down, makespan 5 h against 4 h)
    fm, nm = compute_metrics(flat), compute_metrics(nodes)
    assert nm["avg_jct_h"] < fm["avg_jct_h"] and nm["utilization"] < fm["utilization"]
    assert nm["makespan_h"] == 5.0 and fm["makespan_h"] == 4.0


# -- invariants under random legal decisions ----------------------------------------------------
def expected_rate(s, job_type, where):
    r = min(s.speed(s.types_of_nodes[n], job_type) for n, _ in where)
    if len(where) > -(-sum(g for _, g in where) // s.gpus_per_node):
        r *= s.penalty(job_type)
    return r


@pytest.mark.parametrize("seed", range(6))
def test_random_legal_decisions_keep_nodes_consistent(seed):
    rng = random.Random(seed)
    s = two_types(4, 8, placement=("consolidate", "first-fit", "spread")[seed % 3])
    w = generate(WorkloadConfig(jobs=60, load=1.5, seed=seed, gpus=s.total_gpus, cluster=s))
    sim = Simulator(w)
    c = sim.cluster
    placer = Placer(s)
    runs = {}   # job id -> (start tick, work at start, placement) of an uninterrupted run
    while True:
        kind = sim.advance()
        if kind == DONE:
            break
        if kind == EVAL:
            if rng.random() < 0.05:
                sim.stop(sim.decision_job.job_id)
                runs.pop(sim.decision_job.job_id, None)
            continue
        for j in list(c.running):
            if rng.random() < 0.1:
                sim.preempt(j)
                runs.pop(j, None)
        for v in list(c.waiting.values()):
            if rng.random() < 0.3 or not c.running:
                free = c.node_free
                if v.gpus > sum(free):
                    continue
                # a random legal placement: GPUs from random nodes
                where, need = {}, v.gpus
                for n in rng.sample(range(len(free)), len(free)):
                    take = min(free[n], need)
                    if take:
                        where[n] = take
                        need -= take
                    if not need:
                        break
                if s.placement == "consolidate" and placer.is_spread(tuple(where.items())):
                    continue  # not legal there: consolidate never spreads a job
                sim.start(v.job_id, tuple(where.items()))
                runs[v.job_id] = (c.now_ticks, v.nodes)
        # no node over-allocated; every running job's GPUs sum to its demand; node state adds up
        used = [0] * s.nodes
        for v in c.running.values():
            assert sum(g for _, g in v.nodes) == v.gpus
            for n, g in v.nodes:
                used[n] += g
        assert all(0 <= f == s.gpus_per_node - u for f, u in zip(c.node_free, used))
        assert sum(c.node_free) == c.free_gpus
    out = sim.outcome()
    # an uninterrupted run that completed: its service is the sum over checkpoints of
    # ceil(work between checkpoints / rate), the rate being the slowest type times the penalty if spread
    checked = 0
    for j, (t0, where) in runs.items():
        if out.stopped[j] or sim.views[j]._service_ticks != out.finish_ticks[j] - t0:
            continue
        rate = expected_rate(s, sim.views[j].job_type, where)
        length, e = sim._length[j], w.evals_per_job
        targets = [length * i // e for i in range(e + 1)]
        want = sum(-(-(b - a) * rate.denominator // rate.numerator) for a, b in zip(targets, targets[1:]))
        assert out.service_ticks[j] == want
        checked += 1
    assert checked > 5


# -- the flat pool is kept exactly ---------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_one_node_through_the_node_code_gives_the_flat_pool_byte_for_byte(scheduler, seed):
    # a throughput matrix of ones makes the simulator take the node path on one node
    one = ClusterSpec(nodes=1, gpus_per_node=64, throughput=(("gpu", (("rlhf", 1.0),)),))
    assert not one.trivial
    flat = simulate(scheduler, "evalstop", jobs=120, seed=seed)
    nodes = simulate(scheduler, "evalstop", jobs=120, seed=seed, cluster=one)
    # fragmentation is measured on nodes only (the flat pool reports None)
    assert flat["fragmentation_gpus"] is None and nodes["fragmentation_gpus"] is not None
    for m in (flat, nodes):
        del m["fragmentation_gpus"], m["fragmentation"]
    assert json.dumps(nodes, sort_keys=True) == json.dumps(flat, sort_keys=True)


# -- specs are data with clear errors ----------------------------------------------------------
def test_spec_validation_names_field_value_and_what_is_allowed():
    with pytest.raises(ConfigError, match=r"cluster.placement='tight'.*consolidate, first-fit, spread"):
        ClusterSpec(nodes=2, gpus_per_node=8, placement="tight")
    with pytest.raises(ConfigError, match=r"cluster.node_types=3.*one GPU type per node \(2 nodes\)"):
        ClusterSpec(nodes=2, gpus_per_node=8, node_types=("a", "b", "c"))
    with pytest.raises(ConfigError, match=r"cluster.spread_penalty.rlhf=1.5"):
        ClusterSpec(nodes=2, gpus_per_node=8, spread_penalty=(("rlhf", 1.5),))
    with pytest.raises(ConfigError, match=r"cluster.throughput.*must be a GPU type of some node"):
        ClusterSpec(nodes=2, gpus_per_node=8, throughput=(("h100", (("rlhf", 2.0),)),))
    with pytest.raises(ConfigError, match=r"cluster=.*must hold gpus=32"):
        WorkloadConfig(gpus=32, cluster="nodes8")
    with pytest.raises(ConfigError, match=r"cluster='1000 x 1001 GPUs'.*at most 1,000,000 GPUs"):
        ClusterSpec(nodes=1000, gpus_per_node=1001)
    assert ClusterSpec.flat(25_600).total_gpus == 25_600   # a flat pool is one node: as large as any cluster


def test_spec_files(tmp_path):
    yml = tmp_path / "c.yaml"
    yml.write_text("nodes:\n  - {count: 2, gpu_type: a100}\n  - {count: 1, gpu_type: v100}\n"
                   "gpus_per_node: 4\nthroughput:\n  v100: {rlhf: 0.5}\nspread_penalty: {rlhf: 0.25}\n"
                   "placement: spread\n")
    s = load_cluster(str(yml))
    assert (s.nodes, s.total_gpus, s.types_of_nodes, s.placement) == (3, 12, ("a100", "a100", "v100"), "spread")
    assert s.speed("v100", "rlhf") == Fraction(1, 2) and s.penalty("rlhf") == Fraction(1, 4)
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"nodes": 2, "gpus_per_node": 8, "gpu_type": "h100"}))
    assert load_cluster(str(js)).types_of_nodes == ("h100", "h100")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"nodes": 2, "gpus_per_node": 8, "colour": "red"}))
    with pytest.raises(ConfigError, match="cluster.colour"):
        load_cluster(str(bad))
    with pytest.raises(UsageError, match="no such file"):
        load_cluster(str(tmp_path / "missing.yaml"))


def test_simulator_refuses_an_illegal_placement():
    w = workload_from_jobs([dict(submit_h=0.0, gpus=4, length_h=1.0)], total_gpus=8, cluster=uniform(2, 4))
    sim = Simulator(w)
    sim.advance()
    with pytest.raises(SimulationError, match="distinct nodes with room"):
        sim.start(0, ((0, 3), (1, 3)))   # 6 GPUs for a 4-GPU job
    with pytest.raises(SimulationError, match="distinct nodes with room"):
        sim.start(0, ((0, 5),))          # node 0 has 4 GPUs


# -- environments on nodes --------------------------------------------------------------------
def test_env_observations_show_nodes_and_masks_respect_placement():
    import gymnasium as gym

    import evalstop_gym  # noqa: F401
    from evalstop_gym.envs.features import feature_names

    s = spec(nodes=2, per=4)   # consolidate: C (2 GPUs) cannot be placed while each node has 1 free
    jobs = [dict(submit_h=0.0, gpus=3, length_h=2.0), dict(submit_h=0.0, gpus=3, length_h=1.0),
            dict(submit_h=0.0, gpus=2, length_h=1.0)]
    w = workload_from_jobs(jobs, total_gpus=8, cluster=s)
    small = {"mix": {"lora": 1.0}}   # generated episodes on 8 GPUs need small jobs (unused here)
    env = gym.make("EvalStop-Cluster-v0", slots=4, cluster=s, **small)
    names = feature_names(4, s)
    assert env.observation_space.shape == (len(names),)
    obs, info = env.reset(seed=0, options={"workload": w})
    assert info["action_mask"].tolist() == [0, 0, 1, 1, 1, 0]       # start any of the three (idle: no commit)
    obs, *_, info = env.step(2)                                        # start job 0 (3 GPUs) on node 0
    obs, *_, info = env.step(3)                                        # start job 1 on node 1
    # jobs 0 and 1 just started (no preempting them this instant); job 2 (2 GPUs) fits in no node
    # though 2 GPUs are free: masked (on the flat pool it could start)
    assert info["action_mask"].tolist() == [1, 0, 0, 0, 0, 0]
    at = {n: obs[i] for i, n in enumerate(names)}
    assert (at["node0.free_gpus"], at["node1.free_gpus"]) == (0.25, 0.25)
    assert (at["slot0.speed"], at["slot0.spread"]) == (1.0, 0.0)
    env.close()
    # on first-fit job 2 may start spread over the two single free GPUs, at half speed
    ff = spec(nodes=2, per=4, placement="first-fit")
    env = gym.make("EvalStop-Cluster-v0", slots=4, cluster=ff, **small)
    env.reset(seed=0, options={"workload": workload_from_jobs(jobs, total_gpus=8, cluster=ff)})
    env.step(2)
    env.step(3)
    obs, *_, info = env.step(4)
    at = {n: obs[i] for i, n in enumerate(feature_names(4, ff))}
    assert (at["slot2.spread"], at["slot2.speed"]) == (1.0, 0.5)
    with pytest.raises(ConfigError, match="as many nodes as the env was made with"):
        env.reset(seed=0, options={"cluster": uniform(4, 2)})
    env.close()


def test_reset_options_and_gym_make_take_a_cluster():
    import gymnasium as gym

    import evalstop_gym  # noqa: F401

    env = gym.make("EvalStop-StopControl-v0", cluster="nodes8", jobs=20)
    _, info = env.reset(seed=1, options={"cluster": uniform(8, 8, "spread")})
    assert env.unwrapped.cluster.spec.placement == "spread"
    env.close()


def test_helios_replay_reads_recorded_node_counts(tmp_path):
    from evalstop_gym.traces import read_trace, replay_trace, trace_config

    csv = tmp_path / "cluster_log.csv"
    csv.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "a,u,v,8,1,2,COMPLETED,2020-01-01 00:00:00,,,3600,0\n"    # 8 GPUs recorded on 2 nodes: spread
        "b,u,v,8,1,1,COMPLETED,2020-01-01 00:10:00,,,3600,0\n"    # consolidated
        "c,u,v,16,1,2,COMPLETED,2020-01-01 00:20:00,,,3600,0\n"   # 16 GPUs need 2 nodes: consolidated
        "d,u,v,4,1,,COMPLETED,2020-01-01 00:30:00,,,3600,0\n")    # no node count: taken as consolidated
    table = read_trace(csv, "helios")
    assert table.nodes.tolist() == [2, 1, 2, 0]
    s = spec(nodes=2, per=8)  # spread penalty 0.5 for every job type
    w, report = replay_trace(table, trace_config(gpus=16, cluster=s), rescale="none")
    # a ran at half speed for 1 h: 0.5 h of work at full speed; the others as recorded
    assert w.length_h.tolist() == [0.5, 1.0, 1.0, 1.0]
    assert "runs recorded spread over nodes (work = run time x spread penalty)" in report.summary()
    # the flat pool has no nodes to be spread over: run times as recorded
    w, _ = replay_trace(table, trace_config(gpus=16), rescale="none")
    assert w.length_h.tolist() == [1.0, 1.0, 1.0, 1.0]


# -- the command line ------------------------------------------------------------------------------
def cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "evalstop_gym.cli", *args], capture_output=True, text=True)


def test_cli_cluster_flags_match_the_python_api():
    r = cli("simulate", "--jobs", "30", "--seed", "2", "--nodes", "4", "--gpus-per-node", "16",
            "--placement", "spread", "--scheduler", "sjf-est", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == simulate("sjf-est", jobs=30, seed=2, cluster=uniform(4, 16, "spread"))
    r = cli("simulate", "--jobs", "30", "--seed", "2", "--scheduler", "fifo", "--cluster", "two-types", "--json")
    assert json.loads(r.stdout) == simulate("fifo", jobs=30, seed=2, cluster="two-types")
    # the realistic world's nodes, and its flat pool on request
    r = cli("simulate", "--jobs", "30", "--scheduler", "fifo", "--calibration", "realistic", "--cluster", "flat", "--json")
    assert json.loads(r.stdout) == simulate("fifo", jobs=30, calibration="realistic", cluster="flat")
    assert simulate("fifo", jobs=30, calibration="realistic") == simulate(
        "fifo", jobs=30, calibration="realistic", cluster=uniform(8, 8))


@pytest.mark.parametrize("args, words", [
    (["--gpus-per-node", "3"], "gpus_per_node=3"),
    (["--nodes", "4", "--gpus-per-node", "8", "--gpus", "64"], "gpus=64"),
    (["--placement", "spread"], "placement='spread'"),
    (["--cluster", "nodes8", "--nodes", "2"], "nodes=2"),
    (["--cluster", "no-such.yaml"], "no such file"),
])
def test_cli_cluster_errors_are_one_line_and_exit_2(args, words):
    r = cli("simulate", "--jobs", "5", *args)
    assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
