"""Environment throughput: steps per CPU second of EvalStop-Cluster-v0 and
EvalStop-StopControl-v0 against CartPole-v1, measured in the same process.

Every env is made with ``gym.make`` (so each carries Gymnasium's default
wrappers) and stepped by the same loop, the one of
``gymnasium.utils.performance.benchmark_step`` except that the random action
respects ``info["action_mask"]`` when the env gives one (an unmasked random
action would be invalid on the EvalStop envs) and that only time spent inside
``step``/``reset`` counts (episode resets included). The masked draw
(``Discrete.sample(mask)``) runs enough NumPy between two steps to slow the
step after it; CartPole's draw has no mask. The row ``StopControl-v0, unmasked
draw`` steps that env with unmasked draws (at its checkpoints both actions are
valid) to show how much.

Times are CPU seconds of this process (``time.process_time``), not wall time:
on a machine shared with other work the wall clock also counts the time the
process waits for a core, the CPU clock does not. Reading that clock twice
costs about half a microsecond more than the wall clock, so the CPU time one
bracket of two reads adds to a span is measured in the same run and taken off
every bracketed span. The envs are stepped in turn, in short slices
(``--slice``, 0.05 CPU s each) for ``--seconds`` CPU seconds each per repeat,
so what else slows this process (a neighbour sharing the caches and the
memory bus, a lower clock frequency) hits CartPole and the EvalStop envs
alike. Each ratio is taken within one repeat; the benchmark prints its
minimum and its median over ``--repeat`` repeats, and each env's median rate.
The target is >= 10% of CartPole.

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

    python benchmarks/bench_env.py [--seconds 2] [--repeat 5] [--slice 0.05] [--vector 8]
                                   [--cluster nodes8,two-types] [--floor]

``--cluster``: also measure both EvalStop envs on these clusters (presets or
spec files, ``gym.make(..., cluster=...)``), labelled ``ID [cluster]``.
``--floor``: then measure the build share and the lean SyncVectorEnv rate again
with the observation reduced to one copy of its buffer (:func:`observation_copy_only`),
a lower bound on what any faster observation code could reach.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import time
from typing import Callable, NamedTuple

import gymnasium as gym
import numpy as np

import evalstop_gym  # noqa: F401  (registers the EvalStop ids)

CLOCK = time.process_time  # CPU seconds of this process
BASE = "CartPole-v1"
ENVS = {
    BASE: {},
    "EvalStop-Cluster-v0": {},
    "EvalStop-StopControl-v0": {},
}
# label -> (id, kwargs): one-job episodes of the realistic world, as the stop-policy recipes train on
# (agents/hyperparams/ppo-realistic*.yml: jobs 1), where each reset draws a workload and builds a simulator
LABELLED = {
    "EvalStop-StopControl-v0 [jobs=1, realistic]": ("EvalStop-StopControl-v0",
                                                    {"jobs": 1, "calibration": "realistic"}),
}
# label -> id: stepped by a random agent that draws without the mask (where every action of the id is valid
# at every step but the last, as on StopControl-v0), to show what the masked draw between steps costs the step
UNMASKED = {
    "EvalStop-StopControl-v0, unmasked draw": "EvalStop-StopControl-v0",
}
# label -> (id, make_vec kwargs) of the vector section; a "mode" key is make_vec's vectorization_mode
NATIVE = "vector_entry_point"
VECTOR = {
    BASE: (BASE, {}),
    "EvalStop-Cluster-v0": ("EvalStop-Cluster-v0", {}),
    "EvalStop-Cluster-v0, step_info='lean'": ("EvalStop-Cluster-v0", {"step_info": "lean"}),
    "EvalStop-Cluster-v0, 'none', masks by call": ("EvalStop-Cluster-v0", {"step_info": "none"}),
    "native: EvalStop-Cluster-v0": ("EvalStop-Cluster-v0", {"mode": NATIVE}),
    "native: EvalStop-Cluster-v0, lean": ("EvalStop-Cluster-v0", {"mode": NATIVE, "step_info": "lean"}),
    "native: CartPole-v1 (NumPy)": (BASE, {"mode": NATIVE}),
}
# label -> (id, gym.make kwargs): single envs measured with the vector ones, for what SyncVectorEnv adds
ALONE = {
    "CartPole-v1 (one env)": (BASE, {}),
    "EvalStop-Cluster-v0, lean (one env)": ("EvalStop-Cluster-v0", {"step_info": "lean"}),
}

Clock = Callable[[], float]
# a stepper takes one step (or one vector step) and returns (env steps taken, clock before, clock after),
# the bracket holding only the env's own work
Stepper = Callable[[Clock], tuple[int, float, float]]


def bracket_cost(clock: Clock = CLOCK, n: int = 20_000) -> float:
    """Seconds of ``clock`` that bracketing a span with two reads of it adds to the span (the part of
    the first read after its reading and of the second before its): the median of 5 batches of ``n``."""
    batches = []
    for _ in range(5):
        acc = 0.0
        for _ in range(n):
            t = clock()
            acc += clock() - t
        batches.append(acc / n)
    return statistics.median(batches)


@functools.cache
def process_bracket_cost() -> float:
    """:func:`bracket_cost` of the CPU clock, measured once a process."""
    return bracket_cost()


class EnvStepper:
    """``env`` under random actions that follow ``info["action_mask"]`` when it has one; resets
    (episode ends) are inside the bracket, drawing the action is not (that is the agent's cost)."""

    def __init__(self, env: gym.Env, seed: int = 0, masked: bool = True):
        self.env = env
        _, self.info = env.reset(seed=seed)
        env.action_space.seed(seed)
        self._sample, self._step, self._reset = env.action_space.sample, env.step, env.reset
        self.masked = masked

    def __call__(self, clock: Clock) -> tuple[int, float, float]:
        mask = self.info.get("action_mask")
        if mask is None:
            action = self._sample()
        elif self.masked:
            action = self._sample(mask)
        else:  # unmasked, an invalid draw replaced by the first valid action
            action = self._sample()
            action = action if mask[action] else int(np.flatnonzero(mask)[0])
        step, reset = self._step, self._reset
        t = clock()
        _, _, terminated, truncated, info = step(action)
        if terminated or truncated:
            _, info = reset()
        t2 = clock()
        self.info = info
        return 1, t, t2

    def close(self) -> None:
        self.env.close()


class VectorStepper:
    """``gym.make_vec(env_id, n, vectorization_mode=mode, **kw)`` under random (masked) actions:
    ``"sync"``, ``SyncVectorEnv`` of ``gym.make`` envs; ``"vector_entry_point"``, the id's own vector
    env. With ``step_info="none"`` the masks come from ``envs.call("action_masks")`` (as sb3-contrib's
    ``get_action_masks`` asks a vector env for them), inside the bracket with the step. Autoreset: a
    finished env restarts on its next step."""

    def __init__(self, env_id: str, n: int, seed: int = 0, mode: str = "sync", **kw):
        self.envs = envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode, **kw)
        self.n = n
        _, info = envs.reset(seed=seed)
        self.space = envs.single_action_space
        self.space.seed(seed)
        self.by_call = kw.get("step_info") == "none"
        self.masks = envs.call("action_masks") if self.by_call else info.get("action_mask")

    def __call__(self, clock: Clock) -> tuple[int, float, float]:
        masks, space, envs = self.masks, self.space, self.envs
        actions = np.array([space.sample(m.astype("int8")) for m in masks] if masks is not None else
                           [space.sample() for _ in range(self.n)])  # an array, as a batched space samples
        t = clock()
        _, _, _, _, info = envs.step(actions)
        masks = envs.call("action_masks") if self.by_call else info.get("action_mask")
        t2 = clock()
        self.masks = masks
        return self.n, t, t2

    def close(self) -> None:
        self.envs.close()


def run_slice(stepper: Stepper, seconds: float, clock: Clock = CLOCK) -> tuple[int, int, float]:
    """Step until the bracketed time passes ``seconds`` of ``clock``: (env steps, brackets, bracketed
    seconds)."""
    steps = brackets = 0
    inside = 0.0
    stop_at = clock() + seconds
    while True:
        n, t, t2 = stepper(clock)
        steps += n
        brackets += 1
        inside += t2 - t
        if t2 > stop_at:
            return steps, brackets, inside


def rate(steps: int, brackets: int, inside: float, cost: float) -> float:
    """Env steps per second of ``inside`` less ``cost`` (seconds) for each of the ``brackets``."""
    spent = inside - brackets * cost
    if spent <= 0:
        raise ValueError(f"bracketed time {inside:.3g} s is not above the clock's own cost of "
                         f"{brackets} x {cost:.3g} s: measure for longer")
    return steps / spent


def interleave(steppers: dict[str, Stepper], seconds: float, repeat: int, slice_s: float = 0.05,
               clock: Clock = CLOCK, cost: float | None = None) -> list[dict[str, float]]:
    """Steps per second of each stepper in each of ``repeat`` repeats. A repeat runs every stepper
    for about ``seconds`` in slices of ``slice_s``, taking turns, so a slower stretch of the machine
    falls on all of them alike. ``cost``: :func:`bracket_cost` of ``clock`` (measured if ``None``)."""
    if cost is None:
        cost = process_bracket_cost() if clock is CLOCK else bracket_cost(clock)
    rounds = max(1, round(seconds / slice_s))
    per_repeat = []
    for _ in range(repeat):
        total = {label: [0, 0, 0.0] for label in steppers}
        for _ in range(rounds):
            for label, stepper in steppers.items():
                for i, x in enumerate(run_slice(stepper, slice_s, clock)):
                    total[label][i] += x
        per_repeat.append({label: rate(*t, cost) for label, t in total.items()})
    return per_repeat


class Summary(NamedTuple):
    rate: float          # median over repeats, steps per second
    ratio_min: float     # the lowest of the repeats' rate / the base's rate in the same repeat
    ratio_median: float


def summarise(per_repeat: list[dict[str, float]], base: str = BASE) -> dict[str, Summary]:
    """Each label's median rate and the minimum and median over repeats of its ratio to ``base``."""
    out = {}
    for label in per_repeat[0]:
        ratios = [r[label] / r[base] for r in per_repeat]
        out[label] = Summary(statistics.median(r[label] for r in per_repeat), min(ratios),
                             statistics.median(ratios))
    return out


def close_all(steppers: dict[str, EnvStepper | VectorStepper]) -> None:
    for s in steppers.values():
        s.close()


def measure(seconds: float = 3.0, repeat: int = 5, envs: dict | None = None, clusters: tuple[str, ...] = (),
            slice_s: float = 0.05) -> list[dict[str, float]]:
    """Steps per CPU second of each env in each repeat (:func:`interleave`).

    ``envs`` (id -> kwargs): default :data:`ENVS`, the :data:`LABELLED` ones and the :data:`UNMASKED` ones. Each of ``clusters`` adds
    the EvalStop envs made on that cluster, keyed ``"ID [cluster]"``.
    """
    made = {env_id: (env_id, kw) for env_id, kw in (envs or ENVS).items()}
    if envs is None:
        made.update(LABELLED)
    for c in clusters:
        for env_id in ("EvalStop-Cluster-v0", "EvalStop-StopControl-v0"):
            made[f"{env_id} [{c}]"] = (env_id, {"cluster": c})
    steppers = {label: EnvStepper(gym.make(env_id, **kw)) for label, (env_id, kw) in made.items()}
    if envs is None:
        steppers.update({label: EnvStepper(gym.make(env_id), masked=False) for label, env_id in UNMASKED.items()})
    try:
        return interleave(steppers, seconds, repeat, slice_s)
    finally:
        close_all(steppers)


def vector_rates(labels: dict[str, tuple[str, dict]], n: int, seconds: float, repeat: int,
                 slice_s: float = 0.05, alone: dict[str, tuple[str, dict]] | None = None) -> list[dict[str, float]]:
    """Per-env steps per CPU second of ``gym.make_vec`` of ``n`` (``labels``: label -> (id, kwargs), a
    ``"mode"`` kwarg the vectorization mode) and of the single ``gym.make`` envs of ``alone``, in each
    repeat, interleaved."""
    steppers: dict = {}
    try:
        for label, (env_id, kw) in labels.items():
            steppers[label] = VectorStepper(env_id, n, **kw)
        for label, (env_id, kw) in (alone or {}).items():
            steppers[label] = EnvStepper(gym.make(env_id, **kw))
        per_repeat = interleave(steppers, seconds, repeat, slice_s)
    finally:
        close_all(steppers)
    return [{label: r / (n if label in labels else 1) for label, r in rates.items()} for rates in per_repeat]


def timed_cost(clock: Clock = CLOCK, n: int = 20_000) -> float:
    """Seconds of ``clock`` a call through :func:`build_share`'s timing wrapper costs beyond the call
    itself, as the enclosing span sees it: the median of 5 batches of ``n`` calls to a no-op."""
    spent = [0.0]

    def noop(*a, **kw):
        return None

    wrapped = _timed(noop, clock, spent, 0, [0])
    batches = []
    for _ in range(5):
        t = clock()
        for _ in range(n):
            noop(1, 2)
        plain = clock() - t
        t = clock()
        for _ in range(n):
            wrapped(1, 2)
        batches.append((clock() - t - plain) / n)
    return statistics.median(batches)


def _timed(f, clock: Clock, spent: list, i: int, calls: list):
    """``f`` adding its time to ``spent[i]`` and counting its calls in ``calls[i]``."""
    def g(*a, **kw):
        t = clock()
        try:
            return f(*a, **kw)
        finally:
            spent[i] += clock() - t
            calls[i] += 1
    return g


def build_share(seconds: float, seed: int = 0, parts: dict | None = None) -> float:
    """Share of EvalStop-Cluster-v0's step CPU time spent in ``_refresh`` (window and mask), ``_observe``
    and the kept rows' bookkeeping at starts and preemptions (``JobTable.moved``), over about ``seconds``
    CPU seconds of steps.

    ``parts`` (a dict), if given, also receives the share of ``_advance`` (the simulator's event loop
    and the reward's bookkeeping of elapsed time) under ``"advance"``, and where the building time goes:
    ``"refresh"`` (window and mask, the decision job's row at a checkpoint included), ``"observe"``
    (cluster features and the observation) and, within it, ``"table"`` (:class:`JobTable`'s call:
    arrivals' rows, clock columns, copying the shown rows), timed by a subclass's ``__call__``; and under
    ``"step_us"`` the CPU microseconds of a step with the timers' cost taken off, to compare with an
    untimed step's.

    The timers' own cost is taken off: :func:`bracket_cost` from each timed call, and the whole cost of
    a timed call (:func:`timed_cost`) from the spans enclosing it (the step; ``_observe`` for the table).
    """
    env = gym.make("EvalStop-Cluster-v0")
    inner, clock = env.unwrapped, CLOCK
    spent, calls = [0.0] * 5, [0] * 5   # moved, _advance, _refresh, _observe, the table's call

    table = inner._table
    inner._refresh = _timed(inner._refresh, clock, spent, 2, calls)
    inner._observe = _timed(inner._observe, clock, spent, 3, calls)
    table.moved = _timed(table.moved, clock, spent, 0, calls)
    inner._advance = _timed(inner._advance, clock, spent, 1, calls)
    # the env calls self._table(...), which Python looks up on the type: a subclass times it
    table.__class__ = type("TimedTable", (type(table),), {"__call__": _timed(type(table).__call__, clock,
                                                                              spent, 4, calls)})
    stepper = EnvStepper(env, seed)
    cost, wrapper = process_bracket_cost(), process_timed_cost()
    spent[:], calls[:] = [0.0] * 5, [0] * 5
    steps, brackets, inside = run_slice(stepper, seconds, clock)
    env.close()
    own = [s - c * cost for s, c in zip(spent, calls)]
    own[3] -= calls[4] * wrapper
    step = inside - brackets * cost - sum(calls) * wrapper
    if parts is not None:
        parts.update(advance=own[1] / step, refresh=own[2] / step, observe=own[3] / step, table=own[4] / step,
                     step_us=step / steps * 1e6)
    return (own[0] + own[2] + own[3]) / step


@functools.cache
def process_timed_cost() -> float:
    """:func:`timed_cost` of the CPU clock, measured once a process."""
    return timed_cost()


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


class CopyOnly:
    """A stepper whose steps run under :func:`observation_copy_only` (the switch is outside the bracket)."""

    def __init__(self, stepper: VectorStepper):
        self.stepper = stepper

    def __call__(self, clock: Clock) -> tuple[int, float, float]:
        with observation_copy_only():
            return self.stepper(clock)

    def close(self) -> None:
        self.stepper.close()


def floor(seconds: float, repeat: int, n: int, slice_s: float = 0.05) -> tuple[list[float], list[float]]:
    """Under :func:`observation_copy_only`: the build share of each repeat and, interleaved with
    CartPole's, SyncVectorEnv of ``n`` lean envs' per-env rate as a fraction of CartPole's, each repeat."""
    with observation_copy_only():
        shares = [build_share(seconds) for _ in range(repeat)]
    steppers = {BASE: VectorStepper(BASE, n),
                "copy only": CopyOnly(VectorStepper("EvalStop-Cluster-v0", n, step_info="lean"))}
    try:
        per_repeat = interleave(steppers, seconds, repeat, slice_s)
    finally:
        close_all(steppers)
    return shares, [r["copy only"] / r[BASE] for r in per_repeat]


def spread(values: list[float]) -> str:
    """``"min x%, median y%"`` of shares or ratios."""
    return f"min {min(values):.1%}, median {statistics.median(values):.1%}"


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (``"n/a"`` where the platform has none)."""
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except (AttributeError, OSError):
        return "n/a"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0, help="CPU seconds per env per repeat")
    p.add_argument("--repeat", type=int, default=5, help="repeats (ratios: their min and median)")
    p.add_argument("--slice", type=float, default=0.05, help="CPU seconds an env runs before the next one's turn")
    p.add_argument("--cluster", default="", help="comma-separated cluster presets or spec files to add")
    p.add_argument("--vector", type=int, default=8, help="envs per SyncVectorEnv (default 8)")
    p.add_argument("--floor", action="store_true",
                   help="also measure both observation targets with the observation reduced to its copy")
    a = p.parse_args(argv)
    for name in ("seconds", "slice"):
        if not getattr(a, name) > 0:
            p.error(f"--{name} {getattr(a, name)}: CPU seconds, above 0")
    for name in ("repeat", "vector"):
        if getattr(a, name) < 1:
            p.error(f"--{name} {getattr(a, name)}: a count, at least 1")
    print(f"CPU time of this process; {a.repeat} repeats of {a.seconds:g} CPU s per env in slices of "
          f"{a.slice:g} s, taking turns; ratios within a repeat; load average {load_average()}")
    table = summarise(measure(a.seconds, a.repeat, clusters=tuple(c for c in a.cluster.split(",") if c),
                              slice_s=a.slice))
    header = f"{'steps/CPU s':>12} {'vs CartPole':>12} {'(min)':>8}"
    print(f"{'env':<44} {header}")
    for label, s in table.items():
        print(f"{label:<44} {s.rate:>12.0f} {s.ratio_median:>11.1%} {s.ratio_min:>8.1%}")
    shares = []
    for _ in range(a.repeat):
        parts: dict = {}
        shares.append((build_share(a.seconds, parts=parts), parts))
    med = {k: statistics.median(p[k] for _, p in shares) for k in shares[0][1]}
    print(f"\nEvalStop-Cluster-v0: observation + mask building {spread([s for s, _ in shares])} of a step "
          f"(target <= 25%); medians: window and mask (_refresh) {med['refresh']:.1%}, "
          f"observation (_observe) {med['observe']:.1%}, of which the job table {med['table']:.1%}; "
          f"in the same run the simulator and the reward's time bookkeeping (_advance) {med['advance']:.1%}; "
          f"a timed step {med['step_us']:.1f} us with the timers' cost taken off (untimed, above: "
          f"{1e6 / table['EvalStop-Cluster-v0'].rate:.1f} us)")
    vec = summarise(vector_rates(VECTOR, a.vector, a.seconds, a.repeat, a.slice, alone=ALONE))
    print(f"\ngym.make_vec of {a.vector}, per env, against CartPole-v1's SyncVectorEnv (target >= 40%); "
          "SyncVectorEnv unless marked native (the id's vector_entry_point: ClusterVectorEnv; CartPole's "
          "NumPy CartPoleVectorEnv):")
    print(f"{'':<44} {header}")
    for label, s in vec.items():
        if label not in ALONE:
            print(f"{label:<44} {s.rate:>12.0f} {s.ratio_median:>11.1%} {s.ratio_min:>8.1%}")
    # what SyncVectorEnv adds to each env step (stacking, info merging, autoreset), from the same run
    for name, one, many in (("CartPole-v1", "CartPole-v1 (one env)", BASE),
                            ("EvalStop-Cluster-v0, lean", "EvalStop-Cluster-v0, lean (one env)",
                             "EvalStop-Cluster-v0, step_info='lean'")):
        alone, in_vec = 1e6 / vec[one].rate, 1e6 / (vec[many].rate * a.vector)
        print(f"{name}: {alone:.1f} us per step alone, {in_vec:.1f} us per env step in the vector env "
              f"({in_vec - alone:.1f} us of vector overhead; CPU time, medians)")
    if a.floor:
        shares, ratios = floor(a.seconds, a.repeat, a.vector, a.slice)
        print(f"\nWith the observation reduced to one copy of its buffer (no rows, clock columns or cluster "
              f"features; values wrong, episodes the same): build share {spread(shares)} (target <= 25%), "
              f"SyncVectorEnv of {a.vector} lean {spread(ratios)} of CartPole's per-env rate (target >= 40%)")
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
