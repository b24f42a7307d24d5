"""Files in and out: input data (traces, curve logs) read so that bad bytes give one-line errors and
never hang; output folders checked before any work starts (:func:`prepare_out`).

Rules, shared by every reader:

* only regular files are read: a device (``/dev/zero``, ``/dev/urandom``), a
  FIFO or a directory is refused at once (they never end or are not data), and
  so is a file on ``/proc`` or ``/sys`` (a view of the kernel, not data);
* a gzip file (by its magic bytes, whatever its name) is decompressed on the fly;
* text is UTF-8 (a byte-order mark is dropped); bytes that are not UTF-8 are
  kept as lone surrogates so a reader can name the row that holds them
  (:func:`has_bad_bytes`) instead of failing mid-file;
* a physical line longer than :data:`MAX_LINE_CHARS` characters is an error
  (it names the line) before it is held in memory, and so is a CSV field over
  the ``csv`` module's limit (131072 characters);
* a gzip stream stops with an error once it has inflated to more than
  :data:`MAX_DECOMPRESSED_BYTES`, or to more than :data:`MAX_GZIP_RATIO` times
  the compressed bytes read so far, past the first :data:`GZIP_RATIO_FREE_BYTES`
  (a "zip bomb": real traces and logs compress 3-20 times), and a text stream stops at
  :data:`MAX_LINES` physical lines, blank ones included;
* configuration files (YAML recipes and world files, JSON model configs, cluster specs) are
  read whole, at most :data:`MAX_YAML_BYTES` (YAML) or :data:`MAX_CONFIG_BYTES` (JSON; the size is
  checked before a byte is read), with at most :data:`MAX_NESTING` levels of nesting and
  :data:`MAX_CONFIG_NODES` values once YAML aliases are expanded ("billion laughs"), by
  :func:`load_yaml` and :func:`load_json`; YAML is read with a safe loader (plain data only,
  no tags that build objects), and a key written twice in one mapping or object is an error;
* a directory is walked at most :data:`MAX_WALK_DEPTH` levels deep and over
  at most :data:`MAX_WALK_ENTRIES` entries (:func:`walk`); symbolic links to
  directories are not followed.

Every problem is a :class:`DataFileError` (a ``ConfigError``): one line naming
the file, the line when one is to blame, and what was wrong.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gzip
import io
import os
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from .checks import ConfigError

MAX_LINE_CHARS = 1_000_000   # far above any trace or curve-log row; keeps memory bounded
MAX_LINES = 20_000_000       # physical lines of a text stream: twice the rows a trace may have
MAX_DECOMPRESSED_BYTES = 4 * 2**30   # what one gzip'd input may inflate to
MAX_GZIP_RATIO = 100         # inflated / compressed bytes, checked past GZIP_RATIO_FREE_BYTES
GZIP_RATIO_FREE_BYTES = 2**20
MAX_CONFIG_BYTES = 16 * 2**20   # a model's config.json, a JSON cluster spec
MAX_YAML_BYTES = 2**20       # a YAML recipe, cluster spec or world file (real ones: a few KB; parsing 1 MiB takes ~1 s)
MAX_NESTING = 64             # levels of lists and mappings in a config file
MAX_CONFIG_NODES = 1_000_000    # values of a config file, YAML aliases expanded
MAX_WALK_DEPTH = 8           # folder levels below a curve-log directory
MAX_WALK_ENTRIES = 100_000   # files and folders looked at under one directory
GZIP_MAGIC = b"\x1f\x8b"


class DataFileError(ConfigError):
    """Bad input data: names the file, the line (when one is to blame) and the problem.

    A :class:`ConfigError` (so a ``ValueError``), which the CLI prints on one line, exit code 2.
    """

    field_name = "data"

    def __init__(self, path, line: int | None, problem: str):
        problem = " ".join(str(problem).splitlines())   # one line, whatever a parser's message holds
        self.path, self.line, self.problem = str(path), line, problem
        where = f"{path}, line {line}" if line else str(path)
        ValueError.__init__(self, f"{where}: {problem}")
        self.field, self.value, self.allowed = self.field_name, str(path), problem

    def __reduce__(self):
        return type(self), (self.path, self.line, self.problem)


def open_binary(path, error: type[DataFileError], what: str) -> io.BufferedIOBase:
    """A byte stream of a regular (maybe gzip'd, then inflated within the limits) file.

    The file is opened first and checked through its descriptor (``O_NONBLOCK``:
    opening a FIFO never waits for a writer), so a file swapped for a device
    between the check and the read is still refused.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise error(path, None, f"cannot open the {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a device, pipe or socket"
            raise error(path, None, f"is {kind}, not a regular file: a {what} must be a file")
        if st.st_dev in _kernel_devices():
            raise error(path, None, f"is a kernel file (/proc, /sys), not a {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        raw = open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    if raw.peek(2)[:2] == GZIP_MAGIC:
        return _Inflated(raw, path, error, what)
    return raw


@functools.lru_cache(maxsize=1)
def _kernel_devices() -> frozenset[int]:
    """The devices of /proc and /sys: their "regular" files (``/proc/self/mem``) are views of the kernel or a
    process, which may be endless, block, or fail part way, not data."""
    out = set()
    with contextlib.suppress(OSError):
        plain = os.stat("/").st_dev   # where /proc is no mount of its own, its files are ordinary ones
        for root in ("/proc", "/sys"):
            with contextlib.suppress(OSError):
                out.add(os.stat(root).st_dev)
        out.discard(plain)
    return frozenset(out)


class _Inflated(io.RawIOBase):
    """A gzip stream that refuses to inflate past the limits (a decompression bomb)."""

    def __init__(self, raw, path, error, what):
        self._raw, self._gz = raw, gzip.GzipFile(fileobj=raw, mode="rb")
        self._path, self._error, self._what = path, error, what
        self.inflated = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:
            n = self._gz.readinto(b)
        except (OSError, EOFError, ValueError) as e:   # a corrupt or cut gzip stream
            raise self._error(self._path, None, f"cannot read the {self._what}: {e}") from None
        self.inflated += n
        ratio = self.inflated / max(self._raw.tell(), 1)   # over the compressed bytes read so far
        if self.inflated > MAX_DECOMPRESSED_BYTES or (self.inflated > GZIP_RATIO_FREE_BYTES
                                                      and ratio > MAX_GZIP_RATIO):
            raise self._error(self._path, None, f"the gzip'd {self._what} inflates to more than "
                              f"{self.inflated} bytes ({ratio:.0f} times its size; the limits are "
                              f"{MAX_DECOMPRESSED_BYTES} bytes and {MAX_GZIP_RATIO} times): a decompression bomb?")
        return n

    def close(self) -> None:
        try:
            self._gz.close()
            self._raw.close()
        finally:
            super().close()


def open_text(path: str, error: type[DataFileError], what: str) -> io.TextIOBase:
    """A text stream of a regular (maybe gzip'd) file; ``error(path, None, ...)`` if it cannot be one."""
    raw = open_binary(path, error, what)
    if isinstance(raw, _Inflated):
        raw = io.BufferedReader(raw)
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
        if n > MAX_LINES:
            raise error(path, n, f"more than {MAX_LINES} lines (blank ones included): not a {what}")
        if len(line) > MAX_LINE_CHARS:
            raise error(path, n, f"line longer than {MAX_LINE_CHARS} characters: not a {what}")
        yield line


def csv_rows(f: io.TextIOBase, path: str, error: type[DataFileError], what: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of a CSV stream, strictly: a CSV syntax error, and a record spanning
    several lines (a quote left open swallows the rows after it), are ``error`` naming the line the
    record starts on. Trace and curve-log fields never hold line breaks."""
    reader = csv.reader(lines(f, path, error, what), strict=True)
    end = 0
    while True:
        start = end + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise error(path, start, f"not readable as CSV ({e}; an unbalanced quote?)") from None
        end = reader.line_num
        if end > start and any("\n" in v or "\r" in v for v in row):
            raise error(path, start, f"a quoted field runs over lines {start}-{end}: an unbalanced quote?")
        yield start, row


def has_bad_bytes(text: str) -> bool:
    """True if ``text`` holds bytes that were not UTF-8 (decoded as lone surrogates)."""
    if text.isascii():   # the common case, checked without encoding
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class ConfigFileError(DataFileError):
    """A configuration file (YAML recipe, JSON model config, cluster spec) that cannot be read as one."""

    field_name = "config"


def read_config_text(path, error: type[DataFileError] = ConfigFileError, what: str = "config file",
                     max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """The whole text of a small regular (maybe gzip'd) UTF-8 file, at most ``max_bytes`` bytes."""
    with open_binary(path, error, what) as f:
        if not isinstance(f, _Inflated) and os.fstat(f.fileno()).st_size > max_bytes:   # before reading any
            raise error(path, None, f"is larger than {max_bytes} bytes: not a {what}")
        try:
            data = f.read(max_bytes + 1)
        except OSError as e:
            raise error(path, None, f"cannot read the {what}: {e.strerror or e}") from None
    if len(data) > max_bytes:
        raise error(path, None, f"is larger than {max_bytes} bytes: not a {what}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise error(path, line, f"is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r}): "
                                 f"not a {what}") from None


def _check_shape(path, error, what: str, value, max_values: int = MAX_CONFIG_NODES) -> None:
    """At most :data:`MAX_NESTING` levels and ``max_values`` values, walked without recursion."""
    count, stack = 0, [(value, 1)]
    while stack:
        v, depth = stack.pop()
        count += 1
        if count > max_values:
            raise error(path, None, f"holds more than {max_values} values: not a {what}")
        if isinstance(v, (dict, list)):
            if depth > MAX_NESTING:
                raise error(path, None, f"is nested more than {MAX_NESTING} levels deep: not a {what}")
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))


def load_json(path, error: type[DataFileError] = ConfigFileError, what: str = "JSON file",
              max_bytes: int = MAX_CONFIG_BYTES, *, max_values: int = MAX_CONFIG_NODES):
    """The strict JSON value of a small file (no ``NaN`` / ``Infinity``, no key twice in one object), within
    the limits."""
    import json

    text = read_config_text(path, error, what, max_bytes)

    def refuse_constant(name):
        raise ValueError(f"{name} is not JSON")

    def refuse_repeats(pairs):   # json.loads would keep the last of two equal keys without a word
        out = dict(pairs)
        if len(out) < len(pairs):
            seen: set = set()
            twice = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise ValueError(f"key {twice!r} appears twice in one object")
        return out

    try:
        value = json.loads(text, parse_constant=refuse_constant, object_pairs_hook=refuse_repeats)
    except json.JSONDecodeError as e:
        raise error(path, e.lineno, f"is not valid JSON ({e.msg}, column {e.colno}): not a {what}") from None
    except ValueError as e:
        raise error(path, None, f"is not valid JSON ({e}): not a {what}") from None
    except RecursionError:
        raise error(path, None, f"is nested too deeply (more than {MAX_NESTING} levels): not a {what}") from None
    _check_shape(path, error, what, value, max_values)
    return value


def load_yaml(path, error: type[DataFileError] = ConfigFileError, what: str = "YAML file",
              max_bytes: int = MAX_YAML_BYTES):
    """The plain data of a small YAML file (:func:`parse_yaml`), at most ``max_bytes`` bytes."""
    return parse_yaml(read_config_text(path, error, what, max_bytes), path, error, what)


def parse_yaml(text: str, path, error: type[DataFileError] = ConfigFileError, what: str = "YAML file"):
    """The plain data of YAML ``text`` (read from ``path``; safe loading only), within the limits.

    The events are checked before any object is built: nesting depth, and the
    number of values with every alias expanded (an alias to a large anchor
    counts as that many values), so a "billion laughs" file is refused in
    milliseconds rather than exhausting memory in whatever walks the result.
    A key that appears twice in one mapping is an error naming both lines
    (plain YAML loaders keep the last one without a word).
    """
    import yaml

    try:
        _check_yaml_events(path, error, what, yaml.parse(text, Loader=_strict_loader()))
        return yaml.load(text, Loader=_strict_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise error(path, mark.line + 1 if mark is not None else None, f"is not valid YAML ({problem}): not a {what}") from None
    except RecursionError:
        raise error(path, None, f"is nested too deeply (more than {MAX_NESTING} levels): not a {what}") from None


@functools.lru_cache(maxsize=1)
def _strict_loader():
    """A safe loader (libyaml's when installed: about 8 times faster) that refuses a repeated mapping key."""
    import yaml

    class StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":   # `<<: *base`: its keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1 if key_node.start_mark is not None else None
                try:
                    if key in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key!r} appears twice (lines {seen[key]} and {line})",
                            key_node.start_mark)
                    seen[key] = line
                except TypeError:   # an unhashable key: SafeConstructor names it
                    break
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def _check_yaml_events(path, error, what: str, events) -> None:
    import yaml

    sizes: dict[str, int] = {}   # anchor -> values of its node, aliases expanded
    stack: list[list] = []       # per open collection: [anchor, values inside so far]
    total = 0
    for ev in events:
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(stack) >= MAX_NESTING:
                line = ev.start_mark.line + 1 if ev.start_mark is not None else None
                raise error(path, line, f"is nested more than {MAX_NESTING} levels deep: not a {what}")
            stack.append([ev.anchor, 0])
            continue
        if isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, inside = stack.pop()
            n, total = inside + 1, total + 1   # its values were counted as they came
        elif isinstance(ev, yaml.AliasEvent):
            anchor, n = None, sizes.get(ev.anchor, 1)
            total += n
        elif isinstance(ev, yaml.ScalarEvent):
            anchor, n = ev.anchor, 1
            total += 1
        else:
            continue
        if anchor:
            sizes[anchor] = n
        if stack:
            stack[-1][1] += n
        if total > MAX_CONFIG_NODES:
            why = " once its aliases are expanded (a 'billion laughs' file?)" if sizes else ""
            raise error(path, None, f"holds more than {MAX_CONFIG_NODES} values{why}: not a {what}")


def walk(root, error: type[DataFileError], what: str):
    """``(folder, file names)`` under ``root`` (``root`` first), at most :data:`MAX_WALK_DEPTH` levels deep
    and :data:`MAX_WALK_ENTRIES` entries; links to folders are not followed."""
    root = os.fspath(root)
    seen = 0
    for folder, dirs, names in os.walk(root, onerror=None, followlinks=False):
        seen += len(dirs) + len(names)
        if seen > MAX_WALK_ENTRIES:
            raise error(root, None, f"holds more than {MAX_WALK_ENTRIES} files and folders (looked "
                                    f"{MAX_WALK_DEPTH} levels deep at most): point at the {what} itself")
        rel = os.path.relpath(folder, root)
        depth = 0 if rel == "." else rel.count(os.sep) + 1
        if depth >= MAX_WALK_DEPTH:
            dirs[:] = []
        dirs.sort()
        yield folder, sorted(names)


@contextlib.contextmanager
def atomic_open(path, mode: str = "w", *, field: str = "out", newline: str | None = None):
    """Write ``path`` all or nothing: into a temporary file beside it, renamed over ``path`` once complete.

    A reader (or a run after ``kill -9``) sees the old file or the new one,
    never half of one. A write that fails (``ENOSPC``: a full disk; no
    permission) removes the temporary file and raises :class:`ConfigError`
    naming ``path`` in one line.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as e:
        raise ConfigError(field, path, f"cannot be written ({e.strerror or e})") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())   # as open() would create it, not mkstemp's 0600
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": newline})) as f:
            yield f
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise ConfigError(field, path, f"cannot be written ({e.strerror or e}); nothing half-written was "
                                           "left") from None
        raise


def write_atomic(path, data: str | bytes, *, field: str = "out") -> None:
    """``data`` (text as UTF-8) written to ``path`` by :func:`atomic_open`."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", field=field) as f:
        f.write(data)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
