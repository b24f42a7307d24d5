"""An existing multi-node Ray cluster (two nodes on 127.0.0.1): sweeps and RLlib training on it.

The cluster is started and stopped by the test (see ``ray_cluster.py``); the
sweep runs in a separate driver process, as a user would run it, once with
``--ray-address`` while the test kills a worker process in the middle of a
run, and once with ``$RAY_ADDRESS``. Both must write the very tables the
local backend writes, with every run recorded exactly once. Then
``examples/rllib_tenants.py`` trains the tenants with multi-agent PPO, its two
env runners on the two nodes.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("ray")
pytest.importorskip("psutil")
from ray_cluster import LocalRayCluster  # noqa: E402

pytestmark = pytest.mark.slow

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = ["--experiments", "E1,E5", "--seeds", "3", "--jobs", "400", "--no-progress"]
TABLES = ("E1.md", "E1.csv", "E5.md", "E5.csv", "summary.md")


def reproduce(out, *extra, env=None, wait=True):
    cmd = [sys.executable, "-m", "evalstop_gym.cli", "reproduce", *ARGS, "--out", str(out), *extra]
    p = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if wait:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    return p


def tables(folder):
    return {name: (folder / name).read_bytes() for name in TABLES}


def run_ids(folder):
    return [json.loads(line)["run_id"] for line in (folder / "runs.jsonl").read_text().splitlines()]


def test_an_existing_cluster_gives_the_local_tables_and_survives_a_killed_worker(tmp_path):
    reproduce(tmp_path / "local", "--backend", "local", "--workers", "1")
    with LocalRayCluster() as cluster:
        sweep = reproduce(tmp_path / "flag", "--backend", "ray", "--ray-address", cluster.address,
                          env=cluster.env, wait=False)
        killed = None
        deadline = time.monotonic() + 600
        while sweep.poll() is None and time.monotonic() < deadline:
            busy = cluster.task_workers("execute")
            if busy and killed is None:
                killed = busy[0].pid
                os.kill(killed, signal.SIGKILL)  # a worker process dies in the middle of a run
            time.sleep(0.02)
        assert sweep.wait(timeout=60) == 0, sweep.stderr.read()
        assert killed is not None, "no worker was caught running a task"
        reproduce(tmp_path / "env", "--backend", "ray", env={**cluster.env, "RAY_ADDRESS": cluster.address})
    local = tables(tmp_path / "local")
    assert tables(tmp_path / "flag") == local and tables(tmp_path / "env") == local
    ids = run_ids(tmp_path / "local")
    assert sorted(run_ids(tmp_path / "flag")) == sorted(ids) == sorted(set(ids))  # each run once, none lost


def test_rllib_ppo_trains_the_tenants_on_both_nodes():
    pytest.importorskip("ray.rllib.algorithms.ppo")
    pytest.importorskip("pettingzoo")
    with LocalRayCluster() as cluster:
        r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "rllib_tenants.py"), "--ray-address",
                            cluster.address, "--iterations", "2", "--batch", "200", "--jobs", "10"],
                           cwd=REPO, env=cluster.env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["iteration 1", "iteration 2"]
    assert int(lines[1].split(": ")[1].split()[0]) >= 400  # two batches of 200 env steps sampled
    # one CPU per node and one env runner per CPU: the runners sample on both nodes
    assert lines[-1] == "env runners: 2 on 2 node(s)"
