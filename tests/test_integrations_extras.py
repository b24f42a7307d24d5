"""The integrations load lazily: the live adapter needs no optional package, each hook names its extra in one
line when that is missing, and no core module imports transformers, TRL or Optuna."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HOOK_PACKAGES = ("transformers", "trl", "optuna", "ray", "torch", "datasets", "accelerate")


def run(code: str, hide=()):
    prelude = f"import sys\nfor m in {list(hide)!r}:\n    sys.modules[m] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_the_live_adapter_imports_no_training_framework():
    out = run("import json\nfrom evalstop_gym.integrations import live_stopper\n"
              "live_stopper('cusum').update('a', 0.5)\n"
              f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HOOK_PACKAGES)!r}))))")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("name,missing,extra", [
    ("EvalStopCallback", "transformers", "live"), ("CurveLogger", "transformers", "live"),
    ("TuneStopper", "ray", "ray"), ("EvalStopScheduler", "ray", "ray"), ("EvalStopPruner", "optuna", "live"),
])
def test_a_missing_extra_is_named_in_one_line(name, missing, extra):
    out = run(f"from evalstop_gym.integrations import {name}", hide=[missing])
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("evalstop_gym.extras.MissingExtra: evalstop_gym.integrations.")
    assert f"needs the '{extra}' extra ({missing} is not installed): pip install 'evalstop-gym[{extra}]'" in last


def test_unknown_names_are_attribute_errors():
    import evalstop_gym.integrations as integrations

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        integrations.Nope  # noqa: B018
    assert {"live_stopper", "EvalStopCallback", "TuneStopper", "EvalStopPruner"} <= set(dir(integrations))


# optional layers, which may import their frameworks; everything else is the core
LAYERS = ("integrations", "overopt", "commands", "agents", "bench")   # bench: optuna for --tune only


def test_the_core_imports_no_training_framework():
    pkg = ROOT / "evalstop_gym"
    offenders = []
    for path in pkg.rglob("*.py"):
        if path.relative_to(pkg).parts[0] in LAYERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if n.split(".")[0] in ("transformers", "trl", "optuna")]
    assert offenders == []
