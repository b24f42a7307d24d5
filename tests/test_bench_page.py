"""The leaderboard page: re-rendered from results files byte for byte, twins share a row, provenance shown,
the rows a clone plays given their own figure, and docs/ never overwritten unless named."""

import dataclasses
import json

import pytest

from evalstop_gym.bench import results as res
from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.run import RESULTS_FILE, run_bench
from evalstop_gym.bench.suite import Row, Trace, suite_hash

TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),
       Row("toy-realistic", calibration="realistic", jobs=30, gpus=16, seeds=(1100, 1101)))


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    kw = dict(suite_name="toy", progress=False, echo=lambda _t: None)
    run_bench(["srtf-est+evalstop:k=2", "fifo+cusum"], out=tmp_path / "a", **kw)
    run_bench(["srtf-est+evalstop"], out=tmp_path / "b", **kw)   # k=2 is evalstop's default: the same decisions
    yield [tmp_path / "a" / RESULTS_FILE, tmp_path / "b" / RESULTS_FILE]
    suite_hash.cache_clear()


def _row(page, label):
    return next(line for line in page.splitlines() if line.startswith("| ") and f" {label}" in line)


def test_the_page_is_rerendered_byte_for_byte_and_names_its_provenance(files, tmp_path):
    from evalstop_gym.cli import main

    outs = [tmp_path / "page1.md", tmp_path / "page2.md"]
    for out in outs:
        assert main(["bench", "--leaderboard", *map(str, files), "--leaderboard-out", str(out)]) == 0
    assert outs[0].read_bytes() == outs[1].read_bytes()
    page = outs[0].read_text()
    data = json.loads(files[0].read_text())
    assert f"commit {data['commit']}" in page and f"played {data['date']}" in page
    assert f"numpy {data['versions']['numpy']}" in page and f"fingerprint {data['code']}" in page


def test_policies_with_the_same_results_everywhere_share_a_row(files):
    page = res.leaderboard(files)
    shared = _row(page, "srtf-est + evalstop k=2")
    assert "*same results on every workload:* srtf-est + evalstop)" in shared
    assert sum(line.startswith("| ") and "srtf-est + evalstop" in line for line in page.splitlines()) == 1
    assert "fifo + cusum" in page


def test_the_bootstrap_and_iqm_stand_beside_the_t_interval(files):
    data = json.loads(files[0].read_text())
    card = next(c for c in data["policies"] if c["label"] == "fifo + cusum")
    c = card["vs"]["no stopper"]["aggregate"]["avg_jct_h"]
    assert f"[{c['ci_boot'][0]:+.1f}, {c['ci_boot'][1]:+.1f}], IQM {c['iqm']:+.1f}%" in _row(res.leaderboard(files),
                                                                                             "fifo + cusum")


def test_rows_a_clone_cannot_play_get_a_figure_over_the_others(files, monkeypatch):
    # the second row now replays a trace the package does not ship: the page gives each policy's JCT change
    # over the first row alone, as a clone without the trace computes it
    traced = dataclasses.replace(TOY[1], trace=Trace("not-shipped.csv"))
    monkeypatch.setitem(suite_mod.SUITES, "toy", (TOY[0], traced))
    page = res.leaderboard(files)
    assert "JCT vs no stopper, 1 rows" in page and "Rows toy-realistic replay a file the package does not ship" in page
    data = json.loads(files[0].read_text())
    card = next(c for c in data["policies"] if c["label"] == "fifo + cusum")
    arm, ref = card["per_seed"]["toy-paper"]["avg_jct_h"], data["reference_values"]["no stopper"]["toy-paper"]["avg_jct_h"]
    by_hand = sum(100 * (a - r) / r for a, r in zip(arm, ref)) / len(arm)
    assert f"| {by_hand:+.1f}% [" in _row(page, "fifo + cusum")


def test_the_writer_prints_unless_told_where_to_write(files, tmp_path, monkeypatch, capsys):
    from evalstop_gym.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leaderboard.md").write_text("the published page\n")
    assert main(["bench", "--leaderboard", *map(str, files)]) == 0
    assert (tmp_path / "docs" / "leaderboard.md").read_text() == "the published page\n"
    assert capsys.readouterr().out.startswith("# Leaderboard: suite toy")


def test_a_published_page_renders_again_from_its_shipped_results_files(files, tmp_path, monkeypatch):
    from evalstop_gym.bench.regenerate import publish
    from evalstop_gym.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    text = publish(files, tmp_path / "docs" / "leaderboard.md")
    shipped = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "docs" / "leaderboard").glob("*.json"))
    assert shipped == ["docs/leaderboard/1-a.json", "docs/leaderboard/2-b.json"]
    assert main(["bench", "--leaderboard", *shipped, "--leaderboard-out", "again.md"]) == 0
    assert (tmp_path / "again.md").read_text() == text == (tmp_path / "docs" / "leaderboard.md").read_text()
    assert "- `docs/leaderboard/1-a.json`" in text


def test_the_published_page_renders_from_its_shipped_results_files():
    """docs/leaderboard.md is what `bench --leaderboard docs/leaderboard/*.json` writes, byte for byte (run from
    the repository's root, as the page's file list names them)."""
    import glob
    import os
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    here = os.getcwd()
    os.chdir(root)
    try:
        files = sorted(glob.glob("docs/leaderboard/*.json"))
        assert files == ["docs/leaderboard/1-scored.json", "docs/leaderboard/2-learned.json"]
        assert res.leaderboard(files) == (root / "docs" / "leaderboard.md").read_text(encoding="utf-8")
    finally:
        os.chdir(here)


def test_the_page_adjusts_verdicts_over_the_whole_board(files):
    from evalstop_gym.bench.score import board_verdicts, holm

    cards = [c for f in files for c in json.loads(f.read_text())["policies"]]
    pooled = holm([v["p"] for c in cards for v in c["verdicts"]])
    assert [v["p_holm"] for vs in board_verdicts(cards) for v in vs] == pooled
    page = res.leaderboard(files)
    assert f"({len(pooled)} tests: each policy's" in page   # 3 policies x 2 references x 4 headline metrics
    assert len(pooled) == 3 * 2 * 4


def test_the_page_says_how_many_trials_each_family_got_and_which_schedulers_they_tried():
    tuning = {"families": {"cusum": {"every_trial": [{"scheduler": "sjf-est"}, {"scheduler": "fifo"}]},
                           "none": {"every_trial": [{"scheduler": "fifo"}, {"scheduler": "fifo"}]}}}
    assert res._tried(tuning) == "Trials per family, and the schedulers they tried: cusum 2 (fifo, sjf-est); none 2 (fifo)."
