"""A disk cache of parsed traces, so replaying a large trace does not re-parse it every time.

:func:`evalstop_gym.traces.read_trace` checks every row of a CSV (82,247 rows
for Philly: about 0.3 s); the checked table is stored here as one ``.npz``
file of named arrays and a JSON record and read back in milliseconds.

Never stale, never wrong:

* an entry is used only if it was made from the same **bytes** (a SHA-256 of
  the file; not its size or modification time, which ``cp -p``, ``rsync -t``
  or ``tar`` keep across an edit), with the same arguments and by the same
  parser source files; otherwise the trace is parsed again and its entry (one
  per resolved path and arguments) replaced;
* the entry holds every field the caller gives it (:func:`cached` stores what
  ``parse`` returns, whole), so a replay from the cache and a fresh one are equal
  field for field;
* each entry carries a SHA-256 of its own contents, checked on every read: an
  empty, truncated or corrupt entry (a disk error, a kill while another
  program copied it) is parsed again and replaced, never raised and never used.

Entries are written to a temporary file and renamed, so two replays running at
once each see a whole entry or none. Traces that fail to parse are not cached
(the error comes again).

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
from typing import Callable, Iterable

import numpy as np

FORMAT = 2  # bump when the stored layout changes
_META, _SUM, _VERSION = "__meta__", "__sha256__", "__version__"
Entry = tuple[dict[str, np.ndarray], dict]   # named arrays, and a JSON-able record


def cache_dir() -> str:
    """The directory holding cached traces (not created here)."""
    root = os.environ.get("EVALSTOP_GYM_CACHE_DIR")
    if not root:
        import platformdirs

        root = platformdirs.user_cache_dir("evalstop-gym", appauthor=False)
    return os.path.join(root, "traces")


def file_digest(path, chunk: int = 2**20) -> str | None:
    """SHA-256 of the bytes of regular file ``path`` (None if it is not one: the parser names the problem)."""
    import stat

    h = hashlib.sha256()
    try:
        with open(path, "rb", buffering=0) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            while block := f.read(chunk):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def _checksum(arrays: dict[str, np.ndarray], meta_text: str) -> str:
    h = hashlib.sha256(meta_text.encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"\0{name}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _code_digest(code: Iterable[str]) -> str:
    h = hashlib.sha256()
    for file in code:
        with open(file, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


def entry_path(path, options: dict, code: Iterable[str]) -> tuple[str, str] | None:
    """``(file, version)`` of the entry of trace ``path`` read with ``options`` by the parser in ``code``:
    where it lives, and what it must have been made from (None: not a regular file, no entry)."""
    digest = file_digest(path)
    if digest is None:
        return None
    name = json.dumps([FORMAT, os.path.realpath(path), options], sort_keys=True, default=str)
    version = json.dumps([digest, _code_digest(code)])
    return os.path.join(cache_dir(), hashlib.sha256(name.encode()).hexdigest()[:32] + ".npz"), version


def load_entry(file: str, version: str) -> Entry | None:
    """The entry in ``file`` if it is whole (its checksum matches) and of ``version``, else None."""
    try:
        with np.load(file, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files if k not in (_META, _SUM, _VERSION)}
            meta_text, stored, made = str(z[_META]), str(z[_SUM]), str(z[_VERSION])
        if made != version or _checksum(arrays, made + meta_text) != stored:
            return None
        return arrays, json.loads(meta_text)
    except Exception:   # absent, empty, truncated, not a zip, a bad member, unreadable: parse again
        return None


def store_entry(file: str, version: str, arrays: dict[str, np.ndarray], meta: dict) -> None:
    """Write an entry atomically; a cache that cannot be written is skipped."""
    meta_text = json.dumps(meta, sort_keys=True, allow_nan=False)
    directory = os.path.dirname(file)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".npz.tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays, **{_META: np.array(meta_text), _VERSION: np.array(version),
                                     _SUM: np.array(_checksum(arrays, version + meta_text))})
        os.replace(tmp, file)   # atomic: a reader sees the old entry or the new one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def cached(path, options: dict, code: Iterable[str], parse: Callable[[], Entry]) -> Entry:
    """``parse()`` of trace ``path`` with ``options`` (by the parser whose source files are ``code``), from
    the cache when a whole entry for these bytes, options and code exists; else parsed and stored."""
    where = entry_path(path, options, code)
    if where is not None:
        entry = load_entry(*where)
        if entry is not None:
            return entry
    arrays, meta = parse()
    if where is not None:
        store_entry(where[0], where[1], arrays, meta)
    return arrays, meta
