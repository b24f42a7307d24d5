"""Configuration files run nothing: a recipe (YAML) or a model folder's config.json names only classes of the
package's allow-lists and env ids it registers, and every loader that reads one refuses anything else in one
line, before any module is imported, any network is built or any env is made."""

import json
import os
import sys
import time

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.cli import main  # noqa: E402
from evalstop_gym.config import ConfigError  # noqa: E402

STOP_ID = "EvalStop-StopControl-v0"
GOOD_CONFIG = {"env_id": STOP_ID, "env_kwargs": {}, "algo": "ppo", "policy": "MlpPolicy",
               "env_wrapper": [["JobFeatures", {}]], "hyperparams": {"policy_kwargs": {"net_arch": [8]}}}


def one_line(capsys, argv, *needles, budget_s=10.0):
    t0 = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - t0 < budget_s
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def evil_module(tmp_path, monkeypatch):
    """A module ``evilmod`` importable from the working directory (as ``python3 -m`` makes it) that writes
    a marker file when imported; yields the marker's path."""
    marker = tmp_path / "pwned"
    (tmp_path / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').close()\nEvil = object\nSystem = object\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("evilmod", None)
    yield marker
    sys.modules.pop("evilmod", None)


def recipe(tmp_path, body: str, name="x.yml"):
    p = tmp_path / name
    p.write_text(f"{STOP_ID}:\n  n_timesteps: 64\n  n_envs: 1\n{body}")
    return str(p)


def train_argv(tmp_path, path):
    return ["train", "--env", STOP_ID, "--algo", "ppo", "--hyperparams", path, "--out", str(tmp_path / "m")]


@pytest.mark.parametrize("body, needles", [
    ("  policy: evilmod.Evil\n", ("policy='evilmod.Evil'", "never a path to import")),
    ("  policy: ../evilmod.Evil\n", ("policy='../evilmod.Evil'",)),
    ("  policy: evalstop_gym.agents.networks.transfer\n", ("networks.transfer",)),
    ("  env_wrapper: evilmod.System\n", ("env_wrapper='evilmod.System'", "JobFeatures")),
    ("  env_wrapper: [{os.system: {command: touch pwned}}]\n", ("os.system",)),
    ("  policy_kwargs: {features_extractor_class: evilmod.Evil}\n", ("features_extractor_class",)),
    ("  policy_kwargs: {net_arch: [1000000000]}\n", ("net_arch[0]=1000000000", "4096")),
    ("  policy_kwargs: {net_arch: {pi: [64], vf: [99999999]}}\n", ("net_arch.vf[0]",)),
    ("  policy_kwargs: {net_arch: [8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]}\n", ("at most 16",)),
    # 4096 x 4096 + 4096 x 4096 = 33,554,432 weights: each width is allowed, the network is not
    ("  policy_kwargs: {net_arch: [4096, 4096, 4096]}\n", ("holds 33554432 weights between its layers", "4000000")),
    ("  policy_kwargs: {hidden: 4096}\n", ("hidden=4096", "a layer of 16777216 weights")),
    ("  buffer_size: 100000000000\n", ("buffer_size",)),
])
def test_a_recipe_names_only_allowed_classes_and_sizes(tmp_path, capsys, evil_module, body, needles):
    one_line(capsys, train_argv(tmp_path, recipe(tmp_path, body)), *needles)
    assert not evil_module.exists()
    assert not (tmp_path / "pwned").exists()


def test_the_networks_policy_is_allowed_by_name_and_by_its_module_path():
    from evalstop_gym.agents.hparams import policy_class
    from evalstop_gym.agents.networks import SlotScorerPolicy

    assert policy_class("SlotScorerPolicy", "maskable-ppo") is SlotScorerPolicy
    assert policy_class("evalstop_gym.agents.networks.SlotScorerPolicy", "maskable-ppo") is SlotScorerPolicy
    assert policy_class("MlpPolicy", "ppo") == "MlpPolicy"
    with pytest.raises(ConfigError, match="never a path to import"):
        policy_class("evalstop_gym.agents.networks.SlotSetExtractor", "ppo")


def test_the_shipped_recipes_all_pass_the_allow_list():
    from evalstop_gym.agents.hparams import HYPERPARAMS_DIR, PROJECT_SECTION, _read, load_recipe

    checked = 0
    for path in sorted(HYPERPARAMS_DIR.glob("*.yml")):
        algo = "maskable-ppo" if path.stem.startswith("maskable-ppo") else path.stem.split("-")[0]
        for env_id in _read(path):
            if env_id != PROJECT_SECTION:
                load_recipe(algo, env_id, path)
                checked += 1
    assert checked >= 11


def write_model(folder, config):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.zip").write_bytes(b"not read: the config is refused first")
    return folder


BAD_CONFIGS = [
    ({"policy": "evilmod.Evil"}, "policy='evilmod.Evil'"),
    ({"policy": "antigravity.geohash"}, "antigravity.geohash"),
    ({"policy": "this.Nothing"}, "this.Nothing"),
    ({"policy": ["MlpPolicy"]}, "policy=['MlpPolicy']"),
    ({"env_id": "evilmod:Evil-v0"}, "the env ids this package registers"),
    ({"env_id": "CartPole-v1"}, "env_id='CartPole-v1'"),
    ({"env_wrapper": [["os.system", {"command": "touch pwned"}]]}, "os.system"),
    ({"env_wrapper": [["evilmod.System", {}]]}, "evilmod.System"),
    ({"env_wrapper": "JobFeatures"}, "[wrapper name, keywords] pairs"),
    ({"env_wrapper": [["HandCodedStops", {"stop_model": 7}]]}, "stop_model"),
    ({"algo": "evilmod"}, "algo='evilmod'"),
    ({"env_kwargs": "rm -rf"}, "env_kwargs"),
    ({"hyperparams": {"policy_kwargs": {"net_arch": [2**40]}}}, "net_arch[0]"),
    ({"hyperparams": {"policy_kwargs": {"features_extractor_class": "evilmod.Evil"}}}, "features_extractor_class"),
]


@pytest.mark.parametrize("edit, needle", BAD_CONFIGS)
def test_learned_policy_load_refuses_a_config_naming_anything_else(tmp_path, evil_module, edit, needle):
    folder = write_model(tmp_path / "model", {**GOOD_CONFIG, **edit})
    with pytest.raises(ConfigError) as e:
        LearnedPolicy.load(folder)
    assert needle in str(e.value) and "config.json" in str(e.value)
    assert not evil_module.exists()


@pytest.mark.parametrize("loader", ["evaluate", "reproduce", "targets"])
def test_every_command_loading_a_model_refuses_code_in_its_config(tmp_path, capsys, evil_module, loader):
    folder = write_model(tmp_path / "model", {**GOOD_CONFIG, "policy": "evilmod.Evil"})
    # a .py file inside the model folder, the working directory: still nothing is imported
    (folder / "evilmod.py").write_text((tmp_path / "evilmod.py").read_text())
    os.chdir(folder)
    argv = {"evaluate": ["evaluate", "--policy", str(folder), "--seeds", "1", "--jobs", "10"],
            "reproduce": ["reproduce", "--experiments", "E1", "--model", str(folder), "--seeds", "1", "--jobs", "10",
                          "--out", str(tmp_path / "out"), "--no-progress", "--workers", "1"],
            "targets": ["targets", "--stop-model", str(folder), "--seeds", "2", "--validation-seeds", "2",
                        "--jobs", "10", "--out", str(tmp_path / "out"), "--no-progress"]}[loader]
    one_line(capsys, argv, "policy='evilmod.Evil'")
    assert not evil_module.exists()


@pytest.mark.parametrize("content, needle", [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    (b'{"env_id": NaN}', "not valid JSON"),
    (b" " * (17 * 2**20), "larger than"),
])
def test_an_unreadable_model_config_is_one_line(tmp_path, capsys, content, needle):
    folder = write_model(tmp_path / "model", GOOD_CONFIG)
    (folder / "config.json").write_bytes(content)
    one_line(capsys, ["evaluate", "--policy", str(folder), "--seeds", "1", "--jobs", "10"], needle, "config.json")


def billion_laughs(levels=9, width=9):
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("make, needle", [
    (lambda p: p.write_text(billion_laughs() + f"{STOP_ID}: {{n_timesteps: 64, n_envs: 1}}\n"), "billion laughs"),
    (lambda p: p.write_text(f"{STOP_ID}: " + "[" * 100 + "]" * 100 + "\n"), "nested more than 64"),
    # libyaml's own depth limit (PyYAML >= 6.0.4) may stop this one first ("exceeded maximum nesting depth")
    (lambda p: p.write_text(f"{STOP_ID}: " + "[" * 100_000 + "]" * 100_000 + "\n"), "nest"),
    (lambda p: p.write_bytes(f"{STOP_ID}:\n  n_timesteps: 64 # \xe9\n".encode("latin-1")), "not UTF-8"),
    (lambda p: p.write_text(f"{STOP_ID}: !!python/object/apply:os.system [touch pwned]\n"), "not valid YAML"),
    (lambda p: p.write_text(f"{STOP_ID}: [unclosed\n"), "not valid YAML"),
])
def test_a_hostile_hyperparameter_file_is_one_line_within_seconds(tmp_path, capsys, make, needle):
    path = tmp_path / "x.yml"
    make(path)
    os.chdir(tmp_path)
    one_line(capsys, train_argv(tmp_path, str(path)), "hyperparameter file", needle, budget_s=5.0)
    assert not (tmp_path / "pwned").exists()


def test_a_device_or_a_fifo_as_hyperparameters_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "fifo.yml"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo), str(tmp_path)):
        one_line(capsys, train_argv(tmp_path, path), "not a regular file", budget_s=2.0)
