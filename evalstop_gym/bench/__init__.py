"""EvalStop-Bench: one versioned grid of worlds, any policy, one scorecard with paired CIs (docs/bench.md).

* :mod:`.suite`: the suites as data (rows of worlds, presets, clusters, loads, noise, a real trace; test seeds);
* :mod:`.policies`: a built-in name, ``module:Class`` or a saved model as one policy;
* :mod:`.isolate`: a ``module:Class`` policy in a process of its own, seeing public views only;
* :mod:`.play`: a bench run as the experiment runner's spec (pools, records, resume);
* :mod:`.arms`: the reference arms, and every arm's runs on the rows (played, or read back);
* :mod:`.score`: the scorecard (t-intervals, stratified bootstrap, IQM) and Holm-corrected verdicts;
* :mod:`.tune`: one tuner, the same budget for every family and every declared outside search space;
* :mod:`.fingerprint`: the hash of every input of a score, and a results file's commit, date and versions;
* :mod:`.results`: results files (suite hash, version), comparability, Markdown, the leaderboard;
* :mod:`.verify`: ``bench verify``: a results file played again and compared cell by cell;
* :mod:`.run`: ``evalstop-gym bench``.
"""

from .run import run_bench

__all__ = ["run_bench"]
