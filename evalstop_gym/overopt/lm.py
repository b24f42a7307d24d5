"""A tiny causal transformer (``torch.nn.TransformerEncoder`` with a causal mask): language model and
reward model of the over-optimisation generator.

Sequences are ``prompt + response`` token ids (:mod:`.task`), at most
``PROMPT_LEN + MAX_RESPONSE`` long; PAD only follows EOS, so the causal mask
alone keeps padding from affecting any real position.
"""

from __future__ import annotations

import torch
from torch import nn

from .task import EOS, MAX_RESPONSE, PAD, PROMPT_LEN, VOCAB

SEQ_LEN = PROMPT_LEN + MAX_RESPONSE


class Transformer(nn.Module):
    """Token and position embeddings, ``layers`` pre-norm causal blocks, a final norm and a linear head
    with ``out`` outputs per position (``VOCAB`` for the language model, 1 for the reward model)."""

    def __init__(self, dim: int, layers: int, out: int, heads: int = 2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(SEQ_LEN, dim)
        block = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, out)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(SEQ_LEN), persistent=False)

    def forward(self, seq: torch.Tensor) -> torch.Tensor:
        t = seq.shape[1]
        h = self.tok(seq) + self.pos.weight[:t]
        h = self.blocks(h, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(h))


def response_mask(response: torch.Tensor) -> torch.Tensor:
    """1.0 for the response's real tokens (up to and including EOS), 0.0 for the PAD after it."""
    return (response != PAD).float()


def log_probs(model: Transformer, prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Per-token log-probabilities of ``response`` given ``prompt``, shape ``(n, MAX_RESPONSE)``, 0 on PAD."""
    seq = torch.cat([prompt, response], dim=1)
    logits = model(seq[:, :-1])[:, PROMPT_LEN - 1:]
    lp = torch.log_softmax(logits, -1).gather(-1, response.unsqueeze(-1)).squeeze(-1)
    return lp * response_mask(response)


@torch.no_grad()
def sample(model: Transformer, prompt: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """One response per prompt sampled at temperature 1, PAD after EOS, shape ``(n, MAX_RESPONSE)``.

    Token ``t`` of row ``i`` is drawn by inverse CDF from ``uniforms[i, t]``
    (shape ``(n, MAX_RESPONSE)``, in [0, 1)), so rows that need different
    random streams (fresh or repeated draws) share one forward pass.
    """
    seq = prompt
    done = torch.zeros(prompt.shape[0], dtype=torch.bool)
    for t in range(MAX_RESPONSE):
        probs = torch.softmax(model(seq)[:, -1], -1)
        probs[:, PAD] = 0.0   # PAD is never generated, only written after EOS
        cdf = probs.cumsum(-1)
        tok = (cdf < uniforms[:, t:t + 1] * cdf[:, -1:]).sum(-1).clamp(max=VOCAB - 1)
        tok = torch.where(done, PAD, tok)
        done = done | (tok == EOS)
        seq = torch.cat([seq, tok.unsqueeze(1)], dim=1)
    return seq[:, PROMPT_LEN:]


def reward(model: Transformer, prompt: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Reward-model score of each ``(prompt, response)``: the head's output at the last real token."""
    seq = torch.cat([prompt, response], dim=1)
    last = PROMPT_LEN - 1 + response_mask(response).sum(1).long()
    return model(seq).squeeze(-1).gather(1, last.unsqueeze(1)).squeeze(1)
