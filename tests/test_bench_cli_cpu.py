"""benchmarks/bench_cli_cpu.py on stand-in checkouts: a fake ``evalstop_gym.cli`` whose work is a worker
process burning a known CPU time, and which writes one table saying what it was asked."""

import textwrap
from pathlib import Path

import pytest
from test_bench_env import load

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cli_cpu.py"

FAKE_CLI = textwrap.dedent("""
    import multiprocessing, sys, time

    def burn(seconds):
        t = time.process_time()
        while time.process_time() - t < seconds:
            pass

    if __name__ == "__main__":
        args = sys.argv[1:]
        out = args[args.index("--out") + 1]
        if args[0] == "fail":
            sys.exit("cli: the command failed")
        worker = multiprocessing.get_context("fork").Process(target=burn, args=(float(args[1]),))
        worker.start()
        worker.join()
        with open(out + "/table.md", "w") as f:
            f.write(" ".join(args[:2]) + "\\n")
""")


@pytest.fixture(scope="module")
def bench():
    return load(BENCH)


def fake_tree(root: Path, name: str) -> str:
    package = root / name / "evalstop_gym"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(FAKE_CLI)
    return str(root / name)


def test_compare_counts_identical_tables_and_names_the_rest(bench):
    first = {"a.md": b"1", "b.csv": b"2", "c.md": b"3"}
    other = {"a.md": b"1", "b.csv": b"two", "d.md": b"4"}
    assert bench.compare(first, other) == (1, ["b.csv", "c.md", "d.md"])
    assert bench.compare(first, dict(first)) == (3, [])


def test_tables_reads_md_and_csv_only_nested_included(bench, tmp_path):
    (tmp_path / "E1.md").write_text("t")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "E1.csv").write_text("c")
    (tmp_path / "E1.png").write_bytes(b"\x89PNG")
    assert bench.tables(tmp_path) == {"E1.md": b"t", "sub/E1.csv": b"c"}


def test_run_counts_the_workers_cpu(bench, tmp_path):
    tree = fake_tree(tmp_path, "tree")
    out = tmp_path / "out"
    out.mkdir()
    cpu = bench.run(tree, ["work", "0.4"], out)
    # the worker alone burns 0.4 CPU s; interpreter starts add a little, far less than another 0.4
    assert 0.4 <= cpu < 0.8
    assert (out / "table.md").read_text() == "work 0.4\n"


def test_run_stops_with_the_commands_last_error_line(bench, tmp_path):
    tree = fake_tree(tmp_path, "tree")
    with pytest.raises(SystemExit, match=r"tree: `evalstop-gym fail 0` exited 1: cli: the command failed"):
        bench.run(tree, ["fail", "0"], tmp_path)


def test_main_substitutes_each_trees_budget_and_reports_differing_tables(bench, tmp_path, monkeypatch, capsys):
    a, b = fake_tree(tmp_path, "a"), fake_tree(tmp_path, "b")
    monkeypatch.setattr("sys.argv", ["bench_cli_cpu.py", "--tree", a, "--tree", b, "--budget", "0.05",
                                     "--budget", "0.1", "--repeat", "1", "--warmup", "", "--", "work", "{budget}"])
    bench.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("`evalstop-gym work {budget}`: CPU s of the command and its workers")
    assert lines[1].startswith(f"  {a} (budget 0.05): ")
    assert lines[2].startswith(f"  {b} (budget 0.1): ")
    assert lines[2].endswith("; tables: 0 byte-identical, differ: table.md")


def test_main_refuses_a_budget_count_unlike_the_trees(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["bench_cli_cpu.py", "--tree", "a", "--tree", "b", "--budget", "16",
                                     "--", "bench"])
    with pytest.raises(SystemExit):
        bench.main()
    assert "--budget: given 1 times for 2 --tree; give one per tree" in capsys.readouterr().err
