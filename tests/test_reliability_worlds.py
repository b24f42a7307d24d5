"""World files are bounded: every number has a range checked at load, what the simulator derives from them
cannot overflow, a repeated key is an error, and the parsed file is cached by its content."""

import dataclasses
import math
import os
import time
import warnings

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalstop_gym.api import simulate
from evalstop_gym.config import CALIBRATIONS, ConfigError, LatentModel, WorldModel, calibration_of
from evalstop_gym.worldfile import MAX_WORLD_BYTES, dump_world, world_data

REALISTIC = CALIBRATIONS["realistic"]


def _world(tmp_path, edit, name="w.yaml"):
    data = world_data(REALISTIC)
    edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


HOSTILE = {   # what the file says -> the field the error must name
    "seed noise 1e300": (lambda d: d["world"].update(seed_noise_factor=[1e300, 1e300]), "world.seed_noise_factor"),
    "kl_scale 1e300": (lambda d: d["curves"].update(kl_scale=1e300), "curves.kl_scale"),
    "lr 1e300": (lambda d: d["curves"].update(lr=[1.0, 1e300]), "curves.lr"),
    "straggler 1e300": (lambda d: d["world"].update(straggler_excess=[1e300, 1e300]), "world.straggler_excess"),
    "storage 1e-300 GB/s": (lambda d: d["world"].update(storage_gbps=[1e-300, 1e-300]), "world.storage_gbps"),
    "warm-up 1e12 s": (lambda d: d["world"].update(warmup_s=[1e12, 1e12]), "world.warmup_s"),
    "a resume of a week": (lambda d: d["world"].update(warmup_s=[0, 80000], storage_gbps=[0.01, 0.01]),
                           "world.checkpoint_gb/storage_gbps/warmup_s"),
    "a straggler spread of 1e4": (lambda d: d["world"].update(straggler_excess=[0.001, 10]), "world.straggler_excess"),
    "an integer of 400 digits": (lambda d: d["curves"].update(kl_scale=10**400), "curves.kl_scale"),
    "an integer in a pair": (lambda d: d["world"].update(eval_fixed_min=[0, 10**400]), "world.eval_fixed_min"),
    "an eval set of 10**400": (lambda d: d["world"].update(eval_items=[10**400]), "world.eval_items"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_a_number_out_of_its_range_is_one_line_naming_the_field(tmp_path, cli_error, case):
    edit, field = HOSTILE[case]
    path = _world(tmp_path, edit)
    err = cli_error(["simulate", "--calibration", str(path), "--jobs", "10", "--json"])
    assert f"{field}=" in err and str(path) in err


def test_a_repeated_key_is_refused_naming_both_lines(tmp_path, cli_error):
    text = dump_world(REALISTIC)
    path = tmp_path / "twice.yaml"
    path.write_text(text.replace("  kl_scale: 2.0\n", "  kl_scale: 2.0\n  kl_scale: 1.0e+300\n"))
    line = text.splitlines().index("  kl_scale: 2.0") + 1
    err = cli_error(["simulate", "--calibration", str(path), "--jobs", "10"])
    assert f"key 'kl_scale' appears twice (lines {line} and {line + 1})" in err


def test_a_world_at_its_bounds_simulates_without_a_warning_and_with_finite_metrics():
    top = {k: hi for k, (_, hi) in LatentModel.RANGES.items() if k != "drift_autocorr"}
    curves = dataclasses.replace(REALISTIC.curves, **{k: (top[k], top[k]) if isinstance(v, tuple) else top[k]
                                                      for k, v in vars(REALISTIC.curves).items()
                                                      if k in top and v is not None},
                                 drift_autocorr=0.99)
    world = WorldModel(eval_items=(1,), seed_noise_factor=(10.0, 10.0), checkpoint_gb=(1e3, 1e3, 1e3),
                       storage_gbps=(1e4, 1e4), warmup_s=(0.0, 0.0), straggler_excess=(0.25, 10.0), segment_jitter=1.0)
    for model in (curves, dataclasses.replace(REALISTIC.curves, lr=(1e-6, 1e-6), kl_scale=1e-6, loss_tau=(1e-6, 1e-6),
                                              kl_coef=(1e-6, 1e-6), d_star_exploitable=(1e-6, 1e-6))):
        with warnings.catch_warnings():
            warnings.simplefilter("error")   # a numpy overflow is a warning: here it fails the test
            m = simulate("srtf-est", "evalstop", curves=model, world=world, jobs=30, gpus=64, seed=1)
        assert all(math.isfinite(v) for v in m.values() if isinstance(v, float))


def test_the_cache_is_keyed_by_content_not_size_and_time(tmp_path):
    path = _world(tmp_path, lambda d: d["curves"].update(kl_scale=2.0))
    assert calibration_of(str(path)).curves.kl_scale == 2.0
    st_ = os.stat(path)
    path.write_text(path.read_text().replace("kl_scale: 2.0", "kl_scale: 3.0"))   # same size
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))                        # same time, as cp -p keeps it
    assert os.stat(path).st_size == st_.st_size and os.stat(path).st_mtime_ns == st_.st_mtime_ns
    assert calibration_of(str(path)).curves.kl_scale == 3.0


def test_large_and_special_world_files_are_refused_at_once(tmp_path, cli_error):
    big = tmp_path / "big.yaml"
    # 16 MB of distinct keys, no alias: once 320 s of parsing and then a "billion laughs" message
    big.write_text("provenance:\n" + "".join(f"  k{i}: {i}\n" for i in range(1_300_000)))
    start = time.perf_counter()
    err = cli_error(["simulate", "--calibration", str(big), "--jobs", "10"])
    assert time.perf_counter() - start < 5 and str(MAX_WORLD_BYTES) in err and "laughs" not in err
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    assert "not a regular file" in cli_error(["simulate", "--calibration", str(fifo)])


def test_many_distinct_values_are_not_called_a_billion_laughs(tmp_path):
    from evalstop_gym.files import MAX_CONFIG_NODES, DataFileError, load_yaml

    path = tmp_path / "many.yaml"
    path.write_text("[" + "1," * (MAX_CONFIG_NODES + 1) + "1]")
    with pytest.raises(DataFileError, match=f"more than {MAX_CONFIG_NODES} values: ") as e:
        load_yaml(path, max_bytes=2**23)
    assert "laughs" not in str(e.value)


# -- property: any edit of a world file is a one-line error or a world that simulates finitely -------------

NUMBERS = (st.floats(allow_nan=False) | st.integers(min_value=-10**30, max_value=10**30)
           | st.sampled_from([10**400, -1, 0, 1e-300, 1e300, 0.5]))
VALUES = NUMBERS | st.lists(NUMBERS, max_size=3) | st.none() | st.text(max_size=5) | st.booleans()


@settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES", 40)), deadline=3000,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(["curves", "world", "top"]), st.integers(0, 40), st.booleans(), VALUES,
                                st.floats(0, 1) | st.floats(0, 20) | st.floats(0, 1e4)), min_size=1, max_size=3))
def test_fuzz_any_edit_of_a_world_file_is_one_line_or_a_finite_world(tmp_path, edits):
    data = world_data(REALISTIC)
    for section, i, same_shape, value, number in edits:
        table = data if section == "top" else data[section]
        keys = [k for k in table if k not in ("format", "description", "curves", "world")] or ["noise"]
        key = keys[i % len(keys)]
        old = table[key]
        if same_shape:   # a number in or just past its range, in the field's own shape
            value = [number * (j + 1) / len(old) for j in range(len(old))] if isinstance(old, list) else number
        table[key] = value
    path = tmp_path / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        cal = calibration_of(str(path))
    except ConfigError as e:
        assert "\n" not in str(e)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            m = simulate("srtf-est", "evalstop", calibration=str(path), jobs=15, gpus=64, seed=0)
        except ConfigError as e:   # a workload this world cannot offer (arrivals past 1e6 h): one line
            assert "\n" not in str(e)
            return
    assert cal.world == calibration_of(str(path)).world
    assert all(math.isfinite(v) for v in m.values() if isinstance(v, float))


def test_the_documented_ranges_are_the_checked_ones():
    import re
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text()
    row = r"`(curves|world)\.(\w+)`[^|]*\| \[([-\d.e+]+), ([-\d.e+]+)\]"
    documented = {f"{section}.{name}": (float(lo), float(hi)) for section, name, lo, hi in re.findall(row, text)}
    checked = {**{f"curves.{k}": v for k, v in LatentModel.RANGES.items()},
               **{f"world.{k}": v for k, v in WorldModel.RANGES.items()}}
    assert documented == {k: (float(lo), float(hi)) for k, (lo, hi) in checked.items()}


def test_tiresias_finishes_when_a_resume_costs_more_than_its_first_threshold(tmp_path):
    import subprocess
    import sys

    # 60 RLHF jobs of 8-16 GPUs, each resume 1,200 s: 2.7-5.3 GPU-hours, around Tiresias' 4 GPU-hour threshold;
    # with 600 s (at most 2.7 GPU-hours) the same run takes 0.1 s
    code = ("from evalstop_gym.api import simulate; from evalstop_gym.config import WorldModel; "
            "simulate('tiresias', jobs=60, gpus=64, mix={'rlhf': 1.0}, world=WorldModel(warmup_s=(1200.0, 1200.0)), "
            "seed=1)")
    try:
        done = subprocess.run([sys.executable, "-c", code], timeout=5, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("no answer in 5 s")
    assert done.returncode == 0, done.stderr
