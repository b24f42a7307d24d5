"""The calibrations: the label-first curves of earlier versions stay bit-identical; the realistic world's
curves, noise, costs and speed behave as documented in docs/calibration.md."""

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest

from evalstop_gym.baselines import make_policy
from evalstop_gym import WorkloadConfig, generate, run_policy, simulate
from evalstop_gym.config import CALIBRATIONS, JOB_TYPES, ConfigError, CurveModel, WorldModel
from evalstop_gym.policy import drive
from evalstop_gym.cluster import ClusterSpec
from evalstop_gym.simulator import DONE, EVAL, SCHEDULE, Simulator
from evalstop_gym.timebase import TICKS_PER_HOUR
from evalstop_gym.workload import workload_from_jobs

# The realistic world with the label-first curves it shipped with before its curves came from latent
# causes: the tests below check that family's documented behaviour (docs/calibration.md); the latent
# curves are tested in tests/test_latent.py and tests/test_audit.py.
LABEL_FIRST_REALISTIC_CURVES = CurveModel(
    base=(0.1, 0.3), healthy_gain=(0.3, 0.6), healthy_tau=(0.08, 0.3), hack_gain=(0.3, 0.6), hack_peak=(0.2, 0.45),
    plateau_jitter=0.01, dip_prob=0.05, dip_depth=(0.02, 0.05), overfit_fraction=0.2, overfit_drop=(0.005, 0.03),
    dpo_hacking_fraction=0.4, dpo_peak=(0.1, 0.4), dpo_floor=(0.0, 0.5), hack_rate=(0.6, 1.4),
    recovery_fraction=0.2, recovery=(0.2, 0.6), hack_min_drop=0.05, form="realistic")
REALISTIC = WorkloadConfig(calibration="realistic", curves=LABEL_FIRST_REALISTIC_CURVES)

# SRTF-Est + EvalStop k=2 and no stopper on rlhf-heavy, seed 3, recorded from the simulator before the
# realistic world existed (main at 70d0a27). The paper world's curves now come from latent causes
# (docs/calibration.md); its earlier label-first curves, curves=CurveModel(), must keep giving exactly these.
BEFORE = {'evalstop': {'avg_jct_h': 8.53725855138889,
              'avg_queue_h': 3.3835604750000003,
              'compute_waste_gpu_h': 1585.0208244444445,
              'delivered_quality': 0.7323149107879522,
              'delivered_quality_regret': 0.003058146546288627,
              'detection_delay_evals': 2.2444444444444445,
              'f1': 0.994475138121547,
              'false_negatives': 1,
              'false_positives': 0,
              'fpr': 0.0,
              'gpu_hours': 11121.8497725,
              'jobs': 200,
              'jobs_stopped': 90,
              'makespan_h': 189.8512252777778,
              'p50_jct_h': 5.169350833333334,
              'p99_jct_h': 69.7769939805554,
              'precision': 1.0,
              'preemptions': 161,
              'recall': 0.989010989010989,
              'true_positives': 90,
              'utilization': 0.9153425396178017},
 'none': {'avg_jct_h': 17.856232891666668,
          'avg_queue_h': 11.705501123611112,
          'compute_waste_gpu_h': 3822.9495466666667,
          'delivered_quality': 0.5317653621620062,
          'delivered_quality_regret': 0.2036076951722347,
          'detection_delay_evals': None,
          'f1': None,
          'false_negatives': 91,
          'false_positives': 0,
          'fpr': 0.0,
          'gpu_hours': 13359.778494722223,
          'jobs': 200,
          'jobs_stopped': 0,
          'makespan_h': 216.03225694444444,
          'p50_jct_h': 7.278818194444444,
          'p99_jct_h': 171.87465973611108,
          'precision': None,
          'preemptions': 151,
          'recall': 0.0,
          'true_positives': 0,
          'utilization': 0.9662748606737773}}


@pytest.mark.parametrize("stopper", sorted(BEFORE))
def test_label_first_paper_curves_reproduce_the_results_from_before_the_realistic_world(stopper):
    m = simulate("srtf-est", stopper, seed=3, curves=CurveModel(), **({"k": 2} if stopper == "evalstop" else {}))
    for key, value in BEFORE[stopper].items():
        assert m[key] == value, key  # exact: those curves draw and simulate nothing new


def test_unknown_calibration_is_a_one_line_error_listing_the_names():
    with pytest.raises(ConfigError, match=r"calibration='nope' .*must be one of paper, realistic, grounded"):
        WorkloadConfig(calibration="nope")
    r = subprocess.run([sys.executable, "-m", "evalstop_gym.cli", "simulate", "--calibration", "nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "paper, realistic" in r.stderr


@pytest.mark.parametrize("field,value,allowed", [
    ("curves.dip_prob", 1.5, "in [0.0, 1.0]"),
    ("curves.dpo_peak", (0.0, 0.5), "(0, 1]"),
    ("curves.form", "cartoon", "paper, realistic"),
    ("curves.hack_min_drop", 0.01, "overfit drop"),
    ("world.eval_items", (0, 100), "in [1, "),
    ("world.segment_jitter", -0.1, "in [0.0, 1.0]"),
    ("world.storage_gbps", (0.0, 1.0), "> 0"),
    ("world.checkpoint_gb", (1.0, 2.0), "one size per job type"),
])
def test_every_new_knob_is_validated(field, value, allowed):
    with pytest.raises(ConfigError) as e:
        REALISTIC.replace(**{field: value})
    assert field in str(e.value) and allowed in str(e.value)


def test_a_calibration_brings_its_defaults_unless_a_field_is_given():
    assert WorkloadConfig().noise == CALIBRATIONS["paper"].noise
    switched = WorkloadConfig(noise=0.07).replace(calibration="realistic")
    assert switched.curves == CALIBRATIONS["realistic"].curves and switched.noise == CALIBRATIONS["realistic"].noise
    kept = WorkloadConfig().replace(calibration="realistic", noise=0.03)
    assert kept.noise == 0.03 and kept.world == CALIBRATIONS["realistic"].world
    moved = REALISTIC.replace(**{"curves.hack_peak": (0.6, 0.9)})
    assert moved.curves.hack_peak == (0.6, 0.9) and moved.curves.form == "realistic"


def test_hacking_label_is_the_trend_drop_rule():
    """Without jitter and dips the true score is the trend, so the label must be exactly
    'falls from its maximum to its last checkpoint by at least hack_min_drop'."""
    cfg = REALISTIC.replace(jobs=400, seed=5, **{"curves.plateau_jitter": 0.0, "curves.dip_prob": 0.0})
    w = generate(cfg)
    gold = w.curves.gold
    rule = gold.max(axis=1) - gold[:, -1] >= cfg.curves.hack_min_drop
    assert np.array_equal(w.hacking, rule)
    dpo, lora = JOB_TYPES.index("dpo"), JOB_TYPES.index("lora")
    assert w.hacking[w.job_type == dpo].any()          # direct alignment over-optimises too
    assert not w.hacking[w.job_type == lora].any()
    # some healthy runs decline slowly (overfitting) but by less than the label's threshold
    healthy_drop = (gold.max(axis=1) - gold[:, -1])[~w.hacking]
    assert (healthy_drop > 0.005).any() and healthy_drop.max() < cfg.curves.hack_min_drop


def test_realistic_healthy_curves_saturate_early_and_jitter_on_a_plateau():
    w = generate(REALISTIC.replace(jobs=400, seed=6))
    healthy = ~w.hacking
    gold = w.curves.gold[healthy]
    start = w.curves.start[healthy]
    gain_at_half = (gold[:, 4] - start) / (gold.max(axis=1) - start)
    assert np.median(gain_at_half) > 0.9            # paper world: about 0.6-0.8 at half the run
    true_declines = np.diff(gold, axis=1) < 0         # training stochasticity, before any eval noise
    assert true_declines.any(axis=1).mean() > 0.5
    paper = generate(WorkloadConfig(jobs=400, seed=6))
    # the paper world's gold has no drift: a run that is not labelled declines only where it over-optimises
    # while its noisy proxy's rise stays within that proxy's noise (3 of the 201 unlabelled runs here)
    assert (np.diff(paper.curves.gold[~paper.hacking], axis=1) < 0).any(axis=1).mean() < 0.02


def test_eval_noise_is_the_sampling_error_of_the_jobs_eval_set():
    w = generate(REALISTIC.replace(jobs=50, seed=7, noise=0.01))
    j = 3
    p = np.clip(w.curves.gold[j], 0, 1)
    by_hand = np.sqrt(0.01 ** 2 + w.eval_factor[j] ** 2 * p * (1 - p) / w.eval_items[j])
    assert np.allclose(w.eval_sd[j], by_hand)
    assert np.allclose(w.observed[j], w.curves.gold[j] + by_hand * w.curves.eval_z[j])
    small, large = w.eval_items == 30, w.eval_items == 14042
    assert small.any() and large.any() and w.eval_sd[small].mean() > 5 * w.eval_sd[large].mean()


def toy_costly(restart_h=0.1):
    """One 1-GPU job of 1 h nominal work, 2 evals; the grid says its evals' scores come out at
    0.5 h and 1.0 h of service (speed and eval time included); a resume costs ``restart_h``."""
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=1.0)], total_gpus=1, evals_per_job=2)
    return dataclasses.replace(w, ckpt_service_h=np.array([[0.5, 1.0]]), restart_h=np.array([restart_h]))


def test_a_resume_costs_its_restart_time_on_the_jobs_gpus():
    # start at 0, preempt at 0.25 h, resume at 0.5 h: the restart (0.1 h) runs first, so the first
    # eval comes at service 0.5 + 0.1 = 0.6 h, i.e. t = 0.5 + (0.6 - 0.25) = 0.85 h; completion at
    # service 1.1 h, t = 1.35 h
    sim = Simulator(toy_costly())
    assert sim.advance() == SCHEDULE
    sim.start(0)
    sim.request_wakeup(0.25)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 0.25
    sim.preempt(0)
    sim.request_wakeup(0.5)
    assert sim.advance() == SCHEDULE and sim.cluster.now_h == 0.5
    sim.start(0)
    assert sim.advance() == EVAL and sim.cluster.now_h == pytest.approx(0.85, abs=1e-9)
    assert list(sim.views[0].eval_attained_h) == [pytest.approx(0.6, abs=1e-9)]
    sim.advance()
    out = sim.outcome()
    assert out.finish_h[0] == pytest.approx(1.35, abs=1e-9) and out.service_h[0] == pytest.approx(1.1, abs=1e-9)


def play(w, script):
    """Drive ``w`` by hand: at each ``(time h, [(action, job), ...])`` of ``script`` do the actions, in order;
    after the last, start any waiting job that fits (in job order) at each scheduling point. Return the
    finished simulator."""
    sim, todo = Simulator(w), list(script)
    kind = sim.advance()
    while kind != DONE:
        if kind == SCHEDULE:
            now = sim.cluster.now_h
            if todo and todo[0][0] == now:
                for act, j in todo.pop(0)[1]:
                    getattr(sim, act)(j)
            if todo:
                sim.request_wakeup(todo[0][0])
            else:
                for j in sorted(sim.cluster.waiting):
                    if sim.views[j].gpus <= sim.cluster.free_gpus:
                        sim.start(j)
        kind = sim.advance()
    return sim


def test_a_resume_cut_short_is_charged_only_the_part_it_ran():
    # Two 1-GPU jobs of 1 h (evals at 0.5 h and 1 h of training) on 1 GPU, resumes of 0.25 h:
    # 0      A starts.                         0.25   A is preempted (trained 0.25 h), B starts.
    # 0.5    B is preempted (trained 0.25 h); A resumes (its resume would end at 0.75).
    # 0.625  A is preempted 0.125 h into its resume: charged 0.125 h, it has still trained 0.25 h; B resumes.
    # 0.875  B's resume is over; its evals at 0.875 + 0.25 = 1.125 and 1.625 (completion).
    # 1.625  A resumes: 1.875 its resume is over, 0.75 h left to train: completion at 2.625 (service 1.375 h:
    #        1 h of training, 0.125 + 0.25 h of resumes; B's 1.25 h: 1 h of training, 0.25 h of resume).
    # Charged the whole 0.25 h at the cut, A would have 0.125 h of training left from it and end at 2.75.
    jobs = [dict(submit_h=0.0, gpus=1, length_h=1.0), dict(submit_h=0.0, gpus=1, length_h=1.0)]
    w = dataclasses.replace(workload_from_jobs(jobs, total_gpus=1, evals_per_job=2), restart_h=np.full(2, 0.25))
    sim = play(w, [(0.0, [("start", 0)]), (0.25, [("preempt", 0), ("start", 1)]),
                   (0.5, [("preempt", 1), ("start", 0)]), (0.625, [("preempt", 0), ("start", 1)])])
    out = sim.outcome()
    assert out.finish_h.tolist() == [2.625, 1.625]
    assert out.service_h.tolist() == [1.375, 1.25] and out.preemptions == 3
    assert [sim.views[j].restore_ticks / TICKS_PER_HOUR for j in range(2)] == [0.375, 0.25]


def test_on_a_slower_gpu_a_cut_resume_is_charged_the_work_it_did():
    # One 1-GPU job of 1 h of work (evals at 0.5 and 1 h) on a GPU running it at half speed; a resume costs
    # 0.25 h of work, 0.5 h on this GPU:
    # 0     starts.                     0.5   preempted (0.25 h of work done).
    # 1.0   resumes (until 1.5).        1.25  preempted halfway: charged 0.125 h of work, 0.25 h trained.
    # 1.5   resumes: 2.0 its resume is over; 0.25 h of work to the first eval: 2.5; 0.5 more: 3.5.
    # Charged the whole resume at the cut it would have trained 0.125 h: first eval 2.75, completion 3.75.
    slow = ClusterSpec(nodes=1, gpus_per_node=1, node_types=("old",), throughput=(("old", (("rlhf", 0.5),)),))
    w = workload_from_jobs([dict(submit_h=0.0, gpus=1, length_h=1.0)], total_gpus=1, evals_per_job=2, cluster=slow)
    w = dataclasses.replace(w, restart_h=np.array([0.25]))
    sim = play(w, [(0.0, [("start", 0)]), (0.5, [("preempt", 0)]), (1.0, [("start", 0)]), (1.25, [("preempt", 0)]),
                   (1.5, [("start", 0)])])
    out = sim.outcome()
    assert out.finish_h.tolist() == [3.5]
    assert out.service_h.tolist() == [2.75]   # 1 h of work at half speed, and 0.25 + 0.5 h resuming
    assert sim.views[0].restore_ticks / TICKS_PER_HOUR == 0.75


def test_checkpoints_follow_the_jittered_grid_without_preemption():
    w = dataclasses.replace(toy_costly(), ckpt_service_h=np.array([[0.3, 1.2]]), length_h=np.array([1.2]))
    out = drive(Simulator(w), make_policy("fifo"))
    assert out.finish_h[0] == pytest.approx(1.2, abs=1e-9)


def test_realistic_costs_are_charged_in_gpu_hours_and_jct():
    cfg = REALISTIC.replace(seed=2)
    free = cfg.replace(world=dataclasses.replace(cfg.world, eval_fixed_min=(0.0, 0.0), eval_item_gpu_s=0.0,
                                                  warmup_s=(0.0, 0.0), checkpoint_gb=(0.0, 0.0, 0.0)))
    costly, cheap = generate(cfg), generate(free)
    assert (costly.length_h > cheap.length_h).all()              # evals take time on every job
    assert np.array_equal(costly.curves.gold, cheap.curves.gold)  # same world otherwise
    m_costly = run_policy(costly, make_policy("srtf-est"))
    m_cheap = run_policy(cheap, make_policy("srtf-est"))
    assert m_costly["gpu_hours"] > m_cheap["gpu_hours"]


def test_true_length_is_not_recoverable_from_public_fields():
    """attained-at-last-eval x evals_total / evals_done is exact in the paper's world (to a tick)
    and off in the realistic world, where speed jitters and evals and resumes take time."""
    def relative_errors(cfg):
        w = generate(cfg)
        sim = Simulator(w)
        errors = []
        policy = make_policy("srtf-est")
        policy.reset()
        while True:
            kind = sim.advance()
            if kind == EVAL:
                v = sim.decision_job
                if v.evals_done < v.evals_total:
                    est = v.eval_attained_h[-1] * v.evals_total / v.evals_done
                    errors.append(abs(est - w.length_h[v.job_id]) / w.length_h[v.job_id])
            elif kind == SCHEDULE:
                from evalstop_gym.policy import apply_plan
                apply_plan(sim, policy.schedule(sim.cluster))
            else:
                return np.array(errors)

    paper = relative_errors(WorkloadConfig(jobs=100, seed=4))
    assert paper.max() < 1e-4   # tick rounding only (1 ms in a run of 0.1 h or more)
    real = relative_errors(REALISTIC.replace(jobs=100, seed=4))
    assert np.median(real) > 0.01 and (real < 1e-6).mean() < 0.01


def test_srtf_progress_sees_the_exact_remaining_time_only_in_the_paper_world():
    w = generate(WorkloadConfig(jobs=30, seed=1))
    sim = Simulator(w)
    policy = make_policy("srtf-progress")
    policy.reset()
    checked = 0
    while (kind := sim.advance()) != 0:
        if kind == EVAL:
            v = sim.decision_job
            # exact up to tick rounding: the checkpoint grid is length * i // evals ticks
            assert policy.key(v, sim.cluster) == pytest.approx(w.length_h[v.job_id] - v.attained_h, abs=1e-5)
            checked += 1
        else:
            from evalstop_gym.policy import apply_plan
            apply_plan(sim, policy.schedule(sim.cluster))
    assert checked > 50


def test_divergence_beats_evalstop_on_held_out_seeds():
    """Its defaults were chosen on validation seeds (docs/select_detectors.py); test seeds 0-9 report (docs/detectors.md).

    Measured in this label-first world: F1 0.899 against EvalStop k=2's 0.823, waste cut 64.1% against 57.4%
    (the defaults before the latest selection: F1 0.949 at 60.6%; the rule trades F1 for a waste cut at least
    EvalStop's in its own world, docs/detectors.md)."""
    f1 = {"evalstop": [], "divergence": []}
    cut = {"evalstop": [], "divergence": []}
    for seed in range(10):
        w = generate(REALISTIC.replace(seed=seed))
        base = run_policy(w, make_policy("srtf-est"))["compute_waste_gpu_h"]
        for name, params in (("evalstop", {"k": 2}), ("divergence", {})):
            m = run_policy(w, make_policy("srtf-est", name, **params))
            f1[name].append(m["f1"])
            cut[name].append(1 - m["compute_waste_gpu_h"] / base)
    assert np.mean(f1["divergence"]) >= np.mean(f1["evalstop"]) + 0.05
    assert np.mean(cut["divergence"]) >= np.mean(cut["evalstop"])


def test_world_defaults_are_off():
    assert WorldModel().mean_slowdown == 1.0 and WorldModel().mean_eval_gpu_h(8) == 0.0
    assert CurveModel().form == "paper" and math.isclose(
        CALIBRATIONS["realistic"].world.mean_slowdown, (1 + 0.085 * math.exp(
            (math.log(0.27 / 0.085) / 1.2815515655446004) ** 2 / 2)) * math.exp(0.06 ** 2 / 2))


def test_e1_pairs_the_jobs_an_arm_did_not_stop(tmp_path):
    from evalstop_gym.experiments import reproduce

    res = reproduce(["E1"], seeds=2, out=tmp_path, base=REALISTIC.replace(jobs=60), workers=1, progress=False,
                    plots=False, echo=lambda _: None, detectors=["divergence"])
    rows = {r["arm"]: r for r in res.rows["E1"]}
    # by hand for the same two seeds: mean JCT of the jobs EvalStop did not stop, without and with it
    gains, cuts = [], []
    for seed in (0, 1):
        w = generate(REALISTIC.replace(jobs=60, seed=seed))
        none = drive(Simulator(w), make_policy("srtf-est"))
        k2 = drive(Simulator(w), make_policy("srtf-est", "evalstop", k=2))
        kept = ~k2.stopped
        before = (none.finish_h - w.submit_h)[kept].mean()
        after = (k2.finish_h - w.submit_h)[kept].mean()
        gains.append(100 * (before - after) / before)
        cuts.append(100 * (1 - k2.service_h @ w.gpus / (none.service_h @ w.gpus)))
    assert rows["evalstop k=2"]["jct_gain_kept_pct"] == pytest.approx(np.mean(gains))
    assert rows["evalstop k=2"]["gpu_hours_cut_pct"] == pytest.approx(np.mean(cuts))
    assert rows["none"].get("jct_gain_kept_pct") is None
    assert "JCT gain, jobs not stopped" in (tmp_path / "E1.md").read_text()


def test_healthy_kl_growth_changes_only_the_proxy_of_healthy_rlhf_runs():
    cfg = REALISTIC.replace(jobs=300, seed=3)
    calm, drifting = generate(cfg), generate(cfg.replace(**{"curves.healthy_kl_growth": 1.0}))
    assert np.array_equal(calm.curves.gold, drifting.curves.gold) and np.array_equal(calm.hacking, drifting.hacking)
    assert np.array_equal(calm.eval_items, drifting.eval_items) and np.array_equal(calm.length_h, drifting.length_h)
    rlhf = calm.job_type == JOB_TYPES.index("rlhf")
    changed = ~np.all(calm.curves.proxy == drifting.curves.proxy, axis=1) & rlhf
    assert changed.sum() > 20 and not (changed & ~rlhf).any()
    # a healthy run's proxy levels off with its gold; with the knob it keeps rising to the end, as Gao's d does
    late = slice(5, 10)
    assert np.mean(np.diff(calm.curves.proxy[changed][:, late], axis=1)) < 0.02
    assert np.mean(np.diff(drifting.curves.proxy[changed][:, late], axis=1)) > 0.05


@pytest.mark.parametrize("calibration", ["realistic", "grounded"])
def test_a_world_s_curve_knobs_move_its_curves_and_nothing_of_its_jobs(calibration):
    # a binomial eval error takes as many of its stream's numbers as its p asks for: drawn from the stream of the
    # jobs' speeds and costs, a curve knob would change every job's true length, eval and restart cost (E10's
    # perturbed worlds and the no-exploit world would run other jobs than the world they perturb)
    cfg = WorkloadConfig(calibration=calibration, seed=3)
    base = generate(cfg)
    for knob in ({"dpo_exploitable": 0.2}, {"drift": 2 * cfg.curves.drift}, {"base": (0.3, 0.4)}):
        other = generate(dataclasses.replace(cfg, curves=dataclasses.replace(cfg.curves, **knob)))
        for field in ("submit_h", "gpus", "length_h", "restart_h", "eval_h", "ckpt_service_h", "eval_items"):
            assert np.array_equal(getattr(base, field), getattr(other, field)), (knob, field)
        assert not np.array_equal(base.curves.gold, other.curves.gold), knob
