"""An outside policy plays in a process of its own, which sees public views only.

An in-process policy shares the interpreter with the simulator: it can walk up
the call stack or through the garbage collector to the workload's hidden labels
and true curves, or replace :func:`evalstop_gym.metrics.compute_metrics` when
its module is imported. :class:`Remote` closes those doors for the bench's
``module:Class`` policies: the policy is built, and its module imported, in a
fresh interpreter (a new ``python`` process, never a fork of one that holds a
workload), one per outside policy and worker, which builds the policy afresh
each episode. The simulator, the labels and the metrics stay in the parent.
Per decision the parent sends the public fields of the views that changed
since the last one (:class:`~evalstop_gym.view.JobView`,
:class:`~evalstop_gym.view.ClusterView`); the child keeps a mirror of them, asks
the policy, and returns a plan (:class:`~evalstop_gym.policy.Plan`) or a stop
flag as JSON, which the parent checks field by field (a pickle from the child
could run code in the parent). One pair of pipes, one round trip per decision.
An honest policy makes the same decisions in either process (the mirror holds
exactly the public values), so its metrics are identical byte for byte.

A saved model is loaded only in a child of its own too. A stop-policy plays
as above (:class:`Remote`). A learned scheduler acts through its env, which
holds the simulator: the env plays here (built from the model's checked
``config.json``, its weights never opened), and per step the child gets the
observation and action mask (arrays) and returns an action
(:func:`learned_episode`); a saved stop-policy its config names answers the
checkpoints over public views in the same child. Which clusters a model runs
on is asked there too, given the cluster alone (:func:`learned_cannot_run`).

What isolation does not stop (docs/bench.md, *Trust model*): code in the child
runs as the same user, so it could read the parent's memory through the OS, or
regenerate the public test workloads from their public seeds. The submission
rules ask for the source, and ``bench verify`` re-plays it.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import traceback
from array import array
from pathlib import Path
from typing import Any, Sequence

from ..config import ConfigError
from ..experiments.spec import LEARNED
from ..policy import Plan, Policy
from ..view import ClusterView, JobView

HISTORIES = ("eval_scores", "train_losses", "eval_attained_h", "proxy_rewards")


class PolicyProcessError(RuntimeError):
    """The policy's process failed: its traceback, or why it stopped answering."""


# ---------------------------------------------------------------------------------------------------- the child


class _Mirror:
    """The child's copy of the public views, brought up to date by each decision's message."""

    def __init__(self, total_gpus: int, spec):
        from ..placement import Placer

        placer = None if spec is None or spec.trivial else Placer(spec)
        self.cluster = ClusterView(total_gpus, spec, placer)
        self.views: dict[int, JobView] = {}

    def sync(self, state: tuple) -> None:
        now_ticks, now_h, free, finished, nodes, new, updates, waiting, running = state
        c, views = self.cluster, self.views
        c.now_ticks, c.now_h, c.free_gpus, c.finished = now_ticks, now_h, free, finished
        if nodes is not None:
            n = c._nodes
            n.free[:], n.counts[:], n.total, n._cap = nodes[0], nodes[1], nodes[2], None
        for jid, tenant, job_type, gpus, submit, est, evals_total, items in new:
            views[jid] = JobView(jid, tenant, job_type, gpus, submit, est, evals_total, c, items)
        for jid, status, queued, start_h, service, since, restore, where, declines, grown in updates:
            v = views[jid]
            v.status, v.queued_seq, v.start_h, v._service_ticks, v._run_since_ticks = status, queued, start_h, service, since
            v._restore_ticks = restore  # as of this point: the child's clock moves only here
            v.nodes, v.consecutive_declines = where, declines
            for name, values in zip(HISTORIES, grown):
                if values:
                    _grow(v, name, values)
        for order, held in ((waiting, c.waiting), (running, c.running)):
            if order is not None:
                held.clear()
                held.update((j, views[j]) for j in order)


def _grow(v: JobView, name: str, values: Sequence[float]) -> None:
    """Append to a history; a fresh copy where the policy holds a buffer on it (as the simulator does)."""
    try:
        getattr(v, name).extend(values)
    except BufferError:
        setattr(v, name, getattr(v, name) + array("d", values))


def _plan_out(plan: Plan) -> list:
    placed = plan.placed
    return [[int(j) for j in plan.preempt], [int(j) for j in plan.start],
            None if plan.wakeup_h is None else float(plan.wakeup_h),
            None if placed is None else [[int(j), None if w is None else [[int(n), int(g)] for n, g in w]]
                                         for j, w in placed.items()]]


def _reply(conn, status: str, value: Any) -> None:
    # JSON, never pickle, towards the parent: unpickling runs code, so a pickle from the child could reach
    # the simulator after all
    conn.send_bytes(json.dumps([status, value]).encode())


def main(argv: Sequence[str]) -> None:
    """The child, given ``READ_FD WRITE_FD PARENT_PID [parse]``: one request per message (:func:`_serve`), or
    (``parse``) one list of ``--policy`` texts to parse."""
    from multiprocessing.connection import Connection

    from ..processes import exit_with_parent

    read_fd, write_fd, parent_pid = map(int, argv[:3])
    exit_with_parent(parent_pid)
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    sys.path[:] = inbox.recv()   # the parent's import path: outside modules are found as they are there
    if argv[3:] == ["parse"]:
        _parse(inbox, outbox)
    else:
        _serve(inbox, outbox)


def _serve(inbox, outbox) -> None:
    """Requests ``(kind, *args)``, one per message, each given public values only (never a workload, the
    simulator or metrics), answered as JSON:

    * ``("decide", header, state, job)``: :class:`Remote`'s decision (a plan, or for ``job`` a stop flag) on
      the mirror of the views, a new episode's policy built from ``header``;
    * ``("cannot_run", scheduler, params, gpus, cluster)``: why a saved model cannot play a cluster of
      ``gpus`` GPUs laid out as ``cluster`` (the reason building it there gives), or ``None``;
    * ``("episode", params, gpus, cluster)`` then ``("act", observation, masks)``: a saved learned scheduler
      built for an episode's cluster, then its action for each observation and action mask (arrays).
    """
    from ..experiments.learned import provider

    policy = mirror = act = None
    while True:
        try:
            kind, *args = inbox.recv()
        except EOFError:
            return
        try:
            if kind == "decide":
                header, state, job = args
                if header is not None:   # a new episode: the policy built afresh (as a run in process builds it)
                    scheduler, stopper, params, total_gpus, spec = header
                    policy = _build(scheduler, stopper, dict(params), total_gpus, spec)
                    mirror = _Mirror(total_gpus, spec)
                    policy.reset()
                mirror.sync(state)
                if job is None:
                    reply = _plan_out(policy.schedule(mirror.cluster))
                else:
                    reply = bool(policy.should_stop(mirror.views[job], mirror.cluster))
            elif kind == "act":
                reply = int(act(*args))
            elif kind == "episode":
                act, reply = provider().scheduler_actor(*args), None
            else:
                reply = _cannot_run(*args)
        except ConfigError as e:   # a bad model or parameter: one line, as in this process
            _reply(outbox, "config", [e.field, str(e.value), e.allowed])
            continue
        except Exception:   # noqa: BLE001 - any failure of outside code goes back to the parent, whole
            _reply(outbox, "error", traceback.format_exc())
            continue
        _reply(outbox, "ok", reply)


def _build(scheduler: str, stopper: str, params: dict, total_gpus: int, spec):
    """The policy of a decision loop: :func:`~.policies.build`'s, or a saved stop-policy over ``scheduler``
    (loaded here by the learned layer's provider, for the episode's cluster)."""
    from .policies import build

    if stopper != LEARNED:
        return build(scheduler, stopper, params)
    from ..experiments.learned import provider

    return provider().stopper(params, build(scheduler, "none", {}), total_gpus, spec)


def _cannot_run(scheduler: str, params: dict, gpus: int, cluster) -> str | None:
    """Why the saved model of ``params`` cannot play that cluster: building what would play there refuses it."""
    from ..experiments.learned import provider

    try:
        if scheduler == LEARNED:
            provider().scheduler_actor(params, gpus, cluster)
        else:
            _build(scheduler, LEARNED, params, gpus, cluster)
    except ConfigError as e:
        return e.allowed
    return None


# ---------------------------------------------------------------------------------------------------- the parent


def _parse(inbox, outbox) -> None:
    from dataclasses import asdict

    from .policies import parse_policies

    try:
        texts, want_spaces = inbox.recv()
        policies = parse_policies(texts)
        spaces = {}
        if want_spaces:
            from .space import spaces_of

            spaces = spaces_of(policies)
        _reply(outbox, "ok", [[asdict(p) for p in policies], spaces])
    except ConfigError as e:
        _reply(outbox, "config", [e.field, str(e.value), e.allowed])
    except Exception:   # noqa: BLE001
        _reply(outbox, "error", traceback.format_exc())


def names_outside_code(texts: Sequence[str]) -> bool:
    """Whether any ``--policy`` text names a ``module:Class`` (outside code, to be kept out of this process)."""
    from .policies import _CLASS

    return any(_CLASS.match(part) for t in texts for part in t.rsplit(":", 1)[0].split("+") + t.split("+"))


def parse_outside(texts: Sequence[str], spaces: bool = False) -> tuple[list, dict[str, dict[str, str]]]:
    """:func:`~.policies.parse_policies` of ``texts`` and (``spaces``) :func:`~.space.spaces_of` them, run in a
    child process: checking a ``module:Class`` imports its module, whose code must not run beside the simulator."""
    from .policies import BenchPolicy

    player = _Player("parse")
    try:
        value, declared = player.ask("module:Class", (list(texts), spaces))
    finally:
        player.close()
    return [BenchPolicy(**{**p, "params": tuple((k, v) for k, v in p["params"])}) for p in value], declared


CHILD = "import sys; from evalstop_gym.bench.isolate import main; main(sys.argv[1:])"


class _Player:
    """One child process (:data:`CHILD`, running :func:`main`) and its two pipes."""

    def __init__(self, *mode: str):
        import subprocess

        import evalstop_gym

        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ)
        root = str(Path(evalstop_gym.__file__).resolve().parents[1])   # this checkout's package, not another
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        # one decision at a time, while the parent waits for it: with a second OpenMP thread (torch's) each
        # small forward pass waits for two cores (34 ms per round trip instead of 0.2 ms, measured on 2 busy
        # cores: docs/bench.md, Trust model)
        env.setdefault("OMP_NUM_THREADS", "1")
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(down_r), str(up_w), str(os.getpid()), *mode],
                                     pass_fds=(down_r, up_w), env=env, stdin=subprocess.DEVNULL)
        os.close(down_r)
        os.close(up_w)
        from multiprocessing.connection import Connection

        self.send_conn, self.recv_conn = Connection(down_w, readable=False), Connection(up_r, writable=False)
        self.send_conn.send(list(sys.path))

    def ask(self, label: str, message: tuple) -> Any:
        try:
            self.send_conn.send(message)
            raw = self.recv_conn.recv_bytes()
        except (EOFError, OSError):
            raise PolicyProcessError(f"policy {label}: its process ended (exit code {self.proc.poll()})") from None
        try:
            status, value = json.loads(raw)
        except (ValueError, TypeError):
            raise PolicyProcessError(f"policy {label}: its process sent something other than a decision") from None
        if status == "config" and isinstance(value, list) and len(value) == 3 and all(isinstance(x, str) for x in value):
            raise ConfigError(*value)   # a bad --policy or model: one line, as in this process
        if status != "ok":
            raise PolicyProcessError(f"policy {label} failed in its process:\n{value}")
        return value

    def close(self) -> None:
        for conn in (self.send_conn, self.recv_conn):
            conn.close()
        try:
            self.proc.wait(5)
        except Exception:   # noqa: BLE001 - a child that does not end on EOF is killed
            self.proc.kill()
            self.proc.wait()


_PLAYERS: dict[tuple, _Player] = {}   # least recently used first
MAX_PLAYERS = 8   # live children per process: a saved model's holds torch (about 300 MB), and tuning trains many


def _player(*key: str) -> _Player:
    """This process's child for the outside code ``key`` names (a scheduler and stopper pair, its saved model
    if any, and the child's mode if not the default: one child each, so two submissions never share an
    interpreter); started on
    first use, ended when this process exits or when :data:`MAX_PLAYERS` newer ones are in use."""
    p = _PLAYERS.pop(key, None)
    if p is None or p.proc.poll() is not None:
        if not _PLAYERS:
            atexit.register(close_players)
        while len(_PLAYERS) >= MAX_PLAYERS:
            _PLAYERS.pop(next(iter(_PLAYERS))).close()
        p = _Player(*key[3:])
    _PLAYERS[key] = p
    return p


def close_players() -> None:
    """End every child of this process."""
    while _PLAYERS:
        _PLAYERS.popitem()[1].close()


class Remote(Policy):
    """A policy that plays in a child process: ``build(scheduler, stopper, params)`` there (:mod:`.policies`),
    afresh each episode. Its exceptions come back as :class:`PolicyProcessError` with the child's traceback."""

    name = "remote"

    def __init__(self, scheduler: str, stopper: str, params: Sequence[tuple[str, Any]] = (),
                 player: "_Player | None" = None):
        self.label = f"{scheduler}+{stopper}"
        self._build = (scheduler, stopper, tuple(params))
        self._player = player or _player(scheduler, stopper, _model(params))
        self._new = True

    # -- what the child is told --------------------------------------------------------------------------
    def reset(self) -> None:
        self._new = True   # the next decision starts a new episode: a fresh mirror, policy.reset() there

    def _state(self, c: ClusterView) -> tuple[tuple | None, tuple]:
        header = None
        if self._new:
            header = (*self._build, c.total_gpus, c.spec)
            self._sent: dict[int, Any] = {}     # job id -> what the child last got (queued stamp / running key)
            self._views: dict[int, JobView] = {}  # the jobs the child holds that have not ended
            self._lengths: dict[int, tuple] = {}
            self._orders: tuple = (None, None, None)
            self._finished = 0
            self._new = False
        sent, new, updates = self._sent, [], []
        for jid, v in c.waiting.items():
            if sent.get(jid) != v.queued_seq:
                self._changed(v, v.queued_seq, new, updates)
        for jid, v in c.running.items():
            key = (v.queued_seq, v._service_ticks, v._run_since_ticks, v.restore_ticks, v.nodes, len(v.eval_scores))
            if sent.get(jid) != key:
                self._changed(v, key, new, updates)
        if c.finished != self._finished:   # jobs that ended since: their last state, once
            self._finished = c.finished
            for jid in [j for j in sent if j not in c.waiting and j not in c.running]:
                del sent[jid]
                self._changed(self._views.pop(jid), None, new, updates)
        waiting, running = list(c.waiting), list(c.running)
        nodes = None if c._nodes is None else (list(c._nodes.free), list(c._nodes.counts), c._nodes.total)
        last_w, last_r, last_n = self._orders
        self._orders = (waiting, running, nodes)
        return header, (c.now_ticks, c.now_h, c.free_gpus, c.finished, None if nodes == last_n else nodes,
                        new, updates, None if waiting == last_w else waiting, None if running == last_r else running)

    def _changed(self, v: JobView, key, new: list, updates: list) -> None:
        jid = v.job_id
        if jid not in self._lengths:
            new.append((jid, v.tenant, v.job_type, v.gpus, v.submit_ticks, v.est_length_ticks, v.evals_total,
                        v.eval_items))
            self._lengths[jid] = (0, 0, 0, 0)
            self._views[jid] = v
        had = self._lengths[jid]
        hist = [getattr(v, name) for name in HISTORIES]
        self._lengths[jid] = tuple(len(h) for h in hist)
        updates.append((jid, v.status, v.queued_seq, v.start_h, v._service_ticks, v._run_since_ticks, v.restore_ticks,
                        v.nodes, v.consecutive_declines, tuple(h[n:].tolist() if len(h) > n else () for h, n in zip(hist, had))))
        if key is not None:
            self._sent[jid] = key

    # -- the decisions -----------------------------------------------------------------------------------
    def schedule(self, cluster: ClusterView) -> Plan:
        header, state = self._state(cluster)
        return _plan_in(self.label, self._player.ask(self.label, ("decide", header, state, None)))

    def should_stop(self, job: JobView, cluster: ClusterView) -> bool:
        header, state = self._state(cluster)
        stop = self._player.ask(self.label, ("decide", header, state, job.job_id))
        if not isinstance(stop, bool):
            raise PolicyProcessError(f"policy {self.label}: its process answered {stop!r} to a stop decision")
        return stop


def _model(params: Sequence[tuple[str, Any]]) -> str:
    return str(dict(params).get("model", ""))


STOP_BASE = "fifo"   # the base under a saved stop-policy that answers a learned scheduler's checkpoints (as
# HandCodedStops' own rule: only should_stop is asked of it)


def learned_cannot_run(spec) -> str | None:
    """The learned provider's reason why a saved model's run cannot play its workload's cluster, or ``None``,
    asked in the model's own process (finding out loads the model), which is told the cluster only."""
    from ..workload import generate

    workload = generate(spec.config)
    params = dict(spec.params)
    why = _learned_player(spec).ask(f"model {_model(spec.params)}", (
        "cannot_run", spec.scheduler, params, workload.total_gpus, workload.spec))
    if not (why is None or isinstance(why, str)):
        raise PolicyProcessError(f"model {_model(spec.params)}: its process answered {str(why)[:200]} to cannot_run")
    return why


def learned_episode(spec) -> dict[str, Any]:
    """The metrics of a learned scheduler's episode: its env, and with it the simulator, the labels and the
    metrics, played in this process; its model, in its own process, gets each observation and action mask
    (arrays) and returns an action. A saved stop-policy its config names answers over public views
    (:class:`Remote`), in its own process too."""
    from ..experiments.learned import provider
    from ..workload import generate

    label = f"model {_model(spec.params)}"
    player = _learned_player(spec)
    workload = generate(spec.config)
    params = dict(spec.params)
    player.ask(label, ("episode", params, workload.total_gpus, workload.spec))

    def act(obs, masks) -> int:
        action = player.ask(label, ("act", obs, masks))
        if type(action) is not int:
            raise PolicyProcessError(f"{label}: its process answered {str(action)[:200]} as an action")
        return action

    # a stop-policy the scheduler's config names is part of the same submission: asked in the same process
    return provider().scheduler_episode(params, workload, act,
                                        lambda path: Remote(STOP_BASE, LEARNED, (("model", str(path)),), player))


def _learned_player(spec) -> _Player:
    """The process of a saved model's run (a stop-policy's :class:`Remote` plays in the same one)."""
    return _player(spec.scheduler, spec.stopper, _model(spec.params))


def _ints(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in x)


def _plan_in(label: str, value: Any) -> Plan:
    """The child's plan, checked field by field (it is outside code's output)."""
    ok = isinstance(value, list) and len(value) == 4 and _ints(value[0]) and _ints(value[1])
    if ok:
        preempt, start, wakeup_h, placed = value
        ok = (wakeup_h is None or (isinstance(wakeup_h, (int, float)) and not isinstance(wakeup_h, bool))) and (
            placed is None or (isinstance(placed, list) and all(
                isinstance(e, list) and len(e) == 2 and isinstance(e[0], int)
                and (e[1] is None or all(isinstance(w, list) and len(w) == 2 and _ints(w) for w in e[1]))
                for e in placed)))
    if not ok:
        raise PolicyProcessError(f"policy {label}: its process answered {str(value)[:200]} to a schedule decision")
    return Plan(tuple(preempt), tuple(start), None if wakeup_h is None else float(wakeup_h),
                None if placed is None else {j: None if w is None else tuple(map(tuple, w)) for j, w in placed})

