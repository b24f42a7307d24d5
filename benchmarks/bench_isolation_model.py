"""What isolating a saved model costs: one workload of a suite row played by a tiny stop-policy, in its own
process (the bench's default) and in this one (``--in-process``).

Trains a tiny PPO stop-policy (256 steps, a few seconds; nothing is downloaded) into a temporary folder, then
plays the row's first test seed: once isolated to start the child (its start-up: torch imported, the model
loaded), then isolated and in process, timing each and counting the round trips to the child. Prints the
start-up, both times, the cost per round trip and whether the metrics are identical.

    python benchmarks/bench_isolation_model.py [ROW ...]     # default: paper realistic (suite v2)
"""

import argparse
import tempfile
import time
from pathlib import Path

HEADLINE = ("avg_jct_h", "compute_waste_gpu_h", "f1", "delivered_quality_regret", "preemptions")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="*", default=["paper", "realistic"])
    args = ap.parse_args()
    from evalstop_gym.agents.evaluate import run_learned
    from evalstop_gym.agents.train import train
    from evalstop_gym.bench import isolate
    from evalstop_gym.bench.play import learned_spec
    from evalstop_gym.bench.policies import parse_policy
    from evalstop_gym.bench.suite import SUITES

    calls = [0]
    ask = isolate._Player.ask

    def counted(self, label, message):
        calls[0] += 1
        return ask(self, label, message)

    isolate._Player.ask = counted
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model"
        train("EvalStop-StopControl-v0", "ppo", out=model, timesteps=256, n_envs=1,
              overrides={"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
                         "eval_workload": {"jobs": 10}}, echo=lambda _: None)
        policy = parse_policy(str(model))
        for name in args.rows:
            row = next(r for r in SUITES["v2"] if r.name == name)
            isolated = learned_spec(policy, row, row.seeds[0])
            t = time.perf_counter()
            isolated.play()
            first = time.perf_counter() - t
            calls[0] = 0
            t = time.perf_counter()
            a = isolated.play()
            t_isolated, trips = time.perf_counter() - t, calls[0]
            here = learned_spec(policy, row, row.seeds[0], in_process=True)
            run_learned(here)   # torch and the model loaded here too before timing
            t = time.perf_counter()
            b = run_learned(here)
            t_here = time.perf_counter() - t
            same = all(a[k] == b[k] for k in HEADLINE)
            print(f"{name}: first isolated episode {first:.2f} s (the first row's: with the child's start-up), then "
                  f"isolated "
                  f"{t_isolated:.2f} s ({trips} round trips), in process {t_here:.2f} s: "
                  f"{1000 * (t_isolated - t_here) / max(trips, 1):.2f} ms more per round trip; same metrics: {same}")
        isolate.close_players()


if __name__ == "__main__":
    main()
