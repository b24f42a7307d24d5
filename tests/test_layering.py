"""Layering: the core (simulator, envs, experiments) never imports the learned-policy layer or
stable-baselines3 / torch; learned arms plug in through evalstop_gym.experiments.learned."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("stable_baselines3", "sb3_contrib", "torch")

PROBE = """
import importlib, json, sys
for name in {modules!r}:
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}
                        or m.startswith(('agents', 'evalstop_gym.agents')))))
"""


@pytest.mark.parametrize("modules", [
    ["evalstop_gym"], ["evalstop_gym.simulator"],
    ["evalstop_gym.experiments", "evalstop_gym.experiments.spec", "evalstop_gym.experiments.suite",
     "evalstop_gym.experiments.learned", "evalstop_gym.experiments.tables"],
    ["evalstop_gym.envs", "evalstop_gym.envs.adapter"],
])
def test_core_imports_no_sb3_torch_or_agents(modules):
    code = PROBE.format(modules=modules, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def _layer(name: str) -> str:
    """The optional layer a module name belongs to, or ''."""
    top = name.split(".")[0]
    if top == "agents" or name.startswith("evalstop_gym.agents"):
        return "agents"
    return top if top in HEAVY else ""


def test_no_core_module_imports_the_agents_package_or_sb3():
    # commands are CLI adapters that serve `train` / `evaluate`; overopt's generator is torch by design;
    # the learned-policy layer itself may live inside the package (evalstop_gym/agents)
    pkg = ROOT / "evalstop_gym"
    core = [p for p in pkg.rglob("*.py") if p.relative_to(pkg).parts[0] not in ("commands", "agents")]
    offenders = []
    for path in core:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if _layer(n) and not (_layer(n) == "torch" and "overopt" in path.parts)]
    assert offenders == []


def test_a_registered_provider_is_what_reproduce_uses(tmp_path):
    from evalstop_gym.experiments import learned
    from evalstop_gym.experiments.spec import LEARNED, Arm, build_suite

    calls = []

    class Fake:
        def arm(self, model):
            calls.append(model)
            return Arm("fake learned", LEARNED, (("model", model),)), None

    learned.register_provider("fake", Fake())
    saved = learned._PROVIDERS[learned.DEFAULT_PROVIDER]
    learned.register_provider(learned.DEFAULT_PROVIDER, learned._PROVIDERS["fake"])
    try:
        (e1,) = build_suite(["E1"], model="m.zip")
    finally:
        learned.register_provider(learned.DEFAULT_PROVIDER, saved)
    assert calls == ["m.zip"]
    assert [p.stopper for p in e1.points if p.arm == "fake learned"] == [LEARNED]


def test_the_default_provider_is_the_sb3_layer():
    from evalstop_gym.agents.arms import PROVIDER
    from evalstop_gym.experiments.learned import provider

    assert provider() is PROVIDER
