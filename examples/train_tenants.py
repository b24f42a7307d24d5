"""Shared-parameter PPO over the tenants of evalstop_tenants_v0 (SuperSuit -> stable-baselines3).

Every tenant is played by one policy network (parameter sharing): SuperSuit
turns the ParallelEnv into a vector env with one entry per tenant
(``pettingzoo_env_to_vec_env_v1``), copies it (``concat_vec_envs_v1``) and
hands it to SB3's PPO. Each tenant learns from its own reward (its jobs' JCT,
delivered quality and GPU cost, ``docs/multiagent.md``), so this is
independent learning with shared weights, not a centralized critic.

The trained policy is then played on held-out seeds next to two hand-coded
tenant populations: nobody stops, and every tenant runs EvalStop(k=2).

    python examples/train_tenants.py                      # about 1-2 minutes on 2 cores
    python examples/train_tenants.py --timesteps 20000    # a smoke run in well under a minute

Notes. PPO here sees no action mask: a tenant with nothing to decide acts
too, and its action is a no-op (its info mask is ``[1, 0]``). Those samples
carry no signal and only add variance; a masked learner, or a loop that
trains only on decision steps, would learn faster. SuperSuit's SB3 wrapper
cannot be seeded through ``PPO(seed=...)``, so the vector env is seeded by
``reset(seed=...)`` and torch by ``set_random_seed``.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from evalstop_gym.experiments.stats import summarize
from evalstop_gym.multiagent import tenants_v0
from evalstop_gym.multiagent.rules import EvalStopRule, never_stop, play
from evalstop_gym.report import format_table

EVAL_SEED0 = 10_000   # held-out workloads: training draws its seeds from the env's generator


def make_vec_env(env_kwargs: dict, copies: int, seed: int):
    import supersuit as ss

    venv = ss.pettingzoo_env_to_vec_env_v1(tenants_v0.parallel_env(**env_kwargs))
    venv = ss.concat_vec_envs_v1(venv, copies, num_cpus=0, base_class="stable_baselines3")
    venv.venv.reset(seed=seed)  # copy i plays seed + i, then seeds drawn from its own generator
    return venv


def evaluate(env_kwargs: dict, players: dict, seeds) -> list[dict]:
    rows = []
    for name, player in players.items():
        env = tenants_v0.parallel_env(**env_kwargs)
        runs = [play(env, player, seed=s) for s in seeds]
        col = {k: [r["metrics"][k] for r in runs] for k in ("avg_jct_h", "compute_waste_gpu_h",
                                                           "delivered_quality", "precision", "recall")}

        def pm(k, d=2):
            s = summarize(col[k])
            return "n/a" if s.mean is None else f"{s.mean:.{d}f} ± {s.std or 0:.{d}f}"

        ret = summarize([sum(r["returns"].values()) for r in runs])
        rows.append({"tenants": name, "JCT (h)": pm("avg_jct_h"), "waste (GPU-h)": pm("compute_waste_gpu_h", 0),
                     "quality": pm("delivered_quality", 3), "precision": pm("precision"),
                     "recall": pm("recall"), "sum of tenant returns": f"{ret.mean:.1f} ± {ret.std or 0:.1f}",
                     "stops": f"{np.mean([r['metrics']['jobs_stopped'] for r in runs]):.1f}"})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timesteps", type=int, default=150_000, help="agent-steps (tenant slots x vector steps) to train")
    ap.add_argument("--jobs", type=int, default=100, help="jobs per episode")
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument("--scheduler", default="srtf-est")
    ap.add_argument("--copies", type=int, default=2, help="env copies in the vector env")
    ap.add_argument("--eval-seeds", type=int, default=5)
    ap.add_argument("--gamma", type=float, default=0.999,
                    help="discount per step; a job lives for hundreds of steps, so keep it close to 1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save", default=None, help="save the model here (.zip)")
    args = ap.parse_args(argv)

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.utils import set_random_seed

    from evalstop_gym.agents.train import quiet_logger

    torch.set_num_threads(1)   # the cluster of this laptop is shared too
    set_random_seed(args.seed)
    env_kwargs = {"jobs": args.jobs, "tenants": args.tenants, "scheduler": args.scheduler}
    venv = make_vec_env(env_kwargs, args.copies, args.seed)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=512, n_epochs=5, gamma=args.gamma, learning_rate=3e-4,
                ent_coef=0.0, policy_kwargs={"net_arch": [64, 64]}, verbose=0)
    model.set_logger(quiet_logger())   # no empty /tmp/SB3-<date> folder
    t0 = time.perf_counter()
    model.learn(total_timesteps=args.timesteps)
    print(f"trained {args.timesteps} agent-steps over {venv.num_envs} tenant slots in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    venv.close()
    if args.save:
        model.save(args.save)

    seeds = range(EVAL_SEED0, EVAL_SEED0 + args.eval_seeds)
    players = {"nobody stops": never_stop, "EvalStop(k=2) in every tenant": EvalStopRule(2),
               "PPO, shared parameters": {a: model for a in tenants_v0.parallel_env(**env_kwargs).possible_agents}}
    rows = evaluate(env_kwargs, players, seeds)
    print(f"held-out seeds {seeds.start}-{seeds.stop - 1}, {args.jobs} jobs, {args.tenants} tenants, "
          f"{args.scheduler} placement (mean ± sd)")
    print(format_table(rows, list(rows[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
