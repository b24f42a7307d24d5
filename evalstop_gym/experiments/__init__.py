"""The paper's experiment suite (E1-E10) and its runner, behind ``evalstop-gym reproduce``.

* :mod:`.spec`: experiments as data, built against the policy registry;
* :mod:`.runner`: local process pool or Ray, JSONL results, resume;
* :mod:`.runs_table`: ``runs.parquet`` under its declared schema, and tables rebuilt from it;
* :mod:`.stats`: mean and spread over seeds, paired tests;
* :mod:`.tables` / :mod:`.plots`: Markdown, CSV, PNG;
* :mod:`.suite`: the whole pipeline, :func:`reproduce`.

Names are imported on first use, so ``evalstop-gym --help`` does not load scipy.
"""

import importlib

_EXPORTS = {
    "EXPERIMENTS": "spec", "Experiment": "spec", "Point": "spec", "Registry": "spec", "build_suite": "spec",
    "parse_names": "spec", "ResultStore": "runner", "RunSpec": "runner", "run_sweep": "runner",
    "reproduce": "suite", "markdown_from_parquet": "runs_table", "table_rows": "runs_table",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
