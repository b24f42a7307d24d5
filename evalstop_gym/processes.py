"""Worker processes: how many a pool starts, and that none outlives its parent.

Every pool of the package (the experiment runner's, the curve generator's)
starts :func:`cap_workers` workers, never more than there are tasks or CPUs,
and runs :func:`init_worker` in each, so a ``kill -9`` of the parent takes its
workers with it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from .config import ConfigError


def cpu_count() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cap_workers(workers: int, tasks: int, field: str = "workers") -> int:
    """``workers`` (an integer >= 1) capped by the number of ``tasks`` and of CPUs: more would only queue."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(field, workers, "must be an integer >= 1")
    return max(1, min(workers, tasks, cpu_count()))


def init_worker(parent_pid: int) -> None:
    """A pool's worker initializer: Ctrl-C is the parent's, and the worker ends with the parent.

    Ctrl-C is the parent's to handle: it stops submitting, lets running tasks
    finish and keeps every finished one on disk; workers must not die with tracebacks.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent(parent_pid)


def exit_with_parent(parent_pid: int) -> None:
    """End this worker when the parent dies, even by ``kill -9`` (no orphans left running).

    Linux: the kernel sends SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``);
    elsewhere a daemon thread polls the parent pid twice a second.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent_pid:   # the parent died before prctl took effect
                os._exit(1)
            return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
