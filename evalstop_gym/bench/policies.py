"""What ``bench --policy`` accepts, as one :class:`BenchPolicy`: a built-in name, a user's class, or a saved model.

* ``SCHEDULER+STOPPER[:k=v,...]``: registered names (``srtf-est+evalstop:k=2``); ``STOPPER`` alone
  runs over SRTF-Est (or the ``scheduler`` given), ``SCHEDULER`` alone without a stopper.
* ``module:Class``: a :class:`~evalstop_gym.policy.Scheduler` or :class:`~evalstop_gym.policy.Stopper`
  subclass in an importable module (``mypkg.rules:MyStopper``); either side of ``+`` may be one
  (``fifo+mypkg.rules:MyStopper:window=4``). Importing the module runs its code: name only your own.
  A stopper class is built as ``Class(base_scheduler, **params)``, a scheduler class as ``Class()``.
  The module's source is hashed into every run id, so editing it re-runs its rows.
* a saved model folder (or its ``model.zip``): loaded by the learned layer's provider
  (:mod:`evalstop_gym.experiments.learned`), never by this package.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ..api import DEFAULT_SCHEDULER
from ..config import ConfigError

BUILTIN, USER, LEARNED_KIND = "built-in", "module:Class", "saved model"
_CLASS = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True)
class BenchPolicy:
    """One policy to score: ``stopper(scheduler)`` with ``params``, as the runner names them."""

    text: str                               # as the user wrote it
    label: str                              # as tables show it
    kind: str                               # BUILTIN, USER or LEARNED_KIND
    scheduler: str
    stopper: str
    params: tuple[tuple[str, Any], ...] = ()
    source: str = ""                        # hash of a user class's module source ("" otherwise)


def _params(text: str, items: str) -> dict[str, Any]:
    """``k=2,z=1.5`` -> ``{"k": 2, "z": 1.5}`` (values read as JSON where they parse, else kept as text)."""
    out: dict[str, Any] = {}
    for item in filter(None, items.split(",")):
        key, eq, value = (x.strip() for x in item.partition("="))
        if not eq or not key:
            raise ConfigError("policy", text, "parameters are written NAME:key=value,key=value")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def is_model_path(text: str) -> bool:
    """A saved model: a folder, a path with a separator, or a ``.zip``."""
    return any(sep in text for sep in {"/", os.sep}) or Path(text).suffix == ".zip" or Path(text).is_dir()


def user_class(name: str):
    """The class ``module:Class`` names (a Scheduler or Stopper subclass), or :class:`ConfigError`."""
    from ..policy import Scheduler, Stopper

    module, _, attr = name.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise ConfigError("policy", name, f"module {module!r} cannot be imported ({e})") from None
    cls = getattr(mod, attr, None)
    if not (inspect.isclass(cls) and issubclass(cls, (Scheduler, Stopper))):
        raise ConfigError("policy", name, f"{module} has no Scheduler or Stopper subclass named {attr!r}")
    return cls


def source_hash(name: str) -> str:
    """Hash of the source file of ``module:Class``'s module."""
    mod = importlib.import_module(name.partition(":")[0])
    path = inspect.getsourcefile(mod)
    data = Path(path).read_bytes() if path else repr(mod).encode()
    return hashlib.sha256(data).hexdigest()[:12]


def build(scheduler: str, stopper: str, params: dict[str, Any]):
    """The policy object of runner names, user classes included (what each run plays)."""
    from ..baselines import SCHEDULERS, STOPPERS, make_policy

    if not (_CLASS.match(scheduler) or _CLASS.match(stopper)):
        return make_policy(scheduler, stopper, **params)
    base = user_class(scheduler)() if _CLASS.match(scheduler) else SCHEDULERS[scheduler]()
    if stopper == "none":
        if params:
            raise ConfigError("policy", scheduler, f"parameters {sorted(params)} need a stopper")
        return base
    return (user_class(stopper) if _CLASS.match(stopper) else STOPPERS[stopper])(base, **params)


def _is_stopper(part: str) -> bool:
    from ..baselines import STOPPERS
    from ..policy import Stopper

    return part in STOPPERS or (bool(_CLASS.match(part)) and issubclass(user_class(part), Stopper))


def parse_policy(text: str, scheduler: str = DEFAULT_SCHEDULER) -> BenchPolicy:
    """The :class:`BenchPolicy` of one ``--policy`` value (``ConfigError`` naming what is allowed); a stopper
    named alone, and a saved stop-policy, run over ``scheduler``."""
    from ..baselines import SCHEDULERS, STOPPERS

    if not isinstance(text, str) or not text.strip():
        raise ConfigError("policy", text, "must be a policy name, module:Class or a model folder")
    text = text.strip()
    if is_model_path(text):
        from ..experiments.learned import provider

        arm, own = provider().arm(text)
        # the folder's name tells two models of one kind apart (two recipes of the same algorithm)
        folder = Path(text).parent if Path(text).suffix == ".zip" else Path(text)
        label = f"{arm.label} [{folder.resolve().name}]" + ("" if own else f" over {scheduler}")
        return BenchPolicy(text, label, LEARNED_KIND, own or scheduler, arm.stopper, arm.params)
    head, params = text, {}
    last = text.rsplit(":", 1)
    if len(last) == 2 and "=" in last[1]:
        head, params = last[0], _params(text, last[1])
    parts = head.split("+")
    allowed = (f"schedulers {', '.join(SCHEDULERS)}; stoppers {', '.join(STOPPERS)}; SCHEDULER+STOPPER; "
               "module:Class; or a saved model folder")
    for part in parts:
        if part not in SCHEDULERS and part not in STOPPERS and not _CLASS.match(part):
            raise ConfigError("policy", text, f"{part!r} is not a policy: {allowed}")
    if len(parts) == 1:
        sched, stop = (scheduler, parts[0]) if _is_stopper(parts[0]) else (parts[0], "none")
    elif len(parts) == 2 and not _is_stopper(parts[0]) and _is_stopper(parts[1]):
        sched, stop = parts
    else:
        raise ConfigError("policy", text, f"must be at most one scheduler then one stopper: {allowed}")
    try:   # bad parameters fail now, not in the first run
        build(sched, stop, params)
    except TypeError as e:
        raise ConfigError("policy", text, f"its parameters do not fit: {e}") from None
    user = [p for p in (sched, stop) if _CLASS.match(p)]
    label = " + ".join([sched, *([stop] if stop != "none" else [])]) + "".join(
        f" {k}={v}" for k, v in sorted(params.items()))
    return BenchPolicy(text, label, USER if user else BUILTIN, sched, stop, tuple(sorted(params.items())),
                       "-".join(source_hash(p) for p in user))


def parse_policies(texts: Sequence[str], scheduler: str = DEFAULT_SCHEDULER) -> list[BenchPolicy]:
    """The policies of several ``--policy`` values, each once: the same policy named twice (``evalstop`` and
    ``srtf-est+evalstop``, a model's folder and its ``model.zip``) is a :class:`ConfigError`; two that share a
    label (saved models of one kind in folders of one name) get their ``--policy`` text appended to it."""
    policies = [parse_policy(t, scheduler) for t in texts]
    if len({(p.scheduler, p.stopper, p.params, p.source) for p in policies}) != len(policies):
        raise ConfigError("policy", list(texts), "lists the same policy twice")
    labels = [p.label for p in policies]
    return [replace(p, label=f"{p.label} [{p.text}]") if labels.count(p.label) > 1 else p for p in policies]


def builtin(scheduler: str, stopper: str = "none", **params: Any) -> BenchPolicy:
    """A registered pair as a policy (the reference arms and the tuner's trials)."""
    text = f"{scheduler}+{stopper}" + (":" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(params.items()))
                                       if params else "")
    return parse_policy(text)
