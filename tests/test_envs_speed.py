"""A loose floor on env throughput against CartPole-v1 measured in the same process.

The target is >= 10% of CartPole's steps/s (``python benchmarks/bench_env.py``
prints the ratios); this guard only catches gross regressions, since the
machine running the tests may be loaded.
"""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_env.py"


def test_envs_reach_one_percent_of_cartpole():
    spec = importlib.util.spec_from_file_location("bench_env", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rates = bench.measure(seconds=0.4, repeat=2, clusters=("two-types",))
    for env_id in ("EvalStop-Cluster-v0", "EvalStop-StopControl-v0"):
        for label in (env_id, f"{env_id} [two-types]"):  # the flat pool and nodes of two GPU types
            assert rates[label] >= 0.01 * rates["CartPole-v1"], rates
