import json
import subprocess
import sys

import evalstop_gym


def test_simulate_defaults_runs_and_stops_hacking_runs():
    m = evalstop_gym.simulate("fifo", "evalstop", seed=3)
    assert m["jobs"] == 200
    assert m["jobs_stopped"] > 0
    assert m["precision"] is not None and m["precision"] > 0.8


def test_cli_json_is_one_object():
    out = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "simulate", "--jobs", "20", "--json"],
                         capture_output=True, text=True, check=True)
    assert isinstance(json.loads(out.stdout), dict)
