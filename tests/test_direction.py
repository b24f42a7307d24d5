"""The metric-direction rule, on the names real trainers write."""

import pytest

from evalstop_gym.direction import is_loss_like, mode_from_name, words


@pytest.mark.parametrize("name", ["eval_loss", "loss", "eval_wer", "eval/cer", "val_WER", "perplexity",
                                  "eval_ppl", "test_error", "train/nll", "eval_mse", "reward_loss",
                                  "eval_loss_sft"])
def test_lower_is_better_names(name):
    assert mode_from_name(name) == "min"
    assert is_loss_like(name)


@pytest.mark.parametrize("name", ["eval_accuracy", "eval_f1", "eval_rouge1", "eval_rougeLsum", "eval_bleu",
                                  "eval_reward", "rewards/margins", "eval_rewards/accuracies", "eval_score",
                                  "objective/scores", "eval_exact_match", "eval_f1_macro", "val_acc",
                                  "eval_mean_token_accuracy"])
def test_higher_is_better_names(name):
    assert mode_from_name(name) == "max"
    assert not is_loss_like(name)


@pytest.mark.parametrize("name", ["eval_runtime", "eval_samples_per_second", "epoch", "kl", "eval_logps/chosen",
                                  "learning_rate", "grad_norm", ""])
def test_names_that_say_neither(name):
    assert mode_from_name(name) is None


def test_words_split_at_every_non_alphanumeric():
    assert words("eval/Rouge-L_sum") == ["eval", "rouge", "l", "sum"]
