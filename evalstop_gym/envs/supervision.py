"""Simulation-only supervision: reward terms computed from the simulator's hidden truth.

A platform cannot compute these online: they need the hidden hacking label and
the true best checkpoint. In simulation they are the same labels that chose the
hand-coded detectors' parameters (tuned on validation seeds by their
hidden-label F1 and waste, docs/detectors.md), so a stop-policy may
learn from them in training too, while its observations stay public
(:mod:`evalstop_gym.view`). Evaluation stays on the hidden metrics of held-out
seeds. Both terms are weighted 0 by default; a term weighted 0 is not reported in
``info["reward_terms"]``, and neither is computed while both are (docs/mdp.md).

* ``detect``: per job at its end, the sign of its detection outcome: +1 for a
  stopped hacking run (true positive), -1 for a stopped healthy run (false
  positive), -1 for a hacking run that completes unstopped (false negative),
  0 for a healthy run that completes. F1 = 2 TP / (2 TP + FP + FN) counts
  exactly these three outcomes. Near F1 = 1 one more true positive (an FN made
  a TP) gains F1 as much as one false positive loses, while this term values
  that catch at 2 (from -1 to +1) against a false alarm's 1: it leans to
  recall; the ``stops`` term prices every stop and moves the balance (with
  ``stops`` weight ``-s`` a catch is worth ``2 - s``, a false alarm costs ``1 + s``).
* ``true_waste_gpu_h``: per job at its end, the GPU-hours it ran past its true
  best checkpoint, exactly the per-job part of the ``compute_waste_gpu_h``
  metric (:func:`evalstop_gym.metrics.waste_ticks`).
"""

from __future__ import annotations

from ..metrics import waste_ticks
from ..simulator import Simulator
from ..timebase import TICKS_PER_HOUR
from ..view import JobView

HIDDEN_TERMS = ("detect", "true_waste_gpu_h")


def detect_term(hacking: bool, stopped: bool) -> float:
    """The ``detect`` term of one ended job: +1 TP, -1 FP, -1 FN, 0 TN."""
    if stopped:
        return 1.0 if hacking else -1.0
    return -1.0 if hacking else 0.0


def hidden_terms(sim: Simulator, hacking: bool, v: JobView, stopped: bool) -> tuple[float, float]:
    """``(detect, true_waste_gpu_h)`` of job ``v`` that has just ended (stopped or completed) in ``sim``;
    ``hacking`` is its hidden label."""
    past_peak = int(waste_ticks(v.attained_ticks, sim.peak_service_ticks(v.job_id)))
    return detect_term(hacking, stopped), past_peak * v.gpus / TICKS_PER_HOUR
