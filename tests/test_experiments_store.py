"""``runs.parquet`` as a store: a declared schema (no column lost when the first row lacks it), every
E-table rebuilt from the file alone equals the Markdown the run wrote, and every SQL example of the docs
prints what the docs say it prints."""

import json
import re
import shlex
from pathlib import Path

import pytest

pq = pytest.importorskip("pyarrow.parquet")

from evalstop_gym.cli import main  # noqa: E402
from evalstop_gym.config import WorkloadConfig  # noqa: E402
from evalstop_gym.experiments import EXPERIMENTS, reproduce  # noqa: E402
from evalstop_gym.experiments.runs_table import COLUMNS, markdown_from_parquet  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(base=WorkloadConfig(jobs=20), seeds=2)   # every experiment in about 5 s on one core


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("store")
    reproduce(None, out=out, workers=1, progress=False, plots=False, echo=lambda _: None, **SMALL)
    return out


def table(folder):
    return pq.read_table(folder / "runs.parquet")


def test_the_schema_is_declared_whatever_the_first_row_holds(folder):
    t = table(folder)
    assert t.schema.names == [name for name, _ in COLUMNS]
    rows = t.to_pylist()
    # E9's flat pool has no cluster; the table keeps the column for the rows that have one
    clusters = {r["workload.cluster"] for r in rows if "E9" in r["experiments"]}
    assert None in clusters and len(clusters) == 5   # flat pool, 3 placements of 8 x 8, two GPU types
    # a run of only the flat pool still has every column, all null
    (tmp := folder / "flat").mkdir()
    reproduce(["E7"], out=tmp, workers=1, progress=False, plots=False, echo=lambda _: None, **SMALL)
    assert table(tmp).schema == t.schema and table(tmp).column("workload.cluster").null_count == table(tmp).num_rows


def test_world_variants_tell_every_run_apart(folder):
    rows = table(folder).to_pylist()
    setup = [c for c, _ in COLUMNS if c in ("scheduler", "stopper", "params") or c.startswith("workload.")]
    keys = [tuple(r[c] for c in setup) for r in rows]
    assert len(set(keys)) == len(rows)                       # no two runs look the same
    e8 = {r["workload.curves.hack_peak"] for r in rows if "E8" in r["experiments"]}
    assert e8 == {"[0.15, 0.45]", "[0.3, 0.6]", "[0.45, 0.75]", "[0.6, 0.9]", "[0.7, 1.0]"}
    e10 = [r for r in rows if "E10" in r["experiments"] and r["stopper"] == "none" and r["workload.seed"] == 0]
    worlds = {(r["workload.world.seed_noise_factor"], r["workload.curves.drift"], r["workload.curves.penalty_share"],
               r["workload.curves.peak_gain_exploitable"]) for r in e10}
    # six worlds, each relative to the paper calibration: its drift is 0 and its KL penalty share already 0, so
    # "plateau drift x2" and "healthy KL grows" are the calibrated world itself, the same run; seed noise x2
    # doubles its factor of 1
    assert len(e10) == len(worlds) == 4 and ("[2.0, 2.0]", 0.0, 0.0, "[0.03, 0.12]") in worlds


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_every_table_is_rebuilt_from_the_parquet_file_alone(folder, name):
    written = (folder / f"{name}.md").read_text(encoding="utf-8")
    rebuilt = markdown_from_parquet(folder / "runs.parquet", name, **SMALL)
    assert rebuilt.count("\n") >= 3 and rebuilt in written


def test_sql_means_equal_the_written_e1_table(folder):
    """An independent check of the mean cells: DuckDB's average against the Markdown's ``mean ± std``."""
    duckdb = pytest.importorskip("duckdb")
    by_sql = dict(duckdb.sql(f"SELECT stopper, round(avg(avg_jct_h), 2) FROM '{folder / 'runs.parquet'}' "
                             "WHERE list_contains(experiments, 'E1') GROUP BY stopper").fetchall())
    written = {}
    for line in (folder / "E1.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 6 and " ± " in cells[5]:
            written[cells[0].split()[0]] = float(cells[5].split(" ± ")[0])
    assert len(written) >= 5 and by_sql == pytest.approx(written, abs=0.0051)


# -- the docs' SQL examples: a console block that runs `reproduce` and then `query` ------------------------------
def doc_examples():
    """(file, reproduce argv, query argv, printed lines) of every console block that runs `evalstop-gym query`."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```console\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            if "$ evalstop-gym query" not in block:
                continue
            setup, query, printed = None, None, []
            for line in block.splitlines():
                if line.startswith("$ evalstop-gym reproduce"):
                    setup = shlex.split(line[2:].split(">")[0])[1:]
                elif line.startswith("$ evalstop-gym query"):
                    query = shlex.split(line[2:])[1:]
                elif query is not None:
                    printed.append(line)
            found.append(pytest.param(setup, query, printed, id=f"{path.name}:{query[-1][:40] if query else None}"))
    return found


DOC_EXAMPLES = doc_examples()


def test_the_docs_have_sql_examples():
    assert len(DOC_EXAMPLES) >= 2


@pytest.mark.parametrize("setup,query,printed", DOC_EXAMPLES)
def test_every_sql_example_of_the_docs_prints_what_the_docs_show(setup, query, printed, tmp_path, capsys,
                                                                   monkeypatch):
    pytest.importorskip("duckdb")
    assert setup is not None, "a SQL example starts from the reproduce command that makes its runs"
    monkeypatch.chdir(tmp_path)                              # its --out folder is made here
    assert main(setup) == 0
    capsys.readouterr()
    assert main(query) == 0
    assert capsys.readouterr().out.splitlines() == printed


def test_a_bad_query_is_one_line(folder, capsys):
    pytest.importorskip("duckdb")
    assert main(["query", "--runs", str(folder / "runs.parquet"), "SELECT nope FROM runs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and '"nope"' in err and "SELECT nope FROM runs" in err
    assert main(["query", "--runs", str(folder / "missing.parquet"), "SELECT 1"]) == 2
    assert "runs=" in capsys.readouterr().err


def test_query_prints_csv(folder, capsys):
    pytest.importorskip("duckdb")
    assert main(["query", "--csv", "--runs", str(folder / "runs.parquet"),
                 "SELECT count(*) AS n, count(DISTINCT run_id) AS ids FROM runs"]) == 0
    n = len(json.loads("[" + ",".join(
        line for line in (folder / "runs.jsonl").read_text().splitlines()) + "]"))
    assert capsys.readouterr().out == f"n,ids\n{n},{n}\n"


def inline_queries():
    """Every `evalstop-gym query "..."` written inline in the docs' prose (the README's placeholder aside)."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for code in re.findall(r"`(evalstop-gym query [^`]*)`", path.read_text(encoding="utf-8")):
            argv = shlex.split(code)[1:]
            if argv[-1] != "SQL":
                found.append(pytest.param(argv, id=f"{path.name}:{argv[-1][:40]}"))
    return found


def test_the_docs_have_inline_queries():
    assert inline_queries()


@pytest.mark.parametrize("argv", inline_queries())
def test_every_inline_query_of_the_docs_runs_on_a_results_folder(argv, folder, capsys):
    """Their figures come from the full run; here each must run and return rows on a small one."""
    pytest.importorskip("duckdb")
    assert main([*argv, "--runs", str(folder / "runs.parquet")]) == 0
    assert len(capsys.readouterr().out.splitlines()) > 2
