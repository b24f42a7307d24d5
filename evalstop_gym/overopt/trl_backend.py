"""The over-optimisation generator on the field's own trainers: TRL's ``RewardTrainer``, ``GRPOTrainer``,
``RLOOTrainer`` and ``DPOTrainer`` tuning a tiny Hugging Face causal LM on a task of :mod:`.task` (``task``:
the copy task by default, or the addition task).
Needs the ``live`` extra (transformers, trl, datasets, tokenizers); CPU, one thread, nothing downloaded.

Steps of a run (deterministic in ``seed``):

1. **Model and tokenizer**: a GPT-2 of width ``dim`` and ``layers`` blocks
   built with ``AutoModelForCausalLM.from_config`` and a word-level tokenizer
   built with ``tokenizers`` whose ids are the task's token ids (``<pad>
   <bos> <sep> <eos>`` then the digits ``0``..``7``). **SFT** on
   demonstrations by the plain loop of :func:`.rlhf.fit_sft`, then both are
   saved to a local folder: the policy and TRL's reference model are loaded
   from that path.
2. **Preference data** as in :mod:`.rlhf`: ``pairs`` prompts, two SFT samples
   each, Bradley-Terry labels on the gold scorer at temperature
   ``label_temp`` (Gao et al. 2023's synthetic gold-RM protocol).
3. ``method="grpo"`` / ``"rloo"``: ``RewardTrainer`` fits a proxy reward model
   (a GPT-2 sequence classifier, width ``rm_dim``, ``rm_layers`` blocks) to the
   pairs for ``rm_steps`` steps; its score, shifted and scaled to mean 0 and
   sd 1 on SFT samples, is the only reward of ``GRPOTrainer`` or
   ``RLOOTrainer`` (``prompts`` prompts x ``group`` completions a step, KL
   coefficient ``beta = kl_coef`` against the reference). ``method="dpo"``:
   ``DPOTrainer`` on the same pairs, ``beta = kl_coef``, ``prompts * group``
   pairs a step. With few pairs the reward model learns the demonstrations'
   spurious cue (longer looks better, :mod:`.task`) and the policy runs on.
4. **Evals** every ``steps / evals`` steps and at step 0, by a callback that
   appends to the Trainer's ``log_history``: ``eval_score`` (mean gold of one
   sampled answer on each of ``eval_items`` held-out prompts, fresh draws),
   ``eval_gold`` (the same on ``gold_items`` other prompts with the same draws
   at every eval), ``eval_kl`` (``KL(pi || pi_ref)`` in nats on the eval
   answers) and ``eval_items``; the protocol of :func:`.rlhf.evaluate`.

The run's curve-log rows are read back from its ``trainer_state.json``
(:func:`evalstop_gym.curvelog.read_trainer_state`): the Trainer's own ``loss`` and proxy
(GRPO/RLOO ``reward``, DPO ``rewards/margins``, means over the steps since the
previous log) beside the callback's evals.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass

from . import task
from .lm import sample
from .rlhf import (RunSettings, _stream, evaluate, fit_sft, one_thread_deterministic, preference_pairs, task_prefix,
                   uniforms)

METHODS = ("grpo", "rloo", "dpo")
WORDS = ("<pad>", "<bos>", "<sep>", "<eos>") + tuple(str(d) for d in range(8))   # token id -> word


@dataclass(frozen=True)
class TRLRunSettings(RunSettings):
    """One TRL run: :class:`.rlhf.RunSettings` with this backend's methods and defaults, and the reward
    model's depth ``rm_layers``; ``steps`` must be a multiple of ``evals``."""

    method: str = "grpo"
    dim: int = 80          # with layers=2: 106,560 parameters (parameter_counts)
    layers: int = 2
    rm_layers: int = 1
    rm_steps: int = 100
    steps: int = 120
    prompts: int = 4
    evals: int = 15
    eval_items: int = 100

    def validate(self) -> None:
        from ..config import ConfigError, check_range

        super().validate(METHODS)
        check_range("rm_layers", self.rm_layers, 1, integer=True)
        if self.steps % self.evals:
            raise ConfigError("steps", self.steps, f"must be a multiple of evals ({self.evals})")

    @property
    def name(self) -> str:
        rm = f"-rm{self.rm_dim}" if self.method != "dpo" else ""
        # the width only where it is not the default, so the names of default-width runs stay as they were
        width = f"-d{self.dim}" if self.dim != TRLRunSettings.dim else ""
        return (f"trl-{task_prefix(self.task)}{self.method}{width}-pairs{self.pairs}-kl{self.kl_coef:g}-lr{self.lr:g}"
                f"{rm}-seed{self.seed}")


# The library's grid, 8 points per method. The reward model's quality (pairs; GRPO also its width), the KL
# coefficient and the learning rate spread the runs from over-optimising (few pairs, no KL) to healthy.
TRL_GRID: tuple[dict, ...] = (
    tuple({"method": "grpo", "pairs": pairs, "kl_coef": kl, "lr": 1e-3, "rm_dim": rm_dim}
          for pairs in (128, 1024) for kl in (0.0, 0.3) for rm_dim in (16, 64))
    + tuple({"method": "rloo", "pairs": pairs, "kl_coef": kl, "lr": lr, "rm_dim": 32}
            for pairs in (128, 1024) for kl in (0.0, 0.3) for lr in (1e-3, 3e-3))
    + tuple({"method": "dpo", "pairs": pairs, "kl_coef": beta, "lr": lr}
            for pairs in (128, 1024) for beta in (0.1, 0.5) for lr in (1e-3, 3e-3)))

# The varied library: two tasks with programmatic gold x two policy widths (0.11 and 0.42 million parameters
# at 2 blocks) x TRL_GRID's 24 points at about a third of their learning rates, so that over runs three
# times as long (VARIED_RUN) the runs without a KL penalty fall off their cliff part-way through rather
# than at once, and penalised runs settle on their plateau. The SFT is longer and gentler than the
# default: the addition task needs it to learn its carries, and both tasks share it so that they differ
# only in the task.
SLOWER_LR = {1e-3: 3e-4, 3e-3: 1e-3}
VARIED_POINTS: tuple[dict, ...] = tuple({**point, "lr": SLOWER_LR[point["lr"]]} for point in TRL_GRID)
VARIED_TASKS = ("copy", "add")
VARIED_WIDTHS = (80, 160)
VARIED_RUN = {"steps": 360, "evals": 18, "sft_steps": 1200, "sft_lr": 1e-3}
VARIED_GRID: tuple[dict, ...] = tuple({**point, "task": name, "dim": dim, **VARIED_RUN}
                                      for name in VARIED_TASKS for dim in VARIED_WIDTHS for point in VARIED_POINTS)
GRIDS = {"shipped": TRL_GRID, "varied": VARIED_GRID}


def pilot_points(grid) -> tuple[dict, ...]:
    """A pilot of ``grid``: its first GRPO point without a KL penalty and its first with one, for every task and
    width, in the grid's order (the varied grid: 8 points)."""
    seen, out = set(), []
    for point in grid:
        key = (point.get("task", "copy"), point.get("dim"), point["kl_coef"] > 0)
        if point["method"] == "grpo" and key not in seen:
            seen.add(key)
            out.append(point)
    return tuple(out)


def build_tokenizer():
    """A ``PreTrainedTokenizerFast`` over :data:`WORDS` (word-level, whitespace-split; special tokens also
    match inside words, so ``"3<eos>"`` is two tokens), ids equal to the task's token ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>",
                                   sep_token="<sep>", eos_token="<eos>")


def text(ids) -> str:
    """Words of token ids up to and including the first EOS (PAD after it dropped), space-separated."""
    out = []
    for i in (int(x) for x in ids):
        if i == task.PAD:
            break
        out.append(WORDS[i])
        if i == task.EOS:
            break
    return " ".join(out)


def _gpt2_config(dim: int, layers: int, **extra):
    from transformers import GPT2Config

    # 16 positions: a prompt, an answer without EOS, and the EOS TRL appends to such an answer
    return GPT2Config(vocab_size=task.VOCAB, n_positions=16, n_embd=dim, n_layer=layers, n_head=2, n_inner=2 * dim,
                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=task.BOS, eos_token_id=task.EOS,
                      pad_token_id=task.PAD, **extra)


def parameter_counts(s: TRLRunSettings) -> dict:
    """Parameters of ``s``'s models, counted on models built from their configs: ``policy`` (the
    policy, and as many again in TRL's frozen reference) and ``reward_model`` (GRPO / RLOO; None for DPO)."""
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    def count(model) -> int:
        return sum(p.numel() for p in model.parameters())

    rm = None
    if s.method != "dpo":
        rm = count(AutoModelForSequenceClassification.from_config(_gpt2_config(s.rm_dim, s.rm_layers, num_labels=1)))
    return {"policy": count(AutoModelForCausalLM.from_config(_gpt2_config(s.dim, s.layers))), "reward_model": rm}


def _logits(hf):
    """``hf`` as a module from token ids to logits, the interface :mod:`.lm`'s sampler and log-probs use."""
    import torch

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hf = hf

        def forward(self, seq):
            return self.hf(input_ids=seq).logits

    return Logits()


def _sft_key(s: TRLRunSettings) -> dict:
    return {"seed": s.seed, "dim": s.dim, "layers": s.layers, "steps": s.sft_steps, "batch": s.sft_batch,
            "lr": s.sft_lr, "task": s.task}


def sft_path(s: TRLRunSettings, models_dir: str) -> str:
    """The folder under ``models_dir`` that holds (or will hold) the SFT model of ``s``."""
    digest = hashlib.sha256(json.dumps(_sft_key(s), sort_keys=True).encode()).hexdigest()[:12]
    return os.path.join(models_dir, "sft-" + digest)


def sft_folder(s: TRLRunSettings, models_dir: str) -> str:
    """The SFT model and tokenizer of ``s``, saved under ``models_dir`` (built once per SFT setting; runs
    that differ only after SFT share it; written to a temporary folder then renamed, so a folder that
    exists is complete). Its ``sft.json`` holds the SFT settings and ``cpu_s``, the CPU seconds the
    build took (this process's)."""
    import time

    import torch
    from transformers import AutoModelForCausalLM

    path = sft_path(s, models_dir)
    if os.path.isdir(path):
        return path
    _quiet()
    c0 = time.process_time()
    with one_thread_deterministic():   # as inside a run, so the model does not depend on who builds it
        torch.manual_seed(s.seed * 8 + 6)
        model = AutoModelForCausalLM.from_config(_gpt2_config(s.dim, s.layers))
        fit_sft(_logits(model), s.seed, s.sft_steps, s.sft_batch, s.sft_lr, task.TASKS[s.task])
    os.makedirs(models_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=models_dir, prefix=".sft-")
    model.save_pretrained(tmp)
    build_tokenizer().save_pretrained(tmp)
    with open(os.path.join(tmp, "sft.json"), "w") as f:
        json.dump({**_sft_key(s), "cpu_s": round(time.process_time() - c0, 2)}, f)
    try:
        os.rename(tmp, path)
    except OSError:   # another worker finished the same folder first
        import shutil

        shutil.rmtree(tmp)
    return path


def _quiet() -> None:
    """No progress bars or advice from transformers / datasets inside a run (the library shows its own)."""
    import datasets
    import transformers

    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()


def _silence(trainer) -> None:
    """No log lines printed by the Trainer (``disable_tqdm`` swaps its bar for a printer)."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)


def _args(cls, s: TRLRunSettings, out: str, **kw):
    """A TRL config for a CPU run: no saving, no reporting, logs every ``steps / evals`` steps."""
    base = dict(output_dir=out, use_cpu=True, report_to="none", save_strategy="no", disable_tqdm=True,
                logging_steps=s.steps // s.evals, seed=s.seed, data_seed=s.seed, dataloader_num_workers=0)
    return cls(**{**base, **kw})


def _pair_dataset(pairs):
    from datasets import Dataset

    prompt, chosen, rejected = pairs
    return Dataset.from_dict({"prompt": [text(p) for p in prompt], "chosen": [" " + text(c) for c in chosen],
                              "rejected": [" " + text(r) for r in rejected]})


def fit_reward_model(s: TRLRunSettings, pairs, sft, tokenizer, out: str):
    """``RewardTrainer`` on the pairs; returns ``(reward model, mean, sd)`` with the normalisation
    measured on 512 SFT samples (random stream 5 of the seed)."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from trl import RewardConfig, RewardTrainer

    torch.manual_seed(s.seed * 8 + 5)
    rm = AutoModelForSequenceClassification.from_config(_gpt2_config(s.rm_dim, s.rm_layers, num_labels=1))
    args = _args(RewardConfig, s, out, per_device_train_batch_size=min(64, s.pairs), max_steps=s.rm_steps,
                 learning_rate=s.rm_lr, logging_steps=s.rm_steps)
    trainer = RewardTrainer(model=rm, args=args, train_dataset=_pair_dataset(pairs), processing_class=tokenizer)
    _silence(trainer)
    trainer.train()
    rm.eval()
    gen = _stream(s.seed, 5)
    p = task.prompts(512, gen)
    with torch.no_grad():
        r = _score(rm, torch.cat([p, sample(sft, p, uniforms(512, gen))], 1))
    return rm, float(r.mean()), float(r.std()) + 1e-6


def _score(rm, seq):
    """Reward-model score of token sequences (PAD after the answer; the classifier reads the last real
    token)."""
    return rm(input_ids=seq, attention_mask=(seq != 0).long()).logits[:, 0]


def proxy_reward_function(rm, mean: float, sd: float, tokenizer):
    """The GRPO/RLOO reward function: the normalised reward-model score of prompt + completion ids."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    def proxy_reward(prompts, completion_ids, **_):
        ids = [torch.tensor(tokenizer(p, add_special_tokens=False)["input_ids"] + list(c)) for p, c in
               zip(prompts, completion_ids)]
        with torch.no_grad():
            r = _score(rm, pad_sequence(ids, batch_first=True, padding_value=0))
        return ((r - mean) / sd).tolist()

    return proxy_reward


def eval_callback(s: TRLRunSettings, sft):
    """A ``TrainerCallback`` that evaluates at step 0 and every ``steps / evals`` steps (module docstring)
    and appends the result to ``state.log_history``."""
    from transformers import TrainerCallback

    prompt = task.prompts(s.eval_items + s.gold_items, _stream(s.seed, 1))
    eval_gen = _stream(s.seed, 2)
    every = s.steps // s.evals

    class GoldEval(TrainerCallback):
        def _eval(self, state, model):
            training = model.training
            model.eval()
            score, gold, kl = evaluate(s, _logits(model), sft, prompt, eval_gen)
            model.train(training)
            state.log_history.append({"eval_score": round(score, 6), "eval_gold": round(gold, 6),
                                      "eval_kl": round(kl, 6), "eval_items": s.eval_items, "step": state.global_step})

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self._eval(state, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % every == 0:
                self._eval(state, model)

    return GoldEval()


def run_trainer_state(s: TRLRunSettings, workdir: str, callbacks=()) -> dict:
    """Run ``s`` with TRL under ``workdir`` (``models/`` keeps the SFT folders); return the Trainer's
    state as ``trainer_state.json`` holds it (``log_history`` with the callback's evals). ``callbacks``
    are more ``TrainerCallback`` objects, called after the eval callback (e.g. one reporting each eval
    to Ray Tune)."""
    import torch
    from transformers import AutoModelForCausalLM

    s.validate()
    os.environ["HF_HUB_OFFLINE"] = "1"   # every model and tokenizer comes from a local folder
    _quiet()
    path = sft_folder(s, os.path.join(workdir, "models"))
    tokenizer = build_tokenizer()
    sft = AutoModelForCausalLM.from_pretrained(path).eval()
    for p in sft.parameters():
        p.requires_grad_(False)
    sft = _logits(sft)
    pairs = preference_pairs(s, sft, _stream(s.seed, 4))
    out = tempfile.mkdtemp(dir=workdir, prefix=".trainer-")
    callbacks = [eval_callback(s, sft), *callbacks]
    if s.method == "dpo":
        from trl import DPOConfig, DPOTrainer

        args = _args(DPOConfig, s, out, beta=s.kl_coef, learning_rate=s.lr, max_steps=s.steps,
                     per_device_train_batch_size=s.prompts * s.group, lr_scheduler_type="constant")
        trainer = DPOTrainer(model=path, args=args, train_dataset=_pair_dataset(pairs), processing_class=tokenizer,
                             callbacks=callbacks)
    else:
        from datasets import Dataset

        rm, mean, sd = fit_reward_model(s, pairs, sft, tokenizer, out)
        prompts = task.prompts(s.steps * s.prompts, _stream(s.seed, 6))
        data = Dataset.from_dict({"prompt": [text(p) for p in prompts]})
        if s.method == "grpo":
            from trl import GRPOConfig as Config, GRPOTrainer as Trainer
        else:
            from trl import RLOOConfig as Config, RLOOTrainer as Trainer
        args = _args(Config, s, out, beta=s.kl_coef, learning_rate=s.lr, max_steps=s.steps,
                     per_device_train_batch_size=s.prompts * s.group, num_generations=s.group,
                     max_completion_length=8, temperature=1.0, shuffle_dataset=False, lr_scheduler_type="constant")
        trainer = Trainer(model=path, reward_funcs=proxy_reward_function(rm, mean, sd, tokenizer), args=args,
                          train_dataset=data, processing_class=tokenizer, callbacks=callbacks)
    _silence(trainer)
    torch.manual_seed(s.seed * 8 + 7)
    trainer.train()
    trainer.state.save_to_json(os.path.join(out, "trainer_state.json"))
    with open(os.path.join(out, "trainer_state.json")) as f:
        state = json.load(f)
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    return state


def run(s: TRLRunSettings, workdir: str | None = None, state_path: str | None = None,
        callbacks=()) -> list[dict]:
    """Run ``s`` and return its curve-log rows (``job`` = ``s.name``, a ``method`` column); with
    ``state_path``, also write the Trainer's ``trainer_state.json`` there; ``callbacks`` as for
    :func:`run_trainer_state`. One torch thread, deterministic algorithms (restored after)."""
    from ..curvelog import state_runs

    with one_thread_deterministic():
        if workdir is None:
            with tempfile.TemporaryDirectory() as tmp:
                state = run_trainer_state(s, tmp, callbacks)
        else:
            os.makedirs(workdir, exist_ok=True)
            state = run_trainer_state(s, workdir, callbacks)
    if state_path is not None:
        from ..files import write_atomic

        write_atomic(state_path, json.dumps(state, indent=1))
    logged = state_runs(state, s.name)[s.name]
    rows = []
    for i, step in enumerate(logged.step):
        row = {"job": s.name, "step": int(step), "method": s.method}
        for column in ("eval_score", "train_loss", "proxy_reward"):
            v = float(getattr(logged, column)[i])
            row[column] = round(v, 6) if v == v else None
        for column in ("gold", "kl", "eval_items"):
            v = float(logged.extra[column][i])
            row[column] = (int(v) if column == "eval_items" else round(v, 6)) if v == v else None
        rows.append(row)
    return rows

