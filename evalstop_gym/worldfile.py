"""World files: a calibration (:class:`evalstop_gym.config.Calibration`) as a YAML file.

A world file is what ``evalstop-gym calibrate`` writes and what ``--calibration FILE.yaml``
(``WorkloadConfig(calibration="world.yaml")``, ``gym.make(..., calibration="world.yaml")``) reads::

    format: evalstop-gym world 1
    description: fitted to ... (one line)
    noise: 0.0                 # Gaussian eval noise sigma added to every score
    gpus_per_node: 8           # the default cluster: nodes of this many GPUs (null: one flat pool)
    curves: {base: [0.5, 0.6], lr: [0.6, 1.7], ...}     # LatentModel fields (evalstop_gym.latent)
    world: {eval_items: [100], seed_noise_factor: [0.6, 0.9], ...}   # WorldModel fields
    provenance: {source: ..., sha256: ..., command: ..., version: ..., ...}   # free-form record

``curves`` and ``world`` may leave fields out (they take the dataclass defaults, which switch a
knob off); pairs are two-item lists. Loading checks every key and value: an unknown key is refused
by name, a bad value raises :class:`~evalstop_gym.config.ConfigError` naming the file, the field,
the value and what is allowed (every number has a range: ``LatentModel.RANGES``, ``WorldModel.RANGES``,
docs/reliability.md), and a key written twice is an error. A file is at most :data:`MAX_WORLD_BYTES`,
read in full each time and parsed once per content. ``provenance`` is kept as written and never read by the simulator.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Any

from .checks import ConfigError, check_range

FORMAT = "evalstop-gym world 1"
TOP_KEYS = ("format", "description", "noise", "gpus_per_node", "curves", "world", "provenance")
WORLD_SUFFIXES = (".yaml", ".yml")
MAX_WORLD_BYTES = 2**20   # a world file is about 2 KB; its provenance may hold a long command
# the optional knobs (None: off) that are one number, not a (low, high) pair
SCALAR_KNOBS = ("dpo_penalty_share", "dpo_drift", "drift_spread", "collapse_share", "kl_growth_loading",
                "collapse_drift")


def is_world_path(value: Any) -> bool:
    """Whether a ``calibration`` value names a world file rather than a named calibration."""
    return isinstance(value, (str, os.PathLike)) and os.fspath(value).lower().endswith(WORLD_SUFFIXES)


def world_key(value: str) -> str:
    """The folder name of a calibration's results (``results/<key>``): a name as it is, a file by its stem."""
    return os.path.splitext(os.path.basename(os.fspath(value)))[0] if is_world_path(value) else str(value)


def _pair(name: str, v: Any, kind=float) -> tuple:
    if not isinstance(v, (list, tuple)) or len(v) != 2:
        raise ConfigError(name, v, "must be a [low, high] pair of numbers")
    return tuple(_number(name, x, kind) for x in v)


def _number(name: str, v: Any, kind=float):
    # an integer of hundreds of digits is refused before math.isfinite, which cannot make it a float
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, int) and abs(v) > 2**63) or (
            not math.isfinite(v)) or (kind is int and not isinstance(v, int)):
        raise ConfigError(name, v, f"must be {'an integer' if kind is int else 'a finite number'}")
    return kind(v)


def _model(cls, section: str, data: Any):
    """A ``cls`` instance from a mapping of its fields, each converted to its default's shape."""
    if not isinstance(data, dict):
        raise ConfigError(section, data, f"must be a mapping of {cls.__name__} fields")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kw = {}
    for key, v in data.items():
        name = f"{section}.{key}"
        if key not in fields:
            raise ConfigError(name, v, f"unknown key; {cls.__name__} fields: {', '.join(fields)}")
        default = fields[key].default
        if key == "eval_items":
            if not isinstance(v, (list, tuple)):
                raise ConfigError(name, v, "must be a list of eval-set sizes (integers)")
            kw[key] = tuple(_number(name, x, int) for x in v)
        elif key == "checkpoint_gb":
            if not isinstance(v, (list, tuple)) or len(v) != len(default):
                raise ConfigError(name, v, f"must be a list of {len(default)} numbers (lora, dpo, rlhf)")
            kw[key] = tuple(_number(name, x) for x in v)
        elif default is None:   # an optional knob: null leaves it off
            kw[key] = None if v is None else _number(name, v) if key in SCALAR_KNOBS else _pair(name, v)
        elif isinstance(default, tuple):
            kw[key] = _pair(name, v)
        else:
            kw[key] = _number(name, v)
    model = cls(**kw)
    model.validate()
    return model


def calibration_fields(data: Any, curves_cls, world_cls) -> dict:
    """The :class:`~evalstop_gym.config.Calibration` fields of a world file's parsed mapping, validated;
    ``curves`` and ``world`` built as ``curves_cls`` and ``world_cls`` (``LatentModel``, ``WorldModel``:
    passed in, so that this module does not import the config, which reads world files through it)."""
    if not isinstance(data, dict):
        raise ConfigError("world file", type(data).__name__, f"must be a mapping with keys {', '.join(TOP_KEYS)}")
    for key in data:
        if key not in TOP_KEYS:
            raise ConfigError(str(key), data[key], f"unknown key; a world file holds {', '.join(TOP_KEYS)}")
    if data.get("format", FORMAT) != FORMAT:
        raise ConfigError("format", data["format"], f"must be {FORMAT!r}")
    for key in ("description", "noise", "curves", "world"):
        if key not in data:
            raise ConfigError(key, None, "is required in a world file")
    if not isinstance(data["description"], str) or not data["description"].strip():
        raise ConfigError("description", data["description"], "must be a non-empty string")
    noise = _number("noise", data["noise"])
    check_range("noise", noise, 0.0, 1.0)
    per_node = data.get("gpus_per_node")
    if per_node is not None:
        check_range("gpus_per_node", per_node, 1, 1_000_000, integer=True)
    if "provenance" in data and not isinstance(data["provenance"], dict):
        raise ConfigError("provenance", data["provenance"], "must be a mapping")
    return dict(description=" ".join(data["description"].split()), noise=noise,
                curves=_model(curves_cls, "curves", data["curves"]),
                world=_model(world_cls, "world", data["world"]), gpus_per_node=per_node)


def read_world(path, curves_cls, world_cls) -> dict:
    """:func:`calibration_fields` of a world file, read in full each time (at most
    :data:`~evalstop_gym.files.MAX_YAML_BYTES`) and parsed once per content: an edit that keeps the
    file's size and modification time is read again."""
    from .files import ConfigFileError, read_config_text

    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise ConfigError("calibration", path, "world file cannot be read (no such file)")
    text = read_config_text(path, ConfigFileError, "world file", MAX_WORLD_BYTES)
    return dict(_parse(path, text, curves_cls, world_cls))


@functools.lru_cache(maxsize=32)
def _parse(path: str, text: str, curves_cls, world_cls) -> dict:
    from .files import ConfigFileError, parse_yaml

    data = parse_yaml(text, path, ConfigFileError, "world file")
    try:
        return calibration_fields(data, curves_cls, world_cls)
    except ConfigError as e:
        if isinstance(e, ConfigFileError):
            raise
        raise ConfigError(f"{path}: {e.field}", e.value, e.allowed) from None


def rounded(cal, digits: int = 6):
    """``cal`` with every float of its curves, world and noise rounded to ``digits`` significant digits: a
    fitted world written the same on any machine (a fit's last bits follow the CPU's float rounding)."""
    def r(v):
        if isinstance(v, float) and math.isfinite(v) and v != 0.0:
            return float(f"{v:.{digits}g}")
        return tuple(r(x) for x in v) if isinstance(v, tuple) else v

    def model(m):
        return dataclasses.replace(m, **{f.name: r(getattr(m, f.name)) for f in dataclasses.fields(m)})

    return dataclasses.replace(cal, noise=r(float(cal.noise)), curves=model(cal.curves), world=model(cal.world))


def world_data(cal, provenance: dict | None = None) -> dict:
    """The mapping a world file holds for calibration ``cal`` (lists for pairs, in field order)."""
    def plain(model) -> dict:
        return {f.name: (list(v) if isinstance(v, tuple) else v)
                for f in dataclasses.fields(model) for v in [getattr(model, f.name)]}

    out = {"format": FORMAT, "description": cal.description, "noise": float(cal.noise),
           "gpus_per_node": cal.gpus_per_node, "curves": plain(cal.curves), "world": plain(cal.world)}
    if provenance:
        out["provenance"] = provenance
    return out


def dump_world(cal, provenance: dict | None = None, header: str = "") -> str:
    """The YAML text of a world file (floats written by ``repr``, so they load back bit for bit)."""
    import yaml

    class _Flow(yaml.SafeDumper):   # pairs on one line, sections as blocks
        pass

    _Flow.add_representer(list, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
    text = yaml.dump(world_data(cal, provenance), Dumper=_Flow, sort_keys=False, width=100, allow_unicode=False)
    return "".join(f"# {line}\n" for line in header.splitlines()) + text
