"""Multi-agent PPO (RLlib) on the tenants environment, on a Ray cluster.

Every tenant is an agent deciding continue / stop for its own jobs at their
eval checkpoints (``evalstop_gym.multiagent``, docs/multiagent.md); the
tenants share one PPO policy. Sampling runs on ``--env-runners`` RLlib env
runners, which Ray places on the cluster's nodes; the cluster gets this
checkout's ``evalstop_gym`` as its code (``runtime_env``
``py_modules``), as ``reproduce --backend ray`` does.

    ray start --head --port 6379                       # a cluster (or use an existing one)
    python examples/rllib_tenants.py --ray-address 127.0.0.1:6379 --iterations 20
    python examples/rllib_tenants.py                   # no address: a local Ray

It prints, per training iteration, the env steps sampled so far and the
mean episode return, then the nodes the env runners ran on. This is a
starting point for multi-agent training at scale, not a tuned result.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's code


def make_env(env_config: dict):
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from evalstop_gym.multiagent import tenants_v0

    return ParallelPettingZooEnv(tenants_v0.parallel_env(**env_config))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"),
                   help="an existing Ray cluster (default $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--env-runners", type=int, default=2)
    p.add_argument("--jobs", type=int, default=20, help="jobs per episode")
    p.add_argument("--batch", type=int, default=400, help="env steps per training iteration")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.tune.registry import register_env

    import evalstop_gym

    quiet = dict(logging_level=logging.ERROR, log_to_driver=False)
    if a.ray_address:
        ray.init(address=a.ray_address, runtime_env={"py_modules": [evalstop_gym]}, **quiet)
    else:
        ray.init(num_cpus=a.env_runners + 1, include_dashboard=False, **quiet)
    register_env("evalstop_tenants", make_env)
    config = (PPOConfig()
              .environment("evalstop_tenants", env_config={"jobs": a.jobs})
              .multi_agent(policies={"tenant"}, policy_mapping_fn=lambda agent_id, episode, **kw: "tenant")
              .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={"tenant": RLModuleSpec()}))
              .env_runners(num_env_runners=a.env_runners, rollout_fragment_length="auto")
              .training(train_batch_size_per_learner=a.batch, minibatch_size=min(128, a.batch), num_epochs=2)
              .debugging(seed=a.seed))
    algo = config.build_algo()
    t = time.perf_counter()
    for i in range(a.iterations):
        r = algo.train()["env_runners"]
        print(f"iteration {i + 1}: {int(r['num_env_steps_sampled_lifetime'])} env steps, "
              f"mean episode return {r.get('episode_return_mean', float('nan')):.2f}, "
              f"{time.perf_counter() - t:.1f} s", flush=True)
    nodes = algo.env_runner_group.foreach_env_runner(lambda runner: ray.get_runtime_context().get_node_id(),
                                                     local_env_runner=False)
    print(f"env runners: {len(nodes)} on {len(set(nodes))} node(s)")
    algo.stop()
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
