"""Files in and out: input data (traces, curve logs) read so that bad bytes give one-line errors and
never hang; output folders checked before any work starts (:func:`prepare_out`).

Rules, shared by every reader:

* only regular files are read: a device (``/dev/zero``, ``/dev/urandom``), a
  FIFO or a directory is refused at once (they never end or are not data);
* a gzip file (by its magic bytes, whatever its name) is decompressed on the fly;
* text is UTF-8 (a byte-order mark is dropped); bytes that are not UTF-8 are
  kept as lone surrogates so a reader can name the row that holds them
  (:func:`has_bad_bytes`) instead of failing mid-file;
* a physical line longer than :data:`MAX_LINE_CHARS` characters is an error
  (it names the line) before it is held in memory, and so is a CSV field over
  the ``csv`` module's limit (131072 characters).
"""

from __future__ import annotations

import csv
import gzip
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from .config import ConfigError

MAX_LINE_CHARS = 1_000_000   # far above any trace or curve-log row; keeps memory bounded
GZIP_MAGIC = b"\x1f\x8b"


class DataFileError(ConfigError):
    """Bad input data: names the file, the line (when one is to blame) and the problem.

    A :class:`ConfigError` (so a ``ValueError``), which the CLI prints on one line, exit code 2.
    """

    field_name = "data"

    def __init__(self, path, line: int | None, problem: str):
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{path}, line {line}" if line else str(path)
        ValueError.__init__(self, f"{where}: {problem}")
        self.field, self.value, self.allowed = self.field_name, str(path), problem


def open_text(path: str, error: type[DataFileError], what: str) -> io.TextIOBase:
    """A text stream of a regular (maybe gzip'd) file; ``error(path, None, ...)`` if it cannot be one."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise error(path, None, f"cannot open the {what}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a device, pipe or socket"
        raise error(path, None, f"is {kind}, not a regular file: a {what} must be a file")
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise error(path, None, f"cannot open the {what}: {e.strerror or e}") from None
    if raw.peek(2)[:2] == GZIP_MAGIC:
        raw = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")


def lines(f: io.TextIOBase, path: str, error: type[DataFileError], what: str) -> Iterator[str]:
    """The lines of ``f``, each at most :data:`MAX_LINE_CHARS` characters; decoding and gzip
    errors become ``error`` naming the line."""
    n = 0
    while True:
        n += 1
        try:
            line = f.readline(MAX_LINE_CHARS + 1)
        except (OSError, EOFError, ValueError) as e:   # a corrupt or truncated gzip stream
            raise error(path, n, f"cannot read the {what}: {e}") from None
        if not line:
            return
        if len(line) > MAX_LINE_CHARS:
            raise error(path, n, f"line longer than {MAX_LINE_CHARS} characters: not a {what}")
        yield line


def csv_rows(f: io.TextIOBase, path: str, error: type[DataFileError], what: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of a CSV stream; a CSV syntax error is ``error`` naming the line."""
    reader = csv.reader(lines(f, path, error, what))
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise error(path, reader.line_num or None, f"not readable as CSV ({e})") from None
        yield reader.line_num, row


def has_bad_bytes(text: str) -> bool:
    """True if ``text`` holds bytes that were not UTF-8 (decoded as lone surrogates)."""
    if text.isascii():   # the common case, checked without encoding
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def prepare_out(out: str | os.PathLike, field: str = "out") -> Path:
    """Create the output folder ``out`` and check it can be written; :class:`ConfigError` (one line) if not.

    An empty path is refused (it would mean the current folder by accident). The
    write probe is a uniquely named temporary file, so two programs creating the
    same fresh folder at once do not trip over each other's probe.
    """
    if not os.fspath(out).strip():
        raise ConfigError(field, os.fspath(out), "must name a folder (for the current folder, pass .)")
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise ConfigError(field, str(path), f"cannot write there ({e.strerror or e})") from None
    return path
