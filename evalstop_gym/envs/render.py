"""Headless rendering: a text view of the cluster and queue (``ansi``) and a
Gantt-style picture of GPU allocation over time (``rgb_array``, pure numpy).

The simulator does not place jobs on particular GPUs (they are homogeneous), so
for the picture :class:`AllocationRecorder` gives each running job the lowest
free GPU rows when it starts and keeps them until it stops or is preempted.
That placement exists only in the picture.
"""

from __future__ import annotations

import colorsys

import numpy as np

from ..view import ClusterView, JobView

WIDTH, HEIGHT = 512, 256
BACKGROUND = np.array([24, 24, 28], np.uint8)
STOP_MARK = np.array([235, 30, 30], np.uint8)
# 64 well-spread colours (golden-ratio hues), never pure red (kept for stop marks)
_PALETTE = np.array([[int(255 * c) for c in colorsys.hsv_to_rgb((0.15 + i * 0.618034) % 0.8 + 0.1,
                                                                 0.55 + 0.35 * (i % 2), 0.85 - 0.25 * (i % 3 == 0))]
                     for i in range(64)], np.uint8)


class AllocationRecorder:
    """GPU rows owned by each running job, over time (for :func:`gantt_rgb`)."""

    def __init__(self, total_gpus: int):
        self.owner = np.full(total_gpus, -1, np.int64)   # job id per GPU row now, -1: free
        self.times: list[float] = [0.0]                  # start of each interval, hours
        self.owners: list[np.ndarray] = [self.owner.copy()]
        self.rows: dict[int, np.ndarray] = {}
        self.stops: list[tuple[float, np.ndarray]] = []  # (time, rows) of stopped jobs

    def update(self, cluster: ClusterView, stopped: int | None = None) -> None:
        """Bring the picture up to the cluster's current state (call after every change)."""
        running, rows, owner = cluster.running, self.rows, self.owner
        changed = False
        for j in [j for j in rows if j not in running]:
            r = rows.pop(j)
            owner[r] = -1
            changed = True
            if j == stopped:
                self.stops.append((cluster.now_h, r))
        for j, v in running.items():
            if j not in rows:
                r = np.flatnonzero(owner < 0)[:v.gpus]
                owner[r] = j
                rows[j] = r
                changed = True
        if changed:
            if self.times[-1] == cluster.now_h:
                self.owners[-1] = owner.copy()
            else:
                self.times.append(cluster.now_h)
                self.owners.append(owner.copy())


def gantt_rgb(rec: AllocationRecorder, now_h: float, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """``(height, width, 3)`` uint8 picture: time left to right (0 .. now), GPUs bottom to top.

    Each job has its own colour; a red tick marks the GPUs of a job at the
    moment it was stopped.
    """
    g = rec.owner.shape[0]
    span = now_h if now_h > 0 else 1.0
    t = (np.arange(width) + 0.5) * span / width
    k = np.searchsorted(np.array(rec.times), t, side="right") - 1
    gpu_of_y = (np.arange(height)[::-1] * g) // height      # GPU 0 at the bottom
    owners = np.array(rec.owners)[np.ix_(k, gpu_of_y)].T    # (height, width)
    img = np.where((owners >= 0)[..., None], _PALETTE[owners % len(_PALETTE)], BACKGROUND)
    if now_h <= 0:
        img[:] = BACKGROUND
    for t_stop, rows in rec.stops:
        x = min(int(t_stop / span * width), width - 1)
        ys = np.isin(gpu_of_y, rows)
        img[ys, max(x - 1, 0):x + 2] = STOP_MARK
    return np.ascontiguousarray(img, dtype=np.uint8)


def _job_line(v: JobView) -> str:
    last = f"{v.eval_scores[-1]:6.3f}" if v.eval_scores else "     -"
    return (f"  {v.job_id:>5} {v.job_type:<5} {v.gpus:>4} {v.evals_done:>3}/{v.evals_total:<3} {last} "
            f"{v.consecutive_declines:>3} {v.attained_h:>8.2f} {v.est_length_h:>8.2f}")


def ansi_text(cluster: ClusterView, decision: str, decision_job: JobView | None, n_jobs: int,
              max_rows: int = 12) -> str:
    """A text view of the cluster: clock, GPUs, the running jobs and the head of the queue."""
    c = cluster
    head = (f"t={c.now_h:.3f} h  decision={decision}"
            + (f" (job {decision_job.job_id})" if decision_job is not None else "")
            + f"  GPUs used {c.used_gpus}/{c.total_gpus}  running {len(c.running)}  "
              f"waiting {len(c.waiting)}  ended {c.finished}/{n_jobs}")
    cols = "     id type  gpus evals  score dec attain_h    est_h"
    lines = [head, f"running:\n{cols}"]
    lines += [_job_line(v) for v in list(c.running.values())[:max_rows]]
    if len(c.running) > max_rows:
        lines.append(f"  ... {len(c.running) - max_rows} more")
    lines.append(f"waiting:\n{cols}")
    lines += [_job_line(v) for v in list(c.waiting.values())[:max_rows]]
    if len(c.waiting) > max_rows:
        lines.append(f"  ... {len(c.waiting) - max_rows} more")
    return "\n".join(lines) + "\n"
