"""EvalStopCallback in two processes (torch.distributed, gloo, CPU): the ranks take process 0's eval, so they
stop at the same eval even when their own metrics differ."""

import json
import os
import socket

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# rank 0's scores stop EvalStop(k=2) at the 5th eval; rank 1's own scores would stop it at the 3rd
SCORES = {0: [0.1, 0.3, 0.5, 0.45, 0.4, 0.9], 1: [0.5, 0.4, 0.3, 0.9, 0.9, 0.9]}


class Box:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def one_rank(rank, world, port, out):
    import torch.distributed as dist

    from evalstop_gym.integrations import EvalStopCallback

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        cb = EvalStopCallback(k=2)
        args = Box(metric_for_best_model=None)
        state = Box(global_step=0, max_steps=100, log_history=[], is_world_process_zero=rank == 0,
                    best_global_step=None, best_metric=None)
        stops = []
        for i, score in enumerate(SCORES[rank]):
            state.global_step = 2 * (i + 1)
            control = Box(should_training_stop=False)
            cb.on_evaluate(args, state, control, metrics={"eval_reward": torch.tensor(score)})
            stops.append(control.should_training_stop)
            if control.should_training_stop:
                break
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump({"stops": stops, "best_step": state.best_global_step}, f)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_stop_at_rank_zeros_eval(tmp_path):
    torch.multiprocessing.spawn(one_rank, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    got = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert got[0] == got[1] == {"stops": [False, False, False, False, True], "best_step": 6}
