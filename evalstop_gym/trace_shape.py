"""A trace's shape: a small summary of a real job trace that ships where the trace cannot, and jobs drawn from it.

Some traces may not be copied into a repository, so a row that replays one
cannot be played in a plain clone. A *shape* is what such a row needs of the
trace, fitted once by whoever has the file (``evalstop-gym shape``) and
written as a small JSON file; :func:`sample_jobs` then draws any number of
jobs from it, seeded, which :func:`~evalstop_gym.traces.load_trace` replays
like the trace's own rows.

What a shape keeps, each as quantiles (``QUANTILES`` + 1 knots, from the
minimum to the maximum; run times' knots crowd towards the top, :data:`TAIL`):

* **submit times** (hours since the first submit): drawing uniforms through
  their quantile function keeps the trace's arrival-rate profile (busy weeks,
  quiet nights) at the resolution of one knot, 1/256 of the jobs;
* **GPU demands**: every recorded count with its share of jobs;
* **run times per demand band**: bands are made from the largest demand
  down, each closed once it holds ``MIN_BAND_JOBS`` jobs (Philly: 1, 2-3,
  4-7, 8-15, and 16 and more GPUs); the smallest demands left over join the
  band above. A job's run time is drawn from its band's quantiles,
  interpolated in log seconds, so demands stay paired with their lengths
  (Philly's 2-GPU jobs run a median 21 s, its 4-GPU jobs 4.8 h, its jobs of
  16 and more GPUs are shorter than its 8-GPU ones);
* **tenants**: each tenant's share of jobs (names are not kept).

What it loses: the pairing of a job's tenant with its demand and run time,
and of arrival times with job sizes (bursts of large jobs), the exact
extremes inside one knot, and an Acme trace's job-type tiers (every drawn
job has tier 0, so job types follow GPU-hours alone); a drawn job's "line"
in an error is its index in the draw. docs/traces.md measures what that changes in a
replay.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any, NamedTuple

import numpy as np

from .files import DataFileError

SHAPE_FORMAT = "evalstop-gym trace shape 1"
QUANTILES = 256
MIN_BAND_JOBS = 200   # jobs a GPU count needs for a run-time band of its own (257 knots from 200+ jobs)


class ShapeError(DataFileError):
    """A trace-shape file that is not a valid shape (the message names the file and the field)."""

    field_name = "trace_shape"

    def __init__(self, path: str, field: str, problem: str):
        super().__init__(path, None, f"field {field!r} {problem}")


UNIFORM = np.linspace(0.0, 1.0, QUANTILES + 1)
# run times' knots crowd towards the top (1 - (1 - x)^2): their tail is long, and a run time between two far-apart
# top knots would be drawn too long too often (Philly's single-GPU mean: 2.85 h on a uniform grid, 2.31 h recorded)
TAIL = 1.0 - (1.0 - UNIFORM) ** 2


def _quantiles(x: np.ndarray, probs: np.ndarray = UNIFORM) -> list[float]:
    return [float(v) for v in np.quantile(x, probs)]


def fit_shape(table, *, source: str = "", sha256: str = "", command: str = "", licence: str = "") -> dict[str, Any]:
    """The shape of a :class:`~evalstop_gym.traces.TraceTable` (every valid row), as a JSON-ready dict."""
    if table.n < MIN_BAND_JOBS:
        raise DataFileError(table.report.path, None, f"a shape needs at least {MIN_BAND_JOBS} valid jobs; "
                                                     f"the trace has {table.n}")
    submit_h = (table.submit_s - table.submit_s[0]) / 3600.0
    counts, n_at = np.unique(table.gpus, return_counts=True)
    starts, held = [], 0      # bands from the largest demand down, each closed once it holds MIN_BAND_JOBS jobs
    for c, k in zip(counts[::-1], n_at[::-1]):
        held += int(k)
        if held >= MIN_BAND_JOBS:
            starts.append(int(c))
            held = 0
    starts = sorted(starts) or [int(counts[0])]
    starts[0] = int(counts[0])   # the smallest demands left over join the band above them
    bands: list[dict[str, Any]] = []
    for i, lo in enumerate(starts):
        hi = starts[i + 1] - 1 if i + 1 < len(starts) else None
        inside = (table.gpus >= lo) & ((table.gpus <= hi) if hi is not None else True)
        bands.append({"min_gpus": lo, "max_gpus": hi, "_mask": inside})
    for b in bands:
        mask = b.pop("_mask")
        b["jobs"] = int(mask.sum())
        b["duration_s"] = _quantiles(table.duration_s[mask], TAIL)
    _, per_tenant = np.unique(table.tenant, return_counts=True)
    return {
        "format": SHAPE_FORMAT,
        "source": source, "sha256": sha256, "command": command, "licence": licence,
        "jobs": table.n,
        "submit_h": _quantiles(submit_h),
        "gpus": {str(int(c)): int(k) for c, k in zip(counts, n_at)},
        "bands": bands,
        "tenants": sorted((int(k) for k in per_tenant), reverse=True),
    }


def _check(path: str, cond: bool, field: str, problem: str) -> None:
    if not cond:
        raise ShapeError(path, field, problem)


def _knots(path: str, field: str, v: Any, *, positive: bool) -> np.ndarray:
    ok = isinstance(v, list) and len(v) == QUANTILES + 1 and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
    _check(path, ok, field, f"must be a list of {QUANTILES + 1} finite numbers (quantiles, minimum to maximum)")
    a = np.asarray(v, dtype=float)
    _check(path, bool(np.all(np.diff(a) >= 0)), field, "must not decrease")
    _check(path, a[0] > 0 if positive else a[0] == 0, field,
           "must start above 0" if positive else "must start at 0 (hours since the first submit)")
    return a


def read_shape(path) -> dict[str, Any]:
    """Read and check a trace-shape file; every problem names the file and the field."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ShapeError(path, "(file)", f"cannot be read as JSON: {e}") from None
    _check(path, isinstance(data, dict), "(file)", "must be a JSON object")
    _check(path, data.get("format") == SHAPE_FORMAT, "format", f"is {data.get('format')!r}, must be {SHAPE_FORMAT!r}")
    _knots(path, "submit_h", data.get("submit_h"), positive=False)
    gpus = data.get("gpus")
    _check(path, isinstance(gpus, dict) and gpus and all(
        isinstance(k, str) and k.isascii() and k.isdigit() and k == str(int(k)) and int(k) >= 1 and isinstance(v, int) and not isinstance(v, bool) and v >= 1
        for k, v in gpus.items()), "gpus", "must map GPU counts (integers >= 1) to job counts (integers >= 1)")
    bands = data.get("bands")
    _check(path, isinstance(bands, list) and bands, "bands", "must be a non-empty list")
    covered: list[int] = []
    for i, b in enumerate(bands):
        name = f"bands[{i}]"
        _check(path, isinstance(b, dict) and type(b.get("min_gpus")) is int and b["min_gpus"] >= 1 and (
            b.get("max_gpus") is None or (type(b.get("max_gpus")) is int and b["max_gpus"] >= b["min_gpus"])), name,
            "must have an integer min_gpus >= 1 and an integer max_gpus >= min_gpus, or null (no upper end)")
        _knots(path, f"{name}.duration_s", b.get("duration_s"), positive=True)
        covered += [int(k) for k in gpus if int(k) >= b["min_gpus"] and (b["max_gpus"] is None
                                                                         or int(k) <= b["max_gpus"])]
    missing = sorted({int(k) for k in gpus} - set(covered))
    _check(path, not missing, "bands", f"no band holds the GPU counts {missing}")
    twice = sorted({c for c in covered if covered.count(c) > 1})
    _check(path, not twice, "bands", f"bands overlap: the GPU counts {twice} are in more than one")
    tenants = data.get("tenants")
    _check(path, isinstance(tenants, list) and tenants and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 1 for t in tenants), "tenants",
        "must be a non-empty list of job counts (integers >= 1)")
    return data


def file_sha256(path) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _draw(knots: np.ndarray, u: np.ndarray, probs: np.ndarray = UNIFORM) -> np.ndarray:
    """Values at probabilities ``u`` of the quantile function through ``knots`` at ``probs`` (linear between)."""
    return np.interp(u, probs, knots)


class Draw(NamedTuple):
    """Jobs drawn from a shape, sorted by submit: seconds since the first, seconds, GPUs, tenant indices."""

    submit_s: np.ndarray
    duration_s: np.ndarray
    gpus: np.ndarray
    tenant: np.ndarray
    tenants: int


def sample_jobs(shape: dict[str, Any], jobs: int, seed: int) -> Draw:
    """``jobs`` jobs drawn from ``shape`` with their own generator (``seed``), sorted by submit time."""
    rng = np.random.default_rng([seed, 0x54524143])   # a stream of its own: the replay's draws stay the same
    submit_h = np.sort(_draw(np.asarray(shape["submit_h"]), rng.random(jobs)))
    counts = np.array(sorted(int(k) for k in shape["gpus"]))
    weights = np.array([shape["gpus"][str(c)] for c in counts], dtype=float)
    gpus = counts[rng.choice(counts.size, size=jobs, p=weights / weights.sum())]
    u = rng.random(jobs)
    duration_s = np.empty(jobs)
    for b in shape["bands"]:
        inside = (gpus >= b["min_gpus"]) & ((gpus <= b["max_gpus"]) if b["max_gpus"] is not None else True)
        duration_s[inside] = np.exp(_draw(np.log(np.asarray(b["duration_s"])), u[inside], TAIL))
    tenants = np.asarray(shape["tenants"], dtype=float)
    tenant = rng.choice(tenants.size, size=jobs, p=tenants / tenants.sum())
    return Draw(submit_h * 3600.0, duration_s, gpus.astype(np.int64), tenant.astype(np.int64), tenants.size)
