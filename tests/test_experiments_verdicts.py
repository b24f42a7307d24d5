"""The verdict block at the end of ``reproduce``: each claim holds, is marginal (only a p-value in
[0.05, 0.10) fails it), differs as the docs explain (with that reason, kept beside the claim) or differs
unexpectedly, which ``--strict`` turns into exit code 1."""

import dataclasses

import pytest

from evalstop_gym.cli import main
from evalstop_gym.experiments import spec
from evalstop_gym.experiments.spec import Check, Claim, Experiment, Point
from evalstop_gym.experiments.tables import claim_verdicts, verdict_block

pytest.importorskip("scipy")


def is_arm(name):
    return lambda row: row["arm"] == name


def toy():
    """Four claims on hand-made rows, one of each kind."""
    claims = (
        Claim("a holds", "1%", is_arm("a"), (Check("jct_gain_pct", ">", 0.0),)),
        Claim("b is marginal", "2%", is_arm("b"), (Check("jct_gain_pct", ">", 0.0), Check("jct_gain_p_t", "<", 0.05)),
              differs="seed-to-seed spread"),
        Claim("c differs", "3%", is_arm("c"), (Check("recall", ">=", 0.95),), each=True, differs="the model's reason"),
        Claim("d surprises", "4%", is_arm("d"), (Check("recall", ">=", 0.95),)),
    )
    exp = Experiment("E0", "toy", "?", "x", (Point("a", "fifo"),), ("recall",), ("recall",), claims=claims)
    rows = [{"arm": "a", "x": 1, "jct_gain_pct": 5.0},
            {"arm": "b", "x": 1, "jct_gain_pct": 5.0, "jct_gain_p_t": 0.073},
            {"arm": "c", "x": 1, "recall": 0.5}, {"arm": "c", "x": 2, "recall": 0.97}, {"arm": "c", "x": 3, "recall": 0.9},
            {"arm": "d", "x": 1, "recall": 0.94}]
    return exp, rows


def test_each_claim_gets_its_kind_and_a_documented_one_its_reason():
    exp, rows = toy()
    kinds = [(v["claim"], v["verdict"], v["why"]) for v in claim_verdicts(exp, rows)]
    assert kinds == [
        ("a holds", "holds", ""),
        ("b is marginal", "marginal", "p(t) 0.073 (0.05 <= p < 0.10): seed-to-seed spread"),
        ("c differs [c, x 1]", "differs as documented", "the model's reason"),
        ("c differs [c, x 2]", "holds", ""),
        ("c differs [c, x 3]", "differs as documented", "the model's reason"),
        ("d surprises", "differs unexpectedly", ""),
    ]


def test_a_p_value_of_0_10_or_a_failing_gain_is_not_marginal():
    exp, rows = toy()
    rows[1]["jct_gain_p_t"] = 0.10
    assert claim_verdicts(exp, rows)[1]["verdict"] == "differs as documented"
    rows[1]["jct_gain_p_t"], rows[1]["jct_gain_pct"] = 0.06, -1.0     # the gain itself fails too
    assert claim_verdicts(exp, rows)[1]["verdict"] == "differs as documented"
    rows[1]["jct_gain_p_t"], rows[1]["jct_gain_pct"] = 0.05, 5.0      # 0.05 itself fails p < 0.05: marginal
    assert claim_verdicts(exp, rows)[1]["verdict"] == "marginal"


def test_the_block_counts_every_row_and_lists_a_claim_once_with_its_reason():
    exp, rows = toy()
    block = verdict_block(claim_verdicts(exp, rows), width=200)
    lines = block.splitlines()
    assert lines[0] == ("Verdict on 6 claims: 2 hold, 1 marginal, 2 differ as documented, "
                        "1 differ unexpectedly")
    assert "holds (2):" in lines and "differs unexpectedly (1):" in lines
    assert "E0  c differs (paper: 3%): [c, x 1] recall 0.500; [c, x 3] recall 0.900" in lines
    assert block.count("why: the model's reason") == 1
    assert lines[-1] == "E0  d surprises (paper: 4%): recall 0.940"


def test_strict_fails_only_on_an_unexpected_difference(tmp_path, monkeypatch, capsys):
    args = ["reproduce", "--experiments", "E8", "--seeds", "2", "--jobs", "20", "--no-progress", "--strict"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "differs as documented" in out and "0 differ unexpectedly" in out
    title, build = spec.EXPERIMENTS["E8"]

    def undocumented(c):
        exp = build(c)
        return dataclasses.replace(exp, claims=tuple(dataclasses.replace(cl, differs="") for cl in exp.claims))

    monkeypatch.setitem(spec.EXPERIMENTS, "E8", (title, undocumented))
    assert main([*args, "--out", str(tmp_path / "a")]) == 1       # the same runs, reused
    captured = capsys.readouterr()
    assert "differs unexpectedly" in captured.out
    assert "claims differ unexpectedly (listed above)" in captured.err
    summary = (tmp_path / "a" / "summary.md").read_text()
    assert "0 differ as documented" in summary and "differs unexpectedly (" in summary
