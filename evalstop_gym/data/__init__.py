"""Curve libraries shipped with the package (read without torch or TRL).

* ``trl_library.csv.gz``: runs of TRL's trainers (GRPO, RLOO, DPO) on the tiny
  copy task, with their hidden gold curves; made by the command in
  ``trl_library.json`` (also the package versions and CPU time), described in
  docs/trl_library.md.
* ``philly_shape.json``: the shape of the Philly trace (quantiles of its submit
  times, GPU demands and run times; :mod:`evalstop_gym.trace_shape`), fitted
  by the command it records; docs/traces.md.
"""

from __future__ import annotations

import os

DATA_DIR = os.path.dirname(__file__)
TRL_LIBRARY = os.path.join(os.path.dirname(__file__), "trl_library.csv.gz")
TRL_LIBRARY_META = os.path.join(os.path.dirname(__file__), "trl_library.json")


def trl_library() -> dict:
    """``{run name: LoggedRun}`` of the shipped TRL library (a gzip'd curve-log CSV)."""
    from ..curvelog import read_curve_log

    return read_curve_log(TRL_LIBRARY, "csv")
