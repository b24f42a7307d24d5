"""Environment throughput: steps/s of EvalStop-Cluster-v0 and
EvalStop-StopControl-v0 against CartPole-v1, measured in the same process.

Every env is made with ``gym.make`` (so each carries Gymnasium's default
wrappers) and stepped by the same loop, the one of
``gymnasium.utils.performance.benchmark_step`` except that the random action
respects ``info["action_mask"]`` when the env gives one (an unmasked random
action would be invalid on the EvalStop envs) and that only time spent inside
``step``/``reset`` counts (episode resets included). Prints steps/s and the
ratio to CartPole; the target is >= 10% of CartPole.

Then, in the same run: the share of an EvalStop-Cluster-v0 step spent
building its observation and action mask (target <= 25%), and the per-env
rate of ``SyncVectorEnv`` of 8 EvalStop-Cluster-v0 envs against 8 CartPole-v1
envs, with the full per-step ``info``, with ``step_info="lean"`` and with
``step_info="none"`` and the masks asked for by ``envs.call("action_masks")`` (target
>= 40% of CartPole's), and the same for the id's native vector env
(``gym.make_vec(..., vectorization_mode="vector_entry_point")``,
:class:`evalstop_gym.envs.vector.ClusterVectorEnv`), beside CartPole's own. To say where the time goes, the same run prints the
share of a step spent in the simulator's event loop (``_advance``) and what
``SyncVectorEnv`` adds per env step to CartPole's and to the lean env's step.

    python benchmarks/bench_env.py [--seconds 3] [--repeat 3] [--cluster nodes8,two-types] [--vector 8] [--floor]

``--cluster``: also measure both EvalStop envs on these clusters (presets or
spec files, ``gym.make(..., cluster=...)``), labelled ``ID [cluster]``.
``--floor``: then measure the build share and the lean SyncVectorEnv rate again
with the observation reduced to one copy of its buffer (:func:`observation_copy_only`),
a lower bound on what any faster observation code could reach.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers the EvalStop ids)

ENVS = {
    "CartPole-v1": {},
    "EvalStop-Cluster-v0": {},
    "EvalStop-StopControl-v0": {},
}
# label -> (id, kwargs): one-job episodes of the realistic world, as the stop-policy recipes train on
# (agents/hyperparams/ppo-realistic*.yml: jobs 1), where each reset draws a workload and builds a simulator
LABELLED = {
    "EvalStop-StopControl-v0 [jobs=1, realistic]": ("EvalStop-StopControl-v0",
                                                    {"jobs": 1, "calibration": "realistic"}),
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

    ``envs`` (id -> kwargs): default :data:`ENVS` and the :data:`LABELLED` ones. Each of ``clusters`` adds the EvalStop envs made on that cluster, keyed ``"ID [cluster]"``.
    """
    made = {env_id: gym.make(env_id, **kw) for env_id, kw in (envs or ENVS).items()}
    if envs is None:
        made.update({label: gym.make(env_id, **kw) for label, (env_id, kw) in LABELLED.items()})
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


def build_share(seconds: float, seed: int = 0, parts: dict | None = None) -> float:
    """Share of EvalStop-Cluster-v0's step time spent in ``_refresh`` (window and mask), ``_observe`` and
    the kept rows' bookkeeping at starts and preemptions (``JobTable.moved``).

    ``parts`` (a dict), if given, also receives the share of ``_advance`` (the simulator's event loop
    and the reward's bookkeeping of elapsed time) under ``"advance"``, and where the building time goes:
    ``"refresh"`` (window and mask, the decision job's row at a checkpoint included), ``"observe"``
    (cluster features and the observation) and, within it, ``"table"`` (:class:`JobTable`'s call:
    arrivals' rows, clock columns, copying the shown rows), timed through a stand-in object whose own call
    (about one Python call a step) lands in ``"observe"`` and so in the share.
    """
    env = gym.make("EvalStop-Cluster-v0")
    inner, clock, spent = env.unwrapped, time.perf_counter, [0.0, 0.0, 0.0, 0.0, 0.0]

    def timed(f, i=0):
        def g(*a, **kw):
            t = clock()
            try:
                return f(*a, **kw)
            finally:
                spent[i] += clock() - t
        return g

    table = inner._table
    inner._refresh, inner._observe = timed(inner._refresh, 2), timed(inner._observe, 3)  # [0]: moved
    table.moved = timed(table.moved)
    inner._advance = timed(inner._advance, 1)
    call = timed(table.__call__, 4)
    inner._table = type("TimedTable", (), {"__call__": staticmethod(call),   # the env calls self._table(...)
                                           "__getattr__": lambda _s, name: getattr(table, name)})()
    _, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    sample, in_env, stop_at = env.action_space.sample, 0.0, clock() + seconds
    spent[:] = [0.0] * len(spent)
    while clock() < stop_at:
        action = sample(info["action_mask"])
        t = clock()
        _, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            _, info = env.reset()
        in_env += clock() - t
    env.close()
    if parts is not None:
        parts.update(advance=spent[1] / in_env, refresh=spent[2] / in_env, observe=spent[3] / in_env,
                     table=spent[4] / in_env)
    return (spent[0] + spent[2] + spent[3]) / in_env


def vector_rate(env_id: str, n: int, seconds: float, seed: int = 0, mode: str = "sync", **kw) -> float:
    """Per-env steps/s of ``gym.make_vec(env_id, n, vectorization_mode=mode)`` under random (masked) actions:
    ``"sync"``, ``SyncVectorEnv`` of ``gym.make`` envs; ``"vector_entry_point"``, the id's own vector env.
    With ``step_info="none"`` the masks come from ``envs.call("action_masks")`` (as sb3-contrib's
    ``get_action_masks`` asks a vector env for them), timed with the step."""
    envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode, **kw)
    _, info = envs.reset(seed=seed)
    space = envs.single_action_space
    space.seed(seed)
    by_call = kw.get("step_info") == "none"
    clock, steps, in_env = time.perf_counter, 0, 0.0
    masks = envs.call("action_masks") if by_call else info.get("action_mask")
    stop_at = clock() + seconds
    while clock() < stop_at:
        actions = np.array([space.sample(m.astype("int8")) for m in masks] if masks is not None else
                           [space.sample() for _ in range(n)])   # an array, as a batched action space samples
        t = clock()
        _, _, _, _, info = envs.step(actions)  # autoreset: a finished env restarts on its next step
        masks = envs.call("action_masks") if by_call else info.get("action_mask")
        in_env += clock() - t
        steps += n
    envs.close()
    return steps / in_env / n


@contextlib.contextmanager
def observation_copy_only():
    """EvalStop-Cluster-v0 with its observation reduced to one copy of the kept buffer: no rows, clock
    columns or cluster features are computed (the values are wrong; the episode is not, since the random
    actions follow the masks). Bounds the two observation targets from below: what they would read if
    building the observation cost nothing but its copy."""
    from evalstop_gym.envs.cluster_env import ClusterEnv
    observe = ClusterEnv._observe
    ClusterEnv._observe = lambda self: self._table._buf.copy()
    try:
        yield
    finally:
        ClusterEnv._observe = observe


def floor(seconds: float, repeat: int, n: int) -> tuple[float, float]:
    """Under :func:`observation_copy_only`: the build share (best of ``repeat``) and SyncVectorEnv of ``n``
    lean envs' per-env rate as a fraction of CartPole's (best of each, interleaved)."""
    best = {"CartPole-v1": 0.0, "EvalStop-Cluster-v0": 0.0}
    share = 1.0
    for _ in range(repeat):
        best["CartPole-v1"] = max(best["CartPole-v1"], vector_rate("CartPole-v1", n, seconds))
        with observation_copy_only():
            share = min(share, build_share(seconds))
            best["EvalStop-Cluster-v0"] = max(best["EvalStop-Cluster-v0"],
                                              vector_rate("EvalStop-Cluster-v0", n, seconds, step_info="lean"))
    return share, best["EvalStop-Cluster-v0"] / best["CartPole-v1"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement")
    p.add_argument("--repeat", type=int, default=3, help="measurements per env (the best is kept)")
    p.add_argument("--cluster", default="", help="comma-separated cluster presets or spec files to add")
    p.add_argument("--vector", type=int, default=8, help="envs per SyncVectorEnv (default 8)")
    p.add_argument("--floor", action="store_true",
                   help="also measure both observation targets with the observation reduced to its copy")
    a = p.parse_args(argv)
    rates = measure(a.seconds, a.repeat, clusters=tuple(c for c in a.cluster.split(",") if c))
    base = rates["CartPole-v1"]
    print(f"{'env':<44} {'steps/s':>10} {'vs CartPole':>12}")
    for env_id, r in rates.items():
        print(f"{env_id:<44} {r:>10.0f} {r / base:>11.1%}")
    shares = []
    for _ in range(a.repeat):
        parts: dict = {}
        shares.append((build_share(a.seconds, parts=parts), parts))
    share, parts = min(shares, key=lambda x: x[0])
    print(f"\nEvalStop-Cluster-v0: observation + mask building {share:.1%} of a step "
          f"(best of {a.repeat}; target <= 25%): window and mask (_refresh) {parts['refresh']:.1%}, "
          f"observation (_observe) {parts['observe']:.1%}, of which the job table {parts['table']:.1%}; "
          f"in the same run the simulator and the reward's time bookkeeping (_advance) {parts['advance']:.1%}")
    vec = {}
    native = "vector_entry_point"
    for _ in range(a.repeat):  # interleaved, the best of each kept
        for label, env_id, kw in (("CartPole-v1", "CartPole-v1", {}),
                                  ("EvalStop-Cluster-v0", "EvalStop-Cluster-v0", {}),
                                  ("EvalStop-Cluster-v0, step_info='lean'", "EvalStop-Cluster-v0",
                                   {"step_info": "lean"}),
                                  ("EvalStop-Cluster-v0, 'none', masks by call", "EvalStop-Cluster-v0",
                                   {"step_info": "none"}),
                                  ("native: EvalStop-Cluster-v0", "EvalStop-Cluster-v0", {"mode": native}),
                                  ("native: EvalStop-Cluster-v0, lean", "EvalStop-Cluster-v0",
                                   {"mode": native, "step_info": "lean"}),
                                  ("native: CartPole-v1 (NumPy)", "CartPole-v1", {"mode": native})):
            vec[label] = max(vec.get(label, 0.0), vector_rate(env_id, a.vector, a.seconds, **kw))
        for label, env_id, kw in (("CartPole-v1 (one env)", "CartPole-v1", {}),
                                  ("EvalStop-Cluster-v0, lean (one env)", "EvalStop-Cluster-v0",
                                   {"step_info": "lean"})):
            env = gym.make(env_id, **kw)
            vec[label] = max(vec.get(label, 0.0), masked_steps_per_s(env, a.seconds))
            env.close()
    print(f"\ngym.make_vec of {a.vector}, per env, against CartPole-v1's SyncVectorEnv (target >= 40%); "
          "SyncVectorEnv unless marked native (the id's vector_entry_point: ClusterVectorEnv; CartPole's "
          "NumPy CartPoleVectorEnv):")
    for label, r in vec.items():
        if "one env" not in label:
            print(f"{label:<44} {r:>10.0f} {r / vec['CartPole-v1']:>11.1%}")
    # what SyncVectorEnv adds to each env step (stacking, info merging, autoreset), from the same run
    for name, one, many in (("CartPole-v1", "CartPole-v1 (one env)", "CartPole-v1"),
                            ("EvalStop-Cluster-v0, lean", "EvalStop-Cluster-v0, lean (one env)",
                             "EvalStop-Cluster-v0, step_info='lean'")):
        alone, in_vec = 1e6 / vec[one], 1e6 / (vec[many] * a.vector)
        print(f"{name}: {alone:.1f} us per step alone, {in_vec:.1f} us per env step in the vector env "
              f"({in_vec - alone:.1f} us of vector overhead)")
    if a.floor:
        share, ratio = floor(a.seconds, a.repeat, a.vector)
        print(f"\nWith the observation reduced to one copy of its buffer (no rows, clock columns or cluster "
              f"features; values wrong, episodes the same): build share {share:.1%} (target <= 25%), "
              f"SyncVectorEnv of {a.vector} lean {ratio:.1%} of CartPole's per-env rate (target >= 40%)")


if __name__ == "__main__":
    main()
