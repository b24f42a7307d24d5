"""One-call Python API: build a workload, run a named policy, return metrics."""

from __future__ import annotations

import dataclasses
from typing import Any

from .config import ConfigError, WorkloadConfig
from .metrics import compute_metrics
from .policy import Policy, drive
from .simulator import Simulator
from .workload import Workload, generate

_WORKLOAD_FIELDS = {f.name for f in dataclasses.fields(WorkloadConfig)}


def split_params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split keyword arguments into workload-config fields and policy parameters."""
    wl = {k: v for k, v in params.items() if k in _WORKLOAD_FIELDS}
    pol = {k: v for k, v in params.items() if k not in _WORKLOAD_FIELDS}
    return wl, pol


DEFAULT_SCHEDULER = "srtf-est"   # the paper's base scheduler: the default of simulate, the envs, the CLI


def run_policy(workload: Workload, policy: Policy) -> dict[str, Any]:
    """Run ``policy`` over ``workload`` on a fresh simulator; return its metrics."""
    return compute_metrics(drive(Simulator(workload), policy))


def simulate(scheduler: str | Policy = DEFAULT_SCHEDULER, stopper: str = "none", *,
             config: WorkloadConfig | None = None, **params: Any) -> dict[str, Any]:
    """Simulate one episode and return its metrics (see :mod:`evalstop_gym.metrics`).

    ``scheduler`` and ``stopper`` are registry names (``evalstop_gym.baselines.SCHEDULERS``,
    ``evalstop_gym.baselines.STOPPERS``), or ``scheduler`` is a ready :class:`Policy`.
    Other keywords are :class:`WorkloadConfig` fields (``calibration`` (``paper``
    or ``realistic``), ``workload, jobs, gpus, load, noise, hacking_fraction,
    evals_per_job, seed, cluster, ...``; a ``cluster`` brings its own GPU count,
    see ``docs/cluster.md``) or the stopper's parameters (``k`` for EvalStop).

    >>> m = simulate("fifo", "evalstop", k=2, jobs=50, seed=1)
    >>> sorted(m)[:3]
    ['avg_jct_h', 'avg_queue_h', 'compute_waste_gpu_h']
    """
    from evalstop_gym.baselines import make_policy

    wl, pol = split_params(params)
    cfg = (config or WorkloadConfig()).replace(**wl) if wl else (config or WorkloadConfig())
    if isinstance(scheduler, Policy):
        if stopper != "none" or pol:
            raise ConfigError("stopper", stopper, "must be 'none' (with no stopper parameters) "
                              "when scheduler is a Policy object")
        policy = scheduler
    else:
        policy = make_policy(scheduler, stopper, **pol)
    return run_policy(generate(cfg), policy)
