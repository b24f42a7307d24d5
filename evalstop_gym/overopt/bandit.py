"""A tiny RLHF loop on a bandit: gold reward, preference data, a proxy reward model, policy gradient.

The "responses" are ``actions`` discrete actions, each with a feature vector
``phi(a)`` in ``R^features`` (standard normal). Pieces:

* **Gold reward** ``g(a)``: a fixed random two-layer tanh network of the
  features, rescaled so the worst action scores 0 and the best 1. It stands for
  the downstream eval; the logged ``eval_score`` is its exact expectation
  under the current policy.
* **Initial policy** ``pi0``: softmax of random logits (scale ``init_scale``),
  the "SFT model".
* **Preference data**: ``pairs`` pairs of actions sampled from ``pi0``, each
  labelled by a Bradley-Terry draw on gold, ``P(a > b) = sigmoid((g(a) - g(b)) /
  label_temp)``.
* **Proxy reward model**: an MLP ``features -> hidden -> 1`` trained on those
  pairs with the Bradley-Terry loss (Adam, ``rm_epochs`` full-batch steps, weight
  decay ``rm_weight_decay``).
* **Policy optimization**: logits start at ``pi0``'s; each step samples
  ``batch`` actions, and follows the REINFORCE gradient of the proxy reward
  (mean baseline) plus the exact gradient of ``- kl_coef * KL(pi || pi0)``,
  with Adam (``lr``).

Logged every ``log_every`` steps: ``eval_score`` (= ``gold``, the exact
expected gold), ``proxy_reward`` (exact expected proxy), ``kl`` (exact
``KL(pi || pi0)``, nats) and ``train_loss``: the objective written as a
non-negative loss, the proxy regret to the proxy's best action plus the KL
penalty, ``max r - E_pi[r] + kl_coef * KL``.

With few pairs the proxy is wrong off ``pi0``'s typical actions, and pushing
the policy there makes gold rise then fall (overoptimization). Many pairs or a
KL penalty keep gold rising or flat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


GOLD_AT_PI0 = 0.1   # gold is scaled so the initial policy scores 0.1 and the best action 1


@dataclass(frozen=True)
class RunSettings:
    """One run of the generator. Deterministic in ``seed`` (on one torch build)."""

    seed: int = 0
    actions: int = 256
    features: int = 8
    gold_hidden: int = 16
    init_scale: float = 1.0
    quality_scale: float = 0.3
    length_bias: float = 0.5
    length_gain: float = 1.0
    length_opt: float = 0.75
    length_penalty: float = 1.5
    pairs: int = 64
    label_temp: float = 0.05
    rm_hidden: int = 32
    rm_epochs: int = 300
    rm_lr: float = 0.01
    rm_weight_decay: float = 0.0
    kl_coef: float = 0.0
    steps: int = 400
    batch: int = 64
    lr: float = 0.05
    log_every: int = 10

    def validate(self) -> None:
        from ..config import check_range

        for name in ("actions", "features", "gold_hidden", "pairs", "rm_hidden", "rm_epochs", "steps", "batch",
                     "log_every"):
            check_range(name, getattr(self, name), 1, integer=True)
        check_range("actions", self.actions, 2, integer=True)
        check_range("seed", self.seed, 0, 2**31 - 1, integer=True)
        for name in ("init_scale", "rm_weight_decay", "kl_coef"):
            check_range(name, getattr(self, name), 0.0)
        for name in ("label_temp", "rm_lr", "lr"):
            check_range(name, getattr(self, name), 0.0, lo_open=True)

    @property
    def name(self) -> str:
        return f"pairs{self.pairs}-kl{self.kl_coef:g}-seed{self.seed}"


def _mlp(inp: int, hidden: int, gen: torch.Generator, act=torch.nn.Tanh) -> torch.nn.Sequential:
    net = torch.nn.Sequential(torch.nn.Linear(inp, hidden), act(), torch.nn.Linear(hidden, 1))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(p.shape[-1]))
    return net


def run(settings: RunSettings) -> list[dict]:
    """Run one RLHF loop; return its curve-log rows (``job`` = ``settings.name``)."""
    s = settings
    s.validate()
    gen = torch.Generator().manual_seed(s.seed)
    with torch.no_grad():
        phi = torch.randn(s.actions, s.features, generator=gen)
        length = phi[:, 0]
        g = s.quality_scale * _mlp(s.features, s.gold_hidden, gen)(phi).squeeze(1)
        g = g + s.length_gain * length - s.length_penalty * torch.relu(length - s.length_opt) ** 2
        logits0 = s.init_scale * torch.randn(s.actions, generator=gen) - s.length_bias * length
        pi0 = torch.softmax(logits0, 0)
        g0 = (pi0 * g).sum()
        gold = GOLD_AT_PI0 + (1.0 - GOLD_AT_PI0) * (g - g0) / (g.max() - g0)
        log_pi0 = torch.log_softmax(logits0, 0)

        a = torch.multinomial(pi0, s.pairs, replacement=True, generator=gen)
        b = torch.multinomial(pi0, s.pairs, replacement=True, generator=gen)
        p_a = torch.sigmoid((gold[a] - gold[b]) / s.label_temp)
        a_wins = torch.rand(s.pairs, generator=gen) < p_a
        win, lose = torch.where(a_wins, a, b), torch.where(a_wins, b, a)

    rm = _mlp(s.features, s.rm_hidden, gen, torch.nn.ReLU)
    opt = torch.optim.Adam(rm.parameters(), lr=s.rm_lr, weight_decay=s.rm_weight_decay)
    for _ in range(s.rm_epochs):
        r = rm(phi).squeeze(1)
        loss = -torch.nn.functional.logsigmoid(r[win] - r[lose]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        proxy = rm(phi).squeeze(1)
        # reward models are defined up to affine maps: normalize to mean 0, std 1 under pi0
        mean = (pi0 * proxy).sum()
        proxy = (proxy - mean) / ((pi0 * (proxy - mean) ** 2).sum().sqrt() + 1e-8)
        proxy_max = proxy.max()

    theta = logits0.clone().requires_grad_(True)
    opt = torch.optim.Adam([theta], lr=s.lr)
    rows = []
    for step in range(s.steps + 1):
        log_pi = torch.log_softmax(theta, 0)
        pi = log_pi.exp()
        kl = (pi * (log_pi - log_pi0)).sum()
        if step % s.log_every == 0:
            with torch.no_grad():
                exp_proxy, exp_gold, kl_ = float((pi * proxy).sum()), float((pi * gold).sum()), float(kl)
                rows.append({"job": s.name, "step": step, "eval_score": round(exp_gold, 6),
                             "train_loss": round(float(proxy_max) - exp_proxy + s.kl_coef * kl_, 6),
                             "proxy_reward": round(exp_proxy, 6), "kl": round(kl_, 6), "gold": round(exp_gold, 6)})
        if step == s.steps:
            break
        with torch.no_grad():
            acts = torch.multinomial(pi, s.batch, replacement=True, generator=gen)
            adv = proxy[acts] - proxy[acts].mean()
        objective = (adv * log_pi[acts]).mean() - s.kl_coef * kl
        opt.zero_grad()
        (-objective).backward()
        opt.step()
    return rows

