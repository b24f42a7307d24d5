"""The knobs that shape grounded's RLHF runs like its varied library's: a task latent (the floor at the task's
quantile, an exploitable proxy's d* and gain tied to it), a per-run drift level, a collapse at the KL ceiling;
their checks; the fit's pieces that find them in a log; and the worlds without them, drawn as before."""

import dataclasses
import hashlib
import math

import numpy as np
import pytest

from evalstop_gym import fit
from evalstop_gym.config import CALIBRATIONS, JOB_TYPES, ConfigError, LatentModel, WorkloadConfig
from evalstop_gym.latent import latent_curves, task_quantile
from evalstop_gym.worldfile import calibration_fields

RLHF = JOB_TYPES.index("rlhf")

# every run unpenalised with an exploitable proxy, the same KL path d = 4 sqrt(x) (lr 1, p 0.5) meeting the ceiling
# 3-3.5 at x = (3 / 4)^2 = 0.56 to (3.5 / 4)^2 = 0.77, d* 0.6-0.7, base 0.5, no drift, no proxy noise
CLIFF = LatentModel(base=(0.5, 0.5), lr=(1.0, 1.0), kl_scale=4.0, kl_exponent=(0.5, 0.5), kl_ceiling=(3.0, 3.5),
                    d_star_exploitable=(0.6, 0.7), peak_gain_exploitable=(0.3, 0.3), gold_floor=(0.1, 0.15),
                    proxy_slope=(0.5, 0.5), proxy_noise=0.0)


def curves_of(model, n=400, evals=15, seed=3):
    return latent_curves(np.random.default_rng(seed), model, evals, np.full(n, RLHF), 1.0)


def spearman_reference(a, b):
    # Spearman's rho from its textbook formula, 1 - 6 sum(d^2) / (n (n^2 - 1)), for values without ties
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    n = len(a)
    return 1.0 - 6.0 * float(np.sum((ra - rb) ** 2)) / (n * (n * n - 1))


def test_a_quantity_follows_its_task_by_its_loading():
    rng = np.random.default_rng(0)
    task = rng.random(20000)
    assert np.array_equal(task_quantile(rng, task, 1.0), task)              # loading 1: the task's own quantile
    assert np.array_equal(task_quantile(rng, task, -1.0), 1.0 - task)       # -1: mirrored
    half = task_quantile(rng, task, 0.5)
    # still uniform (deciles within 0.01 of 0.1 .. 0.9), and its rank correlation with the task is the loading:
    # Spearman's rho is linear in the copula, 0.5 x 1 (comonotone) + 0.5 x 0 (independent)
    np.testing.assert_allclose(np.quantile(half, np.linspace(0.1, 0.9, 9)), np.linspace(0.1, 0.9, 9), atol=0.01)
    assert spearman_reference(task, half) == pytest.approx(0.5, abs=0.02)
    assert task_quantile(rng, None, 0.5) is None                            # no task latent: nothing drawn


def test_the_task_places_the_floor_and_ties_the_gain_to_it():
    # with d* fixed (0.6) and every run on the same KL path, a run's peak grows with its gain and it ends at its
    # floor (d at the ceiling is 5-5.8 d*, where u (1 - ln u) is -3.05 or lower: gold 0.5 - 0.3 x 3.05 = -0.42 at
    # most, below any floor), so the loading on the gain is the rank correlation of the peak with the end, exactly
    # +1 or -1, and about 0 without a task latent
    model = dataclasses.replace(CLIFF, d_star_exploitable=(0.6, 0.6), peak_gain_exploitable=(0.3, 0.5))
    for loadings, want in (((0.0, 1.0), 1.0), ((0.0, -1.0), -1.0)):
        curves, _, _ = curves_of(dataclasses.replace(model, task_loadings=loadings))
        assert np.all((curves.gold[:, -1] >= 0.1) & (curves.gold[:, -1] <= 0.15))
        assert spearman_reference(curves.gold.max(axis=1), curves.gold[:, -1]) == pytest.approx(want)
    free, _, _ = curves_of(model)
    assert abs(spearman_reference(free.gold.max(axis=1), free.gold[:, -1])) < 0.15   # 400 runs: sd 0.05


def test_each_run_wanders_at_its_own_log_normal_level():
    # no trend (gains 0), the drift the steps themselves (reversion 1, autocorrelation 0): each run's checkpoints
    # scatter about its base with sd 0.01 exp(0.5 z); over 400 checkpoints a run's sample sd is its level within
    # about 1 / sqrt(2 x 399) = 3.5% in log, so the logs of 2000 runs' sds spread by sqrt(0.5^2 + 0.035^2) = 0.501
    flat = LatentModel(base=(0.5, 0.5), peak_gain_exploitable=(0.0, 0.0), peak_gain_robust=(0.0, 0.0), drift=0.01,
                       drift_reversion=1.0, proxy_noise=0.0)
    spread, _, _ = curves_of(dataclasses.replace(flat, drift_spread=0.5), n=2000, evals=400)
    logs = np.log(np.std(spread.gold, axis=1, ddof=1))
    assert np.std(logs) == pytest.approx(0.501, abs=0.03)
    assert math.exp(np.median(logs)) == pytest.approx(0.01, rel=0.05)        # the level is the median
    alike, _, _ = curves_of(flat, n=2000, evals=400)
    assert np.std(np.log(np.std(alike.gold, axis=1, ddof=1))) < 0.06        # off: the estimate's own 0.035


def test_a_policy_that_meets_its_ceiling_collapses_to_its_floor_whatever_its_gain():
    # a gain of 0.02: at the ceiling d is 3 / 0.7 = 4.286 to 3.5 / 0.6 = 5.833 times d*, where Gao's form
    # u (1 - ln u) is -1.951 to -4.454, so gold is 0.5 + 0.02 x that = 0.4109-0.4610, far above the floor 0.1-0.15
    small = dataclasses.replace(CLIFF, peak_gain_exploitable=(0.02, 0.02))
    slow, _, _ = curves_of(small)
    assert np.all((slow.gold[:, -1] >= 0.4109) & (slow.gold[:, -1] <= 0.4610))
    fast, hacking, kl = curves_of(dataclasses.replace(small, collapse_share=1.0))
    at_ceiling = np.isclose(np.sqrt(kl), np.sqrt(kl[:, -1:]))               # d held at the ceiling from there on
    floor = fast.gold[:, -1:]
    assert np.all((floor >= 0.1) & (floor <= 0.15)) and hacking.all()
    assert np.all(np.where(at_ceiling, fast.gold == floor, fast.gold > 0.41))
    half, _, _ = curves_of(dataclasses.replace(small, collapse_share=0.5))
    assert np.mean(half.gold[:, -1] <= 0.15) == pytest.approx(0.5, abs=0.075)   # 400 coins: sd 0.025


def test_every_new_knob_is_off_in_the_hand_set_worlds_and_they_draw_as_before():
    # sha256 of every array latent_curves returns on seed 2026, 300 runs of each job type in turn, 10 evals, hacking
    # fraction 0.6: computed with the code as it was before these knobs existed, so a knob left off draws nothing
    pinned = {"paper": "bfccd0521036f0d8", "realistic": "17843897e698269d"}
    for name, digest in pinned.items():
        c = CALIBRATIONS[name].curves
        assert (c.task_loadings, c.drift_spread, c.collapse_share) == (None, None, None)
        curves, hacking, kl = latent_curves(np.random.default_rng(2026), c, 10, np.arange(300) % len(JOB_TYPES), 0.6)
        h = hashlib.sha256()
        for a in (curves.gold, curves.start, curves.eval_z, curves.loss, curves.proxy, curves.peak_progress, hacking,
                  kl):
            h.update(np.ascontiguousarray(a).tobytes())
        assert h.hexdigest()[:16] == digest, name


@pytest.mark.parametrize("kw,field", [({"task_loadings": (1.5, 0.0)}, "task_loadings"),
                                      ({"task_loadings": (0.5, 0.5), "gold_floor": None}, "task_loadings"),
                                      ({"drift_spread": -0.1}, "drift_spread"),
                                      ({"drift_spread": 4.0}, "drift_spread"),
                                      ({"collapse_share": 1.2}, "collapse_share"),
                                      ({"collapse_share": 0.5, "kl_ceiling": None}, "collapse_share")])
def test_bad_new_knob_values_name_the_field(kw, field):
    with pytest.raises(ConfigError, match=f"curves.{field}"):
        WorkloadConfig(curves=dataclasses.replace(CLIFF, **kw))


def test_a_world_file_reads_the_new_knobs():
    data = {"description": "x", "noise": 0.0, "world": {},
            "curves": {"kl_ceiling": [3.0, 3.5], "gold_floor": [0.1, 0.15], "task_loadings": [-0.3, 0.2],
                       "drift_spread": 0.6, "collapse_share": 0.9}}
    c = calibration_fields(data, LatentModel, type(CALIBRATIONS["paper"].world))["curves"]
    assert (c.task_loadings, c.drift_spread, c.collapse_share) == ((-0.3, 0.2), 0.6, 0.9)
    data["curves"]["task_loadings"] = [0.5]
    with pytest.raises(ConfigError, match="curves.task_loadings"):
        calibration_fields(data, LatentModel, type(CALIBRATIONS["paper"].world))


FAKE = fit.RunFit("x", "rlhf", 10, 0.5, 1.0, 1.0, math.inf, 1.0, 0.2, 0.0, math.nan, 0.01, True, 1.0, (1.0, 1.0),
                  np.zeros(3), math.nan, math.nan, np.empty(0), None, np.empty(0), np.empty(0), np.empty(0), 0)


def test_the_fit_s_pieces_by_hand():
    # ranks 0 1 2 3 against 0 1 3 2: 1 - 6 x 2 / (4 x 15) = 0.8
    assert fit.spearman([1, 2, 3, 4], [10, 20, 40, 30]) == pytest.approx(0.8)
    # a tie shares its mean rank: ranks 0.5 0.5 2 3 against 0 1 2 3, centred -1 -1 0.5 1.5 and -1.5 -0.5 0.5 1.5:
    # 4.5 / sqrt(4.5 x 5); the tied pair in either order gives the same
    assert fit.spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert fit.spearman([1, 1, 2, 3], [2, 1, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    # the growth loading's p comes from a grid, so its pairs tie: any order of the runs gives one loading
    pairs = [(0.1, 0.5), (0.2, 0.5), (0.3, 0.55), (0.15, 0.6), (0.4, 0.6), (0.5, 0.65), (0.05, 0.5)]
    want = fit.growth_loading(pairs)
    assert [fit.growth_loading(list(np.random.default_rng(s).permutation(pairs))) for s in range(20)] == [want] * 20
    # loadings: the floor's rank correlation with d* (falling: -1) and with the gain (rising: +1) over the floored
    # runs with an exploitable proxy; a robust one and a DPO run are left out; under 5 runs, none
    floored = [dataclasses.replace(FAKE, floor=f, d_star=5 - 10 * f, gain=f) for f in (0.1, 0.2, 0.3, 0.4, 0.5)]
    noise = [dataclasses.replace(FAKE, floor=0.6, d_star=9.0, gain=0.0, exploitable=False),
             dataclasses.replace(FAKE, floor=0.7, d_star=9.0, gain=0.0, job_type="dpo")]
    assert fit.task_loadings(fit.cliff_floored(floored + noise)) == (-1.0, 1.0)
    assert fit.task_loadings(floored[:4]) is None
    # collapse share: of the exploitable runs no penalty held (3), those that collapsed (2); a penalised run and a
    # robust one do not count
    runs = [FAKE, FAKE, FAKE, FAKE, dataclasses.replace(FAKE, exploitable=False)]
    share = fit.collapse_share(runs, np.array([False, False, False, True, False]),
                               np.array([True, True, False, True, True]))
    assert share == pytest.approx(2 / 3, abs=1e-4)
    assert fit.collapse_share(runs, np.zeros(5, bool), np.zeros(5, bool)) is None     # nothing collapsed
    # noise spread: logs 0..4 about their median 2 are -2..2, quartiles -1 and 1: IQR 2, sd 2 / 1.349; a DPO group
    # is centred on its own median, so DPO runs at any one level add zeros
    rl = [dataclasses.replace(FAKE, gold_noise=math.exp(k)) for k in range(5)]
    assert fit.log_noise_spread(rl) == pytest.approx(2 / 1.349)
    dpo = [dataclasses.replace(FAKE, gold_noise=0.5, job_type="dpo")] * 3
    v = np.r_[np.arange(-2.0, 3.0), np.zeros(3)]
    assert fit.log_noise_spread(rl + dpo) == pytest.approx(float(np.subtract(*np.quantile(v, [0.75, 0.25]))) / 1.349)
    assert fit.log_noise_spread(rl[:3]) is None
