"""The fit report: each shape statistic of one run by hand, and the report on the shipped TRL library against
a world, its structure and one row recomputed from the raw CSV with the standard library and scipy."""

import csv
import gzip
import json
import math
import statistics

import numpy as np
import pytest

from evalstop_gym import fit, fitreport
from evalstop_gym.cli import main
from evalstop_gym.config import CALIBRATIONS
from evalstop_gym.curvelog import LoggedRun, write_curve_log
from evalstop_gym.data import TRL_LIBRARY, trl_library
from evalstop_gym.label import curve_wander


pytestmark = pytest.mark.usefixtures("quick_held_lag")   # tests/conftest.py

pytest.importorskip("scipy")


def test_one_run_s_statistics_by_hand():
    gold = np.array([0.5, 0.7, 0.8, 0.6, 0.4, 0.3])
    proxy = np.array([np.nan, 0.1, 0.2, 0.3, 0.4, 0.5])
    run = LoggedRun("rlhf-hand", np.arange(6) * 10.0, gold, np.full(6, np.nan), proxy, {"gold": gold})
    s = fitreport.run_shape(run)
    assert s["peak index"] == 2
    assert s["drop after the peak"] == pytest.approx(0.5)
    assert s["end minus start"] == pytest.approx(-0.2)
    assert s["corr(proxy, gold)"] == pytest.approx(statistics.correlation([.1, .2, .3, .4, .5], [.7, .8, .6, .4, .3]))
    steps = [0.2, 0.1, -0.2, -0.2, -0.1]
    assert s["lag-1 autocorr of gold steps"] == pytest.approx(statistics.correlation(steps[1:], steps[:-1]))
    # second differences -0.1, -0.3, 0.0, 0.1; the one centred on the peak (-0.3) left out: median 0.1
    assert s["gold noise"] == pytest.approx(1.4826 * 0.1 / math.sqrt(6))
    # third differences -0.2, 0.3, 0.1: the two with the peak inside their windows left out, 1 < 3 left, so the
    # wander reading is 0 and there is no wander bar
    assert curve_wander(gold[None, :], np.array([2]))[0] == 0.0
    # gold gives back 0.5 of its 0.3 gain (> 0.075, 0.03 and 2 sqrt(2) x 0.0605) while the proxy rises 0.3 from
    # gold's peak, and the proxy's noise (second differences all 0) is 0: hacking
    assert s["hacking"] == 1.0


def _library_end_minus_start(job_type):
    """End minus start gold of the library's runs of one type, read from the raw CSV without the package."""
    rows = {}
    with gzip.open(TRL_LIBRARY, "rt", newline="") as f:
        for r in csv.DictReader(f):
            if r["gold"] != "":
                rows.setdefault(r["job"], []).append((float(r["step"]), float(r["gold"]), r["method"]))
    out = []
    for pts in rows.values():
        pts.sort()
        if (pts[0][2] == "dpo") == (job_type == "dpo"):
            out.append(pts[-1][1] - pts[0][1])
    return out


@pytest.fixture(scope="module")
def report():
    lib = trl_library()
    world = fitreport.world_runs(CALIBRATIONS["grounded"], lib, 0.6, 10, per_type=100)
    return lib, world, fitreport.shape_table(fitreport.measure(lib, world))


def test_report_on_the_shipped_library_has_every_statistic_per_job_type(report):
    lib, world, rows = report
    assert [(r.job_type, r.statistic) for r in rows] == [(t, s) for t in fitreport.REPORT_TYPES
                                                         for s in fitreport.STATISTICS]
    n_rlhf = sum(fit.job_type_of(n) == "rlhf" for n in lib)
    assert {r.library_runs for r in rows if r.job_type == "rlhf" and r.statistic == "peak index"} == {n_rlhf}
    assert all(0.0 <= r.ks_p <= 1.0 and r.library[0] <= r.library[1] <= r.library[2] for r in rows)
    # the world is sampled at the library's own checkpoint count (its manifest's evals after step 0, and step 0)
    with open(TRL_LIBRARY.replace(".csv.gz", ".json")) as f:
        evals = {s["evals"] for s in json.load(f)["settings"]}
    assert {r.series("gold")[1].size - 1 for r in world.values()} == evals
    table = fitreport.format_report(rows)
    assert table.count("\n") == len(rows) + 1 and "| RLHF | hacking | share " in table


def test_end_minus_start_row_against_the_raw_csv_and_scipy(report):
    from scipy.stats import ks_2samp

    lib, world, rows = report
    row = next(r for r in rows if r.job_type == "rlhf" and r.statistic == "end minus start")
    mine = _library_end_minus_start("rlhf")
    assert len(mine) == row.library_runs
    assert row.library[1] == pytest.approx(statistics.median(mine))
    theirs = [float(r.extra["gold"][-1] - r.extra["gold"][0]) for n, r in world.items() if n.startswith("rlhf")]
    assert row.ks_p == pytest.approx(ks_2samp(mine, theirs).pvalue)


def test_calibrate_prints_the_report_and_draws_it(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    runs = fit.sample_runs(CALIBRATIONS["realistic"], {"dpo": 15, "rlhf": 15}, 10, 5, 0.6)
    log = tmp_path / "runs.csv"
    write_curve_log(log, fit.log_rows(runs))
    png = tmp_path / "fit.png"
    assert main(["calibrate", "--curves", str(log), "--out", str(tmp_path / "w.yaml"), "--samples", "30",
                 "--figure", str(png)]) == 0
    out = capsys.readouterr().out
    assert "Fit report" in out and "| DPO | lag-1 autocorr of gold steps |" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the report's samples are held out: the fit's own seed is refused
    assert main(["calibrate", "--curves", str(log), "--out", str(tmp_path / "w.yaml"), "--seed",
                 str(fit.FIT_SEED)]) == 2
    assert "held out" in capsys.readouterr().err


def test_the_report_holds_the_world_to_every_run_the_fit_refuses_too(tmp_path, capsys):
    # a run that falls to its floor by the first eval leaves fewer than 3 of its points off the floor: the per-run
    # fit refuses it, but it is still one of the runs the world must look like
    runs = fit.sample_runs(CALIBRATIONS["realistic"], {"dpo": 15, "rlhf": 15}, 10, 5, 0.6)
    gold = np.r_[0.6, 0.3, np.full(9, 0.24)]
    kl = np.r_[0.0, 6.0, np.full(9, 9.0)]
    proxy = np.r_[np.nan, np.linspace(0.5, 1.5, 10)]
    cliff = LoggedRun("rlhf-cliff", np.arange(11) * 8.0, gold, np.full(11, np.nan), proxy, {"gold": gold, "kl": kl})
    assert fit.skip_reason(cliff) is None and fit.fit_run(cliff) is None
    runs["rlhf-cliff"] = cliff
    log = tmp_path / "runs.csv"
    write_curve_log(log, fit.log_rows(runs))
    assert main(["calibrate", "--curves", str(log), "--out", str(tmp_path / "w.yaml"), "--samples", "30"]) == 0
    out = capsys.readouterr().out
    assert "Fitted 30 of 31 runs" in out
    # 15 sampled RLHF runs and the cliff; its peak is the start, so every row of the type counts 16 runs
    assert "| RLHF | peak index |" in out and out.count("| 16 / 30 |") >= 4, out
