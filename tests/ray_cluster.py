"""A real two-node Ray cluster on 127.0.0.1 for tests, started and stopped by the test alone.

Both nodes are ``ray start --block`` processes of this test (a head and a
worker node joining it), every port is chosen free on 127.0.0.1, and their
temporary directory is the test's own. Every process of the cluster carries a
random tag in its environment; stopping terminates the two ``ray start``
processes and then only processes with that tag, never ``ray stop`` (which
would stop every Ray on the machine). Drivers must run with :attr:`env`
(in a subprocess), which keeps Ray on 127.0.0.1.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import psutil

TAG = "EVALSTOP_TEST_RAY_CLUSTER"
HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def node_ports() -> list[str]:
    base = 20000 + (uuid.uuid4().int % 40000)  # a random window of worker ports
    return ["--node-manager-port", str(free_port()), "--object-manager-port", str(free_port()),
            "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
            "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port()),
            "--min-worker-port", str(base), "--max-worker-port", str(base + 40)]


class LocalRayCluster:
    """``with LocalRayCluster() as c:`` ... ``c.address`` is ``127.0.0.1:PORT`` of the head."""

    def __init__(self, cpus_per_node: int = 1, timeout_s: float = 180):
        self.tag = uuid.uuid4().hex
        self.cpus, self.timeout_s = cpus_per_node, timeout_s
        self.temp = tempfile.mkdtemp(prefix="esgray")  # short: Ray's socket paths must fit 107 bytes
        self.port = free_port()
        self.address = f"{HOST}:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        self.env[TAG] = self.tag
        # Ray replaces 127.0.0.1 by the machine's outward address unless told this is a
        # single-machine cluster (its setting for macOS and Windows): everything stays on loopback
        self.env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        # a token of its own: ~/.ray/auth_token is shared with every other Ray on the machine
        token = os.path.join(self.temp, "auth_token")
        with open(token, "w") as f:
            f.write(secrets.token_hex(32))
        self.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=token)
        self.nodes: list[subprocess.Popen] = []

    def _start(self, args: list[str], head: bool) -> None:
        ray_start = ["start", "--block", "--node-ip-address", HOST, "--num-cpus", str(self.cpus),
                     "--disable-usage-stats", *node_ports(), *args]
        env = dict(self.env)
        if not head:
            # a second node needs Ray's multi-node mode, in which `ray start --address` swaps
            # 127.0.0.1 for the machine's outward address: keep the address as given
            env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "1"
            cmd = [sys.executable, "-c", "import sys, ray._private.services as s;"
                   "s.resolve_ip_for_localhost = lambda host: host;"
                   "from ray.scripts.scripts import main; sys.exit(main())", *ray_start]
        else:
            cmd = ["ray", *ray_start]
        log = open(os.path.join(self.temp, f"node{len(self.nodes)}.log"), "w")
        self.nodes.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))

    def __enter__(self) -> "LocalRayCluster":
        try:
            self._start(["--head", "--port", str(self.port), "--ray-client-server-port", str(free_port()),
                         "--include-dashboard", "false", "--temp-dir", self.temp], head=True)
            self.wait_for_nodes(1)
            self._start(["--address", self.address], head=False)
            self.wait_for_nodes(2)
        except BaseException as e:
            logs = "".join(open(os.path.join(self.temp, f"node{i}.log")).read()[-2000:]
                           for i in range(len(self.nodes)))
            self.stop()
            raise RuntimeError(f"Ray cluster failed to start: {e}\n{logs}") from e
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def wait_for_nodes(self, n: int) -> None:
        """Wait until ``n`` nodes are alive (asked from a separate driver process)."""
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False);"
                 "print(sum(1 for x in ray.nodes() if x['Alive']))")
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            for p in self.nodes:
                if p.poll() is not None:
                    raise RuntimeError(f"a Ray node exited ({p.returncode}); see {self.temp}/node*.log")
            r = subprocess.run([sys.executable, "-c", probe, self.address], env=self.env, capture_output=True,
                               text=True, timeout=self.timeout_s)
            if r.returncode == 0 and r.stdout.strip().splitlines()[-1:] == [str(n)]:
                return
            time.sleep(1)
        raise TimeoutError(f"the Ray cluster did not reach {n} nodes in {self.timeout_s} s: {r.stderr[-1500:]}")

    def processes(self) -> list[psutil.Process]:
        """Every live process of this cluster (found by the tag in its environment)."""
        out = []
        for p in psutil.process_iter():
            try:
                if p.environ().get(TAG) == self.tag:
                    out.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return out

    def task_workers(self, task_name: str) -> list[psutil.Process]:
        """Worker processes of this cluster now running a task named ``task_name`` (``ray::NAME``)."""
        out = []
        for p in self.processes():
            try:
                if " ".join(p.cmdline()).startswith(f"ray::{task_name}"):
                    out.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                pass
        return out

    def stop(self) -> None:
        for p in reversed(self.nodes):  # the worker node first, then the head
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.nodes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        left = self.processes()
        for p in left:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(left, timeout=10)
        for p in alive:
            p.kill()
        shutil.rmtree(self.temp, ignore_errors=True)
