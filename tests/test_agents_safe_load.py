"""Loading a model runs nothing from its files: pickles in a crafted model zip are never unpickled."""

import base64
import json
import pickle
import shutil
import zipfile

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents.policy import LearnedPolicy  # noqa: E402
from evalstop_gym.agents.train import train  # noqa: E402
from test_agents_cli import one_line_error  # noqa: E402

STOP_ID = "EvalStop-StopControl-v0"
TINY = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}


class WritesMarker:
    """Unpickling this creates the file ``path`` (what a hostile model would do, harmlessly)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-model")
    train(STOP_ID, "ppo", out=out, timesteps=256, n_envs=1, overrides=TINY, echo=lambda _: None)
    return out


def rewrite_zip(src, dst, edit_data=None, extra=None):
    """Copy a model zip, passing its ``data`` JSON through ``edit_data`` and adding ``extra`` entries."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            if item.filename in (extra or {}):
                continue
            body = zin.read(item.filename)
            if item.filename == "data" and edit_data is not None:
                data = json.loads(body)
                edit_data(data)
                body = json.dumps(data).encode()
            zout.writestr(item, body)
        for name, body in (extra or {}).items():
            zout.writestr(name, body)


def serialized(obj):
    return {":type:": "<class 'object'>", ":serialized:": base64.b64encode(pickle.dumps(obj)).decode()}


def crafted(model_dir, tmp_path, **kw):
    folder = tmp_path / "crafted"
    folder.mkdir()
    shutil.copy(model_dir / "config.json", folder / "config.json")
    rewrite_zip(model_dir / "model.zip", folder / "model.zip", **kw)
    return folder




def test_a_pickle_under_a_new_key_is_refused_and_never_run(model_dir, tmp_path, capsys):
    marker = tmp_path / "pwned"
    folder = crafted(model_dir, tmp_path, edit_data=lambda d: d.update(evil=serialized(WritesMarker(marker))))
    one_line_error(capsys, ["evaluate", "--policy", str(folder), "--seeds", "1", "--jobs", "10"],
                   "pickled entries 'evil'", "nothing from the file was run")
    assert not marker.exists()


def test_a_pickle_in_place_of_a_known_entry_is_replaced_not_run(model_dir, tmp_path):
    marker = tmp_path / "pwned"
    payload = serialized(WritesMarker(marker))
    folder = crafted(model_dir, tmp_path, edit_data=lambda d: d.update(policy_class=payload, lr_schedule=payload,
                                                                       observation_space=payload | {"_shape": [18]}))
    crafted_metrics = LearnedPolicy.load(folder).run(seed=3, jobs=10)
    assert not marker.exists()
    assert crafted_metrics == LearnedPolicy.load(model_dir).run(seed=3, jobs=10)


def test_a_pickle_in_the_tensors_is_refused_and_never_run(model_dir, tmp_path, capsys):
    import io

    import torch

    marker = tmp_path / "pwned"
    buf = io.BytesIO()
    torch.save({"weight": WritesMarker(marker)}, buf)
    folder = crafted(model_dir, tmp_path, extra={"pytorch_variables.pth": buf.getvalue()})
    one_line_error(capsys, ["evaluate", "--policy", str(folder), "--seeds", "1", "--jobs", "10"],
                   "cannot be loaded as a ppo model (UnpicklingError: Weights only load failed")
    assert not marker.exists()


def test_reproduce_model_runs_nothing_from_the_file(model_dir, tmp_path, capsys):
    marker = tmp_path / "pwned"
    folder = crafted(model_dir, tmp_path, edit_data=lambda d: d.update(evil=serialized(WritesMarker(marker))))
    one_line_error(capsys, ["reproduce", "--experiments", "E1", "--model", str(folder), "--seed", "0",
                            "--seeds", "1", "--jobs", "10", "--out", str(tmp_path / "out"), "--no-progress",
                            "--workers", "1"], "pickled entries 'evil'")
    assert not marker.exists()


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_model_whose_weights_are_not_finite_is_refused(model_dir, tmp_path, capsys, value):
    import io

    import torch

    with zipfile.ZipFile(model_dir / "model.zip") as z:
        weights = torch.load(io.BytesIO(z.read("policy.pth")), weights_only=True)
    name = next(k for k, t in weights.items() if torch.is_floating_point(t))
    weights[name].view(-1)[0] = value
    buf = io.BytesIO()
    torch.save(weights, buf)
    folder = crafted(model_dir, tmp_path, extra={"policy.pth": buf.getvalue()})
    one_line_error(capsys, ["evaluate", "--policy", str(folder), "--seeds", "1", "--jobs", "10"],
                   f"its weights {name!r} hold NaN or infinite values")
