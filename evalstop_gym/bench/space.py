"""An outside policy's search space: what a stopper class declares for ``bench --tune`` (docs/bench.md).

Kept apart from :mod:`.tune` because it is read where the class's module may be
imported: in the policy's own process (:mod:`.isolate`), or with ``--in-process``.
"""

from __future__ import annotations

from typing import Sequence

from ..config import ConfigError


def optuna_module():
    """Optuna, quiet, or :class:`~evalstop_gym.extras.MissingExtra` naming the extra to install."""
    try:
        import optuna
    except ModuleNotFoundError as e:
        from ..extras import MissingExtra

        raise MissingExtra("bench --tune needs Optuna (the 'live' extra): pip install 'evalstop-gym[live]'") from e
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


# An outside policy's search space: a documented class attribute of its stopper class (docs/bench.md).
SEARCH_SPACE = "search_space"


def declared_space(cls) -> dict[str, str]:
    """The search space a stopper class declares (:data:`SEARCH_SPACE`: a dict, or a function returning one,
    of parameter -> an Optuna distribution or ``(low, high)``, ``(low, high, "log")``, ``(low, high, "int")``),
    as parameter -> Optuna's JSON of the distribution (it crosses a process boundary); ``{}`` if none."""
    import inspect

    optuna = optuna_module()
    dist = optuna.distributions
    space = getattr(cls, SEARCH_SPACE, None)
    if space is None:
        return {}
    where = f"{cls.__module__}:{cls.__name__}.{SEARCH_SPACE}"
    if callable(space):
        space = space()
    allowed = "a dict of parameter -> Optuna distribution or (low, high[, 'log' | 'int'])"
    if not isinstance(space, dict) or not space:
        raise ConfigError(where, type(space).__name__, allowed)
    takes = inspect.signature(cls).parameters
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes.values())
    out = {}
    for name, d in space.items():
        if not open_ended and name not in takes:
            raise ConfigError(f"{where}[{name!r}]", name, f"is not a parameter of {cls.__name__} "
                                                          f"(it takes: {', '.join(list(takes)[1:])})")
        if isinstance(d, tuple) and len(d) in (2, 3) and all(isinstance(x, (int, float)) for x in d[:2]):
            kind = d[2] if len(d) == 3 else None
            if kind not in (None, "log", "int") or not d[0] < d[1]:
                raise ConfigError(f"{where}[{name!r}]", d, "must be (low, high) with low < high, then 'log' or 'int'")
            d = dist.IntDistribution(int(d[0]), int(d[1])) if kind == "int" else \
                dist.FloatDistribution(float(d[0]), float(d[1]), log=kind == "log")
        if not isinstance(d, dist.BaseDistribution):
            raise ConfigError(f"{where}[{name!r}]", d, allowed)
        out[name] = dist.distribution_to_json(d)
    return out


def spaces_of(policies: Sequence) -> dict[str, dict[str, str]]:
    """label -> :func:`declared_space` of each policy whose stopper is an outside class that declares one.
    Imports those classes' modules: call it where outside code may run (:mod:`.isolate`, or ``--in-process``)."""
    from .policies import USER, user_class

    out = {}
    for p in policies:
        if p.kind == USER and ":" in p.stopper:
            space = declared_space(user_class(p.stopper))
            if space:
                out[p.label] = space
    return out
