"""Train a learned stop-policy or scheduler with stable-baselines3; save ``model.zip`` and ``config.json``.

    python -m agents.train --env EvalStop-StopControl-v0 --algo ppo --seed 0 --out models/stop
    evalstop-gym train --env EvalStop-Cluster-v0 --algo maskable-ppo --out models/sched

Hyperparameters come from ``agents/hyperparams/<algo>.yml``, one entry per env
id in RL Zoo's layout (``n_timesteps``, ``n_envs``, ``policy``,
``policy_kwargs``, ``env_wrapper`` and the algorithm's own keywords), plus
our keys ``env_kwargs`` (env settings such as the base scheduler or reward
weights), ``train_workload`` / ``eval_workload`` (workload fields of training
and validation episodes), ``eval_freq``, ``n_eval_episodes`` and
``torch_threads``. Training runs on ``n_envs`` ``SubprocVecEnv`` workers;
an EvalCallback (MaskableEvalCallback for MaskablePPO) scores the policy on
fixed validation seeds and ``model.zip`` is the best of those rounds. Seeds:
:mod:`agents.seeds` (training, validation and held-out test seeds are
disjoint). Everything needed to rebuild the env and to reproduce the run
goes to ``config.json`` next to the model. See ``docs/learned.md``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from evalstop_gym.config import ConfigError, check_range
from evalstop_gym.files import prepare_out

HYPERPARAMS_DIR = Path(__file__).resolve().parent / "hyperparams"
ALGOS = {"ppo": ("stable_baselines3", "PPO"), "dqn": ("stable_baselines3", "DQN"),
         "maskable-ppo": ("sb3_contrib", "MaskablePPO")}
MASKABLE = ("maskable-ppo",)
CONFIG_FILE, MODEL_FILE, FINAL_FILE = "config.json", "model.zip", "final_model.zip"
CONFIG_FORMAT = 1

# our keys in a hyperparameter entry; every other key goes to the algorithm
OWN_KEYS = ("n_timesteps", "n_envs", "policy", "policy_kwargs", "env_wrapper", "env_kwargs", "train_workload",
            "eval_workload", "eval_freq", "n_eval_episodes", "torch_threads")
POLICIES = {"SlotScorerPolicy": "agents.networks"}   # custom policies by name, beside SB3's "MlpPolicy"


def algo_class(algo: str):
    """The SB3 / sb3-contrib class of an algorithm name (``ConfigError`` if unknown)."""
    import importlib

    if algo not in ALGOS:
        raise ConfigError("algo", algo, f"must be one of {', '.join(ALGOS)}")
    module, name = ALGOS[algo]
    return getattr(importlib.import_module(module), name)


def load_hyperparams(algo: str, env_id: str, path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The entry for ``env_id`` in ``<algo>.yml`` (or in ``path``)."""
    import yaml

    from evalstop_gym.envs import ENVS

    if algo not in ALGOS:
        raise ConfigError("algo", algo, f"must be one of {', '.join(ALGOS)}")
    if env_id not in ENVS:
        raise ConfigError("env", env_id, f"must be one of {', '.join(ENVS)}")
    path = Path(path) if path is not None else HYPERPARAMS_DIR / f"{algo}.yml"
    try:
        table = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError("hyperparams", str(path), f"cannot be read ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        raise ConfigError("hyperparams", str(path), f"is not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(table, dict) or env_id not in table:
        known = ", ".join(table) if isinstance(table, dict) else "none"
        raise ConfigError("env", env_id, f"{path.name} has no hyperparameters for it with algo {algo!r} "
                          f"(entries: {known})")
    hp = dict(table[env_id])
    for key in ("n_timesteps", "n_envs"):
        if key not in hp:
            raise ConfigError(f"{path.name}:{env_id}.{key}", None, "is required")
    return hp


def _policy(name: str):
    if name in POLICIES:
        import importlib

        return getattr(importlib.import_module(POLICIES[name]), name)
    return name


def _policy_kwargs(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    from torch import nn

    out = dict(kwargs or {})
    if "activation_fn" in out:   # a name in YAML, a class for SB3
        acts = {"tanh": nn.Tanh, "relu": nn.ReLU}
        if out["activation_fn"] not in acts:
            raise ConfigError("policy_kwargs.activation_fn", out["activation_fn"], f"must be one of {', '.join(acts)}")
        out["activation_fn"] = acts[out["activation_fn"]]
    return out


def make_env(env_id: str, env_kwargs: dict[str, Any], workload: dict[str, Any],
             wrappers: list, first_seed: int | None = None, stride: int = 1, monitor: bool = False):
    """The env stack of a model: ``gym.make`` + named wrappers (+ seeds and a Monitor for training)."""
    import gymnasium as gym

    import evalstop_gym  # noqa: F401  (registers the env ids in a fresh worker)

    from .wrappers import WorkloadSeeds, wrap

    env = wrap(gym.make(env_id, **env_kwargs, **workload), wrappers)
    if first_seed is not None:
        env = WorkloadSeeds(env, first_seed, stride)
    if monitor:
        from stable_baselines3.common.monitor import Monitor

        env = Monitor(env)
    return env


def versions() -> dict[str, str]:
    import importlib.metadata as md
    import platform

    out = {"python": platform.python_version()}
    for dist in ("evalstop-gym", "stable-baselines3", "sb3-contrib", "torch", "gymnasium", "numpy"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _validation_callback(maskable: bool, **kwargs):
    """An (Maskable)EvalCallback that replays the same validation seeds every round."""
    if maskable:
        from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback as Base
    else:
        from stable_baselines3.common.callbacks import EvalCallback as Base

    class Validation(Base):
        def _on_step(self) -> bool:
            if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
                self.eval_env.env_method("rewind")
            return super()._on_step()

    return Validation(**kwargs)


def train(env_id: str, algo: str, *, out: str | os.PathLike, timesteps: int | None = None, seed: int = 0,
          n_envs: int | None = None, tensorboard: str | None = None, hyperparams: str | None = None,
          overrides: dict[str, Any] | None = None, verbose: int = 0, calibration: str | None = None,
          echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Train, save ``<out>/model.zip`` (best validation round), ``final_model.zip`` and ``config.json``.

    ``overrides`` replace entries of the hyperparameter file (tests use it to
    shrink a run). Returns the config written.
    """
    from .seeds import VALIDATION_FIRST, train_first
    from .wrappers import parse_wrappers

    hp = load_hyperparams(algo, env_id, hyperparams)
    hp.update(overrides or {})
    timesteps = int(hp["n_timesteps"]) if timesteps is None else timesteps
    n_envs = int(hp["n_envs"]) if n_envs is None else n_envs
    check_range("timesteps", timesteps, 1, integer=True)
    check_range("n_envs", n_envs, 1, 64, integer=True)
    check_range("seed", seed, 0, 2**31 - 1, integer=True)
    wrappers = parse_wrappers(hp.get("env_wrapper"))
    env_kwargs = dict(hp.get("env_kwargs") or {})
    if calibration is not None:  # the world trained in (docs/calibration.md); saved with the model
        env_kwargs["calibration"] = calibration
    train_wl, eval_wl = dict(hp.get("train_workload") or {}), dict(hp.get("eval_workload") or {})
    eval_freq, n_eval = int(hp.get("eval_freq", 10_000)), int(hp.get("n_eval_episodes", 2))
    algo_kwargs = {k: v for k, v in hp.items() if k not in OWN_KEYS}
    outdir = prepare_out(out)
    if tensorboard is not None:
        prepare_out(tensorboard, "tensorboard")

    # fail on a bad env / wrapper / workload before starting any worker
    probe = make_env(env_id, env_kwargs, train_wl, wrappers)
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()

    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    cls = algo_class(algo)
    torch.set_num_threads(int(hp.get("torch_threads", 1)))
    fns = [functools.partial(make_env, env_id, env_kwargs, train_wl, wrappers, train_first(seed, r), n_envs, True)
           for r in range(n_envs)]
    venv = SubprocVecEnv(fns) if n_envs > 1 else DummyVecEnv(fns)
    eval_env = DummyVecEnv([functools.partial(make_env, env_id, env_kwargs, eval_wl, wrappers, VALIDATION_FIRST,
                                              1, True)])
    t0, cpu0 = time.time(), time.process_time()
    worker_cpu = 0.0
    with tempfile.TemporaryDirectory(prefix="evalstop-train-") as tmp:
        try:
            try:
                model = cls(_policy(hp.get("policy", "MlpPolicy")), venv, seed=seed, device="cpu",
                            tensorboard_log=tensorboard, verbose=verbose,
                            policy_kwargs=_policy_kwargs(hp.get("policy_kwargs")), **algo_kwargs)
            except TypeError as e:
                raise ConfigError("hyperparams", f"{algo}.yml:{env_id}", str(e)) from None
            callback = _validation_callback(algo in MASKABLE, eval_env=eval_env, n_eval_episodes=n_eval,
                                            eval_freq=max(eval_freq // n_envs, 1), best_model_save_path=tmp,
                                            log_path=tmp, deterministic=True, verbose=verbose)
            with warnings.catch_warnings():   # validation runs in-process on purpose (DummyVecEnv)
                warnings.filterwarnings("ignore", message="Training and eval env are not of the same type")
                model.learn(timesteps, callback=callback, tb_log_name=f"{algo}-{env_id}-seed{seed}")
            worker_cpu = sum(venv.env_method("process_cpu_seconds")) if n_envs > 1 else 0.0
        finally:
            venv.close()
            eval_env.close()
        model.save(outdir / FINAL_FILE)
        best = Path(tmp) / "best_model.zip"
        selected_best = best.exists()
        shutil.copyfile(best if selected_best else outdir / FINAL_FILE, outdir / MODEL_FILE)
        rounds = [{"timesteps": int(t), "mean_return": float(sum(r) / len(r))}
                  for t, r in zip(callback.evaluations_timesteps, callback.evaluations_results)]
    cpu = time.process_time() - cpu0 + worker_cpu
    best_round = max(rounds, key=lambda r: r["mean_return"]) if rounds else None
    config = {
        "format": CONFIG_FORMAT,
        "env_id": env_id,
        "env_kwargs": env_kwargs,
        "env_wrapper": [[name, kwargs] for name, kwargs in wrappers],
        "train_workload": train_wl,
        "eval_workload": eval_wl,
        "algo": algo,
        "policy": hp.get("policy", "MlpPolicy"),
        "hyperparams": hp,
        "timesteps": timesteps,
        "n_envs": n_envs,
        "seed": seed,
        "seeds": {
            "train": f"env rank r of {n_envs} plays episode i on workload seed {train_first(seed, 0)} + r + "
                     f"{n_envs} * i",
            "validation": list(range(VALIDATION_FIRST, VALIDATION_FIRST + n_eval)),
            "held_out_test": "0..899999",
        },
        "observation_space": {"shape": list(obs_space.shape)},
        "action_space": {"n": int(act_space.n)},
        "model": MODEL_FILE,
        "selected": ({"by": "best mean validation return", **best_round} if best_round and selected_best
                     else {"by": "final (no validation round)"}),
        "validation_rounds": rounds,
        "cpu_seconds": round(cpu, 1),
        "wall_seconds": round(time.time() - t0, 1),
        "versions": versions(),
        "command": " ".join([os.path.basename(sys.argv[0]), *sys.argv[1:]]),
    }
    (outdir / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    echo(f"trained {algo} on {env_id} for {timesteps} steps with seed {seed} in {cpu / 60:.1f} CPU minutes "
         f"({config['wall_seconds'] / 60:.1f} min wall); wrote {outdir / MODEL_FILE} and {outdir / CONFIG_FILE}")
    return config


# -- command line (also `evalstop-gym train`) -----------------------------------------
HELP = "train a learned stop-policy (ppo, dqn) or scheduler (maskable-ppo)"
DESCRIPTION = ("Train PPO or DQN on EvalStop-StopControl-v0, or MaskablePPO on EvalStop-Cluster-v0, with "
               "hyperparameters from agents/hyperparams/<algo>.yml; validate on held-out seeds and write "
               "OUT/model.zip and OUT/config.json. Needs the rl extra (pip install 'evalstop-gym[rl]').")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from evalstop_gym.envs import ENVS

    p.add_argument("--env", required=True, metavar="ID", help=f"env id: {' | '.join(ENVS)}")
    p.add_argument("--algo", required=True, metavar="NAME",
                   help=f"{' | '.join(ALGOS)} (ppo, dqn: StopControl; maskable-ppo: Cluster)")
    p.add_argument("--timesteps", type=int, default=None, metavar="N",
                   help="environment steps (default: n_timesteps of the hyperparameter file)")
    p.add_argument("--seed", type=int, default=0, help="run seed: networks, sampling and the training "
                   "workload seeds (default %(default)s)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for model.zip and config.json")
    p.add_argument("--n-envs", type=int, default=None, metavar="N",
                   help="SubprocVecEnv workers (default: n_envs of the hyperparameter file, 2)")
    p.add_argument("--tensorboard", default=None, metavar="DIR", help="write TensorBoard logs there")
    p.add_argument("--hyperparams", default=None, metavar="FILE",
                   help="a YAML file to read instead of agents/hyperparams/<algo>.yml")
    p.add_argument("--verbose", type=int, default=0, choices=(0, 1, 2), help="SB3 verbosity (default 0)")
    p.add_argument("--calibration", default=None, metavar="NAME",
                   help="world to train in: paper or realistic (default: the hyperparameter file's, else paper)")


def run(args: argparse.Namespace) -> int:
    train(args.env, args.algo, out=args.out, timesteps=args.timesteps, seed=args.seed, n_envs=args.n_envs,
          tensorboard=args.tensorboard, hyperparams=args.hyperparams, verbose=args.verbose,
          calibration=args.calibration)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m agents.train", description=DESCRIPTION)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except ConfigError as e:
        print(f"agents.train: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
