"""Stop-policy features read from the job's public history that the env's job row does not carry.

The env's job row (:data:`~evalstop_gym.envs.features.JOB_FEATURES`) gives the
last three score changes and the proxy reward's last change. The hand-coded
detectors test more than that: DropTest compares the drop below the best
score with the score's noise, and Divergence first asks whether
the proxy reward rose over the last two checkpoints. These features give a
stop-policy the same statistics, as opt-in names of
:class:`~evalstop_gym.agents.wrappers.JobFeatures` (``features: [..., drop_z_1]``),
so default observations keep their shape:

* ``proxy_rise_2``: ``proxy[-1] - proxy[-3]``, clipped to [-1, 1] (0 with fewer
  than three proxy readings; only RLHF jobs have a proxy reward);
* ``drop_z_1``: ``(max(s[:-1]) - s[-1]) / (se * sqrt(2))``, DropTest's
  statistic with a window of one score;
* ``drop_z_2``: ``(max(s[:-2]) - mean(s[-2:])) / (se * sqrt(1.5))``, with a
  window of two.

``se = sqrt(p (1 - p) / n)`` is the sampling error of a score ``p`` (the
window's mean, clipped to ``[1 / n, 1 - 1 / n]``) on the job's ``n`` eval items:
the one part of the noise a job's own public fields fix. DropTest itself
divides by a noise estimate pooled over the episode's jobs; a stop-policy
learns from its training episodes how much noise beyond sampling error to allow.
A drop statistic is divided by 10 and clipped to [-1, 1], and is 0 where it
is undefined (too few scores, or an eval-set size the world does not model).
Every input is public: the job's observed scores, proxy readings and
eval-set size.
"""

from __future__ import annotations

import math
from typing import Sequence

from evalstop_gym.baselines.droptest import drop_below_best   # DropTest's statistic

Z_SCALE = 10.0

# name -> (low, high, meaning)
HISTORY_FEATURES: dict[str, tuple[float, float, str]] = {
    "proxy_rise_2": (-1.0, 1.0, "proxy reward's change over the last two checkpoints, clipped (0 if undefined)"),
    "drop_z_1": (-1.0, 1.0, "(best earlier score - last score) / its sampling error, / 10, clipped (0 if undefined)"),
    "drop_z_2": (-1.0, 1.0, "(best earlier score - mean of the last two) / its sampling error, / 10, clipped"),
}


def _clip(x: float) -> float:
    return -1.0 if x < -1.0 else 1.0 if x > 1.0 else x


def _drop_z(scores: Sequence[float], items: int, window: int) -> float:
    if len(scores) <= window or items <= 0:
        return 0.0
    drop, level = drop_below_best(scores, window)
    return _clip(drop / (sampling_error(level, items) * math.sqrt(1.0 + 1.0 / window)) / Z_SCALE)


def sampling_error(level: float, items: int) -> float:
    """``sqrt(p (1 - p) / items)`` with ``p`` the level clipped to ``[1 / items, 1 - 1 / items]`` (never 0)."""
    p = min(max(level, 1.0 / items), 1.0 - 1.0 / items) if items > 1 else 0.5
    return math.sqrt(p * (1.0 - p) / items)


def history_row(job, names: Sequence[str]) -> list[float]:
    """The named features of ``job`` (a :class:`~evalstop_gym.view.JobView`; None: all 0, as after the episode)."""
    if job is None:
        return [0.0] * len(names)
    out = []
    for name in names:
        if name == "proxy_rise_2":
            proxy = job.proxy_rewards
            out.append(_clip(proxy[-1] - proxy[-3]) if len(proxy) > 2 else 0.0)
        else:
            out.append(_drop_z(job.eval_scores, job.eval_items, 1 if name == "drop_z_1" else 2))
    return out
