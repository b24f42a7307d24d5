"""EvalStopCallback in TRL's own trainers (DPO, GRPO and RLOO) on a tiny GPT-2 and an in-memory tokenizer: the
callback reads TRL's eval metrics and logged reward, stops the run and keeps the best checkpoint."""

import copy
import json
import os

import pytest

pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from transformers import GPT2LMHeadModel  # noqa: E402
from trl import DPOConfig, DPOTrainer, GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer  # noqa: E402

from evalstop_gym.integrations import EvalStopCallback  # noqa: E402

from trainer_toy import WORDS, one_thread, tiny_model, tiny_tokenizer  # noqa: E402

COMMON = dict(per_device_train_batch_size=4, per_device_eval_batch_size=4, eval_strategy="steps", eval_steps=2,
              save_strategy="steps", save_steps=2, logging_steps=1, report_to="none", use_cpu=True,
              disable_tqdm=True, save_only_model=True)


@pytest.fixture(autouse=True)
def _one_thread():
    with one_thread():
        yield


def test_dpo_stops_by_progress_and_keeps_the_lowest_eval_loss(tmp_path):
    # stopat p=0.5 stops at the first eval at half the run (step 6 of 12) whatever the scores: a fixed stop
    model = tiny_model(vocab=len(WORDS), positions=32)
    data = Dataset.from_list([{"prompt": "a b", "chosen": " good yes", "rejected": " bad no"}] * 16)
    cb = EvalStopCallback("stopat", metric="eval_loss", mode="min", p=0.5)
    trainer = DPOTrainer(model=model, ref_model=copy.deepcopy(model), train_dataset=data,
                         eval_dataset=data.select(range(4)), processing_class=tiny_tokenizer(), callbacks=[cb],
                         args=DPOConfig(str(tmp_path), max_steps=12, save_total_limit=1, **COMMON))
    trainer.train()
    assert trainer.state.global_step == 6 and [e["step"] for e in cb.evals] == [2, 4, 6]
    losses = {e["step"]: e["eval_loss"] for e in trainer.state.log_history if "eval_loss" in e}
    best = min(losses, key=lambda s: (losses[s], s))
    record = json.loads((tmp_path / "evalstop.json").read_text())
    assert record["best"]["step"] == best and record["best"]["checkpoint"] == str(tmp_path / f"checkpoint-{best}")
    assert os.path.isdir(record["best"]["checkpoint"])


def test_grpo_reads_eval_reward_and_the_logged_training_reward_as_the_proxy(tmp_path):
    def reward(completions, **kwargs):
        return [float(c.count("yes")) for c in completions]

    data = Dataset.from_list([{"prompt": "a b"}] * 16)
    cb = EvalStopCallback("stopat", metric="eval_reward", p=0.5, proxy_metric="reward")
    trainer = GRPOTrainer(model=tiny_model(vocab=len(WORDS), positions=32), reward_funcs=reward,
                          train_dataset=data, eval_dataset=data.select(range(4)), processing_class=tiny_tokenizer(),
                          callbacks=[cb], args=GRPOConfig(str(tmp_path), max_steps=8, num_generations=2,
                                                          max_completion_length=4, **COMMON))
    trainer.train()
    assert trainer.state.global_step == 4
    history = trainer.state.log_history
    view = cb.live.view("run")
    assert list(view.eval_scores) == [e["eval_reward"] for e in history if "eval_reward" in e]
    logged = {e["step"]: e["reward"] for e in history if "reward" in e}
    assert list(view.proxy_rewards) == [logged[2], logged[4]]   # the latest training reward at each eval
    assert cb.best_checkpoint is not None and os.path.isdir(cb.best_checkpoint)


def test_rloo_stops_at_the_first_decline_of_its_eval_reward(tmp_path):
    # evalstop k=1: the run ends at the first eval whose reward is below the one before (or runs to step 12)
    def reward(completions, **kwargs):
        return [float(c.count("yes")) - float(c.count("no")) for c in completions]

    # RLOO's KL term (beta 0.05 by default) loads its reference model from the policy's path: save it locally
    tiny_model(vocab=len(WORDS), positions=32).save_pretrained(tmp_path / "policy")
    model = GPT2LMHeadModel.from_pretrained(tmp_path / "policy")
    data = Dataset.from_list([{"prompt": "a b"}] * 16)
    cb = EvalStopCallback("evalstop", metric="eval_reward", k=1, proxy_metric="reward")
    trainer = RLOOTrainer(model=model, reward_funcs=reward,
                          train_dataset=data, eval_dataset=data.select(range(4)), processing_class=tiny_tokenizer(),
                          callbacks=[cb], args=RLOOConfig(str(tmp_path / "out"), max_steps=12, num_generations=2,
                                                          max_completion_length=4, learning_rate=0.05, **COMMON))
    trainer.train()
    history = trainer.state.log_history
    evals = [(e["step"], e["eval_reward"]) for e in history if "eval_reward" in e]
    declines = [step for (_, before), (step, now) in zip(evals, evals[1:]) if now < before]
    assert trainer.state.global_step == (declines[0] if declines else 12)
    assert [e["step"] for e in cb.evals] == [s for s, _ in evals]
    view = cb.live.view("run")
    assert list(view.eval_scores) == [r for _, r in evals]
    logged = {e["step"]: e["reward"] for e in history if "reward" in e}
    assert list(view.proxy_rewards) == [logged[s] for s, _ in evals]   # RLOO's logged training reward
    if declines:   # the best checkpoint is the eval before the decline's run of best scores
        best = max(evals, key=lambda e: (e[1], -e[0]))[0]
        assert cb.best_checkpoint == str(tmp_path / "out" / f"checkpoint-{best}") and os.path.isdir(cb.best_checkpoint)
