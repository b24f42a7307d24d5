"""A tiny causal LM and a plain transformers ``Trainer`` whose eval reports a scripted score, for the callback
tests: a GPT-2 config of 2 layers x 32 wide on integer token ids (no tokenizer), and a word-level tokenizer for
the TRL trainers; nothing is downloaded."""

from __future__ import annotations

import contextlib
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

VOCAB, LENGTH = 32, 8


@contextlib.contextmanager
def one_thread():
    """Torch on one thread while a toy trains: a model this small only loses to thread contention
    (a 16-step run took about 15 times longer on 2 threads of a loaded machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


WORDS = ["<pad>", "<eos>", "a", "b", "yes", "no", "good", "bad", "?"]


def tiny_model(seed: int = 0, vocab: int = VOCAB, positions: int = LENGTH) -> GPT2LMHeadModel:
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=32, n_layer=2, n_head=2, bos_token_id=1,
                     eos_token_id=1, pad_token_id=0)
    return GPT2LMHeadModel(cfg)


def tiny_tokenizer():
    """A word-level tokenizer over :data:`WORDS`, built in memory with ``tokenizers``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="?"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>")


def token_rows(n: int, seed: int) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (n, LENGTH), generator=g)
    return [{"input_ids": row, "labels": row} for row in ids]


class Scripted:
    """``compute_metrics`` returning the next score of a script as ``reward`` (the Trainer names it
    ``eval_reward``) and the number of calls so far."""

    def __init__(self, scores):
        self.scores, self.calls = list(scores), 0

    def __call__(self, eval_pred):
        score = self.scores[self.calls]
        self.calls += 1
        return {"reward": score}


def toy_trainer(out, callbacks, scores, *, max_steps: int, eval_steps: int = 2, save_total_limit=1,
                **args) -> Trainer:
    """A Trainer evaluating (and saving) every ``eval_steps`` steps, with eval scores from ``scores``."""
    options = dict(
        output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=4, per_device_eval_batch_size=4,
        eval_strategy="steps", eval_steps=eval_steps, save_strategy="steps", save_steps=eval_steps,
        save_total_limit=save_total_limit, logging_steps=1, report_to="none", use_cpu=True,
        disable_tqdm=True, learning_rate=1e-3, seed=0, save_only_model=True)
    targs = TrainingArguments(**{**options, **args})
    return Trainer(model=tiny_model(), args=targs, train_dataset=token_rows(16, 1), eval_dataset=token_rows(4, 2),
                   compute_metrics=Scripted(scores),
                   preprocess_logits_for_metrics=lambda logits, labels: logits[..., :1],   # keep predictions small
                   callbacks=callbacks)
