"""Train a learned stop-policy (PPO) and compare it with EvalStop k=2 on held-out seeds.

The shipped recipe (``evalstop_gym/agents/hyperparams/ppo.yml``): PPO with a 64x64 MLP on
EvalStop-StopControl-v0 over SRTF-Est, sigma = 0.05, one-job training
episodes, the job's own 18 public features, the env's default reward. It
takes about 2-3 CPU minutes on 2 cores; then both policies play the same
held-out workloads (seeds 0-9, 200 jobs, sigma = 0.05) and the table shows
precision, recall, FPR, F1, JCT, waste and quality regret.

    python examples/train_stop_policy.py                       # the recipe, ~2-3 min
    python examples/train_stop_policy.py --timesteps 20000     # a smoke run, well under a minute
    python examples/train_stop_policy.py --algo dqn            # DQN instead of PPO
"""

from __future__ import annotations

import argparse

from evalstop_gym.agents.evaluate import evaluate
from evalstop_gym.agents.train import train
from evalstop_gym import WorkloadConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", default="ppo", choices=("ppo", "dqn"))
    p.add_argument("--timesteps", type=int, default=None, help="default: the recipe's (150000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/stop-policy", help="model folder (default %(default)s)")
    p.add_argument("--noise", type=float, default=0.05, help="eval noise of the held-out workloads")
    p.add_argument("--seeds", type=int, default=10, help="held-out seeds 0..N-1")
    args = p.parse_args()

    config = train("EvalStop-StopControl-v0", args.algo, out=args.out, timesteps=args.timesteps, seed=args.seed)
    result = evaluate([args.out, "evalstop", "smoothed", "srtf-est"], seeds=args.seeds,
                      base=WorkloadConfig(noise=args.noise))
    print(f"\nheld-out seeds 0-{args.seeds - 1}, sigma {args.noise:g}, 200 jobs over srtf-est; "
          f"training took {config['cpu_seconds'] / 60:.1f} CPU minutes\n")
    print(result.table)
    f1 = {r["arm"]: r["f1"] for r in result.rows}
    learned = next(a for a in f1 if a.startswith("learned"))
    print(f"\nF1: learned {f1[learned]:.3f} vs EvalStop k=2 {f1['srtf-est + evalstop']:.3f}")


if __name__ == "__main__":
    main()
