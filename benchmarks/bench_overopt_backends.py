"""CPU seconds per run of the over-optimisation generator's two backends, measured in one process with
the runs alternating, and their ratio (TRL / plain torch), each at its default policy size (printed: the
TRL backend's GPT-2 is larger than the plain-torch loop's transformer). Imports are paid before timing;
each backend's first run also builds its SFT model. Needs torch and the live extra.

    HF_HUB_OFFLINE=1 python benchmarks/bench_overopt_backends.py
"""

import tempfile
import time

import datasets  # noqa: F401 - imports paid before timing
import torch  # noqa: F401
import transformers  # noqa: F401
import trl  # noqa: F401

from evalstop_gym.overopt import RunSettings, run, task
from evalstop_gym.overopt.lm import Transformer
from evalstop_gym.overopt.trl_backend import TRLRunSettings, parameter_counts
from evalstop_gym.overopt.trl_backend import run as run_trl

PAIRS = (   # (plain-torch settings, TRL settings) measured one after the other
    (RunSettings(seed=11, method="rlhf", pairs=512, kl_coef=0.0, lr=3e-3),
     TRLRunSettings(seed=11, method="grpo", pairs=1024, kl_coef=0.0, lr=1e-3)),
    (RunSettings(seed=11, method="dpo", pairs=512, kl_coef=0.1, lr=3e-3),
     TRLRunSettings(seed=11, method="dpo", pairs=1024, kl_coef=0.1, lr=1e-3)),
    (RunSettings(seed=11, method="rlhf", pairs=32, kl_coef=0.1, lr=3e-3),
     TRLRunSettings(seed=11, method="rloo", pairs=128, kl_coef=0.3, lr=1e-3)),
)


def cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def main() -> None:
    torch_s, trl_s = PAIRS[0]
    plain = sum(p.numel() for p in Transformer(torch_s.dim, torch_s.layers, task.VOCAB).parameters())
    print(f"policy parameters: torch {plain:,} (width {torch_s.dim}, {torch_s.layers} block), "
          f"trl {parameter_counts(trl_s)['policy']:,} (width {trl_s.dim}, {trl_s.layers} blocks)")
    with tempfile.TemporaryDirectory() as workdir:
        for torch_s, trl_s in PAIRS:
            a = cpu(lambda: run(torch_s))
            b = cpu(lambda: run_trl(trl_s, workdir))
            print(f"torch {torch_s.name}: {a:.1f} s   trl {trl_s.name}: {b:.1f} s   ratio {b / a:.1f}")


if __name__ == "__main__":
    main()
