"""Learned policies (stable-baselines3): stop-policies for EvalStop-StopControl-v0 and schedulers for
EvalStop-Cluster-v0.

* :mod:`evalstop_gym.agents.train`: ``python -m evalstop_gym.agents.train`` / ``evalstop-gym train``; hyperparameters in
  ``evalstop_gym/agents/hyperparams/<algo>.yml`` in RL Zoo's format (:mod:`evalstop_gym.agents.hparams`), which rl_zoo3's own
  scripts run too;
* :mod:`evalstop_gym.agents.arms`: the experiment suite's provider of learned arms (``reproduce --model``);
* :mod:`evalstop_gym.agents.policy`: a saved model (``model.zip`` + ``config.json``) as a policy;
* :mod:`evalstop_gym.agents.evaluate`: ``evalstop-gym evaluate``, hand-coded or learned policies on held-out seeds;
* :mod:`evalstop_gym.agents.targets`: ``evalstop-gym targets``, learned models against the best hand-coded policies
  chosen on validation seeds (:mod:`evalstop_gym.agents.selection`), and the generalisation table; guide
  ``docs/evaluation.md``;
* :mod:`evalstop_gym.agents.combined`: a stop-policy model as a stopper over any scheduler, or answering a learned
  scheduler's checkpoints;
* :mod:`evalstop_gym.agents.wrappers`, :mod:`evalstop_gym.agents.networks`, :mod:`evalstop_gym.agents.seeds`: what training runs behind.

Only this package imports torch; the simulator never does. Guide: ``docs/learned.md``.
"""
