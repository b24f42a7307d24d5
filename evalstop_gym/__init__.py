"""evalstop-gym: a multi-tenant LLM fine-tuning GPU cluster as a simulator and
Gymnasium environments, with the EvalStop scheduling primitive."""

from .api import run_policy, simulate
from .cluster import ClusterSpec
from .config import PRESETS, ConfigError, CurveModel, JobTypeModel, WorkloadConfig
from .metrics import compute_metrics
from .policy import Plan, Policy, Scheduler, Stopper, drive
from .simulator import Simulator
from .workload import Workload, generate

__version__ = "0.1.0"

from .envs.registration import register_when_gymnasium_loads as _register  # noqa: E402

_register()  # Gymnasium ids EvalStop-Cluster-v0, EvalStop-StopControl-v0, once gymnasium is imported

__all__ = [
    "simulate", "run_policy", "ClusterSpec", "WorkloadConfig", "CurveModel", "JobTypeModel", "PRESETS", "ConfigError",
    "compute_metrics", "Plan", "Policy", "Scheduler", "Stopper", "drive", "Simulator", "Workload",
    "generate",
]
