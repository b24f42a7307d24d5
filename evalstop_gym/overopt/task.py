"""The synthetic task the tiny language model learns: copy four digits, then stop.

Tokens: ``PAD, BOS, SEP, EOS`` and ``DIGITS`` digit tokens. A prompt is
``BOS d1 d2 d3 d4 SEP``; the ideal response is ``d1 d2 d3 d4 EOS``. A response
is at most ``MAX_RESPONSE`` tokens; one with no ``EOS`` ends at that cap.

Gold scorer (the downstream eval, one item): with ``c`` the number of the
first four response tokens that equal the prompt's digit at the same place and
``over`` the number of tokens before ``EOS`` beyond four,
``gold = c / 4 * max(0, 1 - over / OVER_TOLERANCE)``. So a response earns
credit for each correct digit up to four, and loses it for running on: the
gold score rises with length up to four tokens and falls after.

Demonstrations (the SFT data) come from imperfect annotators: the response
length is drawn from ``DEMO_LENGTHS`` (mostly at most four: short answers are
common, over-long ones rare), each of the first four tokens is a wrong digit
with probability ``DEMO_ERROR``, and tokens past four are random digits. On
that distribution a longer response is usually a better one, which is the
spurious correlation a reward model fitted to few preference pairs picks up.
"""

from __future__ import annotations

import torch

PAD, BOS, SEP, EOS = 0, 1, 2, 3
DIGITS = 8
VOCAB = 4 + DIGITS
PROMPT_DIGITS = 4
PROMPT_LEN = PROMPT_DIGITS + 2          # BOS d1..d4 SEP
MAX_RESPONSE = 8                        # response tokens including EOS
OVER_TOLERANCE = 4.0                    # gold reaches 0 this many tokens past the ideal length
DEMO_LENGTHS = (0.12, 0.18, 0.22, 0.26, 0.10, 0.07, 0.05)   # P(length = 1..7) of a demonstration
DEMO_ERROR = 0.15


def prompts(n: int, gen: torch.Generator) -> torch.Tensor:
    """``n`` random prompts, shape ``(n, PROMPT_LEN)``."""
    digits = 4 + torch.randint(DIGITS, (n, PROMPT_DIGITS), generator=gen)
    return torch.cat([torch.full((n, 1), BOS), digits, torch.full((n, 1), SEP)], dim=1)


def demonstrations(prompt: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """One demonstration response per prompt, shape ``(n, MAX_RESPONSE)``, EOS then PAD after its length."""
    n = prompt.shape[0]
    length = 1 + torch.multinomial(torch.tensor(DEMO_LENGTHS), n, replacement=True, generator=gen)
    body = 4 + torch.randint(DIGITS, (n, MAX_RESPONSE), generator=gen)
    target = prompt[:, 1:1 + PROMPT_DIGITS]
    keep = torch.rand(n, PROMPT_DIGITS, generator=gen) >= DEMO_ERROR
    body[:, :PROMPT_DIGITS] = torch.where(keep, target, body[:, :PROMPT_DIGITS])
    pos = torch.arange(MAX_RESPONSE).unsqueeze(0)
    length = length.unsqueeze(1)
    return torch.where(pos < length, body, torch.where(pos == length, EOS, PAD))


def response_length(response: torch.Tensor) -> torch.Tensor:
    """Tokens before the first EOS (``MAX_RESPONSE`` if there is none)."""
    is_eos = response == EOS
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), torch.full_like(response[:, 0], MAX_RESPONSE))
    return first


def gold(prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Gold score in [0, 1] of each ``(prompt, response)`` (module docstring)."""
    length = response_length(response)
    target = prompt[:, 1:1 + PROMPT_DIGITS]
    pos = torch.arange(PROMPT_DIGITS).unsqueeze(0)
    correct = ((response[:, :PROMPT_DIGITS] == target) & (pos < length.unsqueeze(1))).sum(1)
    over = (length - PROMPT_DIGITS).clamp(min=0)
    return correct / PROMPT_DIGITS * (1.0 - over / OVER_TOLERANCE).clamp(min=0.0)
