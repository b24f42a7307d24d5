"""What both environments share: configuration, seeding, reward accounting,
the end-of-episode metrics and rendering.

The environment holds no simulation logic. It builds a workload, makes a
:class:`~evalstop_gym.simulator.Simulator`, calls ``advance / start / preempt /
stop / request_wakeup`` on it exactly as :func:`evalstop_gym.policy.drive`
does, and turns the public view into observations. The default reward is
bookkeeping over public signals only (see ``docs/mdp.md``); hidden-truth metrics
(:func:`evalstop_gym.metrics.compute_metrics`) appear only in the ``info`` of
the step that ends the episode. The opt-in simulation-only reward terms
(:mod:`evalstop_gym.envs.supervision`) read the hidden truth, and reach only the
reward and ``info["reward_terms"]``, never an observation.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from collections.abc import Mapping
from itertools import compress
from operator import itemgetter
from typing import Any

import gymnasium as gym
import numpy as np

from ..config import JOB_TYPES, PRESETS, ConfigError, CurveModel, WorkloadConfig, WorldModel, check_range
from ..metrics import compute_metrics
from ..simulator import DONE, EVAL, SCHEDULE, Simulator
from ..view import COMPLETED, ClusterView, JobView
from ..workload import Workload, generate
from .features import topology_bounds, topology_shape
from .render import AllocationRecorder, Window, ansi_text, frame_rgb, render_modes
from .supervision import HIDDEN_TERMS, hidden_terms

CONTINUE = COMMIT = 0   # at an eval checkpoint: let the job run on; at a scheduling point: done deciding
STOP = 1                # stop the job at the eval checkpoint

DECISION_NAMES = {EVAL: "eval", SCHEDULE: "schedule", DONE: "done"}
_WORKLOAD_FIELDS = {f.name for f in dataclasses.fields(WorkloadConfig)}
FREE_RESUMES = WorldModel()  # every knob off, as in the paper's world: resumes cost nothing

# reward = sum over terms of weight * term; terms are per-job averages (see docs/mdp.md)
# an invalid action is a no-op costing 0.1: six minutes of mean JCT, small next to an episode's return
# (about 65 under EvalStop) but enough that an agent without masks learns to avoid wasted steps
# a preemption's resume is priced at its expected GPU-hours (resume_gpu_h) at one hour of mean JCT each
# the hidden-truth terms (supervision.HIDDEN_TERMS) are simulation-only supervision, off by default
DEFAULT_REWARD_WEIGHTS = {"jct_h": -1.0, "waste_gpu_h": 0.0, "quality": 100.0, "invalid": -0.1,
                          "preempt_gpu_h": -1.0, "queue_h": 0.0, "stops": 0.0, "detect": 0.0, "true_waste_gpu_h": 0.0}
TERMS = ("jct_h", "waste_gpu_h", "quality", "preempt_gpu_h", "queue_h", "stops",
         *HIDDEN_TERMS)  # accumulated terms; "invalid" is per step
# the stream of the fresh eval draws that credit stopped jobs: (episode seed, CREDIT_STREAM); the workload
# generator uses (seed), (seed, 1), (seed, 2) for a latent world's curves and (seed, 3) for its binomial eval
# errors, so these draws are independent of every score the agent saw and of the hidden label
CREDIT_STREAM = 4
# a step's info["reward_terms"] with no hidden-truth term weighted and every term 0 (copied, then filled in)
_PUBLIC_PARTS = dict.fromkeys([k for k in TERMS if k not in HIDDEN_TERMS] + ["invalid"], 0.0)
_hidden_weights = itemgetter(*HIDDEN_TERMS)  # the hidden-truth terms' weights from reward_weights
INVALID_ACTION_MODES = ("penalize", "raise")
STEP_INFO_MODES = ("full", "lean", "none")
# default truncation: steps per job of the episode. A hand-coded scheduler takes about 12 steps per job
# on EvalStop-Cluster-v0, a uniformly random agent without masks about 120 (94% of them invalid no-ops)
STEPS_PER_JOB = 500


class FreshEvalCredit:
    """What a stopped job is credited: a fresh public eval of the checkpoint it delivers, its true score
    plus one new draw of the workload's eval noise at that checkpoint (``Workload.eval_sd``), from the
    episode's own stream ``(seed, CREDIT_STREAM)``, one draw per job. Unbiased, unlike the best observed
    score, which is selected as the maximum of noisy draws (docs/mdp.md). Every env that rewards
    delivered quality credits stops through this class."""

    def __init__(self, workload: Workload, seed: int | None):
        self._z = np.random.default_rng([seed if seed is not None else 0, CREDIT_STREAM]).standard_normal(workload.n)
        self._gold, self._sd = workload.curves.gold, workload.eval_sd

    def __call__(self, job_id: int, checkpoint: int) -> float:
        """The credit of ``job_id`` delivering its checkpoint ``checkpoint`` (0-based), score units."""
        # Python floats: the same float64 operations as on NumPy scalars, without making them
        return self._gold.item(job_id, checkpoint) + self._sd.item(job_id, checkpoint) * self._z.item(job_id)


def episode_seed(np_random, seed: int | None, options: Mapping | None) -> int | None:
    """The workload seed of a new episode: ``seed``, or for a generated workload a draw from ``np_random``
    (the one place it is drawn: :func:`episode_workload` and the credit stream both use it); None only for
    a ready workload (``options={"workload": w}``)."""
    ready = isinstance(options, Mapping) and "workload" in options
    if seed is None and not ready:
        seed = int(np_random.integers(0, 2**63 - 1))
    return seed


def plain(value: Any) -> Any:
    """NumPy scalars as Python numbers (``jobs=np.int64(10)``); other values unchanged."""
    return value.item() if isinstance(value, np.generic) else value


def resume_gpu_h(world, job_type: int, gpus: int) -> float:
    """Expected GPU-hours of one resume of a ``job_type`` job on ``gpus`` GPUs in ``world`` (a
    :class:`~evalstop_gym.config.WorldModel`): ``2 x state / bandwidth + warm-up`` on every GPU of the job,
    averaged over the world's bandwidth (log-uniform) and warm-up (uniform) ranges, as the workload
    generator draws them. Public: the world's parameters and the job's type and demand, not the job's
    hidden draw. 0 in the paper's world, where resumes are free."""
    lo, hi = world.storage_gbps
    inv_bw = 1.0 / lo if hi == lo else (1.0 / lo - 1.0 / hi) / math.log(hi / lo)  # E[1 / bandwidth]
    seconds = 2.0 * world.checkpoint_gb[job_type] * inv_bw + 0.5 * (world.warmup_s[0] + world.warmup_s[1])
    return gpus * seconds / 3600.0


class ResumeCharge:
    """What a preemption is charged in one episode: :func:`resume_gpu_h` of the episode's ``world`` (a
    :class:`~evalstop_gym.config.WorldModel`), GPU-hours, computed once per (job type, GPUs) demand."""

    __slots__ = ("world", "_cost")

    def __init__(self, world):
        self.world = world
        self._cost: dict[tuple[str, int], float] = {}

    def __call__(self, job_type: str, gpus: int) -> float:
        """The expected GPU-hours of one resume of a ``job_type`` job (a name in ``JOB_TYPES``) on ``gpus`` GPUs."""
        key = (job_type, gpus)
        cost = self._cost.get(key)
        if cost is None:
            cost = self._cost[key] = resume_gpu_h(self.world, JOB_TYPES.index(job_type), gpus)
        return cost


def _check_mapping(name: str, value: Any, allowed: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(name, value, allowed)
    return {k: plain(v) for k, v in value.items()}


def _check_weights(weights: Any) -> dict[str, float]:
    out = dict(DEFAULT_REWARD_WEIGHTS)
    weights = _check_mapping("reward_weights", weights, f"must be a dict of term weights over {', '.join(out)}")
    for k, v in weights.items():
        if k not in out:
            raise ConfigError(f"reward_weights.{k}", v, f"unknown term; known: {', '.join(out)}")
        check_range(f"reward_weights.{k}", v)
        out[k] = float(v)
    return out


def workload_fields(fields: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """Checked :class:`WorkloadConfig` overrides: known names, NumPy scalars made plain, and the
    structured fields (``mix``, ``curves``, ``job_types``) of the right type, so a wrong value is a
    :class:`ConfigError` naming it rather than an ``AttributeError`` inside the config."""
    out = {}
    for name, value in fields.items():
        if name not in _WORKLOAD_FIELDS:
            raise ConfigError(f"{where}{name}", value, "unknown keyword; workload fields are "
                              f"{', '.join(sorted(_WORKLOAD_FIELDS))}")
        value = plain(value)
        if name in ("mix", "job_types") and value is not None:
            value = _check_mapping(f"{where}{name}", value, "must be a dict of job type -> "
                                   + ("fraction" if name == "mix" else "JobTypeModel"))
        elif name == "workload" and not isinstance(value, str):
            raise ConfigError(f"{where}workload", value, f"must be a preset name: {', '.join(PRESETS)}")
        elif name == "curves" and not isinstance(value, CurveModel):
            raise ConfigError(f"{where}curves", value, "must be an evalstop_gym.CurveModel")
        out[name] = value
    return out


def episode_config(config: WorkloadConfig, options: dict | None) -> WorkloadConfig | Workload:
    """What a new episode plays: the ready :class:`Workload` of ``options["workload"]``, or ``config`` with
    the options' workload field overrides (its seed set later, by :func:`episode_workload`)."""
    options = _check_mapping("options", options, "reset options must be a dict: workload field overrides, or "
                             "{'workload': Workload}")
    if "workload" in options:
        w = options.pop("workload")
        if options:
            raise ConfigError("options", sorted(options), "no other options go with 'workload'")
        if not isinstance(w, Workload):
            raise ConfigError("options.workload", type(w).__name__, "must be an evalstop_gym Workload")
        return w
    if "seed" in options:
        raise ConfigError("options.seed", options["seed"], "pass the seed as reset(seed=...)")
    return config.replace(**workload_fields(options, "options.")) if options else config


def episode_workload(episode: WorkloadConfig | Workload, seed: int | None, trace=None,
                     trace_options: dict | None = None) -> Workload:
    """The workload of a new episode from :func:`episode_config`'s answer ``episode``: a ready workload as it
    is, else the config's workload with ``seed`` (from :func:`episode_seed`, never None for a config).

    With ``trace`` (a :class:`~evalstop_gym.traces.TraceTable`), the episode
    replays it (:func:`~evalstop_gym.traces.replay_trace` with ``trace_options``):
    arrivals, demands and lengths from the trace, curves and labels drawn with
    the episode's seed."""
    if isinstance(episode, Workload):
        return episode
    if trace is not None:
        from ..traces import replay_trace

        return replay_trace(trace, episode.replace(seed=seed), **(trace_options or {}))[0]
    return generate(episode.replace(seed=seed))


def charges_resumes(world: WorldModel) -> bool:
    """Whether :func:`resume_gpu_h` prices a resume in ``world`` above 0 (some state to save or a warm-up)."""
    return any(resume_gpu_h(world, t, 1) > 0 for t in range(len(JOB_TYPES)))


def episode_world(episode: WorkloadConfig | Workload, config: WorkloadConfig) -> WorldModel:
    """The world whose preemption costs an episode is charged (:class:`ResumeCharge`): the world its workload is
    generated (or replayed) in. A ready workload does not record its world, and its ``restart_h`` are the
    jobs' hidden draws, which the charge must not read: one whose resumes cost nothing (``restart_h`` None,
    or all 0, as in any world without state or warm-up) is charged nothing, as the simulator charges it;
    any other is priced in the env's ``config.world``. When that world prices resumes at 0 while the
    workload's cost time, the charge misses them: a ``UserWarning`` says so (shown once, by Python's
    default warning filter)."""
    if not isinstance(episode, Workload):
        return episode.world
    if episode.restart_h is None or not episode.restart_h.any():
        return FREE_RESUMES
    if not charges_resumes(config.world):
        warnings.warn("the ready workload's resumes cost time in the simulator, but the env's world prices "
                      "them at 0 GPU-h, so preempt_gpu_h stays 0; make the env in the workload's world "
                      "(calibration=..., world=...) to charge them", stacklevel=2)
    return config.world


def check_topology(spec, w: Workload) -> None:
    """An episode's cluster must give observations of the shape the env was made with."""
    if topology_shape(spec) != topology_shape(w.spec):
        have = spec.describe() if spec is not None else "the flat pool"
        raise ConfigError("cluster", w.spec.describe(), f"must have as many nodes as the env was made with "
                                                       f"({have}): observations have one entry per node; "
                                                       "make a new env for another node count")


def with_topology(spec, slots: int, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Observation bounds ``lo, hi`` extended by the node block of ``spec`` (if it has nodes)."""
    if spec is None:
        return lo, hi
    tlo, thi = topology_bounds(spec, slots)
    return np.concatenate([lo, tlo]), np.concatenate([hi, thi])


_INT_TYPES = frozenset({int, np.int64, np.int32, np.intp})  # the usual actions' types: checked first, by type


def as_int(action: Any) -> int | None:
    """An action as a Python int, or None if it is not an integer scalar."""
    if type(action) in _INT_TYPES:
        return int(action)
    if isinstance(action, (bool, np.bool_)):
        return None
    if isinstance(action, (int, np.integer)):
        return int(action)
    if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
        return int(action)
    return None


class SimEnv(gym.Env):
    """Base of the EvalStop environments (not registered itself).

    Keyword arguments (all JSON-friendly, so ``env.spec`` round-trips):

    * any :class:`~evalstop_gym.config.WorkloadConfig` field: ``workload``
      (preset), ``jobs``, ``gpus``, ``load``, ``noise``, ``hacking_fraction``,
      ``evals_per_job``, ``estimate_error``, ``tenants``, ``mix``, ``seed``;
      or ``config=WorkloadConfig(...)`` (then the fields override it);
    * ``max_steps``: truncate after this many steps; ``"auto"`` (default):
      :data:`STEPS_PER_JOB` per job of the episode; ``None``: never (an agent
      that repeats an invalid action then never ends its episode);
    * ``invalid_action``: ``"penalize"`` (default: a masked-out or out-of-range
      action is a no-op and the step's ``invalid`` reward term is 1) or
      ``"raise"`` (it raises ``ValueError`` naming the valid actions);
    * ``reward_weights``: overrides of :data:`DEFAULT_REWARD_WEIGHTS`;
    * ``step_info``: ``"full"`` (default: every step's ``info`` holds ``decision``,
      ``time_h``, ``decision_job``, ``action_mask``, ``reward_terms`` and
      ``invalid_action``), ``"lean"`` (only ``action_mask``, and at the end of an
      episode ``metrics`` or ``truncation``): fewer keys for a vector env to merge
      at every step (``SyncVectorEnv`` merges ``info`` key by key), or ``"none"``
      (only the end's ``metrics`` or ``truncation``; masks from :meth:`action_masks`,
      as MaskablePPO reads them). ``reset`` returns the full info in every mode;
    * ``queue_load``: waiting jobs per GPU that the ``queue_h`` reward term charges every GPU-hour
      held (``None``, default: the episode's own queue, ``waiting jobs / cluster GPUs`` at each
      instant); a fixed load stands in for the cluster a one-job training episode leaves out;
    * ``render_mode``: ``"ansi"`` (text), ``"rgb_array"`` (a Gantt chart of GPU
      allocation with axes, legend and clock) or ``"human"`` (the same in a
      pygame window, drawn at every step; the ``render`` extra);
    * ``cluster``: the cluster's nodes, GPU types and placement policy (a
      :class:`~evalstop_gym.cluster.ClusterSpec`, a preset name, a YAML/JSON
      path or a dict; default the flat pool). The placement policy, not the
      agent, chooses nodes for the jobs the agent starts; on nodes the
      observation ends with a node block (free GPUs per node; per slot
      ``spread`` and ``speed``; :func:`~evalstop_gym.envs.features.topology_row`),
      and starting a job is masked unless it can be placed;
    * ``trace``: path of a cluster trace to replay instead of generating jobs
      (read once, replayed with each episode's seed), ``trace_format``
      (``philly``, ``helios``, ``acme``) and ``trace_options``: keywords of
      :func:`evalstop_gym.traces.replay_trace` (``jobs, window, sample,
      rescale, gpu_scale, on_bad_row``).

    Seeding: ``reset(seed=s)`` plays the workload of ``WorkloadConfig(seed=s)``,
    the same as ``simulate(..., seed=s)``; ``reset()`` plays the ``seed``
    keyword's workload the first time and afterwards a seed drawn from
    ``self.np_random``, so every sequence of resets is reproducible.
    ``reset(options=...)`` overrides workload fields for that episode only, or
    plays a ready ``Workload`` with ``options={"workload": w}``.
    """

    # render_modes: what this install can run (no "human" without pygame, so checkers pass on a core install);
    # 30 frames per second: a default episode recorded with render.RecordVideo plays in about a minute
    metadata = {"render_modes": render_modes(), "render_fps": 30}

    def __init__(self, *, config: WorkloadConfig | None = None, max_steps: int | str | None = "auto",
                 invalid_action: str = "penalize", reward_weights: dict[str, float] | None = None,
                 step_info: str = "full", render_mode: str | None = None, trace: str | None = None, trace_format: str = "philly",
                 trace_options: dict[str, Any] | None = None, queue_load: float | None = None, **workload: Any):
        workload = workload_fields(workload)
        if config is not None and not isinstance(config, WorkloadConfig):
            raise ConfigError("config", config, "must be a WorkloadConfig or None")
        self._trace = None
        self._trace_options = _check_mapping("trace_options", trace_options, "must be a dict of "
                                             "evalstop_gym.traces.replay_trace keywords")
        if trace is not None:
            from ..traces import read_trace, replay_trace, trace_config

            known = [n for n, p in inspect.signature(replay_trace).parameters.items() if p.kind == p.KEYWORD_ONLY]
            for k, v in self._trace_options.items():
                if k not in known:
                    raise ConfigError(f"trace_options.{k}", v, f"unknown option; known: {', '.join(known)}")
            self._trace = read_trace(trace, trace_format, on_bad_row=self._trace_options.get("on_bad_row", "error"))
            config = config or trace_config()
        elif trace_options:
            raise ConfigError("trace_options", trace_options, "go only with trace=PATH")
        self.config = (config or WorkloadConfig()).replace(**workload)
        max_steps = plain(max_steps)
        if not (max_steps is None or isinstance(max_steps, str) and max_steps == "auto"):
            check_range("max_steps", max_steps, 1, integer=True)
        invalid_action = plain(invalid_action)
        if invalid_action not in INVALID_ACTION_MODES:
            raise ConfigError("invalid_action", invalid_action, f"must be one of {', '.join(INVALID_ACTION_MODES)}")
        self.metadata = {**self.metadata, "render_modes": render_modes()}   # as installed now
        if render_mode == "human" and "human" not in self.metadata["render_modes"]:
            Window.check_available()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError("render_mode", render_mode, f"must be None or one of "
                              f"{', '.join(self.metadata['render_modes'])}")
        step_info = plain(step_info)
        if step_info not in STEP_INFO_MODES:
            raise ConfigError("step_info", step_info, f"must be one of {', '.join(STEP_INFO_MODES)}")
        self.step_info = step_info
        self.max_steps = max_steps
        self.invalid_action = invalid_action
        self.reward_weights = _check_weights(reward_weights)
        queue_load = plain(queue_load)
        if queue_load is not None:
            check_range("queue_load", queue_load, 0.0, 1000.0)
        self.queue_load = None if queue_load is None else float(queue_load)
        self.render_mode = render_mode
        self._sim: Simulator | None = None
        self._viewer: Window | None = None
        self._kind = DONE
        self._episodes = 0
        # clusters of several nodes (or GPU types) add a node block to observations
        self._topo_spec = self.config.cluster if topology_shape(self.config.cluster) else None

    # -- public state (the information boundary's objects only) -----------------
    @property
    def cluster(self) -> ClusterView:
        """The public cluster view of the current episode."""
        if self._sim is None:
            raise RuntimeError("call reset() first")
        return self._sim.cluster

    @property
    def decision(self) -> str:
        """The current decision point: ``"eval"``, ``"schedule"`` or ``"done"``."""
        return DECISION_NAMES[self._kind]

    @property
    def decision_job(self) -> JobView | None:
        """The job at the current eval checkpoint (``None`` elsewhere)."""
        return self._sim.decision_job if self._sim is not None and self._kind == EVAL else None

    # -- episode -----------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        seed = plain(seed)
        if seed is None and self._episodes == 0:
            seed = self.config.seed  # the first unseeded episode plays the configured seed
        super().reset(seed=seed)
        seed = episode_seed(self.np_random, seed, options)
        episode = episode_config(self.config, options)
        w = episode_workload(episode, seed, self._trace, self._trace_options)
        check_topology(self._topo_spec, w)
        # preemptions are priced in the episode's own world, which reset options may change
        self._resume = ResumeCharge(episode_world(episode, self.config))
        self._episodes += 1
        self._sim = Simulator(w)
        n = w.n
        self._n_jobs = n
        self._job_gpus = w.gpus.tolist()  # job id -> GPU demand (public: each job's view shows it)
        self._steps = 0
        self._limit = STEPS_PER_JOB * n if self.max_steps == "auto" else self.max_steps
        self._truncated = False
        # public bookkeeping for the reward: best observed score per job and
        # the GPU-hours the job had attained when it was observed
        self._best = [-math.inf] * n
        self._best_idx = [-1] * n
        self._best_gpu_h = [0.0] * n
        self._terms = [0.0] * len(TERMS)  # accumulated in this step
        self.fresh_eval = FreshEvalCredit(w, seed)   # the credit of a stopped job
        self._hacking = w.hacking.tolist()  # hidden labels, read only by the weighted hidden-truth terms
        self._recorder = AllocationRecorder(w.total_gpus) if self.render_mode in ("rgb_array", "human") else None
        self._begin_episode()
        if self.render_mode == "human":
            self.render()
        return self._observe(), self._info(False)

    def _begin_episode(self) -> None:
        """Advance to the first decision the agent takes (subclasses)."""
        raise NotImplementedError

    def _advance(self) -> int:
        """``sim.advance()`` plus the public reward bookkeeping for the elapsed time."""
        sim = self._sim
        c = sim.cluster
        running, waiting = c.running, c.waiting
        t0, n_run, n_wait, finished = c.now_h, len(running), len(waiting), c.finished
        ran = list(running) if n_run else ()
        busy = c.total_gpus - c.free_gpus
        kind = sim.advance()
        dt = c.now_h - t0
        if dt:  # no time passed: both terms would add an exact 0
            load = n_wait / c.total_gpus if self.queue_load is None else self.queue_load
            terms = self._terms
            terms[0] += (n_run + n_wait) * dt
            terms[4] += busy * dt * load  # GPU-hours held x waiting jobs per GPU: the queue's waiting
        if c.finished != finished:
            views = sim.views
            for j in ran:
                if views[j].status == COMPLETED:
                    self._job_ended(views[j], stopped=False)
        if kind == EVAL:
            v = sim.decision_job
            s = v.eval_scores[-1]
            if s > self._best[v.job_id]:  # strict, as the simulator picks the delivered checkpoint
                self._best[v.job_id] = s
                self._best_idx[v.job_id] = len(v.eval_scores) - 1
                self._best_gpu_h[v.job_id] = v.eval_attained_h[-1] * v.gpus  # v.attained_gpu_h at its checkpoint
        self._kind = kind
        if self._recorder is not None:
            self._recorder.update(c)
        return kind

    def _stop(self, v: JobView) -> None:
        self._sim.stop(v.job_id)
        self._job_ended(v, stopped=True)
        if self._recorder is not None:
            self._recorder.update(self._sim.cluster, stopped=v.job_id)

    def _preempted(self, v: JobView) -> None:
        """Charge a preemption the expected GPU-hours of the job's resume in the episode's world
        (:class:`ResumeCharge`)."""
        self._terms[3] += self._resume(v.job_type, v.gpus)

    def _job_ended(self, v: JobView, stopped: bool) -> None:
        """Delivered score as credited (:class:`FreshEvalCredit`) and GPU-hours past the best observed checkpoint;
        with supervision on, the hidden-truth terms (:func:`~evalstop_gym.envs.supervision.hidden_terms`)."""
        j = v.job_id
        w = self.reward_weights  # read as the step happens, like every term's weight
        if w["detect"] != 0.0 or w["true_waste_gpu_h"] != 0.0:
            detect, true_waste = hidden_terms(self._sim, self._hacking[j], v, stopped)
            self._terms[6] += detect
            self._terms[7] += true_waste
        best = self._best[j]
        if stopped:  # the tenant gets the best observed checkpoint (stops happen at checkpoints)
            self._terms[5] += 1.0
            self._terms[1] += v.attained_gpu_h - self._best_gpu_h[j]
            self._terms[2] += self.fresh_eval(j, self._best_idx[j])
            return
        last = v.eval_scores[-1]  # a completed job delivers its final checkpoint
        self._terms[2] += last
        if last <= best:  # the final checkpoint is no new best: GPU-hours since the best were wasted
            self._terms[1] += v.attained_gpu_h - self._best_gpu_h[j]

    def _finish_step(self, invalid: bool):
        """Assemble ``(obs, reward, terminated, truncated, info)`` and reset the step's terms."""
        self._steps += 1
        w = self.reward_weights  # read as the step happens: a caller may change a weight between steps
        full = self.step_info == "full"
        # info["reward_terms"]: every term / jobs, a hidden-truth term only while weighted (otherwise per-step
        # info stays public), then "invalid". A template of zeros is filled in: a term that is 0 shows 0.0, what
        # 0.0 / jobs gives (terms start at 0.0 and are never -0.0)
        parts = (_PUBLIC_PARTS if not any(_hidden_weights(w)) else dict.fromkeys(
            [k for k in TERMS if k not in HIDDEN_TERMS or w[k] != 0.0] + ["invalid"], 0.0)).copy() if full else None
        # reward = the sum over terms, in TERMS order then "invalid", of weight * (term / jobs); a hidden-truth
        # term counts only while weighted. A term that is 0 adds an exact 0 to the sum, so it is skipped (and
        # a step that changed no term, most sub-steps of a scheduling decision, keeps its list of zeros)
        reward = 0
        terms = self._terms
        if any(terms):
            self._terms = [0.0] * len(TERMS)
            n = self._n_jobs
            for k, x in compress(zip(TERMS, terms), terms):  # the terms that are not 0 (filtered in C: every step)
                x /= n
                reward += w[k] * x
                if parts is not None and k in parts:
                    parts[k] = x
        if invalid:
            reward += w["invalid"] * 1.0
            if parts is not None:
                parts["invalid"] = 1.0
        reward = float(reward)
        terminated = self._kind == DONE
        truncated = not terminated and self._limit is not None and self._steps >= self._limit
        if full:
            info = self._info(terminated)
        else:
            info = {"action_mask": self.action_masks()} if self.step_info == "lean" else {}
            if terminated:
                info["metrics"] = compute_metrics(self._sim.outcome())
        if truncated:
            self._truncated = True
            c = self._sim.cluster
            info["truncation"] = (f"max_steps={self._limit} reached with {self._n_jobs - c.finished} of "
                                  f"{self._n_jobs} jobs unfinished; no metrics (the episode did not end)")
        if full:
            info["reward_terms"] = parts
            info["invalid_action"] = invalid
        if self.render_mode == "human":
            self.render()
        return self._observe(), reward, terminated, truncated, info

    def _info(self, final: bool) -> dict[str, Any]:
        kind, sim = self._kind, self._sim
        info = {"decision": DECISION_NAMES[kind], "time_h": sim.cluster.now_h,
                "decision_job": sim.decision_job.job_id if kind == EVAL else -1,
                "action_mask": self.action_masks()}
        if final:
            info["metrics"] = compute_metrics(self._sim.outcome())
        return info

    def _check_running(self) -> None:
        if self._sim is None:
            raise RuntimeError("call reset() before step()")
        if self._kind == DONE or self._truncated:
            raise RuntimeError("the episode has ended; call reset()")

    def _bad_action(self, action: Any, why: str) -> bool:
        """Raise, or report an invalid action to be played as a no-op."""
        if self.invalid_action == "raise":
            raise ValueError(f"invalid action {action!r} at a {self.decision} decision (t={self.cluster.now_h:.4f} h): "
                             f"{why}. Valid actions: {np.flatnonzero(self.action_masks()).tolist()} "
                             "(see action_masks()); the default invalid_action='penalize' plays invalid "
                             "actions as penalized no-ops")
        return True

    _as_int = staticmethod(as_int)

    # -- abstract ---------------------------------------------------------------
    def _observe(self) -> np.ndarray:
        raise NotImplementedError

    def action_masks(self) -> np.ndarray:
        """Valid actions now: ``np.int8`` 0/1 of length ``action_space.n`` (for MaskablePPO)."""
        raise NotImplementedError

    # -- rendering ----------------------------------------------------------------
    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; make the env with "
                            "render_mode='ansi', 'rgb_array' or 'human'")
            return None
        if self._sim is None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "ansi":
            return ansi_text(self._sim.cluster, self.decision, self.decision_job, self._n_jobs)
        frame = frame_rgb(self._recorder, self._sim.cluster, self.decision, self.decision_job, self._n_jobs)
        if self.render_mode == "rgb_array":
            return frame
        if self._viewer is None:
            self._viewer = Window(self.metadata["render_fps"])
        self._viewer.show(frame)
        return None

    def close(self):
        if self._viewer is not None:
            self._viewer.close()
            self._viewer = None
        super().close()
