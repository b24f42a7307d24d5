"""Train a learned stop-policy or scheduler with stable-baselines3; save ``model.zip`` and ``config.json``.

    python -m evalstop_gym.agents.train --env EvalStop-StopControl-v0 --algo ppo --seed 0 --out models/stop
    evalstop-gym train --env EvalStop-Cluster-v0 --algo maskable-ppo --out models/sched

Hyperparameters come from ``evalstop_gym/agents/hyperparams/<algo>.yml`` in RL Zoo's
format (:mod:`evalstop_gym.agents.hparams`), so the same files also run under rl_zoo3's
own ``train`` / ``enjoy`` scripts. Training runs on ``n_envs``
``SubprocVecEnv`` workers, or with ``vec_env: in-process`` in the recipe's
``evalstop-gym`` section on ``n_envs`` envs in this process (``DummyVecEnv``:
the same runs, without the pipes); an EvalCallback (MaskableEvalCallback for
MaskablePPO) scores the policy on fixed validation seeds and ``model.zip`` is
the best of those rounds. Seeds: :mod:`evalstop_gym.agents.seeds` (training, validation
and held-out test seeds are disjoint). Everything needed to rebuild the env
and to reproduce the run goes to ``config.json`` next to the model. Progress:
a bar on a terminal, else a one-line summary every 10% of the steps. See
``docs/learned.md``.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from evalstop_gym.config import ConfigError, check_range
from evalstop_gym.files import atomic_open, prepare_out

from .hparams import ALGOS, HYPERPARAMS_DIR, algo_class, algo_kwargs, load_recipe, policy_class  # noqa: F401
from .hparams import MAX_TIMESTEPS, PROJECT_SECTION, SELECTION_KEYS, sb3_policy_kwargs
from .saved import CONFIG_FILE, CONFIG_FORMAT, FINAL_FILE, MODEL_FILE, write_config

MASKABLE = ("maskable-ppo",)


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


def progress_callback(total: int, bar: bool | None = None):
    """An SB3 callback reporting training progress on stderr: a tqdm bar (``bar``; default: when
    stderr is a terminal), else a one-line summary every 10% of ``total`` steps. Built on call, so
    importing this module does not import SB3."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Progress(BaseCallback):
        def __init__(self):
            super().__init__()
            self.total, self.t0 = total, time.time()
            self.use_bar = sys.stderr.isatty() if bar is None else bar
            self.next_report, self.bar = total / 10, None

        def _on_training_start(self) -> None:
            if self.use_bar:
                from tqdm import tqdm

                self.bar = tqdm(total=self.total, desc="train", unit="step", file=sys.stderr)

        def _mean_return(self) -> str:
            eps = [e["r"] for e in self.model.ep_info_buffer or []]
            return f"mean episode return {sum(eps) / len(eps):.2f} (last {len(eps)})" if eps else "no episode yet"

        def _on_step(self) -> bool:
            n = self.num_timesteps
            if self.bar is not None:
                self.bar.update(n - self.bar.n)
            elif n >= self.next_report:
                while self.next_report <= n:
                    self.next_report += self.total / 10
                print(f"train: {n}/{self.total} steps ({n / self.total:.0%}) in {time.time() - self.t0:.0f} s; "
                      f"{self._mean_return()}", file=sys.stderr, flush=True)
            return True

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    return Progress()


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
          force: bool = False, progress: bool | None = None,
          echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Train, save ``<out>/model.zip`` (best validation round), ``final_model.zip`` and ``config.json``.

    Logs go to the model folder as SB3's tools expect them: ``<rank>.monitor.csv`` per training env
    (``stable_baselines3.common.monitor.load_results(out)`` reads them), ``evaluations.npz`` of the
    validation rounds (EvalCallback's ``timesteps``, ``results``, ``ep_lengths``) and TensorBoard
    event files under ``<out>/tensorboard/`` (or ``tensorboard``, when given; none when the
    tensorboard package is not installed and no folder was asked for).

    ``overrides`` replace keys of the hyperparameter entry or of its project
    section (tests use it to shrink a run). An ``out`` that already holds a
    model is refused unless ``force``. ``progress``: a bar (True), one-line
    summaries on stderr (False), or a bar only on a terminal (None). A recipe
    with ``run_seeds`` > 1 trains run seeds ``seed ..`` and keeps one
    (:mod:`evalstop_gym.agents.run_selection`). Returns the config written.
    """
    recipe = load_recipe(algo, env_id, hyperparams, overrides)
    timesteps = recipe.n_timesteps if timesteps is None else timesteps
    n_envs = recipe.n_envs if n_envs is None else n_envs
    check_range("timesteps", timesteps, 1, MAX_TIMESTEPS, integer=True)
    check_range("n_envs", n_envs, 1, 64, integer=True)
    check_range("seed", seed, 0, 2**31 - recipe.run_seeds, integer=True)
    requested, timesteps = timesteps, trained_steps(recipe, timesteps, n_envs)
    if timesteps != requested:
        echo(f"train: {requested} steps asked; {recipe.algo} trains whole rollouts of "
             f"{rollout_steps(recipe, n_envs)} steps, so {timesteps} are trained and recorded")
    train_wl, eval_wl = recipe.train_workload, recipe.eval_workload
    if calibration is not None:  # the world trained and validated in (docs/calibration.md); saved with the model
        train_wl, eval_wl = {**train_wl, "calibration": calibration}, {**eval_wl, "calibration": calibration}
    # a saved stop-policy the env plays over, named from the working directory: saved by its absolute path,
    # so the model loads from any folder (a path that does not exist, or not a string, is left for the
    # wrapper's own error, which names it as written)
    wrappers = [(name, {**kw, "stop_model": os.path.abspath(kw["stop_model"])}
                 if isinstance(kw.get("stop_model"), str) and os.path.exists(kw["stop_model"]) else kw)
                for name, kw in recipe.wrappers]
    outdir = _prepare_out(out, force)
    if tensorboard is not None:
        prepare_out(tensorboard, "tensorboard")
    run = functools.partial(_train_one, recipe, wrappers, timesteps=timesteps, n_envs=n_envs, train_wl=train_wl,
                            eval_wl=eval_wl, tensorboard=tensorboard, verbose=verbose, progress=progress, echo=echo)
    if recipe.run_seeds == 1:
        return run(outdir, seed)
    from .run_selection import train_and_select   # imported on use: the CLI's parser stays cheap

    settings = functools.partial(run_settings, recipe, wrappers, timesteps=timesteps, n_envs=n_envs,
                                 train_wl=train_wl, eval_wl=eval_wl)
    return train_and_select(recipe, lambda run_dir, s: run(prepare_out(run_dir), s), outdir, seed, settings,
                            eval_wl, force=force, echo=echo)


def rollout_steps(recipe, n_envs: int) -> int | None:
    """Environment steps SB3 collects between two checks of the step budget: ``n_steps x n_envs`` for
    PPO / A2C / MaskablePPO, ``train_freq x n_envs`` for DQN (None: a train_freq counted in episodes)."""
    import inspect

    from . import hparams

    params = inspect.signature(hparams.algo_class(recipe.algo).__init__).parameters
    key = "n_steps" if "n_steps" in params else "train_freq"
    value = recipe.algo_kwargs.get(key, params[key].default)
    if isinstance(value, (list, tuple)):
        if value[1] != "step":
            return None
        value = value[0]
    return int(value) * n_envs


def trained_steps(recipe, timesteps: int, n_envs: int) -> int:
    """The steps ``learn(timesteps)`` trains: ``timesteps`` rounded up to whole rollouts (:func:`rollout_steps`)."""
    chunk = rollout_steps(recipe, n_envs)
    return timesteps if not chunk else -(-timesteps // chunk) * chunk


def run_settings(recipe, wrappers: list, seed: int, *, timesteps: int, n_envs: int, train_wl: dict[str, Any],
                 eval_wl: dict[str, Any]) -> dict[str, Any]:
    """The entries of a run's ``config.json`` that its settings fix (a finished run is reused only if they match)."""
    selection_keys = {f"{PROJECT_SECTION}.{k}" for k in SELECTION_KEYS}   # how runs are kept, not how one trains
    return {"env_id": recipe.env_id, "env_kwargs": dict(recipe.env_settings),
            "env_wrapper": [[name, kwargs] for name, kwargs in wrappers], "train_workload": train_wl,
            "eval_workload": eval_wl, "algo": recipe.algo, "policy": recipe.policy,
            "hyperparams": {k: v for k, v in recipe.raw.items() if k not in selection_keys},
            "timesteps": timesteps, "n_envs": n_envs, "seed": seed}


def _train_one(recipe, wrappers: list, outdir: Path, seed: int, *, timesteps: int, n_envs: int,
               train_wl: dict[str, Any], eval_wl: dict[str, Any], tensorboard: str | None, verbose: int,
               progress: bool | None, echo: Callable[[str], None]) -> dict[str, Any]:
    """One training run of ``recipe`` with run seed ``seed`` into ``outdir``; returns the config written."""
    from .seeds import VALIDATION_FIRST, train_first

    env_id, algo = recipe.env_id, recipe.algo
    env_kwargs = dict(recipe.env_settings)
    eval_freq, n_eval = recipe.eval_freq, recipe.n_eval_episodes
    (outdir / CONFIG_FILE).unlink(missing_ok=True)   # a run cut off from here on is never taken as finished
    for stale in outdir.glob("*.monitor.csv"):        # an earlier run's (--force), maybe with more envs
        stale.unlink()
    if tensorboard is None and _has_tensorboard():
        tensorboard = str(outdir / TENSORBOARD_DIR)

    from .policy import make_env   # imported on use (gymnasium): the CLI's parser stays cheap

    # fail on a bad env / wrapper / workload before starting any worker
    probe = make_env(env_id, env_kwargs, train_wl, wrappers)
    obs_space, act_space = probe.observation_space, probe.action_space
    probe.close()

    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    cls = algo_class(algo)
    torch.set_num_threads(recipe.torch_threads)
    fns = [functools.partial(make_env, env_id, env_kwargs, train_wl, wrappers, train_first(seed, r), n_envs, True,
                             str(outdir / str(r))) for r in range(n_envs)]
    venv = SubprocVecEnv(fns) if n_envs > 1 and recipe.vec_env == "subprocess" else DummyVecEnv(fns)
    eval_env = DummyVecEnv([functools.partial(make_env, env_id, env_kwargs, eval_wl, wrappers, VALIDATION_FIRST,
                                              1, True)])
    t0, cpu0 = time.time(), time.process_time()
    worker_cpu = 0.0
    with tempfile.TemporaryDirectory(prefix="evalstop-train-") as tmp:
        try:
            try:
                model = cls(policy_class(recipe.policy, algo), venv, seed=seed, device="cpu",
                            tensorboard_log=tensorboard, verbose=verbose,
                            policy_kwargs=sb3_policy_kwargs(recipe.policy_kwargs), **algo_kwargs(recipe))
            except (TypeError, ValueError, AssertionError) as e:   # SB3's own checks of combinations
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise ConfigError(f"{recipe.path}: {env_id}", "hyperparameters", first) from None
            if tensorboard is None:
                model.set_logger(quiet_logger(verbose))
            callback = _validation_callback(algo in MASKABLE, eval_env=eval_env, n_eval_episodes=n_eval,
                                            eval_freq=max(eval_freq // n_envs, 1), best_model_save_path=tmp,
                                            log_path=str(outdir), deterministic=True, verbose=verbose)
            with warnings.catch_warnings():   # validation runs in-process on purpose (DummyVecEnv)
                warnings.filterwarnings("ignore", message="Training and eval env are not of the same type")
                model.learn(timesteps, callback=[callback, progress_callback(timesteps, progress)],
                            tb_log_name=f"{algo}-{env_id}-seed{seed}")
            worker_cpu = sum(venv.env_method("process_cpu_seconds")) if isinstance(venv, SubprocVecEnv) else 0.0
            timesteps = int(model.num_timesteps)   # what was trained, whatever was planned
        except BaseException:
            # interrupted inside a step (Ctrl-C, a test's time limit) SB3 would wait in close() for
            # replies it has partly read already, forever: the workers are told to close instead
            if isinstance(venv, SubprocVecEnv):
                venv.waiting = False
            raise
        finally:
            venv.close()
            eval_env.close()
        with atomic_open(outdir / FINAL_FILE, "wb") as f:   # all or nothing: never a truncated model
            model.save(f)
        best = Path(tmp) / "best_model.zip"
        selected_best = best.exists()
        with open(best if selected_best else outdir / FINAL_FILE, "rb") as src, \
                atomic_open(outdir / MODEL_FILE, "wb") as f:
            shutil.copyfileobj(src, f)
        rounds = [{"timesteps": int(t), "mean_return": float(sum(r) / len(r))}
                  for t, r in zip(callback.evaluations_timesteps, callback.evaluations_results)]
    cpu = time.process_time() - cpu0 + worker_cpu
    best_round = max(rounds, key=lambda r: r["mean_return"]) if rounds else None
    config = {
        "format": CONFIG_FORMAT,
        **run_settings(recipe, wrappers, seed, timesteps=timesteps, n_envs=n_envs, train_wl=train_wl,
                       eval_wl=eval_wl),
        "hyperparams_file": str(recipe.path),
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
    write_config(outdir, config)
    echo(f"trained {algo} on {env_id} for {timesteps} steps with seed {seed} in {cpu / 60:.1f} CPU minutes "
         f"({config['wall_seconds'] / 60:.1f} min wall); wrote {outdir / MODEL_FILE} and {outdir / CONFIG_FILE}")
    return config


TENSORBOARD_DIR = "tensorboard"   # inside the model folder, unless --tensorboard names another


def _has_tensorboard() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def quiet_logger(verbose: int = 0):
    """An SB3 logger writing no files (stdout with ``verbose`` >= 1). Without one, and without a
    TensorBoard folder, ``learn()`` makes an empty ``<tmp>/SB3-<date>`` folder on every call
    (``stable_baselines3.common.utils.configure_logger`` calls ``configure(None, ...)``, which creates
    its folder even when it writes nothing there)."""
    from stable_baselines3.common.logger import HumanOutputFormat, Logger

    return Logger(folder=None, output_formats=[HumanOutputFormat(sys.stdout)] if verbose >= 1 else [])


def _prepare_out(out: str | os.PathLike, force: bool = False) -> Path:
    """``out`` as a writable folder; one that already holds a finished model (its ``config.json``, written
    last) only with ``force``."""
    taken = [f for f in (MODEL_FILE, FINAL_FILE, CONFIG_FILE) if (Path(out) / f).exists()]
    if (Path(out) / CONFIG_FILE).exists() and not force:
        raise ConfigError("out", str(out), f"already holds a model ({', '.join(taken)}); pass --force to "
                          "overwrite it, or choose another folder")
    if Path(out).exists() and not Path(out).is_dir():
        raise ConfigError("out", str(out), "is a file, not a folder")
    return prepare_out(out)


# -- command line (also `evalstop-gym train`) -----------------------------------------
HELP = "train a learned stop-policy (ppo, a2c, dqn) or scheduler (maskable-ppo)"
DESCRIPTION = ("Train PPO, A2C or DQN on EvalStop-StopControl-v0, or MaskablePPO on EvalStop-Cluster-v0, with "
               "hyperparameters from evalstop_gym/agents/hyperparams/<algo>.yml; validate on held-out seeds and write "
               "OUT/model.zip and OUT/config.json, with SB3's logs: OUT/<rank>.monitor.csv, OUT/evaluations.npz "
               "and TensorBoard events in OUT/tensorboard/. Needs the rl extra (pip install 'evalstop-gym[rl]').")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from evalstop_gym.envs import ENVS

    p.add_argument("--env", required=True, metavar="ID", help=f"env id: {' | '.join(ENVS)}")
    p.add_argument("--algo", required=True, metavar="NAME",
                   help=f"{' | '.join(ALGOS)} (ppo, a2c, dqn: StopControl; maskable-ppo: Cluster)")
    p.add_argument("--timesteps", type=int, default=None, metavar="N",
                   help="environment steps (default: n_timesteps of the hyperparameter file)")
    p.add_argument("--seed", type=int, default=0, help="run seed: networks, sampling and the training "
                   "workload seeds (default %(default)s)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for model.zip and config.json")
    p.add_argument("--n-envs", type=int, default=None, metavar="N",
                   help="training envs: SubprocVecEnv workers, or envs in this process with the recipe's vec_env: "
                        "in-process (default: n_envs of the hyperparameter file, 2)")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="write TensorBoard logs there (default OUT/tensorboard/)")
    p.add_argument("--hyperparams", default=None, metavar="FILE",
                   help="a YAML file to read instead of evalstop_gym/agents/hyperparams/<algo>.yml")
    p.add_argument("--verbose", type=int, default=0, choices=(0, 1, 2), help="SB3 verbosity (default 0)")
    p.add_argument("--calibration", default=None, metavar="NAME",
                   help="world to train in: a named calibration (paper, realistic, grounded) or a world file (default: the hyperparameter file's, else paper)")
    p.add_argument("--force", action="store_true", help="overwrite a model already in --out")


def run(args: argparse.Namespace) -> int:
    train(args.env, args.algo, out=args.out, timesteps=args.timesteps, seed=args.seed, n_envs=args.n_envs,
          tensorboard=args.tensorboard, hyperparams=args.hyperparams, verbose=args.verbose,
          calibration=args.calibration, force=args.force)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evalstop_gym.agents.train", description=DESCRIPTION)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except ConfigError as e:
        print(f"evalstop_gym.agents.train: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
