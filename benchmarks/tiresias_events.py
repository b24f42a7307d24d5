"""Events per case of the compiled-path Tiresias property test, uncapped: how long its cases really are.

``tests/test_compiled.py::test_tiresias_queues_demotions_promotions_and_resumes`` plays the Python reference
first, capped at ``MAX_EVENTS`` advance calls, and rejects a case past the cap (the compiled path cannot be
interrupted). This script draws cases from the same strategies (the test module's own ``generated``,
``tied`` and ``tiresias_policies``), with a fixed hypothesis seed each and the generate phase only, and plays
each one on the reference with no cap but ``--guard`` advance calls (a case past the guard is counted as
such, not played to its end), then on the compiled path, and checks the two outcomes equal (the test's
``assert_same``, so the long cases the cap rejects are checked too). It prints the distribution of advance
calls per case (p50, p90, p99, max), how many pass each of ``--caps``, the longest cases with what they are, and
the CPU seconds of each path over all cases and over the cases within each cap.

It then estimates what one run of the test costs under each cap: ``--runs`` draws of ``--per-run`` cases
(the test's ``max_examples``) from the measured ones, a case within the cap charged both paths' CPU, a case
past it the reference's CPU prorated to the cap (the test stops it there and rejects it). Hypothesis also
draws a fresh case for each rejected one; the estimate leaves that out, so it is a little low.

    python benchmarks/tiresias_events.py [--seeds 1,2] [--examples 300] [--caps 60000,400000]
                                         [--guard 5000000] [--longest 10] [--per-run 100] [--runs 2000]
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]  # this checkout's code and its test module

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import test_compiled as tc  # noqa: E402
from evalstop_gym.compiled import fast_outcome  # noqa: E402
from evalstop_gym.policy import Stopper, drive  # noqa: E402
from evalstop_gym.simulator import Simulator  # noqa: E402


class PastGuard(Exception):
    pass


def describe_policy(policy) -> str:
    base = policy.base if isinstance(policy, Stopper) else policy
    stop = type(policy).__name__ if isinstance(policy, Stopper) else "bare"
    return f"Tiresias{base.thresholds_gpu_h} knob={base.promote_knob} {stop}"


def describe_world(config) -> str:
    if config is None:
        return "tied (hand-written jobs)"
    c = config.cluster
    kind = "flat" if c is None or c.trivial else f"{c.nodes}x{c.gpus_per_node} {c.placement} types={len(c.gpu_types)}"
    return (f"{config.calibration} jobs={config.jobs} gpus={config.gpus} load={config.load} {config.workload} "
            f"evals={config.evals_per_job} estimate_error={config.estimate_error} seed={config.seed} {kind}")


def play(w, policy, guard: int):
    """The reference's outcome, its advance calls (``PastGuard`` past ``guard``) and the events it scheduled."""
    sim = Simulator(w)
    advance, count = sim.advance, itertools.count(1)
    calls = [0]

    def counted():
        calls[0] = next(count)
        if calls[0] > guard:
            raise PastGuard
        return advance()

    sim.advance = counted
    return drive(sim, policy), calls[0], sim.events


def measure(seeds, examples: int, guard: int) -> list[dict]:
    rows: list[dict] = []
    last = {"config": None}
    generate = tc.generate

    def recording(config):   # generated() builds its world through the module's generate
        last["config"] = config
        return generate(config)

    tc.generate = recording
    try:
        for s in seeds:
            play_seed(s, examples, guard, rows, last)
    finally:
        tc.generate = generate
    return rows


def play_seed(s: int, examples: int, guard: int, rows: list[dict], last: dict) -> None:
    """Draws ``examples`` cases at hypothesis seed ``s`` and appends one row per case to ``rows``."""
    @seed(s)
    @settings(max_examples=examples, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(w=st.one_of(tc.generated(), tc.tied()), policy=tc.tiresias_policies())
    def case(w, policy):
        config, last["config"] = last["config"], None
        row = {"seed": s, "world": describe_world(config), "policy": describe_policy(policy),
               "restart": w.restart_h is not None and bool(np.any(w.restart_h > 0))}
        t0 = time.process_time()
        try:
            ref, row["events"], row["scheduled"] = play(w, policy, guard)
        except PastGuard:
            row.update(events=None, ref_s=time.process_time() - t0, fast_s=None)
            rows.append(row)
            return
        t1 = time.process_time()
        got = fast_outcome(w, policy)
        row.update(ref_s=t1 - t0, fast_s=time.process_time() - t1)
        assert got is not None
        tc.assert_same(ref, got)
        rows.append(row)

    case()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--caps", default="60000,400000")
    ap.add_argument("--guard", type=int, default=5_000_000)
    ap.add_argument("--longest", type=int, default=10)
    ap.add_argument("--per-run", type=int, default=100)
    ap.add_argument("--runs", type=int, default=2000)
    a = ap.parse_args()
    seeds = [int(x) for x in a.seeds.split(",")]
    caps = [int(x) for x in a.caps.split(",")]
    fast_outcome(tc.generate(tc.WorkloadConfig(jobs=2, seed=0)), tc.Tiresias())   # load the kernel, untimed
    rows = measure(seeds, a.examples, a.guard)
    ended = [r for r in rows if r["events"] is not None]
    ev = np.array([r["events"] for r in ended])
    print(f"cases {len(rows)} (seeds {a.seeds}, {a.examples} each), compiled == reference on every ended case: "
          f"{len(ended)} ended, {len(rows) - len(ended)} past the guard of {a.guard:,} advance calls")
    print(f"advance calls per ended case: p50 {np.percentile(ev, 50):,.0f}  p90 {np.percentile(ev, 90):,.0f}  "
          f"p99 {np.percentile(ev, 99):,.0f}  max {ev.max():,}")
    ref_all = sum(r["ref_s"] for r in rows)
    fast_all = sum(r["fast_s"] for r in ended)
    print(f"CPU s over all cases: reference {ref_all:.1f}, compiled {fast_all:.2f}")
    for cap in caps:
        within = [r for r in ended if r["events"] <= cap]
        ref_in, fast_in = sum(r["ref_s"] for r in within), sum(r["fast_s"] for r in within)
        print(f"  cap {cap:>9,}: {len(rows) - len(within)} past it; within it reference {ref_in:.1f} s, "
              f"compiled {fast_in:.2f} s")
    if len(ended) == len(rows):
        rng = np.random.default_rng(0)
        draws = rng.integers(0, len(rows), size=(a.runs, a.per_run))
        ref_s, fast_s = np.array([r["ref_s"] for r in rows]), np.array([r["fast_s"] for r in rows])
        print(f"estimated CPU s of one run of {a.per_run} cases ({a.runs} draws from the cases above):")
        for cap in caps:
            cost = np.where(ev <= cap, ref_s + fast_s, ref_s * np.minimum(1.0, cap / ev))
            run = cost[draws].sum(axis=1)
            past = (ev[draws] > cap).sum(axis=1)
            print(f"  cap {cap:>9,}: mean {run.mean():5.1f}  p90 {np.percentile(run, 90):5.1f}  "
                  f"p99 {np.percentile(run, 99):5.1f}  max {run.max():5.1f}; cases rejected: mean {past.mean():.1f}, "
                  f"max {past.max()}")
    print(f"the {a.longest} longest:")
    for r in sorted(rows, key=lambda r: -(r["events"] if r["events"] is not None else a.guard + 1))[:a.longest]:
        n = f"{r['events']:,}" if r["events"] is not None else f">{a.guard:,}"
        fast = f"{r['fast_s']:.2f}" if r["fast_s"] is not None else "-"
        sched = f"{r['scheduled']:,}" if r["events"] is not None else "-"
        print(f"  {n:>11} calls ({sched} events scheduled)  ref {r['ref_s']:6.1f} s  fast {fast:>6} s  "
              f"seed {r['seed']}  {r['policy']}  {r['world']}  resumes={'yes' if r['restart'] else 'no'}")


if __name__ == "__main__":
    main()
