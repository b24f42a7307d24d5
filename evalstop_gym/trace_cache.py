"""A disk cache of parsed traces, so replaying a large trace does not re-parse it every time.

:func:`evalstop_gym.traces.read_trace` checks every row of a CSV (82,247 rows
for Philly: about 0.3 s); the checked table is stored here as one ``.npz``
file and read back in milliseconds. An entry is used only if everything that
decides the table is unchanged: the trace's resolved path, size and
modification time (ns), every argument of the call, and the source of the
parser itself (``traces.py`` and ``files.py``), so it is never stale; any
mismatch re-parses and replaces it.
Traces that fail to parse are not cached (the error comes again).

Where: ``$EVALSTOP_GYM_CACHE_DIR`` if set, else the user cache directory
(``platformdirs.user_cache_dir("evalstop-gym")``, e.g. ``~/.cache/evalstop-gym``
on Linux), subdirectory ``traces``. Deleting it is always safe. If it cannot
be written (read-only home), traces are parsed as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from typing import Callable

import numpy as np

FORMAT = 1  # bump when the stored layout changes
_ARRAYS = ("submit_s", "duration_s", "gpus", "tenant", "tier", "line")


def cache_dir() -> str:
    """The directory holding cached traces (not created here)."""
    root = os.environ.get("EVALSTOP_GYM_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("evalstop-gym", appauthor=False)
    return os.path.join(root, "traces")


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


def _parser_digest() -> str:
    """Hash of the parser's source: the trace layouts and rules, and the file reading under them."""
    from . import files, traces

    h = hashlib.sha256()
    for module in (traces, files):
        with open(module.__file__, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def cached_table(path, options: dict, parse: Callable[[], object]):
    """The parsed table of trace ``path`` read with ``options``: from the cache, or ``parse()`` and store it."""
    from .traces import TraceReport, TraceTable

    try:
        st = os.stat(path)
    except OSError:
        return parse()  # the parser names the problem
    real = os.path.realpath(path)
    name = _digest(real, options)  # one entry per trace and options; replaced when the file or parser changes
    version = _digest(FORMAT, st.st_size, st.st_mtime_ns, _parser_digest())
    directory = cache_dir()
    file = os.path.join(directory, f"{name}.npz")
    try:
        with np.load(file, allow_pickle=False) as z:
            if str(z["version"]) == version:
                meta = json.loads(str(z["meta"]))
                report = TraceReport(path=os.fspath(path), format=meta["format"], rows=meta["rows"],
                                     skipped=Counter(meta["skipped"]), first_bad_line=meta["first_bad_line"],
                                     filtered=Counter(meta["filtered"]), notes=Counter(meta["notes"]))
                return TraceTable(**{a: z[a] for a in _ARRAYS}, tenant_names=meta["tenant_names"],
                                  report=report)
    except (OSError, KeyError, ValueError):
        pass  # absent, unreadable or from another layout: parse again
    table = parse()
    r = table.report
    meta = dict(format=r.format, rows=r.rows, skipped=r.skipped, first_bad_line=r.first_bad_line,
                filtered=r.filtered, notes=r.notes, tenant_names=table.tenant_names)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".npz.tmp")
    except OSError:
        return table  # no writable cache: parse every time, as without one
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, version=np.array(version), meta=np.array(json.dumps(meta)),
                     **{a: getattr(table, a) for a in _ARRAYS})
        os.replace(tmp, file)  # atomic: a reader sees the old entry or the new one
    except OSError:
        os.unlink(tmp)
    return table
