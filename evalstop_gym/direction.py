"""Which way a metric improves, read from its name: the one rule shared by the log readers and the live
integrations (``mode="auto"``).

A metric's name is split into lower-case words at every character that is not a letter or a digit
(``eval_loss`` -> ``eval``, ``loss``; ``eval/rouge1`` -> ``eval``, ``rouge1``; ``val_WER`` -> ``val``,
``wer``). A name with a word of :data:`LOWER_IS_BETTER` (or a marker followed by digits, or a word
starting with a marker of four letters or more) improves downwards (``"min"``); otherwise a name with such a
word of :data:`HIGHER_IS_BETTER` (``rouge1``, ``rougeLsum``) improves upwards (``"max"``); any other name is unknown (``None``) and the caller
asks for the direction instead of guessing. Lower wins when a name has words of both (``reward_loss`` is a
loss). The lists are the names transformers, TRL, evaluate, Lightning and Keras write for their usual metrics.
"""

from __future__ import annotations

import re

MODES = ("max", "min")

#: Words that mark a lower-is-better metric: losses, error rates, perplexities, distances.
LOWER_IS_BETTER = ("loss", "wer", "cer", "ter", "perplexity", "ppl", "error", "err", "nll", "mse", "mae",
                   "rmse", "mape", "bpb", "bpc", "regret", "distance")

#: Words that mark a higher-is-better metric: scores, accuracies, overlaps, rewards, win rates.
HIGHER_IS_BETTER = ("accuracy", "acc", "accuracies", "f1", "precision", "recall", "auc", "auroc", "roc",
                    "rouge", "bleu", "sacrebleu", "chrf", "meteor", "bertscore", "exact", "em", "match",
                    "score", "scores", "reward", "rewards", "margins", "margin", "winrate", "win", "pass",
                    "map", "ndcg", "mrr", "iou", "dice", "r2", "spearman", "pearson", "matthews", "mcc",
                    "gold", "quality", "correct", "correctness")

_WORD = re.compile(r"[a-z0-9]+")


def words(name: str) -> list[str]:
    """The lower-case words of a metric name (split at every non-alphanumeric character)."""
    return _WORD.findall(str(name).lower())


def _marked(ws: list[str], vocabulary: tuple[str, ...]) -> bool:
    # a word is a marker, a marker and digits ("rouge1"), or starts with a marker of 4+ letters ("rougelsum")
    return any(w in vocabulary or w.rstrip("0123456789") in vocabulary
               or any(len(m) >= 4 and w.startswith(m) for m in vocabulary) for w in ws)


def mode_from_name(name: str) -> str | None:
    """``"min"`` for a lower-is-better metric name, ``"max"`` for a higher-is-better one, ``None`` if the name
    says neither (module docstring)."""
    ws = words(name)
    if _marked(ws, LOWER_IS_BETTER):
        return "min"
    if _marked(ws, HIGHER_IS_BETTER):
        return "max"
    return None


def is_loss_like(name: str) -> bool:
    """Whether ``name`` reads as a lower-is-better metric (a warning sign when it is maximised)."""
    return mode_from_name(name) == "min"
