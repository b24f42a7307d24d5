"""What ``bench --policy`` accepts, as one :class:`BenchPolicy`: a built-in name, a user's class, or a saved model.

* ``SCHEDULER+STOPPER[:k=v,...]``: registered names (``srtf-est+evalstop:k=2``); ``STOPPER`` alone
  runs over SRTF-Est (or the ``scheduler`` given), ``SCHEDULER`` alone without a stopper.
* ``module:Class``: a :class:`~evalstop_gym.policy.Scheduler` or :class:`~evalstop_gym.policy.Stopper`
  subclass in an importable module (``mypkg.rules:MyStopper``); either side of ``+`` may be one
  (``fifo+mypkg.rules:MyStopper:window=4``). Importing the module runs its code: name only your own.
  A stopper class is built as ``Class(base_scheduler, **params)``, a scheduler class as ``Class()``.
  The module's source is hashed into every run id, so editing it re-runs its rows.
  Only the command line names a module: a policy read from a file (a results file's tuning) is a
  registered name, or a ``module:Class`` given with ``--policy`` on the same command line, checked by
  :func:`check_file_names` before anything is imported (``--trust FILE`` allows the modules of that file).
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
from typing import Any, Collection, Mapping, Sequence

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


def _split(text: str) -> tuple[list[str], dict[str, Any]]:
    """``fifo+mod:Cls:k=2`` -> ``(["fifo", "mod:Cls"], {"k": 2})``, as written: nothing looked up."""
    head, params = text, {}
    last = text.rsplit(":", 1)
    if len(last) == 2 and "=" in last[1]:
        head, params = last[0], _params(text, last[1])
    return head.split("+"), params


def modules_named(texts: Sequence[str]) -> set[str]:
    """The modules the ``module:Class`` parts of ``--policy`` texts name (a saved model's path names none)."""
    return {part.partition(":")[0] for t in texts if isinstance(t, str) and not is_model_path(t.strip())
            for part in _split(t.strip())[0] if _CLASS.match(part)}


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
    parts, params = _split(text)
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


_KEY = re.compile(r"^[A-Za-z_]\w{0,63}$")


def _pair_text(scheduler: str, stopper: str, params: dict[str, Any]) -> str:
    """``SCHEDULER+STOPPER:k=v,...``; a key or value that would change how the text splits is refused."""
    for k, v in params.items():
        if not isinstance(k, str) or not _KEY.match(k):
            raise ConfigError("params", k, "a parameter name is a Python identifier of at most 64 characters")
        if not (v is None or isinstance(v, (bool, int, float))) and not (
                isinstance(v, str) and len(v) <= 1000 and not set(v) & set(",+:=")):
            raise ConfigError(f"params.{k}", v, "must be a number, true, false, null or a short string "
                                                "without , + : =")
    return f"{scheduler}+{stopper}" + (":" + ",".join(f"{k}={json.dumps(v)}" for k, v in sorted(params.items()))
                                       if params else "")


def builtin(scheduler: str, stopper: str = "none", **params: Any) -> BenchPolicy:
    """A registered pair as a policy (the reference arms and the tuner's trials); any other name is a
    :class:`ConfigError`, raised before anything is looked up."""
    from ..baselines import SCHEDULERS, STOPPERS

    if scheduler not in SCHEDULERS or (stopper != "none" and stopper not in STOPPERS):
        bad = scheduler if scheduler not in SCHEDULERS else stopper
        raise ConfigError("policy", bad, f"is not a registered pair (nothing was imported): schedulers "
                                         f"{', '.join(SCHEDULERS)}; stoppers {', '.join(STOPPERS)}")
    return parse_policy(_pair_text(scheduler, stopper, params))


def _tuning_entries(tuning: Mapping[str, Any]):
    """``(place, entry)`` of every scheduler/stopper pair a tuning names: its best, each family, each trial."""
    yield "tuning.best", tuning["best"]
    for fam, f in tuning["families"].items():
        yield f"tuning.families[{fam[:40]!r}]", f
        for i, t in enumerate(f.get("every_trial") or ()):
            yield f"tuning.families[{fam[:40]!r}].every_trial[{i}]", t


def _check_names(entry: Mapping[str, Any], where: str, path, allowed: Collection[str] | None) -> None:
    from ..baselines import SCHEDULERS, STOPPERS

    for side, registered in (("scheduler", SCHEDULERS), ("stopper", STOPPERS)):
        name = entry[side]
        if name in registered or (isinstance(name, str) and _CLASS.match(name) and (
                allowed is None or name.partition(":")[0] in allowed)):
            continue
        raise ConfigError(f"{path}: {where}.{side}", name,
                          f"a file names registered policies ({', '.join(registered)}) or a module:Class given "
                          f"with --policy on this command line; nothing was imported (--trust {path} allows "
                          "the modules it names)")


def check_file_names(tuning: Mapping[str, Any], path, allowed: Collection[str] | None) -> None:
    """Refuse a tuning read from file ``path`` (a results file's, fitting :mod:`.schema`) that names a scheduler
    or stopper that is neither registered nor a ``module:Class`` whose module is in ``allowed`` (those given
    with ``--policy`` on this command line; ``None``: any, the file is trusted). Names are read as text:
    nothing is imported, whatever the answer."""
    for where, entry in _tuning_entries(tuning):
        _check_names(entry, where, path, allowed)


def file_policy(entry: Mapping[str, Any], where: str, path, allowed: Collection[str] | None) -> BenchPolicy:
    """The policy of ``{"scheduler", "stopper", "params"}`` read from file ``path`` (``where``: its place there),
    once its names pass :func:`check_file_names`' rule; :class:`ConfigError` naming the place otherwise."""
    from ..baselines import SCHEDULERS, STOPPERS

    _check_names(entry, where, path, allowed)
    sched, stop, params = entry["scheduler"], entry["stopper"], entry["params"]
    try:
        if sched in SCHEDULERS and stop in STOPPERS:
            return builtin(sched, stop, **params)
        return parse_policy(_pair_text(sched, stop, params))
    except ConfigError as e:
        raise ConfigError(f"{path}: {where}.{e.field}", e.value, e.allowed) from None
