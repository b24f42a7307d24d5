"""Hyperparameter files: RL Zoo's format, read by ``evalstop-gym train`` and by rl_zoo3's own scripts.

``evalstop_gym/agents/hyperparams/<algo>.yml`` holds one entry per env id exactly as RL Zoo
(rl_zoo3's ``ExperimentManager``) reads it: ``n_timesteps``, ``n_envs``,
``policy``, ``policy_kwargs``, ``env_wrapper`` (names of the allow-lists below, with keyword
arguments as ``{path: {...}}``), ``env_kwargs`` (the ``gym.make`` keywords of
the training env: env settings and workload fields) and the algorithm's own
keywords, which RL Zoo passes to the algorithm unchanged. What only this
project's trainer uses lives in a separate top-level section that RL Zoo never
reads (it looks up the env id only)::

    evalstop-gym:
      EvalStop-StopControl-v0:
        eval_workload: {noise: 0.05}   # workload fields of validation episodes
        eval_freq: 25000               # environment steps between validation rounds
        n_eval_episodes: 2
        torch_threads: 1
        run_seeds: 3                   # stop-policies: train run seeds seed..seed+2, keep one (validation)
        select_seeds: 10               # validation workloads that choice plays (used with run_seeds > 1)
        vec_env: in-process            # the training envs' vector env: subprocess (default) or in-process

Every key and value is checked before any training starts: an unknown key, a
key of another algorithm, a value out of range or of the wrong type, or a
policy that does not exist is a :class:`~evalstop_gym.config.ConfigError`
naming the file, the entry, the key and the value.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from pathlib import Path
from typing import Any, Callable

from evalstop_gym.config import ConfigError, WorkloadConfig, check_range
from evalstop_gym.files import DataFileError, load_yaml

HYPERPARAMS_DIR = Path(__file__).resolve().parent / "hyperparams"
ALGOS = {"ppo": ("stable_baselines3", "PPO"), "a2c": ("stable_baselines3", "A2C"),
         "dqn": ("stable_baselines3", "DQN"), "maskable-ppo": ("sb3_contrib", "MaskablePPO")}
PROJECT_SECTION = "evalstop-gym"
ZOO_KEYS = ("n_timesteps", "n_envs", "policy", "policy_kwargs", "env_wrapper", "env_kwargs")
# RL Zoo keys this trainer does not implement: refused rather than silently ignored
UNSUPPORTED_ZOO_KEYS = ("normalize", "frame_stack", "callback", "monitor_kwargs", "vec_env_wrapper",
                        "noise_type", "noise_std")
# algorithm keywords that are not hyperparameters (set by the trainer) or cannot be written in YAML
NOT_FROM_FILE = ("policy", "env", "tensorboard_log", "policy_kwargs", "verbose", "seed", "device",
                 "_init_setup_model", "rollout_buffer_class", "replay_buffer_class")
FORMER_KEYS = {"train_workload": "put training workload fields in env_kwargs",
               "eval_workload": f"move it to the '{PROJECT_SECTION}' section",
               "eval_freq": f"move it to the '{PROJECT_SECTION}' section",
               "n_eval_episodes": f"move it to the '{PROJECT_SECTION}' section",
               "torch_threads": f"move it to the '{PROJECT_SECTION}' section"}


def _number(lo=None, hi=None, *, integer=False, lo_open=False) -> Callable[[str, Any], None]:
    def check(name: str, value: Any) -> None:
        if integer and isinstance(value, float) and value.is_integer():
            value = int(value)   # YAML writes 1.5e5 as a float
        check_range(name, value, lo, hi, integer=integer, lo_open=lo_open)
    return check


def _schedule(name: str, value: Any) -> None:
    """A positive number or RL Zoo's linear schedule ``lin_<initial value>``."""
    if isinstance(value, str) and value.startswith("lin_"):
        try:
            initial = float(value[4:])
        except ValueError:
            initial = None
        if initial is not None and initial > 0:
            return
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 and value < float("inf"):
        return
    raise ConfigError(name, value, "must be a number > 0 or a linear schedule 'lin_<number>'")


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ConfigError(name, value, "must be true or false")


VEC_ENVS = ("subprocess", "in-process")   # SB3's SubprocVecEnv (one worker per env) or DummyVecEnv


def _vec_env(name: str, value: Any) -> None:
    if value not in VEC_ENVS:
        raise ConfigError(name, value, f"must be one of {', '.join(VEC_ENVS)}")


def _train_freq(name: str, value: Any) -> None:
    if isinstance(value, list) and len(value) == 2 and value[1] in ("step", "episode"):
        value = value[0]
    _number(1, integer=True)(name, value)


MAX_TIMESTEPS = 10**9        # environment steps of one training run (years of CPU time)
MAX_BUFFER = 10**7           # steps held by a rollout or replay buffer (about 1.5 GB for 18 features)
CHECKS: dict[str, Callable[[str, Any], None]] = {
    "n_timesteps": _number(1, MAX_TIMESTEPS, integer=True), "n_envs": _number(1, 64, integer=True),
    "learning_rate": _schedule, "clip_range": _schedule, "n_steps": _number(1, MAX_BUFFER, integer=True),
    "batch_size": _number(1, MAX_BUFFER, integer=True), "n_epochs": _number(1, 10_000, integer=True),
    "gamma": _number(0, 1), "gae_lambda": _number(0, 1), "ent_coef": _number(0), "vf_coef": _number(0),
    "max_grad_norm": _number(0, lo_open=True), "target_kl": _number(0, lo_open=True),
    "normalize_advantage": _flag, "use_sde": _flag, "use_rms_prop": _flag, "optimize_memory_usage": _flag,
    "rms_prop_eps": _number(0, lo_open=True), "buffer_size": _number(1, MAX_BUFFER, integer=True),
    "learning_starts": _number(0, integer=True), "tau": _number(0, 1), "train_freq": _train_freq,
    "gradient_steps": _number(-1, integer=True), "target_update_interval": _number(1, integer=True),
    "exploration_fraction": _number(0, 1), "exploration_initial_eps": _number(0, 1),
    "exploration_final_eps": _number(0, 1), "stats_window_size": _number(1, integer=True),
    "sde_sample_freq": _number(-1, integer=True),
    # the project section
    "eval_freq": _number(1, integer=True), "n_eval_episodes": _number(1, 1000, integer=True),
    "torch_threads": _number(1, 256, integer=True), "run_seeds": _number(1, 64, integer=True),
    "select_seeds": _number(1, 1000, integer=True), "vec_env": _vec_env,
}
SELECTION_KEYS = ("run_seeds", "select_seeds")   # how many runs and which one is kept (run_selection.py)
PROJECT_KEYS = ("eval_workload", "eval_freq", "n_eval_episodes", "torch_threads", *SELECTION_KEYS, "vec_env")


@dataclasses.dataclass
class Recipe:
    """One checked entry: what ``evalstop-gym train`` needs to run it (``raw``: as written)."""

    path: Path
    env_id: str
    algo: str
    n_timesteps: int
    n_envs: int
    policy: str
    policy_kwargs: dict[str, Any]
    wrappers: list[tuple[str, dict[str, Any]]]
    env_settings: dict[str, Any]      # gym.make keywords that are not workload fields
    train_workload: dict[str, Any]    # the workload fields of env_kwargs
    eval_workload: dict[str, Any]
    eval_freq: int
    n_eval_episodes: int
    torch_threads: int
    run_seeds: int                    # training runs, one kept (:mod:`evalstop_gym.agents.run_selection`)
    select_seeds: int                 # validation workloads that keep it
    vec_env: str                      # "subprocess" (SubprocVecEnv for n_envs > 1) or "in-process" (DummyVecEnv)
    algo_kwargs: dict[str, Any]       # as written; see :func:`algo_kwargs`
    raw: dict[str, Any]


def algo_class(algo: str):
    """The SB3 / sb3-contrib class of an algorithm name (``ConfigError`` if unknown)."""
    if algo not in ALGOS:
        raise ConfigError("algo", algo, f"must be one of {', '.join(ALGOS)}")
    module, name = ALGOS[algo]
    return getattr(importlib.import_module(module), name)


# The policy classes of this package a recipe or a model's config.json may name, besides each
# algorithm's own SB3 aliases (MlpPolicy, ...): resolved by name in evalstop_gym.agents.networks,
# never by importing a dotted path a file gives (that would run any module on sys.path)
PROJECT_POLICIES = ("SlotScorerPolicy",)
PROJECT_EXTRACTORS = ("SlotSetExtractor",)   # policy_kwargs.features_extractor_class (networks.EXTRACTORS)
ACTIVATIONS = ("tanh", "relu")               # policy_kwargs.activation_fn
NETWORKS_MODULE = "evalstop_gym.agents.networks"
MAX_LAYER_WIDTH = 4096   # units of one layer (policy_kwargs: net_arch, hidden, extractor widths)
MAX_LAYERS = 16          # layers of one net_arch list
# weights between the hidden layers of one net_arch list (sum of consecutive widths' products): the shipped
# recipes use 64 x 64 = 4,096; 16 layers of 4,096 would be 250M weights, minutes to build before any load
MAX_HIDDEN_WEIGHTS = 4_000_000


def policy_class(name: str, algo: str, where: str = "policy"):
    """An SB3 policy alias of ``algo`` (``MlpPolicy``) as is, or a policy class of this package by name
    (``SlotScorerPolicy``, also written ``evalstop_gym.agents.networks.SlotScorerPolicy``).

    Nothing else is accepted: no module is imported by a name a file gives.
    """
    cls = algo_class(algo)
    if isinstance(name, str):
        if name in cls.policy_aliases:
            return name
        module, _, short = name.rpartition(".")
        if short in PROJECT_POLICIES and module in ("", NETWORKS_MODULE):
            from . import networks

            return getattr(networks, short)
    allowed = [*cls.policy_aliases, *(f"{NETWORKS_MODULE}.{p}" for p in PROJECT_POLICIES)]
    raise ConfigError(where, name, f"must be one of {', '.join(allowed)} (a name, never a path to import)")


def extractor_name(where: str, name: Any) -> str:
    """The short name of an allowed features extractor (``SlotSetExtractor`` or its path in the networks module)."""
    module, _, short = name.rpartition(".") if isinstance(name, str) else ("", "", None)
    if short not in PROJECT_EXTRACTORS or module not in ("", NETWORKS_MODULE):
        raise ConfigError(where, name, f"must be one of {', '.join(PROJECT_EXTRACTORS)} ({NETWORKS_MODULE})")
    return short


def check_policy_kwargs(where: str, kwargs: Any) -> dict[str, Any]:
    """``policy_kwargs`` as written, with every layer width and count checked before anything is built."""
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise ConfigError(where, kwargs, "must be a mapping (strings are not evaluated)")
    width = _number(1, MAX_LAYER_WIDTH, integer=True)

    def layers(key: str, value: Any) -> None:
        if not isinstance(value, list) or len(value) > MAX_LAYERS:
            raise ConfigError(key, value, f"must be a list of at most {MAX_LAYERS} layer widths")
        for i, v in enumerate(value):
            width(f"{key}[{i}]", v)
        weights = sum(a * b for a, b in zip(value, value[1:]))
        if weights > MAX_HIDDEN_WEIGHTS:
            raise ConfigError(key, value, f"holds {weights} weights between its layers, more than {MAX_HIDDEN_WEIGHTS}")

    arch = kwargs.get("net_arch")
    if isinstance(arch, dict):
        for k, v in arch.items():
            if k not in ("pi", "vf", "qf"):
                raise ConfigError(f"{where}.net_arch", k, "keys must be pi, vf or qf")
            layers(f"{where}.net_arch.{k}", v)
    elif arch is not None:
        layers(f"{where}.net_arch", arch)
    if "activation_fn" in kwargs and kwargs["activation_fn"] not in ACTIVATIONS:
        raise ConfigError(f"{where}.activation_fn", kwargs["activation_fn"], f"must be one of {', '.join(ACTIVATIONS)}")
    if "features_extractor_class" in kwargs:
        extractor_name(f"{where}.features_extractor_class", kwargs["features_extractor_class"])
    def hidden(key: str, value: Any) -> None:   # a hidden width feeds a hidden x hidden layer
        width(key, value)
        if value * value > MAX_HIDDEN_WEIGHTS:
            raise ConfigError(key, value, f"makes a layer of {value * value} weights, more than {MAX_HIDDEN_WEIGHTS}")

    for key in ("hidden", "n_critics"):
        if key in kwargs:
            (hidden if key == "hidden" else width)(f"{where}.{key}", kwargs[key])
    fx = kwargs.get("features_extractor_kwargs")
    if fx is not None:
        if not isinstance(fx, dict):
            raise ConfigError(f"{where}.features_extractor_kwargs", fx, "must be a mapping")
        for k, v in fx.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                (hidden if k == "hidden" else width)(f"{where}.features_extractor_kwargs.{k}", v)
    return kwargs


def sb3_policy_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``policy_kwargs`` for SB3: names (checked against the allow-lists) as the classes they stand for."""
    from torch import nn

    out = dict(check_policy_kwargs("policy_kwargs", kwargs))
    if "activation_fn" in out:   # a name in YAML, a class for SB3
        out["activation_fn"] = {"tanh": nn.Tanh, "relu": nn.ReLU}[out["activation_fn"]]
    if "features_extractor_class" in out:   # a class of evalstop_gym.agents.networks, by name: nothing is evaluated
        from . import networks

        short = extractor_name("policy_kwargs.features_extractor_class", out["features_extractor_class"])
        out["features_extractor_class"] = networks.EXTRACTORS[short]
    return out


def algo_kwargs(recipe: Recipe) -> dict[str, Any]:
    """The algorithm's keywords, with ``lin_<x>`` schedules as the functions SB3 takes."""
    out = {}
    for k, v in recipe.algo_kwargs.items():
        if isinstance(v, str) and v.startswith("lin_"):
            initial = float(v[4:])
            v = _linear(initial)
        elif k == "train_freq" and isinstance(v, list):
            v = tuple(v)
        out[k] = v
    return out


def _linear(initial: float) -> Callable[[float], float]:
    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial
    return schedule


class HyperparamsError(DataFileError):
    """A hyperparameter file that cannot be read as YAML within the reader's limits."""

    field_name = "hyperparams"


def _read(path: Path) -> dict:
    table = load_yaml(path, HyperparamsError, "hyperparameter file")
    if not isinstance(table, dict):
        raise ConfigError("hyperparams", str(path), "must be a mapping of env ids to hyperparameters")
    return table


def load_recipe(algo: str, env_id: str, path: str | os.PathLike | None = None,
                overrides: dict[str, Any] | None = None) -> Recipe:
    """The checked entry for ``env_id`` in ``<algo>.yml`` (or in ``path``), with ``overrides``
    (keys of either the entry or the project section) applied."""
    from evalstop_gym.envs import ENVS
    from evalstop_gym.envs.adapter import STOP_CONTROL_ID
    from evalstop_gym.envs.base import workload_fields

    cls = algo_class(algo)
    if env_id not in ENVS:
        raise ConfigError("env", env_id, f"must be one of {', '.join(ENVS)}")
    path = Path(path) if path is not None else HYPERPARAMS_DIR / f"{algo}.yml"
    table = _read(path)
    if env_id not in table or not isinstance(table[env_id], dict):
        known = ", ".join(k for k in table if k != PROJECT_SECTION) or "none"
        raise ConfigError("env", env_id, f"{path} has no hyperparameters for it (entries: {known})")
    entry = dict(table[env_id])
    section = table.get(PROJECT_SECTION) or {}
    own = section.get(env_id) or {} if isinstance(section, dict) else None
    if not isinstance(own, dict):
        raise ConfigError(f"{path}: {PROJECT_SECTION}", section, f"must map env ids to {', '.join(PROJECT_KEYS)}")
    own = dict(own)
    for k, v in (overrides or {}).items():
        (own if k in PROJECT_KEYS else entry)[k] = v

    def where(key: str, sec: str = "") -> str:
        return f"{path}: {sec}{env_id}.{key}"

    algo_keys = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", *NOT_FROM_FILE)]
    for key, value in entry.items():
        if key in FORMER_KEYS:
            raise ConfigError(where(key), value, f"is not an RL Zoo key: {FORMER_KEYS[key]}")
        if key in UNSUPPORTED_ZOO_KEYS:
            raise ConfigError(where(key), value, "is an RL Zoo key that evalstop-gym train does not support")
        if key not in ZOO_KEYS and key not in algo_keys:
            raise ConfigError(where(key), value, f"unknown key for {algo}: keys are {', '.join(ZOO_KEYS)} "
                              f"and the {cls.__name__} keywords {', '.join(algo_keys)}")
        if key in CHECKS:
            CHECKS[key](where(key), value)
    for key in ("n_timesteps", "n_envs"):
        if key not in entry:
            raise ConfigError(where(key), None, "is required")
    for key, value in own.items():
        if key not in PROJECT_KEYS:
            raise ConfigError(where(key, f"{PROJECT_SECTION}."), value,
                              f"unknown key: the {PROJECT_SECTION} section takes {', '.join(PROJECT_KEYS)}")
        if key in CHECKS:
            CHECKS[key](where(key, f"{PROJECT_SECTION}."), value)

    policy = entry.get("policy", "MlpPolicy")
    policy_class(policy, algo, where("policy"))
    policy_kwargs = check_policy_kwargs(where("policy_kwargs"), entry.get("policy_kwargs"))
    env_kwargs = entry.get("env_kwargs") or {}
    if not isinstance(env_kwargs, dict):
        raise ConfigError(where("env_kwargs"), env_kwargs, "must be a mapping of gym.make keywords")
    fields = {f.name for f in dataclasses.fields(WorkloadConfig)}
    train_wl = {k: v for k, v in env_kwargs.items() if k in fields}
    settings = {k: v for k, v in env_kwargs.items() if k not in fields}
    eval_wl = own.get("eval_workload") or {}
    if not isinstance(eval_wl, dict):
        raise ConfigError(where("eval_workload", f"{PROJECT_SECTION}."), eval_wl, "must be a mapping of workload fields")
    workload_fields(eval_wl, f"{path}: {PROJECT_SECTION}.{env_id}.eval_workload.")
    from .wrappers import parse_wrappers

    try:
        wrappers = parse_wrappers(entry.get("env_wrapper"))
    except ConfigError as e:
        raise ConfigError(where(e.field), e.value, e.allowed) from None
    n_timesteps = int(entry["n_timesteps"])
    n_envs = int(entry["n_envs"])
    if int(own.get("run_seeds", 1)) > 1 and env_id != STOP_CONTROL_ID:
        raise ConfigError(where("run_seeds", f"{PROJECT_SECTION}."), own["run_seeds"],
                          f"more than 1 run is kept by its detection on validation seeds, which needs a stop-policy "
                          f"({STOP_CONTROL_ID}); use 1 here")
    kwargs = {k: v for k, v in entry.items() if k not in ZOO_KEYS}
    if "n_steps" in kwargs and algo in ("ppo", "maskable-ppo") and kwargs["n_steps"] * n_envs < 2:
        raise ConfigError(where("n_steps"), kwargs["n_steps"], f"n_steps * n_envs must be > 1 for {algo}")
    return Recipe(path, env_id, algo, n_timesteps, n_envs, policy, dict(policy_kwargs), wrappers, settings,
                  train_wl, dict(eval_wl), int(own.get("eval_freq", 10_000)), int(own.get("n_eval_episodes", 2)),
                  int(own.get("torch_threads", 1)), int(own.get("run_seeds", 1)), int(own.get("select_seeds", 10)),
                  own.get("vec_env", VEC_ENVS[0]), kwargs, {**entry, **{f"{PROJECT_SECTION}.{k}": v for k, v in own.items()}})
