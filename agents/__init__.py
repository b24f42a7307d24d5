"""Learned policies (stable-baselines3): stop-policies for EvalStop-StopControl-v0 and schedulers for
EvalStop-Cluster-v0.

* :mod:`agents.train`: ``python -m agents.train`` / ``evalstop-gym train``; hyperparameters in
  ``agents/hyperparams/<algo>.yml`` in RL Zoo's format (:mod:`agents.hparams`), which rl_zoo3's own
  scripts run too;
* :mod:`agents.arms`: the experiment suite's provider of learned arms (``reproduce --model``);
* :mod:`agents.policy`: a saved model (``model.zip`` + ``config.json``) as a policy;
* :mod:`agents.evaluate`: ``evalstop-gym evaluate``, hand-coded or learned policies on held-out seeds;
* :mod:`agents.wrappers`, :mod:`agents.networks`, :mod:`agents.seeds`: what training runs behind.

Only this package imports torch; the simulator never does. Guide: ``docs/learned.md``.
"""
