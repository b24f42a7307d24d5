"""Read a transformers / TRL ``trainer_state.json`` (its ``log_history``) as a curve log, so a real Trainer
run replays in the simulator (``--curves trainer_state.json``).

``log_history`` is a list of dicts, each with a ``step``. An entry with a key
starting ``eval_`` is an eval: ``eval_score`` is its first key present among
:data:`EVAL_SCORE_KEYS` (the project's own ``eval_score``, then TRL's
``eval_reward``, then ``eval_accuracy``); every other numeric ``eval_X``
becomes the extra column ``X`` (``eval_gold`` -> ``gold``, ``eval_kl`` ->
``kl``), except ``eval_items`` (the eval's n), kept under that name. Any
other entry is a training log: ``loss`` is ``train_loss``, the first key among
:data:`PROXY_KEYS` is ``proxy_reward`` (GRPO / RLOO ``reward``, DPO
``rewards/margins``) and every other numeric key ``Y`` becomes ``train_Y``
(GRPO's ``kl`` -> ``train_kl``). The end-of-training summary (the entry with
``train_runtime``) is skipped. Entries of one step merge into one row.

A file named ``<run>.trainer_state.json`` (as ``curves generate --backend
trl`` keeps them) holds run ``<run>``; a ``trainer_state.json`` is named by the
folder holding it (its parent's name for a ``checkpoint-N`` folder); or pass
``name``.
"""

from __future__ import annotations

import json
import os

EVAL_SCORE_KEYS = ("eval_score", "eval_reward", "eval_accuracy")
PROXY_KEYS = ("reward", "rewards/margins", "objective/scores")


def is_trainer_state(path) -> bool:
    """Whether ``path`` names a Trainer state file (``trainer_state.json``, or ``<run>.trainer_state.json``)."""
    return os.path.basename(os.fspath(path)).endswith("trainer_state.json")


def _run_name(path: str) -> str:
    prefix = os.path.basename(path)[:-len("trainer_state.json")].rstrip("._-")
    if prefix:
        return prefix
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(folder).startswith("checkpoint-"):
        folder = os.path.dirname(folder)
    return os.path.basename(folder) or "run"


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def state_records(state: dict, name: str, where: str = "trainer state") -> list[dict]:
    """Curve-log records (``job``, ``step`` and columns) of a Trainer state's ``log_history``, one per step
    (a step's entries merged, later keys winning), in order of each step's first entry."""
    from .curvelog import CurveLogError

    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise CurveLogError(where, None, "no log_history list (is this a transformers trainer_state.json?)")
    by_step: dict = {}
    for i, entry in enumerate(history):
        if not isinstance(entry, dict) or "step" not in entry:
            raise CurveLogError(where, None, f"log_history[{i}] is not an object with a 'step'")
        if "train_runtime" in entry:
            continue
        row = {"job": name, "step": entry["step"]}
        values = {k: v for k, v in entry.items() if k != "step" and _numeric(v)}
        if any(k.startswith("eval_") for k in values):
            score = next((k for k in EVAL_SCORE_KEYS if k in values), None)
            if score is not None:
                row["eval_score"] = values.pop(score)
            for k, v in values.items():
                row[k if k == "eval_items" else k[len("eval_"):] if k.startswith("eval_") else k] = v
        else:
            if "loss" in values:
                row["train_loss"] = values.pop("loss")
            proxy = next((k for k in PROXY_KEYS if k in values), None)
            if proxy is not None:
                row["proxy_reward"] = values.pop(proxy)
            row.update({"train_" + k: v for k, v in values.items() if k != "epoch"})
        by_step.setdefault(_step_key(row["step"]), {}).update(row)
    return list(by_step.values())


def _step_key(step):
    return step if _numeric(step) else str(step)


def state_runs(state: dict, name: str, where: str = "trainer state") -> dict:
    """``{name: LoggedRun}`` of a Trainer state (a dict as ``trainer_state.json`` holds it)."""
    from .curvelog import _Collector

    col = _Collector(where)
    for i, record in enumerate(state_records(state, name, where)):
        record.setdefault("eval_score", None)
        col.add(record, i + 1)
    return col.runs()


def read_trainer_state(path, name: str | None = None) -> dict:
    """``{run name: LoggedRun}`` of one ``trainer_state.json`` (module docstring)."""
    from .curvelog import CurveLogError
    from .files import open_text

    path = os.fspath(path)
    with open_text(path, CurveLogError, "trainer state") as f:
        try:
            state = json.load(f)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as e:
            raise CurveLogError(path, None, f"not valid JSON ({getattr(e, 'msg', type(e).__name__)})") from None
    return state_runs(state, name or _run_name(path), path)
