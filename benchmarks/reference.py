"""A reference timing every benchmark measures on the machine it runs on, so its figures travel.

Absolute times say as much about the machine (and what else runs on it) as about the code. Each
benchmark prints this reference beside its own figures and states them as multiples of it:
CartPole-v1 (Gymnasium's own, pure Python) stepped with random actions, in steps per CPU second.
A figure such as "simulated jobs per second = 1.2 x CartPole-v1 steps per second" holds on a
laptop and on a loaded server alike, as far as both slow Python code by the same factor.
"""

from __future__ import annotations

import time


def cartpole_steps_per_cpu_s(steps: int = 20_000) -> float:
    """CartPole-v1 steps per CPU second (``steps`` steps, random actions from a seeded space, resets
    included): the reference rate. About a second of CPU on a typical machine."""
    import gymnasium as gym

    env = gym.make("CartPole-v1").unwrapped      # no wrappers: the bare env's step
    env.action_space.seed(0)
    env.reset(seed=0)
    t = time.process_time()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return steps / (time.process_time() - t)


def reference_line(rate: float) -> str:
    return (f"reference: CartPole-v1 at {rate:,.0f} steps per CPU second on this machine now "
            "(the 'x CartPole' figures are rates over this one, or times over 1,000 of its steps)")
