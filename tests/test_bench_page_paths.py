"""Each leaderboard row names a command a reader can run: the tuning from a results file the page is rendered
from (the shipped ones under docs/leaderboard/), a saved model by the folder its training command writes, never
the folder of the machine that made the page."""

import json
import os
import shlex
from pathlib import Path

import pytest

from evalstop_gym.bench import results as res
from evalstop_gym.bench import suite as suite_mod
from evalstop_gym.bench.run import RESULTS_FILE, run_bench
from evalstop_gym.bench.suite import Row, suite_hash

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["docs/leaderboard/1-scored.json", "docs/leaderboard/2-learned.json"]
TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),)


def _commands(page):
    return [line.rsplit(" | `", 1)[1].rstrip("` |") for line in page.splitlines()
            if line.startswith("| ") and " | `evalstop-gym bench " in line]


@pytest.mark.parametrize("recorded, shown", [
    ("/tmp/lb/learned/models/runs/stop-realistic", "runs/stop-realistic"),   # trained by --leaderboard-run
    ("/home/me/runs/old/runs/stop-b/model.zip", "runs/stop-b/model.zip"),    # the last runs folder
    ("/home/me/models/mine", "mine"),                                         # no runs folder: its own name
    ("runs/stop-realistic", "runs/stop-realistic"),                           # relative: as given
])
def test_a_saved_model_is_named_by_the_folder_its_training_writes(recorded, shown):
    assert res.model_path(recorded) == shown


def test_the_shipped_files_render_with_paths_a_reader_has(tmp_path, monkeypatch):
    from evalstop_gym.cli import main

    monkeypatch.chdir(ROOT)   # the page names its files as the repository's root sees them
    out = tmp_path / "page.md"
    assert main(["bench", "--leaderboard", *SHIPPED, "--leaderboard-out", str(out)]) == 0
    commands = _commands(out.read_text(encoding="utf-8"))
    scored, learned = (json.loads((ROOT / f).read_text(encoding="utf-8")) for f in SHIPPED)
    assert scored["tuned_from"].startswith("/") and learned["tuning"] == scored["tuning"]   # recorded: the run's folder
    assert len(commands) == len({c["label"] for d in (scored, learned) for c in d["policies"]}) - _shared(out)
    assert all(c.endswith(" --tuned docs/leaderboard/1-scored.json") and "/tmp" not in c for c in commands)
    models = [c for c in commands if " --policy runs/" in c]
    assert len(models) == len({c["label"] for c in learned["policies"]}) > 0


def _shared(page):
    """Rows that stand for others (*same results on every workload*): how many labels they absorb."""
    text = page.read_text(encoding="utf-8")
    return sum(line.split("*same results on every workload:* ", 1)[1].split(")", 1)[0].count("; ") + 1
               for line in text.splitlines() if line.startswith("| ") and "*same results on every workload:*" in line)


def test_a_published_rows_command_runs_from_the_shipped_file_and_gives_its_numbers(tmp_path, monkeypatch):
    """A results file scored with --tuned FILE in a folder of its own; published under docs/; the page's row
    command, run as printed from the reader's folder, reads the tuning from the shipped copy and gives the
    same per-seed metrics."""
    from evalstop_gym.bench import tune
    from evalstop_gym.bench.regenerate import publish
    from evalstop_gym.cli import main

    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    real = tune.tune_families   # one family, one trial: a tuning as stage 1 leaves it, in little time
    monkeypatch.setattr(tune, "tune_families", lambda *a, **k: real(*a, **{**k, "families": ["none"]}))
    kw = dict(suite_name="toy", progress=False, echo=lambda _t: None)
    run = tmp_path / "run"
    run_bench(["fifo"], out=run / "tuned", tune=True, budget=1, **kw)
    run_bench(["fifo+cusum"], out=run / "scored", tuned=run / "tuned" / RESULTS_FILE, **kw)
    reader = tmp_path / "reader"
    (reader / "docs").mkdir(parents=True)
    monkeypatch.chdir(reader)
    page = publish([run / "scored" / RESULTS_FILE], Path("docs/leaderboard.md"))
    (command,) = [c for c in _commands(page) if "fifo+cusum" in c]
    assert command == "evalstop-gym bench --suite toy --policy fifo+cusum --tuned docs/leaderboard/1-scored.json"
    assert str(run) not in page.split("The results files, and the commands")[0]
    argv = shlex.split(command)[1:] + ["--out", "again", "--quiet"]
    assert main(argv) == 0
    suite_hash.cache_clear()
    mine = json.loads((reader / "again" / RESULTS_FILE).read_text())
    shipped = json.loads((reader / "docs" / "leaderboard" / "1-scored.json").read_text())
    assert [c["per_seed"] for c in mine["policies"]] == [c["per_seed"] for c in shipped["policies"]]
    assert mine["references"] == shipped["references"] and os.path.isabs(shipped["tuned_from"])
