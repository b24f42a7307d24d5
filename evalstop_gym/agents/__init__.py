"""Learned policies (stable-baselines3): stop-policies for EvalStop-StopControl-v0 and schedulers for
EvalStop-Cluster-v0.

The modules form layers; each imports only from layers below it (``tests/test_import_cycles.py`` fails on any
import circle, function-level imports included). From the bottom:

1. :mod:`~evalstop_gym.agents.seeds`, :mod:`~evalstop_gym.agents.history_features`: seed ranges, the job
   history a stop-policy may see;
2. :mod:`~evalstop_gym.agents.wrappers`: the Gymnasium wrappers training and evaluation run behind (they load
   no model: a ``HandCodedStops`` that names a saved stop-policy is given it as its rule);
3. **recipes**: :mod:`~evalstop_gym.agents.hparams` (``hyperparams/<algo>.yml`` in RL Zoo's format, which
   rl_zoo3's own scripts run too), with :mod:`~evalstop_gym.agents.networks` (the project's torch networks a
   recipe may name);
4. **model loading**: :mod:`~evalstop_gym.agents.saved` (a model folder's files, its config checked, the SB3
   model loaded without running anything from the file), then :mod:`~evalstop_gym.agents.policy` (a saved
   model as a policy, a stop-policy as a stopper, the env stacks of models);
5. **evaluation**: :mod:`~evalstop_gym.agents.combined` (one episode of a learned pair on a workload),
   :mod:`~evalstop_gym.agents.evaluate` (``evalstop-gym evaluate``; policies read by
   :func:`evalstop_gym.bench.policies.parse_policy`), :mod:`~evalstop_gym.agents.selection` (the hand-coded
   comparators chosen on validation seeds);
6. **training**: :mod:`~evalstop_gym.agents.run_selection` (several runs of a recipe, one kept by its
   validation detection, so above evaluation), :mod:`~evalstop_gym.agents.train` (``evalstop-gym train``);
7. **judging and glue**: :mod:`~evalstop_gym.agents.verdicts` (the targets' verdicts from the bench's paired
   comparisons and Holm correction, :mod:`evalstop_gym.bench.score`), then :mod:`~evalstop_gym.agents.targets`
   (``evalstop-gym targets``: selection, worlds, report; guide ``docs/evaluation.md``),
   :mod:`~evalstop_gym.agents.arms` (the experiment suite's and the bench's provider
   of learned arms), :mod:`~evalstop_gym.agents.cli`.

Only this package imports torch; the simulator never does. Guide: ``docs/learned.md``.
"""
