"""The shape of a ``bench`` results file, checked before anything in it is used.

A results file (``OUT/results.json``; the tuning a ``--tuned`` file or a
``--leaderboard-run`` folder's ``tuned/results.json`` holds) is read with the
package's JSON reader (:func:`evalstop_gym.files.load_json`): a regular file of
at most :data:`MAX_RESULTS_BYTES`, strict JSON, nested at most
:data:`~evalstop_gym.files.MAX_NESTING` levels, at most
:data:`MAX_RESULTS_VALUES` values. Then every key the bench reads is checked
here against :data:`RESULTS` (types, the metric names, lengths of strings and
lists), and the parts that must agree with each other (each scorecard's references
and its rows against each) are checked by :func:`check_results`. A file that does not fit
is one line naming the file, the place in it (``policies[2].vs['no stopper']``)
and what was expected, never a ``KeyError`` or ``TypeError`` later.

Nothing here imports what a file names: policy names are checked by
:func:`evalstop_gym.bench.policies.check_file_names` where a file's policy is about to be played.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ..files import DataFileError, load_json
from .arms import EVALSTOP_K2, NO_STOPPER
from .play import COUNTS, METRICS
from .policies import BUILTIN, LEARNED_KIND, USER

# A full leaderboard's scored results (70-odd policies x 19 rows, per-seed values kept) is about 10 MB and
# 500,000 values; these leave room for a suite several times larger while keeping the parsed file under
# about 1 GB of memory.
MAX_RESULTS_BYTES = 64 * 2**20
MAX_RESULTS_VALUES = 5_000_000
MAX_TEXT = 100_000          # characters of one string (a label, a recorded command)
MAX_ITEMS = 1_000_000       # entries of one list or mapping


class ResultsFileError(DataFileError):
    """A bench results file that does not fit its schema."""

    field_name = "results"


class _Misfit(Exception):
    """Where in the file (``policies[2].label``) and what was expected."""

    def __init__(self, where: str, expected: str, value: Any):
        shown = repr(value) if isinstance(value, (int, float, bool, type(None))) or (
            isinstance(value, str) and len(value) <= 40) else type(value).__name__
        super().__init__(f"{where or 'the top level'}: must be {expected}, not {shown}")


# -- the building blocks: each checks one value and names where it sits -----------------------------------

def _check(spec, value: Any, where: str) -> None:
    if isinstance(spec, str):
        _SCALARS[spec](value, where)
    else:
        spec.check(value, where)


def _text(value, where):
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise _Misfit(where, f"a string of at most {MAX_TEXT} characters", value)


def _number(value, where):
    # an integer is bounded before math.isfinite, which cannot convert one of 400 digits to a float
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, int) and abs(value) > 2**63) or not math.isfinite(value):
        raise _Misfit(where, "a finite number", value)


def _maybe_number(value, where):
    if value is not None:
        try:
            _number(value, where)
        except _Misfit:
            raise _Misfit(where, "a finite number or null", value) from None


def _count(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**12:
        raise _Misfit(where, "a whole number in [0, 1e12]", value)


def _flag(value, where):
    if not isinstance(value, bool):
        raise _Misfit(where, "true or false", value)


def _scalar(value, where):   # a policy parameter: as `--policy NAME:k=v` reads it (JSON scalars)
    if value is not None and not isinstance(value, (bool, str)):
        _number(value, where)
    elif isinstance(value, str):
        _text(value, where)


_SCALARS = {"text": _text, "number": _number, "number?": _maybe_number, "count": _count, "flag": _flag,
            "scalar": _scalar}


@dataclass(frozen=True)
class OneOf:
    choices: tuple

    def check(self, value, where):
        if not isinstance(value, str) or value not in self.choices:
            raise _Misfit(where, f"one of {', '.join(map(repr, self.choices))}", value)


@dataclass(frozen=True)
class Const:
    value: Any

    def check(self, value, where):
        if type(value) is not type(self.value) or value != self.value:
            raise _Misfit(where, repr(self.value), value)


@dataclass(frozen=True)
class Maybe:
    spec: Any

    def check(self, value, where):
        if value is not None:
            _check(self.spec, value, where)


@dataclass(frozen=True)
class ListOf:
    spec: Any
    length: int | None = None   # exactly this many, else at most MAX_ITEMS

    def check(self, value, where):
        if not isinstance(value, list) or len(value) > MAX_ITEMS or (
                self.length is not None and len(value) != self.length):
            n = f"of {self.length}" if self.length is not None else f"of at most {MAX_ITEMS}"
            raise _Misfit(where, f"a list {n}", value)
        for i, v in enumerate(value):
            _check(self.spec, v, f"{where}[{i}]")


@dataclass(frozen=True)
class MapOf:
    spec: Any

    def check(self, value, where):
        if not isinstance(value, dict) or len(value) > MAX_ITEMS:
            raise _Misfit(where, f"a mapping of at most {MAX_ITEMS} entries", value)
        for k, v in value.items():
            _text(k, f"{where} key")
            _check(self.spec, v, f"{where}[{k[:40]!r}]")


@dataclass(frozen=True)
class Record:
    """A mapping with these keys (``optional`` ones may be absent). Other keys are kept and never read (a key a
    later version adds): the file's size, value and nesting caps bound them."""

    required: Mapping[str, Any]
    optional: Mapping[str, Any] = None

    def check(self, value, where):
        if not isinstance(value, dict):
            raise _Misfit(where, "a mapping with keys " + ", ".join(self.required), value)
        missing = [k for k in self.required if k not in value]
        if missing:
            raise _Misfit(where, f"a mapping with key {missing[0]!r}", f"{len(value)} keys without it")
        for k, spec in {**self.required, **(self.optional or {})}.items():
            if k in value:
                _check(spec, value[k], f"{where}.{k}" if where else k)


@dataclass(frozen=True)
class Interval:
    """``[low, high]``: two numbers, or two nulls (too few pairs for an interval)."""

    def check(self, value, where):
        ListOf("number?", 2).check(value, where)
        if (value[0] is None) != (value[1] is None):
            raise _Misfit(where, "two numbers or two nulls", "one of each")


def _metrics(spec, names=METRICS) -> Record:
    return Record({m: spec for m in names})


CHANGE = Record({"unit": OneOf(("%", "abs")), "n": "count", "change": "number?",
                 "ci": Interval(), "p": "number?"}, {"ci_boot": Interval(), "iqm": "number?"})
VERDICT = Record({"reference": "text", "metric": OneOf(METRICS), "change": "number?", "unit": OneOf(("%", "abs")),
                  "ci": Interval(), "p": "number?", "p_holm": "number?",
                  "verdict": OneOf(("better", "worse", "tie"))})
PER_SEED = MapOf(_metrics(ListOf("number?"), METRICS + COUNTS))   # row -> metric -> value per seed
CARD = Record({"policy": "text", "label": "text", "kind": OneOf((BUILTIN, USER, LEARNED_KIND)), "source": "text",
               "aggregate": _metrics("number?"), "per_row": MapOf(_metrics("number?")),
               "vs": MapOf(Record({"aggregate": _metrics(CHANGE), "per_row": MapOf(_metrics(CHANGE))})),
               "verdicts": ListOf(VERDICT), "per_seed": PER_SEED}, {"process": OneOf(("isolated", "in-process"))})
PARAMS = MapOf("scalar")
TRIAL = Record({"stopper": "text", "scheduler": "text", "params": PARAMS, "score": "number", "tie": "number",
                "feasible": "flag", "label": "text"})
FAMILY = Record({**TRIAL.required, "searched": ListOf("text"), "every_trial": ListOf(TRIAL)})
TUNING = Record({"rule": "text", "trials": "count", "validation_seeds_per_row": Maybe("count"),
                 "rows": ListOf("text"), "families": MapOf(FAMILY), "best": FAMILY}, {"per_scheduler": "flag"})
OUTSIDE_TUNING = Record({"rule": "text", "budget": "count", "searched": ListOf("text"), "every_trial": ListOf(TRIAL),
                         "best": TRIAL})
LEARNED_TRIAL = Record({"params": MapOf("number"), "score": "number", "feasible": "flag", "model": "text",
                        "label": "text"})
LEARNED_TUNING = Record({"rule": "text", "trials": "count", "validation_seeds_per_row": Maybe("count"),
                         "rows": ListOf("text"), "searched": ListOf("text"), "best": LEARNED_TRIAL,
                         "every_trial": ListOf(LEARNED_TRIAL), "family": "text"})
# Every key the bench reads is listed here (a reader of a new key adds it); other keys are kept, never read.
RESULTS = Record({"format": "count", "suite": "text", "suite_hash": "text", "version": "text", "code": "text",
                  "rows": ListOf("text"), "skipped": MapOf("text"), "references": MapOf("text"),
                  "reference_values": MapOf(PER_SEED), "tuning": Maybe(TUNING), "tuned_from": Maybe("text"),
                  "command": "text", "policies": ListOf(CARD)},
                 {"learned_tuning": LEARNED_TUNING, "trusted": ListOf("text"), "fingerprint": MapOf("text"),
                  "commit": "text", "uncommitted_changes": "flag", "date": "text", "versions": MapOf("text"),
                  "in_process": "flag", "outside_tuning": MapOf(OUTSIDE_TUNING)})


def check_results(data: Any) -> None:
    """Raise ``_Misfit`` unless ``data`` fits :data:`RESULTS` and its parts agree (module docstring)."""
    _check(RESULTS, data, "")
    refs = set(data["references"])
    if not {NO_STOPPER, EVALSTOP_K2} <= refs:
        raise _Misfit("references", f"a mapping holding {NO_STOPPER!r} and {EVALSTOP_K2!r}", ", ".join(sorted(refs)))
    for i, card in enumerate(data["policies"]):
        where = f"policies[{i}]"
        if set(card["vs"]) != refs:
            raise _Misfit(f"{where}.vs", f"one entry per reference ({', '.join(sorted(refs))})",
                          ", ".join(sorted(card["vs"])))
        for ref, vs in card["vs"].items():
            if set(vs["per_row"]) != set(card["per_row"]):
                raise _Misfit(f"{where}.vs[{ref[:40]!r}].per_row", "the scorecard's own rows", len(vs["per_row"]))


def read_results(path) -> dict[str, Any]:
    """The results file at ``path``, within the size limits and fitting :data:`RESULTS`; else
    :class:`ResultsFileError` (one line)."""
    what = "bench results file"
    data = load_json(path, ResultsFileError, what, MAX_RESULTS_BYTES, max_values=MAX_RESULTS_VALUES)
    try:
        check_results(data)
    except _Misfit as e:
        raise ResultsFileError(path, None, f"{e}: not a {what}") from None
    return data
