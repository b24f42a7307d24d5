"""``runs.parquet``: the sweep's checksummed JSONL records as one table for pandas and SQL, a snapshot
that a kill never leaves half written."""

import json
import os

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from evalstop_gym.config import WorkloadConfig  # noqa: E402
from evalstop_gym.experiments import reproduce  # noqa: E402
from evalstop_gym.experiments.runs_table import export_parquet  # noqa: E402


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("res")
    reproduce(["E5"], seeds=2, out=out, base=WorkloadConfig(jobs=20), workers=1, progress=False, plots=False,
              echo=lambda _: None)
    return out


def records(folder):
    return [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]


def test_the_table_holds_every_record_with_its_spec_and_metrics(folder):
    table = pq.read_table(folder / "runs.parquet").to_pylist()
    recs = records(folder)
    assert len(table) == len(recs) == 12                          # E5: 6 points x 2 seeds
    by_id = {r["run_id"]: r for r in recs}
    for row in table:
        rec = by_id[row["run_id"]]
        assert row["stopper"] == rec["spec"]["stopper"] and json.loads(row["params"]) == rec["spec"]["params"]
        assert row["workload.seed"] == rec["spec"]["workload"]["seed"] and row["workload.jobs"] == 20
        assert row["avg_jct_h"] == rec["metrics"]["avg_jct_h"] and row["checksum"] == rec["checksum"]
        assert row["job_jct_h"] == rec["metrics"]["jobs_detail"]["jct_h"] and row["experiments"] == ["E5"]


def mean_jct_by_stopper(folder):
    """The mean of avg_jct_h per stopper, from the JSONL by hand."""
    expected = {}
    for r in records(folder):
        expected.setdefault(r["spec"]["stopper"], []).append(r["metrics"]["avg_jct_h"])
    return {k: sum(v) / len(v) for k, v in expected.items()}


def test_the_documented_pandas_query(folder):
    pd = pytest.importorskip("pandas")
    by_pandas = pd.read_parquet(folder / "runs.parquet").groupby("stopper")["avg_jct_h"].mean().to_dict()
    assert by_pandas == pytest.approx(mean_jct_by_stopper(folder))


def test_the_documented_sql_query(folder):
    duckdb = pytest.importorskip("duckdb", reason="DuckDB is not a dependency; the query is for those who have it")
    by_sql = dict(duckdb.sql(f"SELECT stopper, avg(avg_jct_h) FROM '{folder / 'runs.parquet'}' "
                             "GROUP BY stopper").fetchall())
    assert by_sql == pytest.approx(mean_jct_by_stopper(folder))


def test_a_write_cut_off_leaves_the_previous_table_and_bad_records_are_left_out(folder, tmp_path, monkeypatch):
    jsonl = tmp_path / "runs.jsonl"
    lines = (folder / "runs.jsonl").read_text().splitlines()
    edited = json.loads(lines[1])
    edited["metrics"]["avg_jct_h"] += 1.0                          # its checksum no longer matches
    jsonl.write_text("\n".join([lines[0], json.dumps(edited), lines[2]]) + '\n{"metrics": {"avg_')
    before = pq.read_table(export_parquet(jsonl)).to_pylist()
    assert [r["run_id"] for r in before] == [json.loads(lines[0])["run_id"], json.loads(lines[2])["run_id"]]
    snapshot = (tmp_path / "runs.parquet").read_bytes()

    def killed(table, where, **kw):     # as if the process died mid-write: a partial temporary file
        open(where, "wb").write(b"PAR1 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", killed)
    jsonl.write_text("\n".join(lines) + "\n")
    with pytest.raises(KeyboardInterrupt):
        export_parquet(jsonl)
    assert (tmp_path / "runs.parquet").read_bytes() == snapshot    # the old table, whole
    monkeypatch.undo()
    assert len(pq.read_table(export_parquet(jsonl))) == 12          # the next export replaces it


def test_a_table_older_than_its_records_is_brought_up_to_date_by_the_next_reproduce(folder):
    table = folder / "runs.parquet"
    table.write_bytes(b"stale")                                    # as if killed between a record and the table
    os.utime(table, ns=(0, 0))
    reproduce(["E5"], seeds=2, out=folder, base=WorkloadConfig(jobs=20), workers=1, progress=False, plots=False,
              echo=lambda _: None)                                 # nothing left to run
    assert len(pq.read_table(table)) == 12
