"""A permutation-equivariant actor-critic for EvalStop-Cluster-v0 (sb3-contrib MaskablePPO).

A flat MLP over 32 slots x 22 features must learn the same "which job first"
rule once per slot. :class:`SlotScorerPolicy` scores every slot with one small
shared network (each job row with the cluster features), so a rule such as
"shortest estimated remaining time first" is one function of one row, learned
from every slot at once; the commit / stop logits and the value read a pooled
summary of all present slots (mean and max), as Decima and DeepRM-style
schedulers do. The logits come out in the env's action order
``[commit/continue, stop, slot 0, ..., slot S-1]``; masking is MaskablePPO's.
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from torch import nn

from evalstop_gym.envs.cluster_env import SLOT0
from evalstop_gym.envs.features import N_CLUSTER, N_JOB

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _mlp(sizes: list[int], act: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), act()]
    return nn.Sequential(*layers)


class SlotScorer(nn.Module):
    """``features -> (logits, value latent)``; plays the role of SB3's ``MlpExtractor``."""

    def __init__(self, slots: int, hidden: int = 64, activation: str = "tanh"):
        super().__init__()
        act = _ACTIVATIONS[activation]
        self.slots = slots
        self.row = _mlp([N_JOB + N_CLUSTER, hidden, hidden], act)   # shared by every slot
        self.slot_logit = nn.Linear(hidden, 1)
        self.head_logits = nn.Linear(3 * hidden + N_CLUSTER, SLOT0)  # mean, max, cluster, slot 0 -> commit, stop
        self.critic = _mlp([2 * hidden + N_CLUSTER, hidden], act)
        self.latent_dim_pi = SLOT0 + slots
        self.latent_dim_vf = hidden

    def _encode(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Per-slot embeddings ``(B, S, hidden)`` and the pooled summary ``(B, 2 hidden + N_CLUSTER)``."""
        b = obs.shape[0]
        rows = obs[:, :self.slots * N_JOB].reshape(b, self.slots, N_JOB)
        cluster = obs[:, self.slots * N_JOB:]
        h = self.row(th.cat([rows, cluster.unsqueeze(1).expand(b, self.slots, N_CLUSTER)], dim=2))
        present = rows[:, :, :1]                                     # feature 0: the slot holds a job
        any_present = present.sum(dim=1) > 0
        mean = (h * present).sum(dim=1) / present.sum(dim=1).clamp(min=1.0)
        pooled_max = th.where(present > 0, h, th.full_like(h, -1.0)).amax(dim=1)  # tanh, relu >= -1
        pooled_max = th.where(any_present, pooled_max, th.zeros_like(pooled_max))
        return h, th.cat([mean, pooled_max, cluster], dim=1)

    def _logits(self, h: th.Tensor, pooled: th.Tensor) -> th.Tensor:
        head = self.head_logits(th.cat([pooled, h[:, 0]], dim=1))   # slot 0 holds the job at a checkpoint
        return th.cat([head, self.slot_logit(h).squeeze(2)], dim=1)

    def forward_actor(self, obs: th.Tensor) -> th.Tensor:
        return self._logits(*self._encode(obs))

    def forward_critic(self, obs: th.Tensor) -> th.Tensor:
        return self.critic(self._encode(obs)[1])

    def forward(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        h, pooled = self._encode(obs)
        return self._logits(h, pooled), self.critic(pooled)


class SlotScorerPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy for EvalStop-Cluster-v0 built on :class:`SlotScorer`.

    Extra keyword arguments (``policy_kwargs``): ``hidden`` (width, default 64)
    and ``activation`` (``"tanh"`` or ``"relu"``).
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule,
                 hidden: int = 64, activation: str = "tanh", **kwargs: Any):
        if not isinstance(action_space, spaces.Discrete) or action_space.n <= SLOT0:
            raise ValueError(f"SlotScorerPolicy needs Discrete(2 + slots), got {action_space}")
        slots = int(action_space.n) - SLOT0
        if observation_space.shape != (slots * N_JOB + N_CLUSTER,):
            raise ValueError(f"SlotScorerPolicy expects EvalStop-Cluster-v0 observations of shape "
                             f"({slots * N_JOB + N_CLUSTER},), got {observation_space.shape}")
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(_ACTIVATIONS)}, got {activation!r}")
        self.hidden, self.activation_name, self.slots = hidden, activation, slots
        kwargs.pop("net_arch", None)
        super().__init__(observation_space, action_space, lr_schedule, net_arch=[], **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = SlotScorer(self.slots, self.hidden, self.activation_name)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        # the scorer emits the logits itself; start near uniform, as SB3 does with its 0.01 output gain
        self.action_net = nn.Identity()
        for layer, gain in ((self.mlp_extractor.slot_logit, 0.01), (self.mlp_extractor.head_logits, 0.01)):
            nn.init.orthogonal_(layer.weight, gain=gain)
            nn.init.zeros_(layer.bias)
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.pop("net_arch", None)
        data.update(hidden=self.hidden, activation=self.activation_name)
        return data
