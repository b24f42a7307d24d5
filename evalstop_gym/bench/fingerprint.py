"""The fingerprint of every input of a bench score, and where a results file came from.

A score depends on code (the simulator and everything it imports, the
policies, the bench's playing, scoring and statistics, the learned layer for a
saved model), on data files shipped in the package (worlds such as
``data/grounded.yaml``, the TRL curve library, learned recipes' hyperparameters)
and on the numerical libraries underneath (numpy, scipy, pyarrow). The
fingerprint hashes all three (:data:`SCORED_CODE`, :data:`SCORED_DATA`,
:data:`VERSIONED`), so any edit to any of them gives new results files a new
fingerprint, and :func:`~.results.check_comparable` refuses to rank them with older ones.
Adapters a score never runs (the command line, the live integrations, the
multi-agent env, plots and tables) are left out: editing them keeps results
comparable.

:func:`provenance` adds what a reader of a results file needs to find the
code again: the git commit (``"unknown"`` outside a checkout), whether the
checkout had uncommitted edits, the date (UTC) and the library versions.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

# relative to the package folder; a glob each
SCORED_CODE = ("*.py", "baselines/*.py", "compiled/*.py", "bench/*.py", "experiments/runner.py", "experiments/stats.py",
               "experiments/learned.py", "envs/*.py", "agents/*.py")
SCORED_DATA = ("data/**/*", "agents/hyperparams/*")
VERSIONED = ("numpy", "scipy", "pyarrow")


def package_root() -> Path:
    """The folder of the ``evalstop_gym`` package this process runs."""
    return Path(__file__).resolve().parents[1]


def scored_files(root: Path, patterns=SCORED_CODE + SCORED_DATA) -> list[Path]:
    """Every file the fingerprint reads under ``root``, sorted (compiled caches left out)."""
    found = {p for pattern in patterns for p in root.glob(pattern)
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _hash_files(root: Path, patterns) -> str:
    h = hashlib.sha256()
    for p in scored_files(root, patterns):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def versions() -> dict[str, str]:
    """The installed version of each :data:`VERSIONED` library (``"absent"`` if it is not installed)."""
    out = {}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def parts(root: Path | None = None) -> dict[str, Any]:
    """``{"code": hash, "data": hash, "versions": {...}}`` of the package at ``root`` (default: this one)."""
    if root is None:
        return _own_parts()
    return {"code": _hash_files(root, SCORED_CODE), "data": _hash_files(root, SCORED_DATA), "versions": versions()}


@functools.lru_cache(maxsize=1)
def _own_parts() -> dict[str, Any]:
    return parts(package_root())


def combine(p: dict[str, Any]) -> str:
    """One hash of the :func:`parts`."""
    return hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest()[:12]


def fingerprint(root: Path | None = None) -> str:
    """The fingerprint of every input of a score (see the module docstring), 12 hex digits."""
    return combine(parts(root))


def commit(root: Path | None = None) -> tuple[str, bool]:
    """``(git commit, uncommitted edits?)`` of the checkout holding the package; ``("unknown", False)`` when
    it is not in a git checkout (an installed package) or git is absent."""
    folder = root or package_root()
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown", False
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=folder, capture_output=True,
                               text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown", False
    return head.stdout.strip(), bool(dirty.stdout.strip())


def provenance() -> dict[str, Any]:
    """What a results file records of where it came from: fingerprint and its parts, commit, date, versions."""
    p = parts()
    sha, dirty = commit()
    return {"code": combine(p), "fingerprint": {"code": p["code"], "data": p["data"]}, "commit": sha,
            "uncommitted_changes": dirty,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "versions": p["versions"]}
