"""How far a trace's shape plays from the trace: the bench's Philly row replayed from the trace and from its shape.

    python benchmarks/shape_fidelity.py [--seeds N] [--policies fifo,srtf-est+evalstop:k=2,...]

For each policy and each of N seeds (the row's test seeds and the seeds after them), the row is played twice: jobs sampled from the trace
(``realistic-philly``) and jobs drawn from ``evalstop_gym/data/philly_shape.json``. Prints the average JCT,
makespan and GPU-hours saved per policy over the seeds (mean and per-seed spread), each workload's size
(GPU-hours, median and mean over the seeds; longest job), and each policy's JCT change against no stopper on both, which is what the
bench's page reports. Needs the trace (../shared/traces or $EVALSTOP_GYM_TRACES).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys

from evalstop_gym.bench.play import BenchSpec
from evalstop_gym.bench.policies import parse_policy
from evalstop_gym.bench.suite import PHILLY_SHAPE, V2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20, help="seeds: the row's first test seed and the N - 1 after it")
    ap.add_argument("--policies", default="srtf-est,srtf-est+evalstop:k=2,fifo,fifo+evalstop:k=2,tiresias")
    args = ap.parse_args()
    row = next(r for r in V2 if r.trace is not None)
    if row.trace.path() is None:
        sys.exit(f"the trace {row.trace.file} is not on this machine")
    shaped = dataclasses.replace(row, trace=PHILLY_SHAPE)
    seeds = range(row.seeds[0], row.seeds[0] + args.seeds)
    print(f"row {row.name}: {len(seeds)} seeds, {row.trace.jobs} jobs each; trace vs shape")
    jct: dict[tuple[str, str], list[float]] = {}
    for text in args.policies.split(","):
        pol = parse_policy(text)
        for name, r in (("trace", row), ("shape", shaped)):
            vals, size = [], []
            for s in seeds:
                spec = BenchSpec.make(pol, r, s)
                m = spec.play()
                vals.append(m["avg_jct_h"])
                w = spec.workload()
                size.append((float((w.gpus * w.length_h).sum()), float(w.length_h.max())))
            jct[text, name] = vals
            gh = [x for x, _ in size]
            print(f"{text:28s} {name:5s} avg JCT {statistics.mean(vals):8.2f} h (median over seeds "
                  f"{statistics.median(vals):7.2f}, min {min(vals):7.2f}, max {max(vals):7.2f}); workload "
                  f"{statistics.median(gh):6.0f} GPU-h median ({statistics.mean(gh):6.0f} mean), longest job median {statistics.median(l for _, l in size):6.1f} h")
    base = {"srtf-est": "srtf-est", "fifo": "fifo"}
    for text in args.policies.split(","):
        sched = text.split("+")[0]
        if "+" in text and sched in base:
            for name in ("trace", "shape"):
                a, b = jct[text, name], jct[base[sched], name]
                change = statistics.mean(100 * (x - y) / y for x, y in zip(a, b))
                print(f"{text:28s} {name:5s} JCT vs {sched} alone: {change:+.1f}% (mean of per-seed changes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
