"""Results that never mix: each world writes its own folder, a partial run keeps the other experiments of
its folder, and writing one world over another is refused unless forced."""

import json

import pytest

from evalstop_gym.cli import main

pytest.importorskip("matplotlib", reason="reproduce needs the experiments extra")

SMALL = ["--jobs", "20", "--seeds", "1", "--workers", "1", "--no-progress"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def reproduce(capsys, *args, code=0):
    rc = main(["reproduce", *SMALL, *args])
    out = capsys.readouterr()
    assert rc == code, out.err
    return out


def snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != ".lock"}


def test_the_readme_commands_in_order_leave_every_world_intact(capsys, in_tmp):
    # `reproduce`, then `reproduce --calibration realistic`, then `reproduce --experiments E9`
    reproduce(capsys, "--experiments", "E5,E7")
    paper = in_tmp / "results" / "paper"
    first = snapshot(paper)
    assert {"E5.md", "E7.md", "summary.md", "suite.json", "runs.jsonl"} <= set(first)
    reproduce(capsys, "--experiments", "E5,E7", "--calibration", "realistic")
    realistic = snapshot(in_tmp / "results" / "realistic")
    assert snapshot(paper) == first                      # the other world's folder is untouched
    assert "Calibration realistic" in realistic["E5.md"].decode()
    out = reproduce(capsys, "--experiments", "E9")
    assert "summary.md keeps E5, E7 from earlier runs" in out.out
    after = snapshot(paper)
    assert all(after[f] == first[f] for f in ("E5.md", "E5.csv", "E7.md", "E7.csv", "E5.png"))
    summary = after["summary.md"].decode()
    assert all(f"## {e}:" in summary for e in ("E5", "E7", "E9"))
    assert snapshot(in_tmp / "results" / "realistic") == realistic
    # independent check: the three experiments run at once in a fresh folder give the same summary
    reproduce(capsys, "--experiments", "E9,E7,E5", "--out", "at-once")
    assert (in_tmp / "at-once" / "summary.md").read_bytes() == after["summary.md"]


@pytest.mark.parametrize("other, field", [
    (["--calibration", "realistic"], "workload.calibration='paper' there, 'realistic' here"),
    (["--seed", "3"], "seeds=[0, 1] there, [3, 1] here"),
    (["--base-scheduler", "fifo"], "base_scheduler=None there, 'fifo' here"),
])
def test_another_world_is_refused_in_one_line_unless_forced(capsys, in_tmp, other, field):
    reproduce(capsys, "--experiments", "E5", "--out", "res")
    before = snapshot(in_tmp / "res")
    err = reproduce(capsys, "--experiments", "E7", "--out", "res", *other, code=2).err
    assert err.count("\n") == 1 and "holds the results of another world" in err and field in err, err
    assert "--force" in err
    assert snapshot(in_tmp / "res") == before
    out = reproduce(capsys, "--experiments", "E7", "--out", "res", *other, "--force")
    assert "replacing the results of another world" in out.err
    files = set(snapshot(in_tmp / "res"))
    assert "E7.md" in files and "E5.md" not in files and "E5.csv" not in files   # no leftovers of the old world
    assert "## E5:" not in (in_tmp / "res" / "summary.md").read_text()
    manifest = json.loads((in_tmp / "res" / "suite.json").read_text())
    assert list(manifest["experiments"]) == ["E7"]


def test_the_same_world_resumes_and_a_named_scale_gets_its_own_folder(capsys, in_tmp):
    from evalstop_gym.config import WorkloadConfig
    from evalstop_gym.experiments.suite import default_out

    assert str(default_out(WorkloadConfig())) == "results/paper"
    assert str(default_out(WorkloadConfig(calibration="realistic"), "large")) == "results/realistic-large"
    reproduce(capsys, "--experiments", "E5")
    reproduce(capsys, "--experiments", "E5")     # the same world again: reused, not refused
    assert (in_tmp / "results" / "paper" / "E5.md").is_file()


def test_a_broken_manifest_is_refused_naming_the_file(capsys, in_tmp):
    (in_tmp / "res").mkdir()
    (in_tmp / "res" / "suite.json").write_text("{not json")
    err = reproduce(capsys, "--experiments", "E5", "--out", "res", code=2).err
    assert "suite.json is not readable JSON" in err and err.count("\n") == 1
    # experiment names are the suite's own: --force never removes files a manifest names elsewhere
    (in_tmp / "keep.md").write_text("mine")
    (in_tmp / "res" / "suite.json").write_text('{"world": {}, "experiments": {"../keep": []}}')
    assert "is not a results manifest" in reproduce(capsys, "--experiments", "E5", "--out", "res", code=2).err
    reproduce(capsys, "--experiments", "E5", "--out", "res", "--force")
    assert (in_tmp / "keep.md").read_text() == "mine"
    reproduce(capsys, "--experiments", "E5", "--out", "res", "--force")
    assert json.loads((in_tmp / "res" / "suite.json").read_text())["experiments"].keys() == {"E5"}
