"""Importing the package and running ``simulate`` leave Gymnasium unimported (and ``simulate`` without
``--trace`` / ``--curves`` the trace and curve readers); the env ids are still there for ``gym.make``
whichever of the two packages is imported first (each case in a fresh process, since this one has
imported Gymnasium already)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOADED = "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'gymnasium')))"


def run(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", "import json, sys\n" + code], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_import_does_not_import_gymnasium():
    assert run("import evalstop_gym, evalstop_gym.envs.registration\n" + LOADED) == ["[]"]


def test_simulate_command_does_not_import_gymnasium_or_the_readers():
    code = ("import contextlib, io\nfrom evalstop_gym.cli import main\nbuf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n    rc = main(['simulate', '--json', '--jobs', '20'])\n"
            "print(rc, sorted(json.loads(buf.getvalue()))[:1])\n" + LOADED + "\n"
            "print([m for m in ('evalstop_gym.traces', 'evalstop_gym.curvelog') if m in sys.modules])")
    assert run(code) == ["0 ['avg_jct_h']", "[]", "[]"]


def test_lazy_choices_are_checked_and_listed(capsys):
    from evalstop_gym.cli import main
    from evalstop_gym.commands.common import LazyChoices

    formats = LazyChoices("evalstop_gym.curvelog", "CURVE_FORMATS")
    assert "jsonl" in formats and "xml" not in formats and list(formats)[0] == "auto"
    with pytest.raises(SystemExit) as e:
        main(["simulate", "--trace", "t.csv", "--trace-format", "nope"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--trace-format: invalid choice: 'nope' (choose from 'philly', 'helios', 'acme')" in err
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    assert "trace layout: philly, helios, acme (default philly)" in capsys.readouterr().out


@pytest.mark.parametrize("imports", ["import evalstop_gym\nimport gymnasium as gym",
                                     "import gymnasium as gym\nimport evalstop_gym",
                                     "import evalstop_gym\nimport gymnasium.spaces\nimport gymnasium as gym"])
def test_env_ids_registered_in_either_import_order(imports):
    code = imports + ("\nenv = gym.make('EvalStop-Cluster-v0', jobs=5)\n"
                      "print(env.unwrapped.spec.id, gym.spec('EvalStop-StopControl-v0').entry_point)\n"
                      # Gymnasium keeps its own loader (the hook only wraps it while Gymnasium loads)
                      "print(gym.__loader__ is gym.__spec__.loader, type(gym.__loader__).__name__)\n"
                      # and once Gymnasium is in, the finder is gone from the import path
                      "print([type(f).__name__ for f in sys.meta_path if 'Gymnasium' in type(f).__name__])")
    out = run(code)
    assert out[0] == "EvalStop-Cluster-v0 evalstop_gym.envs.stop_env:StopControlEnv"
    assert out[1].startswith("True ") and "ThenRegister" not in out[1]
    assert out[2] == "[]"


def test_env_classes_load_on_first_use():
    out = run("import evalstop_gym.envs as envs\n" + LOADED + "\nprint(envs.ClusterEnv.__name__, envs.STOP)\n"
              "print(sorted({'EvalStop-Cluster-v0'} & set(sys.modules['gymnasium'].registry)))")
    assert out == ["[]", "ClusterEnv 1", "['EvalStop-Cluster-v0']"]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        import evalstop_gym.envs

        evalstop_gym.envs.Nope  # noqa: B018
