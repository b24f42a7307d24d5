"""With only the core installed, commands and optional layers say in one line which extra to install.

A missing module is simulated with ``sys.modules[name] = None`` in a subprocess (Python then raises
``ModuleNotFoundError`` on import, as if the package were not installed)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = ["matplotlib", "scipy", "tqdm", "stable_baselines3", "sb3_contrib", "torch", "yaml", "tensorboard",
            "pettingzoo", "supersuit", "ray", "pygame", "moviepy", "rl_zoo3"]


def run_without_extras(code: str, argv=()):
    prelude = f"import sys\nfor m in {OPTIONAL!r}:\n    sys.modules[m] = None\n"
    return subprocess.run([sys.executable, "-c", prelude + code, *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


CLI = "from evalstop_gym.cli import main\nsys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("argv,extra", [
    (["reproduce", "--seeds", "1", "--experiments", "E1", "--out", "{tmp}/r"], "experiments"),
    (["train", "--env", "EvalStop-StopControl-v0", "--algo", "ppo", "--out", "{tmp}/t"], "rl"),
    (["evaluate", "--policy", "{tmp}/no-model", "--seeds", "1"], "rl"),
    (["curves", "generate", "--out", "{tmp}/g", "--runs", "1"], "rl"),
])
def test_commands_name_the_extra_in_one_line_and_exit_2(tmp_path, argv, extra):
    (tmp_path / "no-model").mkdir()
    (tmp_path / "no-model" / "model.zip").write_bytes(b"")
    (tmp_path / "no-model" / "config.json").write_text(
        '{"env_id": "EvalStop-StopControl-v0", "env_kwargs": {}, "env_wrapper": [], "algo": "ppo"}')
    out = run_without_extras(CLI, [a.format(tmp=tmp_path) for a in argv])
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"evalstop-gym {argv[0]}: error: ")
    assert f"'{extra}' extra" in lines[0] and f"pip install 'evalstop-gym[{extra}]'" in lines[0]


def test_curve_commands_without_the_generator_need_no_extra(tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("job,step,eval_score\n" + "".join(f"a,{i},{0.1 * i}\n" for i in range(1, 6)))
    out = run_without_extras(CLI, ["curves", "label", str(log)])
    assert out.returncode == 0, out.stderr


def test_the_multiagent_import_names_its_extra():
    out = run_without_extras("import evalstop_gym.multiagent")
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last == ("evalstop_gym.extras.MissingExtra: evalstop_gym.multiagent needs the 'multiagent' extra "
                    "(pettingzoo is not installed): pip install 'evalstop-gym[multiagent]'")


def test_a_missing_module_of_no_extra_is_not_disguised():
    from evalstop_gym.extras import MissingExtra, missing_extra

    err = ModuleNotFoundError("no module named 'typo'", name="typo")
    assert missing_extra(err) is err
    assert isinstance(missing_extra(ModuleNotFoundError("x", name="scipy.stats")), MissingExtra)
