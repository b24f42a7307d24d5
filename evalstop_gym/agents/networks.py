"""Networks over a set of job slots, for the EvalStop envs (SB3 and sb3-contrib).

:class:`SlotSetExtractor` is an SB3 ``features_extractor_class`` (Deep Sets,
Zaheer et al. 2017): one shared MLP embeds every job slot (its job row, plus
its ``spread`` / ``speed`` on a cluster of nodes), a masked mean and max over
the present slots pool them, and the cluster features plus a summary of the
node block (mean, min, max of the nodes' free-GPU shares) complete the
features. The output is invariant to the order of the slots and of the nodes,
empty (padding) slots do not change it, and no weight depends on the number
of slots or nodes, so one set of weights runs on any window or cluster size
(:func:`transfer`). Every slot feature is already normalised by the cluster's
size (GPU demand / cluster GPUs; running jobs / cluster GPUs), see
``docs/mdp.md``. It works with PPO, A2C and MaskablePPO on either env:
``policy_kwargs: {features_extractor_class: SlotSetExtractor,
features_extractor_kwargs: {slots: 1}}``.

:class:`SlotScorerPolicy` (MaskablePPO on EvalStop-Cluster-v0) puts an
equivariant head on the same extractor: each slot's embedding gives that
slot's logit, and the commit / stop logits and the value read the pooled
summary, as Decima and DeepRM-style schedulers do. "Start the job with the
shortest estimated remaining time" is then one function of one row, learned
from every slot at once. The logits come out in the env's action order
``[commit/continue, stop, slot 0, ..., slot S-1]``; masking is MaskablePPO's.
"""

from __future__ import annotations

from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from evalstop_gym.envs.cluster_env import SLOT0
from evalstop_gym.envs.features import N_CLUSTER, N_JOB, N_TOPO_SLOT

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


def _mlp(sizes: list[int], act: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), act()]
    return nn.Sequential(*layers)


N_NODE_SUMMARY = 3   # mean, min, max of the nodes' free-GPU shares


def slot_layout(dim: int, slots: int) -> int:
    """Nodes in the node block of an observation of ``dim`` entries over ``slots`` slots (0: the flat pool).

    ``ValueError`` if ``dim`` is no EvalStop observation size for ``slots``."""
    rest = dim - slots * N_JOB - N_CLUSTER
    nodes = rest - N_TOPO_SLOT * slots
    if rest == 0:
        return 0
    if nodes >= 1:
        return nodes
    raise ValueError(f"an observation of {dim} entries is not an EvalStop observation over {slots} slots "
                     f"({slots} x {N_JOB} job features + {N_CLUSTER} cluster features, + nodes + "
                     f"{N_TOPO_SLOT} x {slots} on a cluster of nodes)")


class SlotSetExtractor(BaseFeaturesExtractor):
    """Deep Sets features over job slots (an SB3 ``features_extractor_class``).

    ``slots``: job rows in the observation (1 for EvalStop-StopControl-v0);
    ``hidden``: width of the shared slot MLP; ``activation``: ``"tanh"`` or
    ``"relu"``; ``per_slot``: also return every slot's embedding after the
    pooled features (for an equivariant head such as :class:`SlotScorerPolicy`).
    Features: ``[mean, max of present slots' embeddings (2 hidden), cluster
    features, node summary (3, on nodes only)]`` (then ``slots x hidden`` with
    ``per_slot``).
    """

    def __init__(self, observation_space: spaces.Box, slots: int = 1, hidden: int = 64,
                 activation: str = "tanh", per_slot: bool = False):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(_ACTIVATIONS)}, got {activation!r}")
        if not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an integer >= 1, got {slots!r}")
        nodes = slot_layout(int(observation_space.shape[0]), slots)
        pooled = 2 * hidden + N_CLUSTER + (N_NODE_SUMMARY if nodes else 0)
        super().__init__(observation_space, pooled + (slots * hidden if per_slot else 0))
        self.slots, self.nodes, self.hidden, self.per_slot = slots, nodes, hidden, per_slot
        self.pooled_dim = pooled
        self.row = _mlp([N_JOB + N_CLUSTER + (N_TOPO_SLOT if nodes else 0), hidden, hidden], _ACTIVATIONS[activation])

    def encode(self, obs: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """Per-slot embeddings ``(B, S, hidden)`` and the pooled features ``(B, pooled_dim)``."""
        b, s = obs.shape[0], self.slots
        rows = obs[:, :s * N_JOB].reshape(b, s, N_JOB)
        end = s * N_JOB + N_CLUSTER
        cluster = obs[:, s * N_JOB:end]
        parts = [rows, cluster.unsqueeze(1).expand(b, s, N_CLUSTER)]
        summary = [cluster]
        if self.nodes:
            free = obs[:, end:end + self.nodes]
            parts.append(obs[:, end + self.nodes:].reshape(b, s, N_TOPO_SLOT))
            summary.append(th.stack([free.mean(dim=1), free.amin(dim=1), free.amax(dim=1)], dim=1))
        h = self.row(th.cat(parts, dim=2))
        present = rows[:, :, :1]                                     # feature 0: the slot holds a job
        any_present = present.sum(dim=1) > 0
        mean = (h * present).sum(dim=1) / present.sum(dim=1).clamp(min=1.0)
        pooled_max = th.where(present > 0, h, th.full_like(h, -1.0)).amax(dim=1)  # tanh, relu >= -1
        pooled_max = th.where(any_present, pooled_max, th.zeros_like(pooled_max))
        return h, th.cat([mean, pooled_max, *summary], dim=1)

    def forward(self, obs: th.Tensor) -> th.Tensor:
        h, pooled = self.encode(obs)
        return th.cat([pooled, h.flatten(1)], dim=1) if self.per_slot else pooled


EXTRACTORS = {"SlotSetExtractor": SlotSetExtractor}   # features_extractor_class names a hyperparameter file may give


class SlotScorer(nn.Module):
    """``features -> (logits, value latent)`` over :class:`SlotSetExtractor`'s ``per_slot`` features;
    plays the role of SB3's ``MlpExtractor``."""

    def __init__(self, slots: int, pooled_dim: int, hidden: int = 64, activation: str = "tanh"):
        super().__init__()
        act = _ACTIVATIONS[activation]
        self.slots, self.pooled_dim, self.hidden = slots, pooled_dim, hidden
        self.slot_logit = nn.Linear(hidden, 1)
        self.head_logits = nn.Linear(pooled_dim + hidden, SLOT0)  # pooled, slot 0 -> commit, stop
        self.critic = _mlp([pooled_dim, hidden], act)
        self.latent_dim_pi = SLOT0 + slots
        self.latent_dim_vf = hidden

    def _split(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        pooled = features[:, :self.pooled_dim]
        return features[:, self.pooled_dim:].reshape(features.shape[0], self.slots, self.hidden), pooled

    def _logits(self, h: th.Tensor, pooled: th.Tensor) -> th.Tensor:
        head = self.head_logits(th.cat([pooled, h[:, 0]], dim=1))   # slot 0 holds the job at a checkpoint
        return th.cat([head, self.slot_logit(h).squeeze(2)], dim=1)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return self._logits(*self._split(features))

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.critic(features[:, :self.pooled_dim])

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        h, pooled = self._split(features)
        return self._logits(h, pooled), self.critic(pooled)


class SlotScorerPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy for EvalStop-Cluster-v0: :class:`SlotSetExtractor` then :class:`SlotScorer`.

    Extra keyword arguments (``policy_kwargs``): ``hidden`` (width, default 64)
    and ``activation`` (``"tanh"`` or ``"relu"``). Works on the flat pool and
    on clusters of nodes (the node block is read by the extractor).
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space, lr_schedule,
                 hidden: int = 64, activation: str = "tanh", **kwargs: Any):
        if not isinstance(action_space, spaces.Discrete) or action_space.n <= SLOT0:
            raise ValueError(f"SlotScorerPolicy needs Discrete(2 + slots), got {action_space}")
        slots = int(action_space.n) - SLOT0
        slot_layout(int(observation_space.shape[0]), slots)   # a clear error for another env's observations
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(_ACTIVATIONS)}, got {activation!r}")
        self.hidden, self.activation_name, self.slots = hidden, activation, slots
        for k in ("net_arch", "features_extractor_class", "features_extractor_kwargs"):
            kwargs.pop(k, None)
        super().__init__(observation_space, action_space, lr_schedule, net_arch=[],
                         features_extractor_class=SlotSetExtractor,
                         features_extractor_kwargs=dict(slots=slots, hidden=hidden, activation=activation,
                                                        per_slot=True), **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = SlotScorer(self.slots, self.features_extractor.pooled_dim, self.hidden,
                                        self.activation_name)

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
        for k in ("net_arch", "features_extractor_class", "features_extractor_kwargs"):
            data.pop(k, None)
        data.update(hidden=self.hidden, activation=self.activation_name)
        return data


def transfer(model, env):
    """``model`` (PPO / A2C / MaskablePPO over :class:`SlotSetExtractor` or :class:`SlotScorerPolicy`)
    rebuilt for ``env``, which may have another number of slots or nodes: a new model of the same class
    and hyperparameters for ``env``'s spaces, holding ``model``'s weights (none of which depends on the
    slot or node count). SB3's own ``load(..., env=...)`` refuses other spaces, which is right for every
    other policy."""
    kwargs = dict(model.policy_kwargs)
    fx = dict(kwargs.get("features_extractor_kwargs") or {})
    if kwargs.get("features_extractor_class") is SlotSetExtractor:
        fx["slots"] = int(env.action_space.n) - SLOT0 if fx.get("per_slot") else fx.get("slots", 1)
        kwargs["features_extractor_kwargs"] = fx
    elif not issubclass(model.policy_class, SlotScorerPolicy):
        raise ValueError(f"transfer needs a SlotSetExtractor or SlotScorerPolicy model, got {model.policy_class.__name__}")
    new = type(model)(model.policy_class, env, policy_kwargs=kwargs, device="cpu", seed=0)
    try:
        new.policy.load_state_dict(model.policy.state_dict())
    except RuntimeError as e:   # a weight's shape differs: the per-job or per-cluster features do
        from ..checks import ConfigError

        raise ConfigError("model", type(model).__name__,
                          "cannot play this env: its observation features differ from the ones it was trained "
                          "on (a model trained on nodes of GPUs sees a node block that a flat pool lacks, and "
                          f"vice versa; {str(e).splitlines()[0]})") from None
    return new
