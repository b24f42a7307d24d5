"""TensorBoard event files: one run per folder holding ``*tfevents*`` files (needs ``tensorboard``).

Every scalar tag is read, those written as TF2 summaries (tensors) too; each
event file's framing is checked first
(:func:`evalstop_gym.curvelog.check_event_file`). Eval metrics are the tags
whose first word is ``eval``, ``val``, ``test`` ... (TRL and transformers write
``eval/loss``; :func:`evalstop_gym.logs.tables.is_eval_key`).
"""

from __future__ import annotations

import math
import os

from .record import LogError, RunLog, series_from_rows
from .tables import is_eval_key


def read_event_folder(folder: str) -> list[RunLog]:
    from ..config import ConfigError

    try:
        from tensorboard.util import tensor_util
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("curves", folder, "reading TensorBoard logs needs the tensorboard package "
                                            "(pip install tensorboard)") from None
    from ..curvelog import accumulate

    acc = accumulate(folder, LogError)
    tags = acc.Tags()
    rows: dict[float, dict[str, float]] = {}
    for tag in tags.get("scalars", ()):
        for e in acc.Scalars(tag):
            rows.setdefault(float(e.step), {})[tag] = float(e.value)
    for tag in tags.get("tensors", ()):
        for e in acc.Tensors(tag):
            try:
                v = float(tensor_util.make_ndarray(e.tensor_proto))
            except (TypeError, ValueError):
                break   # not a scalar (a histogram, a text summary)
            rows.setdefault(float(e.step), {})[tag] = v
    rows = {s: {k: v for k, v in r.items() if math.isfinite(v)} for s, r in rows.items()}
    series = series_from_rows(rows)
    name = os.path.basename(os.path.abspath(folder))
    return [RunLog(name=name, source=folder, fmt="tensorboard", series=series,
                   evals=tuple(sorted(k for k in series if is_eval_key(k))))]
