"""benchmarks/parity_tiresias.py's own parts, without the peer: the Python 3 port's one hand change, and
one-line refusals of bad flags. (The parity figures themselves come from running the peer: docs/parity.md.)"""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "parity_tiresias.py"


@pytest.fixture(scope="module")
def parity():
    spec = importlib.util.spec_from_file_location("parity_tiresias", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TIMER = "jump_time = int(math.ceil((JOBS.queue_limit[qid] - rjob['executed_time'])/rjob['num_gpu']) + event_time)"


def fake_peer(folder: Path, timers: int) -> Path:
    """A peer folder whose run_sim.py is Python 2 (a print statement) with ``timers`` demotion timers."""
    sim = folder / "simulator"
    sim.mkdir()
    (sim / "run_sim.py").write_text("import math\nprint 'start'\n" + "".join(
        f"def f{i}(JOBS, qid, rjob, event_time):\n    {TIMER}\n    return jump_time\n" for i in range(timers)))
    return sim


@pytest.mark.skipif(importlib.util.find_spec("lib2to3") is None, reason="this Python has no lib2to3")
def test_the_port_is_python_3_and_keeps_python_2s_integer_division(parity, tmp_path):
    sim = fake_peer(tmp_path, 4)
    port = Path(parity.make_port(sys.executable, str(sim), str(tmp_path)))
    code = (port / "run_sim.py").read_text()
    assert "print('start')" in code and code.count("executed_time'])//rjob['num_gpu'])") == 4
    namespace = {}
    exec(compile(code, "run_sim.py", "exec"), namespace)  # now valid Python 3
    # Python 2: (3250 - 1000) / 8 == 281 (integer division), ceil(281) + 10 == 291; true division would give 292
    assert namespace["f0"](type("J", (), {"queue_limit": [3250]}), 0, {"executed_time": 1000, "num_gpu": 8}, 10) == 291
    assert (sim / "run_sim.py").read_text().count("print 'start'") == 1  # the original is left as it was


@pytest.mark.skipif(importlib.util.find_spec("lib2to3") is None, reason="this Python has no lib2to3")
def test_a_peer_with_another_count_of_timers_is_refused(parity, tmp_path):
    sim = fake_peer(tmp_path, 3)
    with pytest.raises(SystemExit, match="has 3 copies of the demotion timer"):
        parity.make_port(sys.executable, str(sim), str(tmp_path))


@pytest.mark.parametrize("flags, message", [
    (["--sizes", "0"], "--sizes 0: comma-separated counts, each at least 1"),
    (["--evals", "1,x"], "--evals 1,x: comma-separated counts, each at least 1"),
    (["--peer-schedules", "fjf,lottery"], "--peer-schedules fjf,lottery: unknown lottery"),
    (["--python", "/no/such/python2.7"], "--python /no/such/python2.7: cannot run it with numpy"),
    (["--python", "none", "--port-python", "none"], "no peer build left to run"),
])
def test_bad_flags_are_named(parity, flags, message):
    with pytest.raises(SystemExit, match=message.replace("(", r"\(")):
        parity.main(["--peer", "unused", *flags])
