"""A saved model on disk: its files, its ``config.json`` checked, its fingerprint, and its SB3 model loaded safely.

A model folder written by ``evalstop-gym train`` holds ``model.zip`` (the
kept model), ``final_model.zip`` (the last step's) and ``config.json``
(everything needed to rebuild its env; written last, so a folder without it
is an unfinished run).

Loading never trusts the files: nothing in them is unpickled or run
(:func:`load_model`), and a missing or corrupt model or config, an unknown
algorithm, or a model whose spaces differ from the env's raises
:class:`~evalstop_gym.config.ConfigError` with one line saying which.
Nothing here imports torch until a model is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from evalstop_gym.config import ConfigError
from evalstop_gym.experiments.spec import LEARNED
from evalstop_gym.files import DataFileError, load_json, write_atomic

from .hparams import ALGOS, algo_class, check_policy_kwargs, policy_class, sb3_policy_kwargs

CONFIG_FILE, MODEL_FILE, FINAL_FILE = "config.json", "model.zip", "final_model.zip"
CONFIG_FORMAT = 1


def write_config(outdir: Path, config: dict[str, Any]) -> None:
    """``outdir/config.json`` (written last: it marks a finished run)."""
    write_atomic(outdir / CONFIG_FILE, json.dumps(config, indent=2) + "\n")


def model_files(path: str | os.PathLike) -> tuple[Path, Path]:
    """``(model.zip, config.json)`` of a model folder or of a model file (``ConfigError`` if missing)."""
    p = Path(path)
    model = p / MODEL_FILE if p.is_dir() else p
    if not model.is_file():
        raise ConfigError("model", str(path), f"no such model file (expected a folder with {MODEL_FILE}, "
                          "or a .zip saved by `evalstop-gym train`)")
    config = model.parent / CONFIG_FILE
    if not config.is_file():
        raise ConfigError("model", str(path), f"has no {CONFIG_FILE} beside it (saved by `evalstop-gym train`)")
    return model, config


class ModelConfigError(DataFileError):
    """A model's ``config.json`` that cannot be read as JSON within the reader's limits."""

    field_name = "model"


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """The training config beside a model, checked against what a model may name.

    A config is data and runs nothing: its env id must be one this package
    registers (``gym.make("module:Env")`` would import ``module``), its
    algorithm one of :data:`~evalstop_gym.agents.hparams.ALGOS`, its policy
    and wrappers names on the allow-lists (:func:`~evalstop_gym.agents.hparams.policy_class`,
    :data:`~evalstop_gym.agents.wrappers.WRAPPERS`) and its layer widths within
    :func:`~evalstop_gym.agents.hparams.check_policy_kwargs`'s limits. Any
    other value is a one-line :class:`ConfigError` naming the file and key.
    """
    from evalstop_gym.envs import ENVS

    from .wrappers import parse_wrappers

    _, cfg_path = model_files(path)
    cfg = load_json(cfg_path, ModelConfigError, "model config")
    missing = [k for k in ("env_id", "env_kwargs", "env_wrapper", "algo") if not isinstance(cfg, dict) or k not in cfg]
    if missing:
        raise ConfigError("model", str(path), f"its {cfg_path.name} lacks {', '.join(missing)}")

    def bad(key: str, why: str) -> ConfigError:
        value = repr(cfg.get(key))
        value = value if len(value) <= 80 else value[:77] + "..."
        return ConfigError("model", str(path), f"its {cfg_path.name} names {key}={value}: {why}")

    if not isinstance(cfg["algo"], str) or cfg["algo"] not in ALGOS:
        raise bad("algo", f"must be one of {', '.join(ALGOS)}")
    if not isinstance(cfg["env_id"], str) or cfg["env_id"] not in ENVS:
        raise bad("env_id", f"must be one of {', '.join(ENVS)} (the env ids this package registers)")
    if not isinstance(cfg["env_kwargs"], dict):
        raise bad("env_kwargs", "must be a mapping of gym.make keywords")
    wrappers = cfg["env_wrapper"]
    if not isinstance(wrappers, list) or not all(isinstance(w, list) and len(w) == 2 for w in wrappers):
        raise bad("env_wrapper", "must be a list of [wrapper name, keywords] pairs")
    try:
        parse_wrappers([{name: kw} for name, kw in wrappers])
        for name, kw in wrappers:
            if not isinstance(kw, dict) or not isinstance(kw.get("stop_model", ""), (str, type(None))):
                raise ConfigError(f"env_wrapper.{name}", kw, "must be a mapping of keywords (stop_model: a path)")
        policy_class(cfg.get("policy", "MlpPolicy"), cfg["algo"], "policy")
        hp = cfg.get("hyperparams") or {}
        if not isinstance(hp, dict):
            raise ConfigError("hyperparams", hp, "must be a mapping")
        check_policy_kwargs("hyperparams.policy_kwargs", hp.get("policy_kwargs"))
    except ConfigError as e:
        cfg[e.field] = e.value   # named as the check names it
        raise bad(e.field, e.allowed) from None
    return cfg


def fingerprint(path: str | os.PathLike) -> str:
    """Hash of the model, its config, the stop-policy it plays over (a scheduler trained with a saved
    stop-policy names it in its config) and the code that runs it (evalstop_gym/agents/, the envs).

    Part of a learned run's id in ``reproduce`` and ``targets``, so results of
    another model, of the same scheduler over a retrained stop-policy, or of
    older agent / env code are never reused.
    """
    import evalstop_gym.envs

    h = hashlib.sha1()
    for f in model_files(path):
        h.update(f.read_bytes())
    for name, kw in read_config(path)["env_wrapper"]:
        stop_model = kw.get("stop_model") if name == "HandCodedStops" and isinstance(kw, dict) else None
        if stop_model:  # found as loading finds it (absolute since training saves it so; else from the cwd)
            try:
                files = model_files(stop_model)
            except ConfigError as e:
                raise ConfigError("stop_model", str(stop_model), f"(named by {path}) {e.allowed}") from None
            for f in files:
                h.update(f.read_bytes())
    for folder in (Path(__file__).resolve().parent, Path(evalstop_gym.envs.__file__).resolve().parent):
        for f in sorted(folder.glob("*.py")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


def describe(cfg: dict[str, Any]) -> str:
    """A short label: what the model decides and with what."""
    from evalstop_gym.envs.adapter import STOP_CONTROL_ID

    if cfg["env_id"] == STOP_CONTROL_ID:
        return f"learned stop-policy ({cfg['algo']})"
    stops = next((kw for name, kw in cfg["env_wrapper"] if name == "HandCodedStops"), None)
    if stops is not None and stops.get("stop_model"):
        return f"learned scheduler ({cfg['algo']}) + learned stop-policy"
    if stops is not None:
        return f"learned scheduler ({cfg['algo']}) + {stops.get('stopper', 'evalstop')}"
    return f"learned scheduler and stops ({cfg['algo']})"


def learned_arm(path: str | os.PathLike):
    """``(Arm, scheduler or None)`` of a saved model for the experiment suite.

    A stop-policy runs over the experiment's base scheduler (``None``); a
    learned scheduler is its own (``"learned"``).
    """
    from evalstop_gym.envs.adapter import STOP_CONTROL_ID
    from evalstop_gym.experiments.spec import Arm

    cfg = read_config(path)
    model, _ = model_files(path)
    arm = Arm(describe(cfg), LEARNED, (("model", str(model.resolve())), ("fingerprint", fingerprint(path))))
    return arm, (None if cfg["env_id"] == STOP_CONTROL_ID else LEARNED)


def _space(space) -> str:
    """A space in one short line: ``Box(30,)`` (with its bounds' extremes), ``Discrete(2)``."""
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        return f"Box{space.shape} in [{space.low.min():g}, {space.high.max():g}]"
    return str(space).splitlines()[0]


# Entries SB3 pickles into a model zip's ``data`` that only training uses: replaced on load by
# these stand-ins (None: SB3 rebuilds its default; a schedule: a constant, unused by predict)
TRAINING_ONLY = {"_last_obs": None, "_last_episode_starts": None, "_last_original_obs": None,
                 "ep_info_buffer": None, "ep_success_buffer": None, "rollout_buffer_class": None,
                 "replay_buffer_class": None, "train_freq": 1}
SCHEDULES = ("lr_schedule", "clip_range", "clip_range_vf", "exploration_schedule")
MAX_DATA_BYTES = 16 * 2**20        # the JSON ``data`` entry of a model zip
MAX_WEIGHT_BYTES = 2**30           # all tensors of a model zip, uncompressed


def _constant(_progress: float) -> float:
    return 0.0


def load_model(model_path: Path, cfg: dict[str, Any], observation_space, action_space):
    """The SB3 model in ``model_path`` loaded without running anything from the file.

    SB3 stores some entries of a model zip's ``data`` as pickles (cloudpickle),
    and unpickling runs whatever code the file names. Here every such entry is
    given instead (SB3's ``custom_objects``): the spaces from the env rebuilt
    from ``config.json``, the policy class and its keywords from the config's
    names, and stand-ins for training-only state; an entry we cannot rebuild
    refuses the file. Tensors load with ``torch.load(weights_only=True)`` (SB3
    passes it; torch >= 2.6 defaults to it), which reads tensors and plain
    containers only. Any problem is a one-line :class:`ConfigError`.
    """
    import zipfile


    algo = algo_class(cfg["algo"])   # first: a missing rl extra is not a bad file

    def refuse(why: str) -> ConfigError:
        return ConfigError("model", str(model_path), f"cannot be loaded as a {cfg['algo']} model ({why}); nothing from the file was run")

    try:
        with zipfile.ZipFile(model_path) as z:
            infos = {i.filename: i for i in z.infolist()}
            if "data" not in infos:
                raise refuse("no data entry")
            if infos["data"].file_size > MAX_DATA_BYTES:
                raise refuse(f"its data entry is {infos['data'].file_size} bytes, more than {MAX_DATA_BYTES}")
            if sum(i.file_size for n, i in infos.items() if n.endswith(".pth")) > MAX_WEIGHT_BYTES:
                raise refuse(f"its tensors exceed {MAX_WEIGHT_BYTES} bytes")
            data = json.loads(z.read("data").decode("utf-8"))
    except (OSError, zipfile.BadZipFile, UnicodeDecodeError, ValueError) as e:
        if isinstance(e, ConfigError):
            raise
        raise refuse(f"not a readable model zip: {type(e).__name__}: {e}") from None
    if not isinstance(data, dict):
        raise refuse("its data entry is not a JSON object")
    try:
        policy = policy_class(cfg.get("policy", "MlpPolicy"), cfg["algo"])
    except ConfigError as e:
        raise refuse(f"unknown policy: {e}") from None
    if isinstance(policy, str):
        if policy not in algo.policy_aliases:
            raise refuse(f"unknown policy {policy!r}")
        policy = algo.policy_aliases[policy]
    given = {"observation_space": observation_space, "action_space": action_space, "policy_class": policy,
             "policy_kwargs": sb3_policy_kwargs((cfg.get("hyperparams") or {}).get("policy_kwargs")),
             **TRAINING_ONLY, **{k: _constant for k in SCHEDULES}}
    pickled = [k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v]
    unknown = [k for k in pickled if k not in given]
    if unknown:
        raise refuse(f"it holds pickled entries {', '.join(map(repr, unknown[:5]))}; loading them would run code "
                     "from the file")
    for space_key in ("observation_space", "action_space"):
        if space_key not in data:
            raise refuse(f"no {space_key}")
    _check_spaces(model_path, data, observation_space, action_space)
    try:
        model = algo.load(model_path, device="cpu", custom_objects={k: given[k] for k in pickled})
    except Exception as e:   # a torch unpickling refusal, a missing tensor, a shape mismatch, ...
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()   # torch colours its messages
        first = text.splitlines()[0] if text else ""
        raise refuse(f"{type(e).__name__}{': ' + first[:300] if first else ''}") from None
    import torch

    # a NaN weight makes every action the same (argmax of NaN) and every probability NaN: refused, not played
    bad = next((name for name, t in model.policy.state_dict().items()
                if torch.is_floating_point(t) and not torch.isfinite(t).all()), None)
    if bad is not None:
        raise refuse(f"its weights {bad!r} hold NaN or infinite values")
    return model


def _check_spaces(model_path: Path, data: dict[str, Any], observation_space, action_space) -> None:
    """The spaces the model was saved with (their JSON summary, read without unpickling) against the env's."""
    obs, act = data["observation_space"], data["action_space"]
    shape = obs.get("_shape") if isinstance(obs, dict) else None
    n = act.get("n") if isinstance(act, dict) else None
    if (shape is not None and tuple(shape) != tuple(observation_space.shape)) or (
            n is not None and int(n) != int(getattr(action_space, "n", -1))):
        raise ConfigError("model", str(model_path), f"was trained for other spaces: observation shape {shape}, "
                          f"{n} actions; the env of its config has {_space(observation_space)}, {_space(action_space)}")
