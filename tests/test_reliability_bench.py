"""Bench results files are data: they name no module to import, fit a schema, and fail in one line.

A genuine tuned results file is made once (a toy suite, two families, two trials), then tampered with:
a policy name that is a module (``this``, ``antigravity``, a ``.py`` in the working folder that writes a
marker file when imported), wrong types, missing keys, deep nesting, huge numbers. Every case must be a
one-line error before anything is played or imported.
"""

import contextlib
import copy
import json
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym.bench import results as res
from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.arms import TUNED_BEST
from evalstop_gym.bench.run import RESULTS_FILE, run_bench
from evalstop_gym.bench.suite import Row, suite_hash
from evalstop_gym.cli import main

TOY = (Row("toy-a", jobs=20, gpus=16, seeds=(1000, 1001)),)
MARKER_MODULE = """
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("the module ran")
from evalstop_gym.baselines import STOPPERS
Foo = STOPPERS["evalstop"]
"""


@contextlib.contextmanager
def _toy_suite(mp):
    """The toy suite registered as ``toy`` (the suite hash cache cleared on both sides)."""
    mp.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    try:
        yield "toy"
    finally:
        suite_hash.cache_clear()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A genuine ``bench --tune`` results file of the toy suite (read-only: tests copy it)."""
    from evalstop_gym.bench import tune

    out = tmp_path_factory.mktemp("tuned")
    with pytest.MonkeyPatch.context() as mp, _toy_suite(mp):
        real = tune.tune_families
        mp.setattr(tune, "tune_families", lambda *a, **k: real(*a, **{**k, "families": ["none", "evalstop"]}))
        run_bench(["fifo"], suite_name="toy", out=out, tune=True, budget=2, progress=False, echo=lambda _t: None)
    return json.loads((out / RESULTS_FILE).read_text())


@pytest.fixture
def toy(monkeypatch):
    with _toy_suite(monkeypatch) as name:
        yield name


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """The working folder holds ``marker_mod.py`` and is importable (as under ``python -m``)."""
    (tmp_path / "marker_mod.py").write_text(MARKER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("BROWSER", "true")   # should antigravity ever be imported, it opens nothing
    yield tmp_path
    sys.modules.pop("marker_mod", None)


def _write(tmp_path, data, name="tampered.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("module", ["this", "antigravity", "marker_mod"])
@pytest.mark.parametrize("where", ["best.stopper", "best.scheduler", "families.evalstop.stopper",
                                   "families.evalstop.every_trial.0.scheduler"])
def test_a_results_file_naming_a_module_is_refused_before_anything_is_imported(tuned, toy, workdir, cli_error,
                                                                              module, where):
    data = copy.deepcopy(tuned)
    entry = data["tuning"]
    for key in where.split(".")[:-1]:
        entry = entry[int(key) if key.isdigit() else key]
    entry[where.split(".")[-1]] = f"{module}:Foo"
    path = _write(workdir, data)
    before = set(sys.modules)
    err = cli_error(["bench", "--suite", "toy", "--policy", "fifo", "--tuned", str(path),
                                    "--out", str(workdir / "out"), "--quiet"])
    assert f"'{module}:Foo'" in err and "nothing was imported" in err and f"--trust {path}" in err
    assert module not in sys.modules and not {m for m in set(sys.modules) - before if m.startswith(module)}
    assert not (workdir / "IMPORTED").exists() and not (workdir / "out" / RESULTS_FILE).exists()
    # a leaderboard page reads the names as text: it is written, and nothing is imported
    assert main(["bench", "--leaderboard", str(path), "--leaderboard-out", str(workdir / "page.md")]) == 0
    assert module not in sys.modules and not (workdir / "IMPORTED").exists()


@pytest.mark.parametrize("params,says", [({"k": "1,window=3"}, "params.k='1,window=3'"),
                                         ({"k+evil:X": 1}, "params='k+evil:X'"),
                                         ({"k": 99.5}, "k=99.5 is invalid: must be an integer")])
def test_tuned_parameters_that_do_not_fit_are_one_line_before_anything_is_played(tuned, toy, workdir, cli_error,
                                                                               params, says):
    data = copy.deepcopy(tuned)
    data["tuning"]["best"].update(stopper="evalstop", params=params)
    path = _write(workdir, data)
    err = cli_error(["bench", "--suite", "toy", "--policy", "fifo", "--tuned", str(path), "--out",
                     str(workdir / "out"), "--quiet"])
    assert f"{path}: tuning.best" in err and says in err and "evil" not in sys.modules
    assert not (workdir / "out" / "runs.jsonl").exists()


def test_a_module_typed_on_the_command_line_or_trusted_may_be_named(tuned, toy, workdir, cli_error):
    data = copy.deepcopy(tuned)
    data["tuning"]["best"].update(stopper="marker_mod:Foo", params={"k": 1})
    path = _write(workdir, data)
    out = workdir / "out"
    argv = ["bench", "--suite", "toy", "--policy", "fifo", "--tuned", str(path), "--out", str(out), "--quiet"]
    cli_error(argv)
    assert not (workdir / "IMPORTED").exists()
    assert main(argv + ["--trust", str(path)]) == 0
    assert (workdir / "IMPORTED").exists()
    saved = json.loads((out / RESULTS_FILE).read_text())
    assert saved["trusted"] == [str(path)] and saved["references"][TUNED_BEST].endswith(" + marker_mod:Foo k=1")
    # named with --policy on this command line: the file may name the same module without --trust
    (workdir / "IMPORTED").unlink()
    assert main(argv + ["--policy", "marker_mod:Foo"]) == 0
    assert "trusted" not in json.loads((out / RESULTS_FILE).read_text())


def test_a_leaderboard_run_folder_naming_a_module_is_refused_before_anything_is_played(tuned, toy, workdir, capsys):
    data = copy.deepcopy(tuned)
    data["tuning"]["families"]["none"]["scheduler"] = "marker_mod:Foo"   # identity keys copied from a genuine file
    (workdir / "board" / "tuned").mkdir(parents=True)
    path = _write(workdir / "board" / "tuned", data, RESULTS_FILE)
    assert main(["bench", "--leaderboard-run", str(workdir / "board"), "--suite", "toy", "--budget", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1].startswith("evalstop-gym bench: error: ")
    assert f"{path}: tuning.families['none'].scheduler='marker_mod:Foo'" in err and "nothing was imported" in err
    assert not (workdir / "IMPORTED").exists() and not (workdir / "board" / "scored").exists()


def test_trust_goes_with_tuned_only(cli_error):
    err = cli_error(["bench", "--policy", "fifo", "--trust", "x.json"])
    assert "--tuned" in err
    err = cli_error(["bench", "--leaderboard", "x.json", "--trust", "x.json"])
    assert "--trust" in err


def _nested(depth):
    v = []
    for _ in range(depth):
        v = [v]
    return v


TAMPERED = {
    "policies is a string": lambda d: d.update(policies="x"),
    "a card without vs": lambda d: d["policies"][0].pop("vs"),
    "a metric as text": lambda d: d["policies"][0]["aggregate"].update(avg_jct_h="12"),
    "a change as a list": lambda d: d["policies"][0]["vs"]["no stopper"]["aggregate"]["avg_jct_h"].update(change=[1]),
    "half an interval": lambda d: d["policies"][0]["verdicts"][0].update(ci=[None, 1.0]),
    "an unknown verdict": lambda d: d["policies"][0]["verdicts"][0].update(verdict="best"),
    "references without no stopper": lambda d: d.update(references={"x": "fifo"}),
    "a card without its label": lambda d: d["policies"][0].pop("label"),
    "a reference the cards lack": lambda d: d["references"].update(extra="fifo"),
    "deep nesting": lambda d: d["policies"][0].update(per_seed=_nested(5000)),
    "a 400-digit integer": lambda d: d["policies"][0]["aggregate"].update(avg_jct_h=10**400),
    "1e400": lambda d: d["policies"][0]["aggregate"].update(avg_jct_h=1e400),
    "tuning best is a list": lambda d: d["tuning"].update(best=[]),
    "params as a list": lambda d: d["tuning"]["best"].update(params=[1, 2]),
    "format 2": lambda d: d.update(format=2),
    "a bootstrap interval as text": lambda d: d["policies"][0]["vs"]["no stopper"]["aggregate"]["avg_jct_h"].update(
        ci_boot="[-1, 1]"),
    "an IQM as text": lambda d: d["policies"][0]["vs"]["no stopper"]["aggregate"]["avg_jct_h"].update(iqm="-3"),
    "fingerprint parts as a list": lambda d: d.update(fingerprint=["code"]),
    "versions as numbers": lambda d: d.update(versions={"numpy": 2}),
    "an outside tuning without its best": lambda d: d.update(outside_tuning={"m:C": {"rule": "r", "budget": 1,
                                                                                     "searched": [],
                                                                                     "every_trial": []}}),
    "a top-level list": lambda d: (d.clear(), d.update({"": []})),
}


@pytest.mark.parametrize("case", TAMPERED)
def test_a_tampered_results_file_is_one_line(tuned, tmp_path, cli_error, case):
    data = copy.deepcopy(tuned)
    TAMPERED[case](data)
    text = json.dumps(data, allow_nan=True) if case != "deep nesting" else None
    path = tmp_path / "r.json"
    if text is None:   # json.dumps recurses too; write the nesting by hand
        text = json.dumps({**data, "policies": []})[:-1] + ', "deep": ' + "[" * 5000 + "]" * 5000 + "}"
    path.write_text(text)
    with pytest.raises(ValueError) as e:
        res.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    cli_error(["bench", "--leaderboard", str(path), "--leaderboard-out", "-"])


def test_a_key_written_twice_is_refused_not_taken_last(tuned, tmp_path, cli_error):
    text = json.dumps(tuned)
    path = tmp_path / "twice.json"
    path.write_text(text[:-1] + ', "suite": "other"}')   # a second "suite", which json.loads would keep
    with pytest.raises(ValueError, match="key 'suite' appears twice"):
        res.load(path)
    assert "appears twice" in cli_error(["bench", "--leaderboard", str(path), "--leaderboard-out", "-"])


def test_special_and_huge_files_are_refused_without_reading_them(tmp_path, cli_error):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)   # nobody writes: reading it would block forever
    err = cli_error(["bench", "--leaderboard", str(fifo), "--leaderboard-out", "-"])
    assert "not a regular file" in err
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(65 * 2**20)   # sparse: no disk used
    err = cli_error(["bench", "--leaderboard", str(big), "--leaderboard-out", "-"])
    assert str(64 * 2**20) in err


def test_leaderboard_out_is_written_whole_or_not_at_all(tuned, tmp_path, cli_error, monkeypatch):
    import errno

    from evalstop_gym import files

    path = _write(tmp_path, tuned, "r.json")
    page = tmp_path / "lb.md"
    page.write_text("the old page\n")
    err = cli_error(["bench", "--leaderboard", str(path), "--leaderboard-out", str(tmp_path)])
    assert "leaderboard-out" in err
    err = cli_error(["bench", "--leaderboard", str(path), "--leaderboard-out",
                                    str(tmp_path / "missing" / "lb.md")])
    assert "leaderboard-out" in err

    real_fdopen = files.os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, text):
            self.f.write(text[:10])
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fdopen", lambda *a, **k: Full(real_fdopen(*a, **k)))
    err = cli_error(["bench", "--leaderboard", str(path), "--leaderboard-out", str(page)])
    assert "No space left" in err
    assert page.read_text() == "the old page\n" and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# -- property: any edit of a genuine file is a one-line error or a page -----------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _places(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            yield from _places(v, path + (i,))


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 60)), deadline=2000,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_any_edit_of_a_results_file_is_a_page_or_one_line(tuned, tmp_path, data):
    places = [p for p in _places(tuned) if p]
    doc = copy.deepcopy(tuned)
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(places))
        parent = doc
        try:
            for key in where[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                parent.pop(where[-1], None)
            else:
                parent[where[-1]] = data.draw(JSON)
        except (KeyError, IndexError, TypeError):
            continue   # an earlier edit removed this place
    path = tmp_path / "fuzzed.json"
    path.write_text(json.dumps(doc))
    try:
        loaded = res.load(path)
    except ValueError as e:
        assert "\n" not in str(e)
        return
    assert res.leaderboard([path]).startswith("# Leaderboard") and res.markdown(loaded).startswith("# evalstop-gym")
