"""A saved model on the bench: loaded and played by the learned layer's provider, on synthetic rows only."""

import pytest

pytest.importorskip("sb3_contrib")

from evalstop_gym.agents.train import train  # noqa: E402
from evalstop_gym.bench import suite as suite_mod  # noqa: E402
from evalstop_gym.bench.policies import LEARNED_KIND, parse_policy  # noqa: E402
from evalstop_gym.bench.arms import NO_STOPPER, specs_of  # noqa: E402
from evalstop_gym.bench.run import run_bench  # noqa: E402
from evalstop_gym.bench.suite import PHILLY, Row, suite_hash  # noqa: E402

TINY = {"n_steps": 128, "batch_size": 64, "n_epochs": 1, "eval_freq": 256, "n_eval_episodes": 1,
        "eval_workload": {"jobs": 10}}
TOY = (Row("toy-paper", jobs=30, gpus=16, seeds=(1000, 1001)),)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-stop-model")
    train("EvalStop-StopControl-v0", "ppo", out=out, timesteps=256, n_envs=1, overrides=TINY, echo=lambda _: None)
    return out


def test_a_saved_model_is_scored_against_the_references(model_dir, tmp_path, monkeypatch):
    monkeypatch.setitem(suite_mod.SUITES, "toy", TOY)
    suite_hash.cache_clear()
    p = parse_policy(str(model_dir))
    assert p.kind == LEARNED_KIND and p.scheduler == "srtf-est"
    trace_row = Row("trace", trace=PHILLY, seeds=(1200,))
    assert specs_of(p, (TOY[0], trace_row)) and all(s.config.seed != 1200 for s in specs_of(p, (TOY[0], trace_row)))
    out = run_bench([str(model_dir)], suite_name="toy", out=tmp_path, progress=False, echo=lambda _t: None)
    suite_hash.cache_clear()
    (card,) = out["policies"]
    assert card["kind"] == LEARNED_KIND and list(card["per_row"]) == ["toy-paper"]
    assert card["vs"][NO_STOPPER]["aggregate"]["avg_jct_h"]["n"] == 2
