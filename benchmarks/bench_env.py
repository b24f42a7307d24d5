"""Environment throughput: steps/s of EvalStop-Cluster-v0 and
EvalStop-StopControl-v0 against CartPole-v1, measured in the same process.

Every env is made with ``gym.make`` (so each carries Gymnasium's default
wrappers) and stepped by the same loop, the one of
``gymnasium.utils.performance.benchmark_step`` except that the random action
respects ``info["action_mask"]`` when the env gives one (an unmasked random
action would be invalid on the EvalStop envs) and that only time spent inside
``step``/``reset`` counts (episode resets included). Prints steps/s and the
ratio to CartPole; the target is >= 10% of CartPole.

    python benchmarks/bench_env.py [--seconds 3] [--repeat 3] [--cluster nodes8,two-types]

``--cluster``: also measure both EvalStop envs on these clusters (presets or
spec files, ``gym.make(..., cluster=...)``), labelled ``ID [cluster]``.
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym

import evalstop_gym  # noqa: F401  (registers the EvalStop ids)

ENVS = {
    "CartPole-v1": {},
    "EvalStop-Cluster-v0": {},
    "EvalStop-StopControl-v0": {},
}


def masked_steps_per_s(env: gym.Env, seconds: float, seed: int = 0) -> float:
    """Random (masked) steps per second of env time over about ``seconds`` of wall time.

    Only the time inside ``env.step`` and ``env.reset`` counts: drawing a
    masked action costs more than an unmasked one, and that is the agent's
    cost, not the env's.
    """
    clock = time.perf_counter
    _, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    sample, step, reset = env.action_space.sample, env.step, env.reset
    steps, in_env = 0, 0.0
    stop_at = clock() + seconds
    while True:
        mask = info.get("action_mask")
        action = sample(mask) if mask is not None else sample()
        t = clock()
        _, _, terminated, truncated, info = step(action)
        if terminated or truncated:
            _, info = reset()
        t2 = clock()
        in_env += t2 - t
        steps += 1
        if t2 > stop_at:
            return steps / in_env


def measure(seconds: float = 3.0, repeat: int = 3, envs: dict | None = None,
            clusters: tuple[str, ...] = ()) -> dict[str, float]:
    """Best steps/s of each env over ``repeat`` runs, interleaved so load drifts hit all alike.

    Each of ``clusters`` adds the EvalStop envs made on that cluster, keyed ``"ID [cluster]"``.
    """
    envs = envs or ENVS
    made = {env_id: gym.make(env_id, **kw) for env_id, kw in envs.items()}
    for c in clusters:
        for env_id in ("EvalStop-Cluster-v0", "EvalStop-StopControl-v0"):
            made[f"{env_id} [{c}]"] = gym.make(env_id, cluster=c)
    best = dict.fromkeys(made, 0.0)
    for _ in range(repeat):
        for env_id, env in made.items():
            best[env_id] = max(best[env_id], masked_steps_per_s(env, seconds))
    for env in made.values():
        env.close()
    return best


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement")
    p.add_argument("--repeat", type=int, default=3, help="measurements per env (the best is kept)")
    p.add_argument("--cluster", default="", help="comma-separated cluster presets or spec files to add")
    a = p.parse_args(argv)
    rates = measure(a.seconds, a.repeat, clusters=tuple(c for c in a.cluster.split(",") if c))
    base = rates["CartPole-v1"]
    print(f"{'env':<38} {'steps/s':>10} {'vs CartPole':>12}")
    for env_id, r in rates.items():
        print(f"{env_id:<38} {r:>10.0f} {r / base:>11.1%}")


if __name__ == "__main__":
    main()
