"""Ray Tune's best checkpoint when a trial reports a checkpoint without the metric: with ``num_to_keep=1`` Tune
deletes the best one in either order (the adapter warns), and ``num_to_keep=None`` with
``Result.get_best_checkpoint`` keeps and finds the stopper's best eval."""

import json
import os
import tempfile

import pytest

ray = pytest.importorskip("ray")

from ray import tune  # noqa: E402

from evalstop_gym.integrations import TuneStopper  # noqa: E402

# one checkpoint per iteration; the one at iteration 3 is reported without the metric (None). EvalStop(k=2) stops
# at iteration 5 (the second decline after the best, at iteration 2) in both directions.
SCRIPTS = {"max": ("eval_reward", [0.3, 0.6, None, 0.5, 0.4, 0.35]),
           "min": ("eval_loss", [0.7, 0.4, None, 0.5, 0.6, 0.65])}
BEST, STOP = 2, 5


def trainable(metric, scores):
    def train(config):
        for i, score in enumerate(scores, start=1):
            with tempfile.TemporaryDirectory() as d:
                json.dump({"iteration": i}, open(os.path.join(d, "it.json"), "w"))
                tune.report({"it": i} if score is None else {"it": i, metric: score},
                            checkpoint=tune.Checkpoint.from_directory(d))

    return train


def iteration(checkpoint):
    with checkpoint.as_directory() as d:
        return json.load(open(os.path.join(d, "it.json")))["iteration"]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def fit(tmp_path, order, num_to_keep):
    metric, scores = SCRIPTS[order]
    stopper = TuneStopper(metric, k=2)
    tuner = tune.Tuner(tune.with_resources(trainable(metric, scores), {"cpu": 1}),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), name=f"{order}{num_to_keep}", verbose=0,
                                                 stop=stopper,
                                                 checkpoint_config=tune.CheckpointConfig(
                                                     num_to_keep=num_to_keep, checkpoint_score_attribute=metric,
                                                     checkpoint_score_order=order)))
    with pytest.warns(UserWarning, match=f"checkpoint without '{metric}'.*num_to_keep=None"):
        (result,) = tuner.fit()
    assert not result.error and result.metrics["it"] == STOP
    assert stopper.live.best(result.metrics["trial_id"]).step == BEST
    return metric, result


@pytest.mark.slow   # Ray's start-up and four one-trial fits: about 25 s on 2 loaded cores
@pytest.mark.parametrize("order", ["max", "min"])
def test_a_checkpoint_without_the_metric_costs_the_best_unless_every_checkpoint_is_kept(local_ray, tmp_path,
                                                                                       order):
    _, result = fit(tmp_path, order, num_to_keep=1)
    kept = [iteration(c) for c, _ in result.best_checkpoints]
    assert BEST not in kept   # Tune deleted the best eval's checkpoint: the hazard the warning names
    metric, result = fit(tmp_path, order, num_to_keep=None)
    assert sorted(iteration(c) for c, _ in result.best_checkpoints) == list(range(1, STOP + 1))
    assert iteration(result.get_best_checkpoint(metric, order)) == BEST   # the stopper's best eval
