"""What isolating a saved model costs: one workload of a suite row played by a tiny saved model in its own process
(the bench's default) and in this one (``--in-process``), for a stop-policy and for a learned scheduler.

Trains a tiny PPO stop-policy (256 steps) and a tiny MaskablePPO scheduler over it (64 steps, the realistic
world's nodes, as the shipped scheduler recipes), a few seconds in all, into a temporary folder (nothing is
downloaded). Then per model and row, on the row's first test seed: once isolated to start the child (its
start-up: torch imported, the model loaded), then isolated and in process, timing each and counting the round
trips to the child by kind (``decide``: a stop decision over public views; ``act``: a learned scheduler's action
for an observation and action mask). Prints the start-up, both times, their ratio, the cost per round trip and
whether the metrics are identical. A learned scheduler plays only the rows of nodes (``realistic`` and others).
The child runs one OpenMP thread (:mod:`evalstop_gym.bench.isolate`); this process torch's default unless
``OMP_NUM_THREADS`` is set, which on a busy machine changes the in-process times more than isolation does.

    python benchmarks/bench_isolation_model.py [--rows ROW ...] [--scheduler-rows ROW ...]
"""

import argparse
import tempfile
import time
from collections import Counter
from pathlib import Path

TINY = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}


def _train(tmp: Path) -> dict[str, Path]:
    from evalstop_gym.agents.train import train
    from evalstop_gym.envs.adapter import CLUSTER_ID

    stop, scheduler = tmp / "stop", tmp / "scheduler"
    train("EvalStop-StopControl-v0", "ppo", out=stop, timesteps=256, n_envs=1, overrides=TINY, echo=lambda _: None)
    stops = {"stop_model": str(stop), "work_conserving": True, "preempt": False}
    train(CLUSTER_ID, "maskable-ppo", out=scheduler, timesteps=64, n_envs=1, calibration="realistic",
          overrides={**TINY, "n_steps": 64, "batch_size": 32, "env_kwargs": {"jobs": 10},
                     "env_wrapper": [{"evalstop_gym.agents.wrappers.HandCodedStops": stops}]}, echo=lambda _: None)
    return {"stop-policy": stop, "learned scheduler": scheduler}


def _measure(kind: str, model: Path, row_name: str, trips: Counter) -> None:
    from evalstop_gym.agents.evaluate import run_learned
    from evalstop_gym.bench.play import learned_spec
    from evalstop_gym.bench.policies import parse_policy
    from evalstop_gym.bench.suite import SUITES

    policy = parse_policy(str(model))
    row = next(r for r in SUITES["v2"] if r.name == row_name)
    isolated = learned_spec(policy, row, row.seeds[0])
    t = time.perf_counter()
    isolated.play()
    first = time.perf_counter() - t
    trips.clear()
    t = time.perf_counter()
    a = isolated.play()
    t_isolated, n = time.perf_counter() - t, sum(trips.values())
    here = learned_spec(policy, row, row.seeds[0], in_process=True)
    run_learned(here)   # torch and the model loaded here too before timing
    t = time.perf_counter()
    b = run_learned(here)
    t_here = time.perf_counter() - t
    import torch

    kinds = ", ".join(f"{c} {k}" for k, c in sorted(trips.items()))
    print(f"{kind}, {row_name}: first isolated episode {first:.2f} s (with the child's start-up if it is the first), "
          f"then isolated {t_isolated:.2f} s ({n} round trips: {kinds}; the child runs 1 torch thread), in process "
          f"{t_here:.2f} s ({torch.get_num_threads()} torch threads) "
          f"(x{t_isolated / t_here:.2f}): {1000 * (t_isolated - t_here) / max(n, 1):.2f} ms more per round trip; "
          f"same metrics: {a == b}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", default=["paper", "realistic"], help="rows the stop-policy plays")
    ap.add_argument("--scheduler-rows", nargs="*", default=["realistic"],
                    help="rows the learned scheduler plays (rows of nodes only)")
    args = ap.parse_args()
    from evalstop_gym.bench import isolate

    trips: Counter = Counter()
    ask = isolate._Player.ask

    def counted(self, label, message):
        trips[message[0]] += 1
        return ask(self, label, message)

    isolate._Player.ask = counted
    with tempfile.TemporaryDirectory() as tmp:
        models = _train(Path(tmp))
        for kind, rows in (("stop-policy", args.rows), ("learned scheduler", args.scheduler_rows)):
            for name in rows:
                _measure(kind, models[kind], name, trips)
        isolate.close_players()


if __name__ == "__main__":
    main()
