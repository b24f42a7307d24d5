"""Curve libraries shipped with the package (read without torch or TRL).

* ``trl_library.csv.gz``: runs of TRL's trainers (GRPO, RLOO, DPO) on the tiny
  copy task, with their hidden gold curves; made by the command in
  ``trl_library.json`` (also the package versions and CPU time), described in
  docs/trl_library.md.
* ``trl_library_varied.csv.gz``: 96 runs of the varied grid (the copy and
  addition tasks, policy widths 80 and 160, 360 steps, 18 evals, half the
  GRPO and RLOO runs without a KL penalty), made by the command in
  ``trl_library_varied.json``; docs/trl_library.md. The ``grounded`` world
  is fitted to the 48-run library, not to this one (docs/calibration.md).
* ``philly_shape.json``: the shape of the Philly trace (quantiles of its submit
  times, GPU demands and run times; :mod:`evalstop_gym.trace_shape`), fitted
  by the command it records; docs/traces.md.
"""

from __future__ import annotations

import os

DATA_DIR = os.path.dirname(__file__)
TRL_LIBRARY = os.path.join(os.path.dirname(__file__), "trl_library.csv.gz")
TRL_LIBRARY_META = os.path.join(os.path.dirname(__file__), "trl_library.json")
TRL_LIBRARY_VARIED = os.path.join(DATA_DIR, "trl_library_varied.csv.gz")
TRL_LIBRARY_VARIED_META = os.path.join(DATA_DIR, "trl_library_varied.json")


def trl_library(path: str = TRL_LIBRARY) -> dict:
    """``{run name: LoggedRun}`` of a shipped TRL library (a gzip'd curve-log CSV; default the 48-run one)."""
    from ..curvelog import read_curve_log

    return read_curve_log(path, "csv")
