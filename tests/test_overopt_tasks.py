"""The generator's tasks: the addition task's answer and gold scorer by hand, its annotators' length cue,
run names that say the task, a bad task named in one line, and a tiny plain-torch run on it."""

import pytest

torch = pytest.importorskip("torch")

from evalstop_gym.config import ConfigError  # noqa: E402
from evalstop_gym.overopt import RunSettings, run, task  # noqa: E402

ADD = task.TASKS["add"]


def tokens(*digits, eos=True):
    """A response of digit values 0..7 (then EOS), padded to the response length."""
    body = [4 + d for d in digits] + ([task.EOS] if eos else [])
    return body + [task.PAD] * (task.MAX_RESPONSE - len(body))


def prompt_of(*digits):
    return [task.BOS] + [4 + d for d in digits] + [task.SEP]


def test_the_addition_answer_by_hand():
    # 35 + 67 (base 8) = 29 + 55 = 84 = 124 (base 8), least significant digit first: 4 2 1;
    # 77 + 77 = 63 + 63 = 126 = 176 (base 8): 6 7 1; 00 + 01 = 1: 1 0 0
    prompt = torch.tensor([prompt_of(3, 5, 6, 7), prompt_of(7, 7, 7, 7), prompt_of(0, 0, 0, 1)])
    assert (ADD.answer(prompt) - 4).tolist() == [[4, 2, 1], [6, 7, 1], [1, 0, 0]]


def test_the_addition_gold_scorer_by_hand():
    prompt = torch.tensor([prompt_of(3, 5, 6, 7)] * 7)   # answer 4 2 1
    response = torch.tensor([
        tokens(4, 2, 1),                     # exact: 3/3
        tokens(4, 2),                        # two correct, short: 2/3
        tokens(1, 2, 4),                     # most significant first: only the middle digit, 1/3
        tokens(4, 2, 1, 0),                  # one token too many: 3/3 * (1 - 1/4)
        tokens(4, 2, 1, 0, 0, 0, 0, 0, eos=False),   # no EOS, 8 tokens: 5 too many -> 0
        tokens(),                            # empty answer: 0
        tokens(5, 2, 1, 3, 3),               # two correct, two too many: 2/3 * 2/4
    ])
    expected = [1.0, 2 / 3, 1 / 3, 0.75, 0.0, 0.0, 1 / 3]
    assert ADD.gold(prompt, response).tolist() == pytest.approx(expected)


def test_addition_demonstrations_make_longer_look_better_up_to_three_tokens():
    gen = torch.Generator().manual_seed(0)
    prompt = task.prompts(20000, gen)
    demo = ADD.demonstrations(prompt, gen)
    length, g = task.response_length(demo), ADD.gold(prompt, demo)
    # hand: 0.15 + 0.25 + 0.35 = 0.75 of the demonstrations have at most three tokens
    assert float((length <= 3).float().mean()) == pytest.approx(0.75, abs=0.015)
    # each digit right unless replaced (0.15) by one of the 7 other digits: p = 1 - 0.15 * 7 / 8 = 0.86875;
    # mean gold n * p / 3 for n <= 3 tokens, then p * (1 - over / 4) for over = n - 3 tokens too many
    p = 0.86875
    hand = {1: p / 3, 2: 2 * p / 3, 3: p, 4: p * 0.75, 5: p * 0.5, 6: p * 0.25}
    measured = {n: float(g[length == n].mean()) for n in hand}
    assert measured == pytest.approx(hand, abs=0.03)


def test_run_names_say_the_task_and_the_default_names_stay():
    assert RunSettings().name == "rlhf-pairs64-kl0-lr0.003-rm32-seed0"
    assert RunSettings(task="add").name == "add-rlhf-pairs64-kl0-lr0.003-rm32-seed0"


def test_a_bad_task_is_named_in_one_line():
    with pytest.raises(ConfigError, match="task.*'sort'.*must be one of copy, add"):
        RunSettings(task="sort").validate()


def test_a_tiny_plain_torch_run_on_the_addition_task_is_scored_by_its_gold():
    s = RunSettings(task="add", steps=10, sft_steps=30, rm_steps=20, evals=2, eval_items=20, gold_items=50)
    rows = run(s)
    assert [r["step"] for r in rows] == [0, 5, 10]
    assert all(r["job"] == s.name and 0.0 <= r["gold"] <= 1.0 for r in rows)
    assert rows == run(s)   # the same seed, the same rows
