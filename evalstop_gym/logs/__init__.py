"""Readers of the training logs people have, one module per format, all returning :class:`RunLog`.

=====================================  ==============================  =============================
format                                 module                          one run is
=====================================  ==============================  =============================
transformers / TRL trainer_state.json  :mod:`.trainer_state`           an output folder (its latest
                                                                       state: nothing counted twice)
CSV / JSONL curve logs, Lightning      :mod:`.tables`                  a file (a curve log: its
``metrics.csv``, Ray Tune                                              ``job`` column's runs)
``progress.csv`` / ``result.json``,
W&B history CSV export
MLflow ``mlruns/``                     :mod:`.mlflow`                  a run folder
TensorBoard event files                :mod:`.tensorboard`             a folder of event files
=====================================  ==============================  =============================

:func:`read_logs` takes files, folders and globs; a folder is searched (a
bounded walk) for every log above, and every file that cannot be read is
refused with one line naming why, while the others are read. Which metric of a
run is judged, and which way it improves, is :mod:`.metric`'s (never a
reader's) choice.
"""

from __future__ import annotations

import glob
import os
from ..files import DataFileError
from .record import LogError, RunLog, check_not_lfs

def _expand(paths) -> list[str]:
    out = []
    for p in paths:
        p = os.fspath(p)
        if glob.has_magic(p):
            hits = sorted(glob.glob(p, recursive=True))
            if not hits:
                raise LogError(p, None, "no file matches this pattern")
            out.extend(hits)
        else:
            out.append(p)
    return out


def read_logs(paths) -> tuple[list[RunLog], list[LogError]]:
    """Every run under ``paths`` (files, folders, globs) and every file refused, with why.

    A path that does not exist is an error at once (a typo is not a refusal).
    """
    from . import mlflow, tensorboard, trainer_state

    runs: list[RunLog] = []
    refused: list[LogError] = []
    units, states = [], []   # every trainer state of every path, grouped by output folder at the end
    order: dict[str, int] = {}   # a file or folder -> the index of the path it was found under
    for i, path in enumerate(_expand(paths)):
        if not os.path.exists(path):
            raise LogError(path, None, "no such file or directory")
        if os.path.isdir(path):
            found, found_states = _units(path)
            if not found and not found_states:
                refused.append(LogError(path, None, "no training log here (trainer_state.json, *.csv, *.jsonl, "
                                                    "result.json, mlruns/ or TensorBoard event files)"))
        elif os.path.basename(path).endswith("trainer_state.json"):
            found, found_states = [], [path]
        else:
            found, found_states = [("file", path)], []
        for item in [u[1] for u in found] + found_states:
            order.setdefault(os.path.abspath(item), i)
        units += found
        states += found_states
    given = {}
    for p in states:   # a state named twice (a folder and a glob) counts once
        given.setdefault(os.path.abspath(p), p)
    units = list(dict.fromkeys(units)) + [("states", g) for g in trainer_state.group_states(list(given.values()))]

    def where(unit):   # in the order the paths were given, then by path
        first = unit[1][0] if unit[0] == "states" else unit[1]
        return order[os.path.abspath(first)], first

    for kind, item in sorted(units, key=where):
        try:
            if kind == "states":
                runs.append(trainer_state.read_output_folder(item))
            elif kind == "tensorboard":
                runs.extend(tensorboard.read_event_folder(item))
            elif kind == "mlflow":
                runs.append(mlflow.read_run(item))
            else:
                runs.extend(read_file(item))
        except LogError as e:
            refused.append(e)
        except DataFileError as e:
            refused.append(LogError(e.path, e.line, e.problem))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):   # one name from two places: tell them apart by their folders
        where = {id(r): trainer_state.run_folder(r.source) if r.fmt == "trainer_state" else os.path.abspath(r.source)
                 for r in runs}
        top = os.path.dirname(os.path.commonpath(list(where.values())))
        runs = [RunLog(**{**r.__dict__, "name": os.path.relpath(where[id(r)], top)})
                if names.count(r.name) > 1 else r for r in runs]
    return runs, refused


def read_file(path: str) -> list[RunLog]:
    """The runs of one log file, its format told by its name."""
    from . import tables, trainer_state

    check_not_lfs(path)
    base = os.path.basename(path)
    if base.endswith("trainer_state.json"):
        return [trainer_state.read_state(path)]
    if os.path.isdir(path):
        raise LogError(path, None, "a folder: give it as a folder to search")
    return tables.read_table(path)


def _units(root: str) -> tuple[list[tuple[str, str]], list[str]]:
    """What to read under ``root``, found by a bounded walk: TensorBoard folders, MLflow run folders and table
    files; and the trainer states (grouped into runs by the caller)."""
    from ..files import walk
    from . import mlflow

    states, units = [], []
    for d, files in walk(root, LogError, "log directory"):
        if mlflow.is_run_folder(d):
            units.append(("mlflow", d))
            continue
        if os.sep + "metrics" in d and mlflow.is_run_folder(os.path.dirname(d)):
            continue   # an MLflow run's metric files: read with their run
        if any("tfevents" in f for f in files):
            units.append(("tensorboard", d))
        for f in sorted(files):
            p = os.path.join(d, f)
            if f.endswith("trainer_state.json"):
                states.append(p)
            elif f == "result.json" and "progress.csv" in files:
                continue   # a Ray Tune trial writes both: the same results, read once
            elif f.endswith((".csv", ".jsonl", ".csv.gz", ".jsonl.gz")) or f == "result.json":
                units.append(("file", p))
    return units, states
