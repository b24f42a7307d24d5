"""transformers / TRL ``trainer_state.json``: one run per output folder.

``log_history`` is a list of entries, each with a ``step``. An entry with a
key starting ``eval_`` is an evaluation: its numeric ``eval_*`` keys are the
run's eval metrics (the timing keys ``eval_runtime``,
``eval_samples_per_second``, ``eval_steps_per_second`` are not). Every other
entry is a training log (``loss``, ``grad_norm``, DPO's ``rewards/margins``,
GRPO's ``reward`` and ``kl``); the end-of-training summary (the entry with
``train_runtime``) is skipped. Entries of one step merge.

The run's own metric: ``metric_for_best_model`` is not stored in the state,
but ``best_metric`` is its value at the best checkpoint (``best_global_step``
where the state has it, else the ``N`` of ``best_model_checkpoint``'s
``checkpoint-N``): the eval key whose value at that step equals
``best_metric`` is the metric, and the direction is the one in which that value
is the run's extreme (``greater_is_better`` is not stored either).

Runs: the Trainer writes ``trainer_state.json`` into every ``checkpoint-N``
folder and, at the end, into the output folder itself. Every state of one
output folder (the folder itself, its ``checkpoint-N`` and ``last-checkpoint``
folders) is one run: the state with the most steps is read (the output
folder's own on a tie), the others not, so nothing is counted twice.
"""

from __future__ import annotations

import json
import math
import os
import re

from .record import LogError, RunLog, check_not_lfs, series_from_rows

TIMING_KEYS = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second")
_CHECKPOINT = re.compile(r"checkpoint-(\d+)$")


def _numeric(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def load(path: str) -> dict:
    """The state dict of a ``trainer_state.json`` (NaN and Infinity, as Python writes them, allowed)."""
    from ..files import open_text

    check_not_lfs(path)
    with open_text(path, LogError, "trainer state") as f:
        try:
            state = json.load(f)
        except (json.JSONDecodeError, RecursionError, UnicodeDecodeError) as e:
            raise LogError(path, None, f"not valid JSON ({getattr(e, 'msg', type(e).__name__)})") from None
    if not isinstance(state, dict) or not isinstance(state.get("log_history"), list):
        raise LogError(path, None, "no log_history list (is this a transformers trainer_state.json?)")
    return state


def run_folder(path: str) -> str:
    """The output folder a state belongs to (the parent of a ``checkpoint-N`` / ``last-checkpoint`` folder)."""
    folder = os.path.dirname(os.path.abspath(path))
    if _CHECKPOINT.search(os.path.basename(folder)) or os.path.basename(folder) == "last-checkpoint":
        return os.path.dirname(folder)
    return folder


def group_states(paths: list[str]) -> list[list[str]]:
    """The states of ``paths`` grouped by output folder, one group per run (``<run>.trainer_state.json``
    files, as ``curves generate --backend trl`` keeps them, are runs of their own)."""
    groups: dict[str, list[str]] = {}
    for p in paths:
        key = p if os.path.basename(p) != "trainer_state.json" else run_folder(p)
        groups.setdefault(key, []).append(p)
    return [sorted(g) for _, g in sorted(groups.items())]


def read_output_folder(paths: list[str]) -> RunLog:
    """The run of one output folder's states: the one with the most steps (module docstring)."""
    if len(paths) == 1:
        return read_state(paths[0])
    folder = run_folder(paths[0])

    def steps(p):
        try:
            s = load(p)
        except LogError:
            return (-1, 0)
        g = s.get("global_step")
        return (g if _numeric(g) else -1, os.path.dirname(os.path.abspath(p)) == folder)

    best = max(paths, key=steps)
    run = read_state(best)
    skipped = len(paths) - 1
    return RunLog(**{**run.__dict__, "notes": run.notes + (f"latest of {len(paths)} states in its output "
                                                                  f"folder ({skipped} earlier not counted)",)})


GENERIC_FOLDERS = ("results", "outputs", "output", "out", "checkpoints", "runs", "model", "trainer_output")


def _name(path: str) -> str:
    """``<run>`` of ``<run>.trainer_state.json``; else the output folder's name, with its parent's where the
    name says nothing (``results``, ``outputs``)."""
    prefix = os.path.basename(path)[:-len("trainer_state.json")].rstrip("._-")
    if prefix:
        return prefix
    folder = run_folder(path)
    name = os.path.basename(folder) or "run"
    if name.lower() in GENERIC_FOLDERS and os.path.basename(os.path.dirname(folder)):
        return f"{os.path.basename(os.path.dirname(folder))}/{name}"
    return name


def read_state(path: str) -> RunLog:
    """One run from one ``trainer_state.json`` (module docstring)."""
    state = load(path)
    rows: dict[float, dict[str, float]] = {}
    evals: set[str] = set()
    for i, entry in enumerate(state["log_history"]):
        if not isinstance(entry, dict) or not _numeric(entry.get("step")):
            raise LogError(path, None, f"log_history[{i}] is not an object with a numeric 'step'")
        if "train_runtime" in entry:
            continue
        values = {k: float(v) for k, v in entry.items() if k not in ("step", "epoch") and _numeric(v)
                  and k not in TIMING_KEYS}
        if any(k.startswith("eval_") for k in values):
            evals.update(k for k in values if k.startswith("eval_"))
        rows.setdefault(float(entry["step"]), {}).update(values)
    series = series_from_rows(rows)
    own, mode = own_metric(state, series, sorted(evals & set(series)))
    max_steps = state.get("max_steps")
    return RunLog(name=_name(path), source=path, fmt="trainer_state", series=series,
                  evals=tuple(sorted(evals & set(series))), own_metric=own, own_mode=mode,
                  max_steps=float(max_steps) if _numeric(max_steps) and max_steps > 0 else None)


def best_step(state: dict) -> float | None:
    """The step of the best checkpoint: ``best_global_step``, else ``checkpoint-N`` of
    ``best_model_checkpoint`` (either path separator), else None."""
    step = state.get("best_global_step")
    if _numeric(step):
        return float(step)
    ckpt = state.get("best_model_checkpoint")
    if isinstance(ckpt, str):
        m = _CHECKPOINT.search(ckpt.replace("\\", "/").rstrip("/"))
        if m:
            return float(m.group(1))
    return None


def own_metric(state: dict, series: dict, evals: list[str]) -> tuple[str | None, str | None]:
    """``(metric_for_best_model, "max" | "min")`` as the state records them (module docstring), or
    ``(None, None)`` when it does not (no ``best_metric``, or no eval key takes that value)."""
    best = state.get("best_metric")
    if not _numeric(best) or not math.isfinite(best):
        return None, None
    at = best_step(state)

    def equal(a, b):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)

    found = [k for k in evals if at is not None and any(equal(s, at) and equal(v, best)
                                                        for s, v in zip(*series[k]))]
    if not found:   # the best step is not in the log (a pruned history): the key whose extreme it is
        found = [k for k in evals if equal(series[k][1].max(), best) or equal(series[k][1].min(), best)]
    if len(found) != 1:
        return None, None
    key = found[0]
    values = series[key][1]
    hi, lo = equal(values.max(), best), equal(values.min(), best)
    return key, ("max" if hi and not lo else "min" if lo and not hi else None)
