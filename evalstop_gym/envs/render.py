"""Rendering: a text view of the cluster and queue (``ansi``), a Gantt chart of GPU allocation
over time with axes, a legend and the clock (``rgb_array``), the same in a pygame window
(``human``), and :class:`RecordVideo`, which keeps one video frame per simulated instant.

The simulator does not place jobs on particular GPUs (they are homogeneous), so
for the picture :class:`AllocationRecorder` gives each running job the lowest
free GPU rows when it starts and keeps them until it stops or is preempted.
That placement exists only in the picture. The chart itself is numpy
(:func:`gantt_rgb`); axes, text and the window are drawn with pygame (the
``render`` extra), as Gymnasium's own environments do.
"""

from __future__ import annotations

import colorsys
import importlib.util
import os
import warnings

import gymnasium as gym
import numpy as np

from ..view import ClusterView, JobView

WIDTH, HEIGHT = 512, 256                       # the chart, pixels
FRAME_WIDTH, FRAME_HEIGHT = 640, 360           # the annotated frame
CHART_LEFT, CHART_TOP = 56, 34                 # chart position inside the frame
BACKGROUND = np.array([24, 24, 28], np.uint8)
STOP_MARK = np.array([235, 30, 30], np.uint8)
TEXT, AXIS = (230, 230, 230), (150, 150, 160)
# 64 well-spread colours (golden-ratio hues), never pure red (kept for stop marks)
_PALETTE = np.array([[int(255 * c) for c in colorsys.hsv_to_rgb((0.15 + i * 0.618034) % 0.8 + 0.1,
                                                                 0.55 + 0.35 * (i % 2), 0.85 - 0.25 * (i % 3 == 0))]
                     for i in range(64)], np.uint8)
_COLOURS = np.vstack([_PALETTE, BACKGROUND])   # index len(_PALETTE): a free GPU


class AllocationRecorder:
    """GPU rows owned by each running job, over time (for :func:`gantt_rgb`)."""

    def __init__(self, total_gpus: int):
        self.owner = np.full(total_gpus, -1, np.int64)   # job id per GPU row now, -1: free
        self.times: list[float] = [0.0]                  # start of each interval, hours
        self._owners = np.full((64, total_gpus), -1, np.int64)   # row i: owners from times[i] on (grown by doubling)
        self.rows: dict[int, np.ndarray] = {}
        self.stops: list[tuple[float, np.ndarray]] = []  # (time, rows) of stopped jobs

    @property
    def owners(self) -> np.ndarray:
        """``(intervals, GPUs)``: the job id on each GPU row in each interval (-1: free)."""
        return self._owners[:len(self.times)]

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
            if self.times[-1] != cluster.now_h:
                self.times.append(cluster.now_h)
                if len(self.times) > len(self._owners):
                    self._owners = np.concatenate([self._owners, np.full_like(self._owners, -1)])
            self._owners[len(self.times) - 1] = owner


def gantt_rgb(rec: AllocationRecorder, now_h: float, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """``(height, width, 3)`` uint8 chart: time left to right (0 .. now), GPUs bottom to top.

    Each job has its own colour; a red tick marks the GPUs of a job at the
    moment it was stopped.
    """
    g = rec.owner.shape[0]
    span = now_h if now_h > 0 else 1.0
    t = (np.arange(width) + 0.5) * span / width
    k = np.searchsorted(np.array(rec.times), t, side="right") - 1
    gpu_of_y = (np.arange(height)[::-1] * g) // height      # GPU 0 at the bottom
    owners = rec.owners[k]                                  # (width, GPUs): colour each GPU once ...
    n = len(_PALETTE)
    colours = _COLOURS[np.where(owners >= 0, owners % n, n) if now_h > 0 else np.full_like(owners, n)]
    img = colours[:, gpu_of_y].transpose(1, 0, 2)           # ... then lay GPUs out as pixel rows
    hit = np.zeros(g, bool)
    for t_stop, rows in rec.stops:
        x = min(int(t_stop / span * width), width - 1)
        hit[:] = False
        hit[rows] = True
        img[hit[gpu_of_y], max(x - 1, 0):x + 2] = STOP_MARK
    return np.ascontiguousarray(img, dtype=np.uint8)


def render_modes() -> list[str]:
    """The render modes this install can run: ``human`` only where pygame (the ``render`` extra) is
    installed. Looked up without importing pygame, so asking prints nothing."""
    return ["ansi", "rgb_array"] + (["human"] if importlib.util.find_spec("pygame") is not None else [])


def _pygame():
    """pygame, imported on first use (the ``render`` extra); ``None`` if it is not installed.

    Its greeting on import is hidden, so importing it prints nothing."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ModuleNotFoundError:
        return None
    if not pygame.font.get_init():
        pygame.font.init()
    return pygame


_FONTS: dict = {}


def _font(pg):
    """pygame's default font at 18 px, loaded once per process."""
    if "default" not in _FONTS:
        _FONTS["default"] = pg.font.Font(None, 18)
    return _FONTS["default"]


def _ticks(span: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values in ``[0, span]`` (1, 2 or 5 times a power of ten apart)."""
    raw = span / n
    step = 10 ** np.floor(np.log10(raw)) if raw > 0 else 1.0
    step *= next(m for m in (1, 2, 5, 10) if raw <= m * step)
    return [i * step for i in range(int(span / step) + 1)]


def _tick_label(v: float) -> str:
    return f"{v:g}" if v >= 1 or v == 0 else f"{v:.2g}"


def frame_rgb(rec: AllocationRecorder, cluster: ClusterView, decision: str, decision_job: JobView | None,
              n_jobs: int) -> np.ndarray:
    """``(FRAME_HEIGHT, FRAME_WIDTH, 3)`` uint8: the Gantt chart with a time axis (hours), a GPU
    axis, the clock and cluster state in a title line, and a legend. Without pygame: a frame of the
    same size with the chart and its two axis lines, no text (one warning says which extra adds it)."""
    chart = gantt_rgb(rec, cluster.now_h)
    pg = _pygame()
    if pg is None:
        warnings.warn("rgb_array frames without pygame carry no tick labels, legend or clock: "
                      "pip install 'evalstop-gym[render]'", stacklevel=3)
        return bare_frame(chart)
    surf = pg.Surface((FRAME_WIDTH, FRAME_HEIGHT))
    surf.fill(tuple(int(c) for c in BACKGROUND))
    surf.blit(pg.image.frombuffer(chart.tobytes(), (WIDTH, HEIGHT), "RGB"), (CHART_LEFT, CHART_TOP))
    font = _font(pg)
    x0, y0, x1, y1 = CHART_LEFT, CHART_TOP + HEIGHT, CHART_LEFT + WIDTH, CHART_TOP

    def text(s, pos, anchor="topleft", color=TEXT):
        img = font.render(s, True, color)
        surf.blit(img, img.get_rect(**{anchor: pos}))

    pg.draw.line(surf, AXIS, (x0 - 1, y1), (x0 - 1, y0), 1)
    pg.draw.line(surf, AXIS, (x0 - 1, y0), (x1, y0), 1)
    span = cluster.now_h if cluster.now_h > 0 else 1.0
    for v in _ticks(span):
        x = x0 + int(v / span * (WIDTH - 1))
        pg.draw.line(surf, AXIS, (x, y0), (x, y0 + 4), 1)
        text(_tick_label(v), (x, y0 + 5), "midtop")
    text("time (h)", (x1, y0 + 18), "topright", AXIS)
    g = cluster.total_gpus
    for v in _ticks(g, 4):
        y = y0 - int(v / g * HEIGHT)
        pg.draw.line(surf, AXIS, (x0 - 5, y), (x0 - 1, y), 1)
        text(_tick_label(v), (x0 - 7, y), "midright")
    text("GPUs", (4, y1 - 4), "bottomleft", AXIS)
    at = f" (job {decision_job.job_id})" if decision_job is not None else ""
    text(f"t = {cluster.now_h:.2f} h   {decision}{at}   GPUs {cluster.used_gpus}/{g}   running "
         f"{len(cluster.running)}   waiting {len(cluster.waiting)}   ended {cluster.finished}/{n_jobs}", (8, 8))
    ly = FRAME_HEIGHT - 22
    for i, c in enumerate(_PALETTE[:4]):
        pg.draw.rect(surf, tuple(int(v) for v in c), (x0 + 5 * i, ly + 3, 5, 10))
    text("a job (one colour each)", (x0 + 26, ly))
    pg.draw.rect(surf, tuple(int(v) for v in STOP_MARK), (x0 + 200, ly + 2, 3, 12))
    text("stopped at an eval checkpoint", (x0 + 208, ly))
    pg.draw.rect(surf, AXIS, (x0 + 420, ly + 3, 10, 10), 1)
    text("idle GPU", (x0 + 436, ly))
    return np.frombuffer(pg.image.tobytes(surf, "RGB"), np.uint8).reshape(FRAME_HEIGHT, FRAME_WIDTH, 3).copy()


def bare_frame(chart: np.ndarray) -> np.ndarray:
    """``(FRAME_HEIGHT, FRAME_WIDTH, 3)``: ``chart`` where :func:`frame_rgb` puts it, with its time and
    GPU axis lines, on the background (the frame without pygame: same size, no text)."""
    img = np.empty((FRAME_HEIGHT, FRAME_WIDTH, 3), np.uint8)
    img[:] = BACKGROUND
    x0, y1 = CHART_LEFT, CHART_TOP
    img[y1:y1 + HEIGHT, x0:x0 + WIDTH] = chart
    img[y1:y1 + HEIGHT + 1, x0 - 1] = AXIS                  # GPU axis
    img[y1 + HEIGHT, x0 - 1:x0 + WIDTH + 1] = AXIS          # time axis
    return img


class Window:
    """The ``human`` render mode: frames shown in a pygame window at ``fps``."""

    @staticmethod
    def check_available():
        """pygame, or :class:`~evalstop_gym.extras.MissingExtra` naming the ``render`` extra."""
        from ..extras import missing_extra

        pygame = _pygame()   # hides pygame's greeting before the first import
        if pygame is None:
            raise missing_extra(ModuleNotFoundError("No module named 'pygame'", name="pygame"),
                                "render_mode='human'")
        return pygame

    def __init__(self, fps: int):
        pygame = self.check_available()
        self.pg, self.fps = pygame, fps
        try:
            pygame.display.init()
            self.screen = pygame.display.set_mode((FRAME_WIDTH, FRAME_HEIGHT))
        except pygame.error as e:
            raise RuntimeError(f"render_mode='human' cannot open a window ({e}); on a machine without a "
                               "display use render_mode='rgb_array', or SDL_VIDEODRIVER=dummy") from None
        pygame.display.set_caption("evalstop-gym")
        self.clock = pygame.time.Clock()

    def show(self, frame: np.ndarray) -> None:
        pg = self.pg
        pg.event.pump()
        self.screen.blit(pg.image.frombuffer(frame.tobytes(), (FRAME_WIDTH, FRAME_HEIGHT), "RGB"), (0, 0))
        pg.display.flip()
        self.clock.tick(self.fps)

    def close(self) -> None:
        self.pg.display.quit()


class RecordVideo(gym.wrappers.RecordVideo):
    """Gymnasium's ``RecordVideo`` keeping one frame per simulated instant.

    Sub-steps at one instant (EvalStop-Cluster-v0 starts and preempts jobs one
    action at a time, and invalid actions are no-ops) and simultaneous
    checkpoints let no time pass: the frame of such a step replaces the
    previous one instead of adding a frame, so the video shows each
    scheduling point once, in its final state. Keywords are
    ``gymnasium.wrappers.RecordVideo``'s (needs moviepy).
    """

    _instant: float | None = None

    def _capture_frame(self):
        now = self.env.unwrapped.cluster.now_h
        if self._instant == now and self.recorded_frames:
            self.recorded_frames.pop()
        self._instant = now
        super()._capture_frame()

    def reset(self, *, seed=None, options=None):
        self._instant = None
        return super().reset(seed=seed, options=options)


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
