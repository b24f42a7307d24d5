"""One run of the over-optimisation generator: SFT, preference pairs, then RLHF (RLOO) or DPO.

Steps of a run (CPU, one thread, deterministic in ``seed``):

1. **SFT**: a tiny causal transformer (:mod:`.lm`; width ``dim``, ``layers``
   blocks) is trained by next-token cross-entropy on ``sft_steps`` batches of
   demonstrations of the run's ``task`` (:mod:`.task`). It is also the
   reference policy.
2. **Preference data**: ``pairs`` prompts, two responses sampled from the SFT
   model for each, labelled by a Bradley-Terry draw on the gold scorer,
   ``P(a preferred) = sigmoid((gold(a) - gold(b)) / label_temp)``.
3. ``method="rlhf"``: a reward model (a one-block transformer of width
   ``rm_dim``) is fitted to the pairs with the Bradley-Terry loss, then shifted
   and scaled to mean 0 and sd 1 on SFT samples. The policy is trained with
   RLOO (REINFORCE with a leave-one-out baseline over ``group`` samples per
   prompt, ``prompts`` prompts a step; Ahmadian et al. 2024) on the
   KL-penalised reward ``r - kl_coef * sum_t log(pi / pi_ref)``.
   ``method="dpo"``: the policy is trained on the same pairs with the DPO loss
   (Rafailov et al. 2023), ``beta = kl_coef``, minibatches of
   ``prompts * group`` pairs; no reward model.
4. **Evals** at ``evals + 1`` evenly spaced steps (step 0 included): the
   public ``eval_score`` is the mean gold of one sampled response on each of
   ``eval_items`` fixed held-out prompts (fresh draws each time: genuine
   sampling noise, sd about ``sqrt(var / eval_items)``); the hidden ``gold`` is
   the same on ``gold_items`` other prompts with the same draws at every eval,
   so consecutive values differ by the policy's change, not by sampling luck;
   ``kl`` estimates ``KL(pi || pi_ref)`` (nats) on the eval responses.

Public training signals, means over the steps since the previous eval (blank
at step 0): ``proxy_reward`` (RLHF: the reward model's normalised score of the
policy's samples; DPO: the implicit reward margin ``beta * (log-ratio chosen -
log-ratio rejected)`` on the batch) and ``train_loss`` (RLHF: ``-log
sigmoid(r) + kl_coef * KL``, the Bradley-Terry loss of a sample against a
typical SFT response, whose normalised reward is 0, plus the KL penalty; DPO:
the DPO loss). Both improve in every run; only gold tells a hacking run.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import task
from .lm import Transformer, log_probs, reward, sample

METHODS = ("rlhf", "dpo")


MAX_SETTING = {"dim": 1024, "rm_dim": 1024, "layers": 16, "sft_batch": 4096, "prompts": 4096, "eval_items": 10_000,
               "gold_items": 10_000, "evals": 1000}   # every other count: at most 100,000


@dataclass(frozen=True)
class RunSettings:
    """One run of the generator; steps count optimiser updates, ``*_items`` held-out prompts."""

    seed: int = 0
    method: str = "rlhf"
    task: str = "copy"     # a name in task.TASKS
    pairs: int = 64
    kl_coef: float = 0.0
    lr: float = 3e-3
    rm_dim: int = 32
    dim: int = 32
    layers: int = 1
    sft_steps: int = 200
    sft_batch: int = 64
    sft_lr: float = 3e-3
    label_temp: float = 0.1
    rm_steps: int = 150
    rm_lr: float = 3e-3
    steps: int = 160
    prompts: int = 8
    group: int = 4
    evals: int = 20
    eval_items: int = 200
    gold_items: int = 1000

    # tiny models: beyond these a run would allocate gigabytes or run for days (checked before any tensor)
    def validate(self, methods: tuple[str, ...] = METHODS) -> None:
        from ..config import ConfigError, check_range

        if self.method not in methods:
            raise ConfigError("method", self.method, f"must be one of {', '.join(methods)}")
        if self.task not in task.TASKS:
            raise ConfigError("task", self.task, f"must be one of {', '.join(task.TASKS)}")
        for name in ("pairs", "rm_dim", "dim", "layers", "sft_steps", "sft_batch", "rm_steps", "steps",
                     "prompts", "evals", "eval_items", "gold_items"):
            check_range(name, getattr(self, name), 1, MAX_SETTING.get(name, 100_000), integer=True)
        check_range("group", self.group, 2, integer=True)
        check_range("seed", self.seed, 0, 2**31 - 1, integer=True)
        check_range("kl_coef", self.kl_coef, 0.0)
        if self.method == "dpo":
            check_range("kl_coef", self.kl_coef, 0.0, lo_open=True)   # DPO's beta
        for name in ("lr", "sft_lr", "label_temp", "rm_lr"):
            check_range(name, getattr(self, name), 0.0, lo_open=True)
        for name in ("dim", "rm_dim"):
            if getattr(self, name) % 2:
                raise ConfigError(name, getattr(self, name), "must be even (two attention heads)")

    @property
    def name(self) -> str:
        rm = f"-rm{self.rm_dim}" if self.method == "rlhf" else ""
        return f"{task_prefix(self.task)}{self.method}-pairs{self.pairs}-kl{self.kl_coef:g}-lr{self.lr:g}{rm}-seed{self.seed}"


def task_prefix(name: str) -> str:
    """The part of a run's name that names its task: empty for the default copy task (names from before
    there were other tasks stay valid), else the task and a dash."""
    return "" if name == task.COPY.name else name + "-"


def _stream(seed: int, k: int) -> torch.Generator:
    """Random stream ``k`` of a run: each use (SFT data, eval draws, training) has its own, so sharing one
    part between runs (the SFT model) leaves the others' draws unchanged."""
    return torch.Generator().manual_seed(seed * 8 + k)


def _batches(n: int, size: int, gen: torch.Generator):
    """Index minibatches of one shuffled pass over ``n`` items."""
    order = torch.randperm(n, generator=gen)
    return [order[i:i + size] for i in range(0, n, size)]


@functools.lru_cache(maxsize=2)
def sft_model(seed: int, dim: int, layers: int, steps: int, batch: int, lr: float,
              demos: task.Task = task.COPY) -> Transformer:
    """The SFT model (frozen): next-token cross-entropy on fresh demonstrations every step. Runs that
    differ only after SFT share it (cached per process)."""
    torch.manual_seed(seed * 8 + 6)
    model = fit_sft(Transformer(dim, layers, task.VOCAB), seed, steps, batch, lr, demos)
    for p in model.parameters():
        p.requires_grad_(False)
    return model.eval()


def fit_sft(model, seed: int, steps: int, batch: int, lr: float, demos: task.Task = task.COPY):
    """Train ``model`` (any module mapping token ids ``(n, t)`` to logits ``(n, t, VOCAB)``) in place by
    next-token cross-entropy on ``steps`` batches of fresh demonstrations of ``demos`` (random stream 0 of
    ``seed``)."""
    gen = _stream(seed, 0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        prompt = task.prompts(batch, gen)
        response = demos.demonstrations(prompt, gen)
        loss = -log_probs(model, prompt, response).sum() / (response != task.PAD).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def uniforms(n: int, gen: torch.Generator) -> torch.Tensor:
    """Draws for :func:`.lm.sample` of ``n`` responses."""
    return torch.rand(n, task.MAX_RESPONSE, generator=gen)


def preference_pairs(s: RunSettings, sft: Transformer, gen: torch.Generator):
    """``(prompt, chosen, rejected)`` for ``s.pairs`` prompts, labelled by Bradley-Terry on gold."""
    prompt = task.prompts(s.pairs, gen)
    a, b = sample(sft, prompt, uniforms(s.pairs, gen)), sample(sft, prompt, uniforms(s.pairs, gen))
    gold = task.TASKS[s.task].gold
    p_a = torch.sigmoid((gold(prompt, a) - gold(prompt, b)) / s.label_temp)
    a_wins = (torch.rand(s.pairs, generator=gen) < p_a).unsqueeze(1)
    return prompt, torch.where(a_wins, a, b), torch.where(a_wins, b, a)


def train_reward_model(s: RunSettings, pairs, sft: Transformer, gen: torch.Generator) -> Transformer:
    """Bradley-Terry reward model (one layer, width ``rm_dim``): ``rm_steps`` Adam steps on minibatches of
    at most 64 pairs (so few pairs are seen many times), then shifted and scaled to mean 0, sd 1 on SFT
    samples."""
    prompt, chosen, rejected = pairs
    torch.manual_seed(s.seed * 8 + 5)
    rm = Transformer(s.rm_dim, 1, 1)
    opt = torch.optim.Adam(rm.parameters(), lr=s.rm_lr)
    batches: list = []
    for _ in range(s.rm_steps):
        if not batches:
            batches = _batches(s.pairs, 64, gen)
        idx = batches.pop()
        r = reward(rm, prompt[idx].repeat(2, 1), torch.cat([chosen[idx], rejected[idx]]))
        loss = -F.logsigmoid(r[:idx.numel()] - r[idx.numel():]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    rm.eval()
    with torch.no_grad():
        p = task.prompts(512, gen)
        r = reward(rm, p, sample(sft, p, uniforms(512, gen)))
        mean, sd = r.mean(), r.std() + 1e-6
        rm.head.bias.sub_(mean).div_(sd)
        rm.head.weight.div_(sd)
    return rm


@torch.no_grad()
def evaluate(s: RunSettings, policy: Transformer, sft: Transformer, prompt: torch.Tensor,
             eval_gen: torch.Generator) -> tuple[float, float, float]:
    """``(eval_score, gold, kl)`` at a checkpoint, from one sampling pass over ``prompt`` (the
    ``s.eval_items`` eval prompts, then the ``s.gold_items`` gold prompts).

    ``eval_score``: mean gold of one response per eval prompt, fresh draws from
    ``eval_gen``. ``gold``: the same on the gold prompts, with the same draws at
    every eval. ``kl``: mean ``sum_t log(pi / pi_ref)`` of the eval responses
    (an estimate of ``KL(pi || pi_ref)`` in nats).
    """
    u = torch.cat([uniforms(s.eval_items, eval_gen),
                   uniforms(s.gold_items, _stream(s.seed, 3))])
    response = sample(policy, prompt, u)
    g = task.TASKS[s.task].gold(prompt, response)
    p, y = prompt[:s.eval_items], response[:s.eval_items]
    kl = log_probs(policy, p, y).sum(1) - log_probs(sft, p, y).sum(1)
    return float(g[:s.eval_items].mean()), float(g[s.eval_items:].mean()), float(kl.mean())


def rloo_loss(s: RunSettings, policy: Transformer, sft: Transformer, rm: Transformer, gen: torch.Generator):
    """``(loss to minimise, logged train loss, logged proxy reward)`` of one RLOO step on fresh samples."""
    prompt = task.prompts(s.prompts, gen).repeat_interleave(s.group, 0)
    response = sample(policy, prompt, uniforms(prompt.shape[0], gen))
    with torch.no_grad():
        r = reward(rm, prompt, response)
        ref = log_probs(sft, prompt, response).sum(1)
    lp = log_probs(policy, prompt, response).sum(1)
    kl = lp.detach() - ref
    total = (r - s.kl_coef * kl).view(s.prompts, s.group)
    advantage = (total - (total.sum(1, keepdim=True) - total) / (s.group - 1)).view(-1)   # leave-one-out
    return -(advantage * lp).mean(), float((-F.logsigmoid(r) + s.kl_coef * kl).mean()), float(r.mean())


def dpo_loss(s: RunSettings, policy: Transformer, sft: Transformer, batch):
    """``(loss, logged train loss, logged proxy reward)`` of one DPO step on ``(prompt, chosen, rejected)``."""
    prompt, chosen, rejected = batch
    with torch.no_grad():
        ref_c, ref_r = log_probs(sft, prompt, chosen).sum(1), log_probs(sft, prompt, rejected).sum(1)
    lp_c, lp_r = log_probs(policy, prompt, chosen).sum(1), log_probs(policy, prompt, rejected).sum(1)
    margin = s.kl_coef * ((lp_c - ref_c) - (lp_r - ref_r))
    loss = -F.logsigmoid(margin).mean()
    return loss, float(loss.detach()), float(margin.detach().mean())


def run(settings: RunSettings) -> list[dict]:
    """Run one generator loop; return its curve-log rows (``job`` = ``settings.name``).

    Runs on one thread with torch's deterministic algorithms (both restored
    after), so a seed gives the same rows on one machine and torch build.
    """
    settings.validate()
    with one_thread_deterministic():
        return _run(settings)


@contextlib.contextmanager
def one_thread_deterministic():
    """Torch on one thread with deterministic algorithms inside the block; both restored after."""
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def _run(s: RunSettings) -> list[dict]:
    eval_prompts = task.prompts(s.eval_items + s.gold_items, _stream(s.seed, 1))
    eval_gen, gen = _stream(s.seed, 2), _stream(s.seed, 4)
    sft = sft_model(s.seed, s.dim, s.layers, s.sft_steps, s.sft_batch, s.sft_lr, task.TASKS[s.task])
    pairs = preference_pairs(s, sft, gen)
    rm = train_reward_model(s, pairs, sft, gen) if s.method == "rlhf" else None
    policy = Transformer(s.dim, s.layers, task.VOCAB)
    policy.load_state_dict(sft.state_dict())
    opt = torch.optim.Adam(policy.parameters(), lr=s.lr)
    eval_at = {round(i * s.steps / s.evals) for i in range(s.evals + 1)}
    rows, loss_sum, proxy_sum, count = [], 0.0, 0.0, 0
    dpo_batches: list = []
    for step in range(s.steps + 1):
        if step in eval_at:
            policy.eval()
            eval_score, gold, kl = evaluate(s, policy, sft, eval_prompts, eval_gen)
            rows.append({"job": s.name, "step": step, "eval_score": round(eval_score, 6),
                         "train_loss": round(loss_sum / count, 6) if count else None,
                         "proxy_reward": round(proxy_sum / count, 6) if count else None,
                         "kl": round(kl, 6), "gold": round(gold, 6), "method": s.method,
                         "eval_items": s.eval_items})
            loss_sum = proxy_sum = 0.0
            count = 0
            policy.train()
        if step == s.steps:
            break
        if s.method == "rlhf":
            loss, shown_loss, proxy = rloo_loss(s, policy, sft, rm, gen)
        else:
            if not dpo_batches:
                dpo_batches = _batches(s.pairs, s.prompts * s.group, gen)
            idx = dpo_batches.pop()
            loss, shown_loss, proxy = dpo_loss(s, policy, sft, [x[idx] for x in pairs])
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss_sum += shown_loss
        proxy_sum += proxy
        count += 1
    return rows
