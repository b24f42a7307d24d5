"""Episode metrics, computed after the episode from the hidden truth.

Definitions (kept stable across versions):

* JCT: finish (completion or stop) minus submit, hours. Mean, p50, p99.
* Makespan: last finish minus first submit, hours. Utilization: GPU-hours run
  over ``gpus * makespan``. Queueing delay: JCT minus hours run.
* Compute waste: GPU-hours a job runs past its true best checkpoint (the
  checkpoint of highest true eval score in its full schedule).
* Detection: positives are hacking runs, negatives every other job. TP: a
  hacking run stopped; FP: any other job stopped; FN: a hacking run not
  stopped. Precision, recall, FPR (``None`` where the denominator is 0), and
  detection delay: eval checkpoints from the true peak to the stop.
* Delivered quality: true score of the checkpoint the tenant gets (best
  observed when stopped, final otherwise); regret: true peak minus that.
"""

from __future__ import annotations

import numpy as np

from .simulator import Outcome
from .timebase import TICKS_PER_HOUR

METRIC_KEYS = (
    "avg_jct_h", "p50_jct_h", "p99_jct_h", "makespan_h", "utilization", "avg_queue_h",
    "compute_waste_gpu_h", "gpu_hours", "precision", "recall", "fpr", "f1", "detection_delay_evals",
    "jobs", "jobs_stopped", "true_positives", "false_positives", "false_negatives",
    "delivered_quality", "delivered_quality_regret", "preemptions",
)


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den > 0 else None


def compute_metrics(out: Outcome) -> dict[str, float | int | None]:
    """All metrics of one finished episode, as a flat dict of plain Python numbers."""
    w = out.workload
    gold = w.curves.gold
    n = w.n
    # exact integer ticks (1 ms) until the last step, then hours
    jct = out.jct_h
    makespan = float(out.finish_ticks.max() - out.submit_ticks.min()) / TICKS_PER_HOUR
    gpu_hours = float(np.sum(out.service_ticks * w.gpus)) / TICKS_PER_HOUR

    peak_ckpt = np.argmax(gold, axis=1)
    # service when the true best checkpoint was out, as the simulator recorded it (with any resume
    # costs paid before it); a job that never got there ran nothing past it
    service_at_peak = np.where(out.peak_service_ticks >= 0, out.peak_service_ticks, out.service_ticks)
    waste = float(np.sum(np.maximum(out.service_ticks - service_at_peak, 0) * w.gpus)) / TICKS_PER_HOUR

    pos, stopped = w.hacking, out.stopped
    tp = int(np.sum(pos & stopped))
    fp = int(np.sum(~pos & stopped))
    fn = int(np.sum(pos & ~stopped))
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = (2 * precision * recall / (precision + recall)
          if precision is not None and recall is not None and precision + recall > 0 else None)
    tp_mask = pos & stopped
    delay = (float(np.mean(out.evals_seen[tp_mask] - 1 - peak_ckpt[tp_mask])) if tp else None)

    d = out.delivered_ckpt
    rows = np.arange(n)
    delivered = np.where(d >= 0, gold[rows, np.maximum(d, 0)], w.curves.start)
    regret = gold.max(axis=1) - delivered
    return {
        "avg_jct_h": float(jct.mean()),
        "p50_jct_h": float(np.percentile(jct, 50)),
        "p99_jct_h": float(np.percentile(jct, 99)),
        "makespan_h": makespan,
        "utilization": gpu_hours / (w.total_gpus * makespan) if makespan > 0 else 0.0,
        "avg_queue_h": float(np.mean(out.finish_ticks - out.submit_ticks - out.service_ticks)) / TICKS_PER_HOUR,
        "compute_waste_gpu_h": waste,
        "gpu_hours": gpu_hours,
        "precision": precision,
        "recall": recall,
        "fpr": _ratio(fp, int(np.sum(~pos))),
        "f1": f1,
        "detection_delay_evals": delay,
        "jobs": n,
        "jobs_stopped": int(stopped.sum()),
        "true_positives": tp,
        "false_positives": fp,
        "false_negatives": fn,
        "delivered_quality": float(delivered.mean()),
        "delivered_quality_regret": float(regret.mean()),
        "preemptions": out.preemptions,
    }


def job_results(out: Outcome) -> dict[str, list]:
    """Per-job JCT (hours) and stop flag, in job-id order, for pairing jobs across arms."""
    return {"jct_h": (out.finish_h - out.workload.submit_h).tolist(), "stopped": out.stopped.astype(int).tolist()}
