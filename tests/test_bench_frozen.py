"""A frozen suite: the fingerprint covers every input of a score, results say where they came from, and
`bench verify` replays a results file cell for cell."""

import json
import re
import shutil

import pytest

from evalstop_gym.bench import fingerprint as fp
from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.suite import Row, suite_hash

TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),
       Row("toy-realistic", calibration="realistic", jobs=30, gpus=16, seeds=(1100, 1101)))


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory):
    """The files the fingerprint reads, and one it must not (the command line), copied."""
    src, root = fp.package_root(), tmp_path_factory.mktemp("pkg") / "evalstop_gym"
    for p in fp.scored_files(src) + [src / "commands" / "bench.py"]:
        target = root / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, target)
    return root


@pytest.mark.parametrize("path, kind", [
    ("simulator.py", "code"), ("metrics.py", "code"), ("baselines/evalstop.py", "code"),
    ("bench/score.py", "code"), ("experiments/stats.py", "code"), ("experiments/runner.py", "code"),
    ("data/grounded.yaml", "data"), ("data/trl_library.csv.gz", "data"), ("data/trl_library.json", "data"),
    ("agents/hyperparams/ppo.yml", "data")])
def test_editing_any_input_of_a_score_changes_the_fingerprint(package_copy, path, kind):
    f = package_copy / path
    assert f.is_file(), path
    before, parts = fp.fingerprint(package_copy), fp.parts(package_copy)
    original = f.read_bytes()
    try:
        f.write_bytes(original + b"\n")   # one byte more: a refit, an edit
        assert fp.fingerprint(package_copy) != before
        changed = fp.parts(package_copy)
        assert changed[kind] != parts[kind] and all(changed[k] == parts[k] for k in changed if k != kind)
    finally:
        f.write_bytes(original)
    assert fp.fingerprint(package_copy) == before


def test_an_adapter_a_score_never_runs_leaves_it_alone(package_copy):
    before = fp.fingerprint(package_copy)
    f = package_copy / "commands" / "bench.py"
    original = f.read_bytes()
    f.write_bytes(original + b"# a new flag\n")
    try:
        assert fp.fingerprint(package_copy) == before
    finally:
        f.write_bytes(original)


def test_a_new_data_file_counts_too(package_copy):
    before = fp.fingerprint(package_copy)
    extra = package_copy / "data" / "mine.yaml"
    extra.write_text("calibration: mine\n")
    try:
        assert fp.fingerprint(package_copy) != before
    finally:
        extra.unlink()


def test_each_library_version_is_in_the_fingerprint(package_copy, monkeypatch):
    before = fp.fingerprint(package_copy)
    real = fp.metadata.version
    for lib in fp.VERSIONED:
        monkeypatch.setattr(fp.metadata, "version", lambda name, lib=lib: "0.0.1" if name == lib else real(name))
        assert fp.fingerprint(package_copy) != before, lib
    monkeypatch.setattr(fp.metadata, "version", real)
    assert fp.fingerprint(package_copy) == before


def test_suite_hashes_are_pinned():
    # a change to any row of a published suite is a new suite version, never an edit of these
    assert suite_hash("v1") == "fa4b1d555bd37d31"
    assert suite_hash("v2") == "a67b27a150e6f168"
    assert suite_hash("v3") == "571190d18feeccd8"


def test_provenance_names_commit_date_and_versions(tmp_path):
    p = fp.provenance()
    assert re.fullmatch(r"[0-9a-f]{40}|unknown", p["commit"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["date"])
    assert set(p["versions"]) == {"numpy", "scipy", "pyarrow"} and p["code"] == fp.fingerprint()
    assert fp.commit(tmp_path) == ("unknown", False)   # not a git checkout (an installed package)


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    yield "toy"
    suite_hash.cache_clear()


def test_verify_replays_a_results_file_cell_for_cell_and_names_a_tampered_cell(toy, tmp_path):
    from evalstop_gym.bench.run import RESULTS_FILE, run_bench
    from evalstop_gym.bench.verify import verify

    result = run_bench(["fifo+cusum"], suite_name=toy, out=tmp_path / "a", progress=False, echo=lambda _t: None)
    assert {"commit", "date", "versions", "fingerprint"} <= set(result) and result["in_process"] is False
    lines = []
    assert verify(tmp_path / "a" / RESULTS_FILE, progress=False, echo=lines.append)
    assert lines[-1].endswith("every one identical")
    n = int(re.search(r"(\d+) cells compared", lines[-1]).group(1))
    # every metric of every workload of the 2 references and the policy: 3 arms x 4 workloads x 15 values
    assert n == 3 * 4 * 15
    data = json.loads((tmp_path / "a" / RESULTS_FILE).read_text())
    data["policies"][0]["per_seed"]["toy-realistic"]["avg_jct_h"][1] += 1e-9
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data))
    lines = []
    assert not verify(tampered, progress=False, echo=lines.append)
    assert any(line.startswith("fifo + cusum / toy-realistic / avg_jct_h / seed #1: recorded") for line in lines)
    assert lines[-1].endswith("1 differences")


def test_verify_in_a_clone_without_the_trace_compares_the_other_rows_and_names_it(toy, tmp_path, monkeypatch):
    import dataclasses

    from evalstop_gym.bench.run import RESULTS_FILE, run_bench
    from evalstop_gym.bench.verify import verify

    run_bench(["fifo"], suite_name=toy, out=tmp_path / "a", progress=False, echo=lambda _t: None)
    # here the second row replays a trace this machine lacks, as realistic-philly does in a plain clone
    traced = dataclasses.replace(TOY[1], trace=suite_mod.Trace("absent.csv"))
    monkeypatch.setitem(suite_mod.SUITES, "toy", (TOY[0], traced))
    monkeypatch.setenv(suite_mod.TRACES_ENV, str(tmp_path / "no-traces"))
    lines = []
    assert verify(tmp_path / "a" / RESULTS_FILE, progress=False, echo=lines.append)
    assert any(x.startswith("not replayed here, so not compared: toy-realistic (trace absent.csv not found")
               for x in lines)
    assert lines[-1].endswith(f"{3 * 2 * 15} cells compared; every one identical")   # 3 arms x 2 seeds of one row


def test_runs_played_under_another_fingerprint_are_set_aside_not_reused(toy, tmp_path):
    from evalstop_gym.bench.run import INPUTS_FILE, RUNS_FILE, run_bench

    kw = dict(suite_name=toy, out=tmp_path / "a", progress=False, echo=lambda _t: None)
    first = run_bench(["fifo"], **kw)
    assert (tmp_path / "a" / INPUTS_FILE).read_text().strip() == fp.fingerprint()
    lines = (tmp_path / "a" / RUNS_FILE).read_text()
    (tmp_path / "a" / INPUTS_FILE).write_text("0123456789ab\n")   # as if grounded.yaml had been refitted since
    again = run_bench(["fifo"], **kw)
    assert (tmp_path / "a" / "runs.0123456789ab.jsonl").read_text() == lines   # kept aside, not read
    assert sorted((tmp_path / "a" / RUNS_FILE).read_text().splitlines()) == sorted(lines.splitlines())  # replayed
    assert again["policies"] == first["policies"]


def test_bench_verify_on_the_command_line_exits_1_on_a_difference(toy, tmp_path, capsys):
    from evalstop_gym.bench.run import RESULTS_FILE, run_bench
    from evalstop_gym.cli import main

    run_bench(["fifo"], suite_name=toy, out=tmp_path / "a", progress=False, echo=lambda _t: None)
    path = tmp_path / "a" / RESULTS_FILE
    assert main(["bench", "verify", str(path), "--quiet"]) == 0
    data = json.loads(path.read_text())
    data["reference_values"]["no stopper"]["toy-paper"]["f1"][0] = 0.5
    path.write_text(json.dumps(data))
    assert main(["bench", "verify", str(path), "--quiet"]) == 1
    assert "reference no stopper / toy-paper / f1 / seed #0: recorded 0.5, replayed None" in capsys.readouterr().out
    assert main(["bench", "verify", str(path), "--policy", "fifo"]) == 2
