"""Measure the order-free estimate docs/integrations.md quotes: detectors whose noise comes from each job's own evals.

    PYTHONPATH=. python3 docs/order_free_noise.py [--calibration realistic] [--seeds 0-19] [--minimum 6,4]

The shipped noise-aware detectors (`divergence`, `droptest`) pool the second differences of every job's
eval scores (`evalstop_gym.baselines.noise.NoiseBySize`; divergence's proxy readings likewise), so
a pooled detector's decision depends on which evals it has seen, i.e. on the order the evals came in.
The variant here, which the package does not ship, keys every pool by job: a job's noise is read from
its own evals only, once it has `--minimum` second differences (the shipped pools ask for
`MIN_DIFFERENCES` = 20, which a 10-eval job never reaches). Each detector runs over `srtf-est` on the
test seeds, pooled and per job at each minimum, and prints the means over seeds of F1, the share of
the no-stopper waste it cuts (per seed, then averaged) and the detection delay in evals.
"""

from __future__ import annotations

import argparse
import os
import statistics

from evalstop_gym.checks import ConfigError
from evalstop_gym.commands.common import seed_range
from evalstop_gym.seeds import check_seeds

# the per-job pools below replace Python objects; the compiled path would play the shipped detectors
os.environ["EVALSTOP_COMPILED"] = "0"

from evalstop_gym.api import simulate  # noqa: E402
from evalstop_gym.baselines import make_policy, noise  # noqa: E402

DETECTORS = ("divergence", "droptest")
SHIPPED_MINIMUM = noise.MIN_DIFFERENCES


class JobPools:
    """One :class:`~evalstop_gym.baselines.noise.PooledNoise` per job, in place of the episode's shared pool."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._pools: dict[int, noise.PooledNoise] = {}
        self._last: noise.PooledNoise | None = None

    def add(self, job_id: int, values) -> None:
        self._last = self._pools.setdefault(job_id, noise.PooledNoise())
        self._last.add(job_id, values)

    def observe(self, job) -> None:
        self.add(job.job_id, job.eval_scores)


class EvalPools(JobPools):
    """Stands in for ``NoiseBySize``: the sigma of ``job``'s scores from its own pool."""

    def sigma(self, job) -> float | None:
        pool = self._pools.get(job.job_id)
        return None if pool is None else pool.sigma


class ProxyPools(JobPools):
    """Stands in for divergence's proxy ``PooledNoise``, whose ``sigma`` is read right after the judged job's
    readings are added (``Divergence.proxy_rising``): the sigma of that job's own pool."""

    @property
    def sigma(self) -> float | None:
        return None if self._last is None else self._last.sigma


def detector(name: str, minimum: int | None):
    """``srtf-est`` + detector ``name``: shipped (``minimum`` None) or with per-job pools of ``minimum`` differences."""
    noise.MIN_DIFFERENCES = SHIPPED_MINIMUM if minimum is None else minimum   # read when a sigma is asked
    policy = make_policy("srtf-est", name)
    if minimum is not None:
        policy.noise = EvalPools()
        if hasattr(policy, "proxy_noise"):
            policy.proxy_noise = ProxyPools()
    return policy



def report(calibration: str, seeds: list[int], minimums: list[int]) -> None:
    """Print each detector's row pooled and per job at each of ``minimums``."""
    none = [simulate("srtf-est", calibration=calibration, seed=s)["compute_waste_gpu_h"] for s in seeds]
    for name in DETECTORS:
        for minimum in (None, *minimums):
            runs = [simulate(detector(name, minimum), calibration=calibration, seed=s) for s in seeds]
            cut = statistics.mean((base - m["compute_waste_gpu_h"]) / base for base, m in zip(none, runs))
            delays = [m["detection_delay_evals"] for m in runs if m["detection_delay_evals"] is not None]
            pools = "pooled" if minimum is None else f"per job, minimum {minimum}"
            print(f"{name} {pools}: F1 {statistics.mean(m['f1'] for m in runs):.3f}, waste cut {100 * cut:.1f}%, "
                  f"detection delay {statistics.mean(delays):.2f} evals ({len(delays)} of {len(runs)} seeds)",
                  flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibration", default="realistic", help="a world's name or file (default realistic)")
    ap.add_argument("--seeds", default="0-19", help="test seeds A-B (default 0-19)")
    ap.add_argument("--minimum", default="6,4", help="per-job minimums of second differences (default 6,4)")
    args = ap.parse_args()
    try:
        minimums = [int(m) for m in args.minimum.split(",")]
        if any(m < 1 for m in minimums):
            raise ValueError
    except ValueError:
        raise SystemExit(f"error: --minimum={args.minimum!r} must be whole numbers >= 1, comma-separated") from None
    try:
        report(args.calibration, check_seeds("test", seed_range(args.seeds)), minimums)
    except ConfigError as e:   # one line naming the bad value, not a traceback
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
