"""A live platform on one machine: tiny TRL jobs as Ray Tune trials, with and without EvalStop, then replayed.

Eight tiny TRL jobs (GRPO and DPO on a 2-block GPT-2 built from a config, a learned proxy reward model, a
programmatic gold logged at every eval; :mod:`evalstop_gym.overopt.trl_backend`) are submitted at t=0 as
Ray Tune trials on a local Ray of 2 CPUs, one CPU per trial (2 concurrent slots). Half are configured to
over-optimise (few preference pairs, no KL, a high learning rate), half to stay healthy. Three arms:

- ``none``: every job runs to its end (these runs' logs are the full histories the replay reads);
- ``evalstop``: ``EvalStopScheduler(stopper="evalstop", k=2)``, which answers ``STOP`` and frees the slot;
- ``divergence``: the same scheduler with the ``divergence`` detector (reads the logged proxy too), its eval
  noise given as the largest sampling error of the 100-item eval set.

Each trial reports every eval after step 0 to Tune from a ``TrainerCallback`` and writes its
``trainer_state.json`` before each report, so a stopped trial leaves every eval it saw. The table gives
makespan, mean JCT (trial end minus submit), CPU-hours reserved (trial wall time x 1 CPU) and precision /
recall of the stops against the gold labels (:func:`evalstop_gym.curvelog.label_run` on the full runs).
Then every full run is replayed in the simulator (noise 0) under the same stopper, each job's checkpoints at
the times its evals reached the scheduler live (:func:`evalstop_gym.integrations.replay_runs`), and the
simulator's stop step must equal the live one for every job, for the pooled-noise detector too.

    HF_HUB_OFFLINE=1 python examples/live_platform.py --out /tmp/live_platform
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time

import numpy as np

STEPS, EVALS = 48, 6          # an eval every 8 steps; the simulator's checkpoints are exactly these steps
# dim 32: the policy width the measured tables were made at (18k parameters; the backend's default is 80)
COMMON = dict(steps=STEPS, evals=EVALS, sft_steps=100, rm_steps=60, gold_items=300, dim=32)
# (method, pairs, kl_coef / DPO beta, lr): few pairs, no KL and a high learning rate over-optimise
JOBS = (("grpo", 128, 0.0, 3e-3), ("grpo", 1024, 0.3, 1e-3), ("dpo", 128, 0.1, 3e-3), ("dpo", 1024, 0.5, 1e-3))
METRIC = "eval_score"
EVAL_ITEMS = 100   # TRLRunSettings.eval_items: the public eval set's size
# divergence with the eval's noise given as the largest sampling error on EVAL_ITEMS items, sqrt(0.25 / 100):
# estimated from the scores instead, it needs 20 second differences pooled over the jobs (a few short jobs'
# worth) before it judges any job, so on eight 6-eval jobs it would stop almost none
ARMS = {"none": None, "evalstop": ("evalstop", {"k": 2}), "divergence": ("divergence", {"sigma": 0.05})}


def job_settings(jobs: int = 8) -> list:
    """``jobs`` TRLRunSettings: the four kinds of :data:`JOBS` over seeds 0, 1, ..."""
    from evalstop_gym.overopt.trl_backend import TRLRunSettings

    return [TRLRunSettings(method=m, pairs=p, kl_coef=kl, lr=lr, rm_dim=16, seed=i // len(JOBS), **COMMON)
            for i, (m, p, kl, lr) in ((i, JOBS[i % len(JOBS)]) for i in range(jobs))]


def reporter(name: str, state_path: str):
    """A TrainerCallback that, at each logged eval after step 0, writes the Trainer state to
    ``state_path`` and reports the eval's curve-log row (exactly what the replay reads) to Ray Tune."""
    from ray import tune
    from transformers import TrainerCallback

    from evalstop_gym.curvelog import state_runs

    class TuneReport(TrainerCallback):
        reported = 0

        def on_log(self, args, state, control, logs=None, **kwargs):
            step = state.global_step
            if step == 0 or step == self.reported or not any(
                    r.get("step") == step and METRIC in r for r in state.log_history):
                return
            self.reported = step
            with open(state_path + ".tmp", "w") as f:
                json.dump({"log_history": state.log_history}, f)
            os.replace(state_path + ".tmp", state_path)
            run = state_runs({"log_history": state.log_history}, name)[name]
            at = int(np.flatnonzero(run.step == step)[-1])
            tune.report({METRIC: float(run.eval_score[at]), "train_loss": float(run.train_loss[at]),
                         "proxy_reward": float(run.proxy_reward[at]), "gold": float(run.extra["gold"][at]),
                         "step": step})

    return TuneReport()


def trainable(config):
    import torch

    from evalstop_gym.overopt.trl_backend import TRLRunSettings, run

    torch.set_num_threads(1)
    s = TRLRunSettings(**config["settings"])
    path = os.path.join(config["logs"], s.name + ".trainer_state.json")
    run(s, workdir=config["work"], callbacks=[reporter(s.name, path)])


def scheduler(stopper: str, params: dict):
    """The platform's scheduler: FIFO, and STOP (freeing the slot) when ``stopper`` stops a trial."""
    from evalstop_gym.integrations import EvalStopScheduler

    return EvalStopScheduler(METRIC, stopper, "max", eval_items=EVAL_ITEMS, loss_metric="train_loss",
                             proxy_metric="proxy_reward", max_t=STEPS, time_attr="step", **params)


def run_arm(arm: str, settings: list, out: str) -> dict:
    """Run every job as a Tune trial under ``arm``. Returns ``{"jobs": {run name: {"end_s", "wall_s",
    "stop_step", "last_step"}}, "order": [(run name, step, seconds), ...]}``: times in seconds from the submit
    of all trials at t=0, and every result in the order Tune handed it to the scheduler, with its time."""
    from ray import tune
    from ray.tune import Callback

    from evalstop_gym.overopt.trl_backend import TRLRunSettings

    logs = os.path.join(out, arm)
    os.makedirs(logs, exist_ok=True)
    times: dict[str, dict] = {}
    order: list = []   # (trial id, step, seconds since t0)
    t0 = time.time()

    class Clock(Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            times.setdefault(trial.trial_id, {})["start"] = time.time() - t0

        def _end(self, trial):
            times.setdefault(trial.trial_id, {})["end"] = time.time() - t0

        def on_trial_complete(self, iteration, trials, trial, **info):
            self._end(trial)

        def on_trial_error(self, iteration, trials, trial, **info):
            self._end(trial)

        def on_trial_result(self, iteration, trials, trial, result, **info):
            order.append((trial.trial_id, int(result["step"]), time.time() - t0))

    space = {"settings": tune.grid_search([dataclasses.asdict(s) for s in settings]),
             "logs": logs, "work": os.path.join(out, "work")}
    sched = scheduler(*ARMS[arm]) if ARMS[arm] else None
    tuner = tune.Tuner(tune.with_resources(trainable, {"cpu": 1}), param_space=space,
                       tune_config=tune.TuneConfig(scheduler=sched, max_concurrent_trials=2),
                       run_config=tune.RunConfig(storage_path=os.path.join(out, "ray"), name=arm, verbose=0,
                                                 callbacks=[Clock()]))
    results = tuner.fit()
    if results.errors:
        raise RuntimeError(f"arm {arm}: {results.errors}")
    jobs, names = {}, {}
    for r in results:
        name = TRLRunSettings(**r.config["settings"]).name
        names[r.metrics["trial_id"]] = name
        t = times[r.metrics["trial_id"]]
        last = int(r.metrics["step"])
        jobs[name] = {"end_s": t["end"], "wall_s": t["end"] - t["start"], "last_step": last,
                      "stop_step": last if last < STEPS else None}
    return {"jobs": jobs, "order": [(names[t], step, seconds) for t, step, seconds in order]}


def logged_runs(out: str, arm: str = "none") -> dict:
    """The runs an arm logged as ``{run name: LoggedRun}`` (arm ``none``: the full runs)."""
    from evalstop_gym.curvelog import read_trainer_state

    folder = os.path.join(out, arm)
    runs = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".trainer_state.json"):
            runs.update(read_trainer_state(os.path.join(folder, f), f[: -len(".trainer_state.json")]))
    return runs


def simulated_stops(runs: dict, stopper: str, order: list | None = None, **params) -> tuple[dict, list]:
    """Replay ``runs`` in the simulator (noise 0, one job per run on its own slot) under ``stopper``, its
    checkpoints at the live arrival times of ``order`` (``[(run name, step, seconds), ...]``; without it the
    simulator's own clock). Returns ``{run name: stop step or None}`` and the order in which the simulator
    asked about the evals, ``[(run name, step), ...]``."""
    from evalstop_gym.integrations import replay_runs

    arrivals = None
    if order is not None:
        arrivals = {}
        for name, _, seconds in order:
            arrivals.setdefault(name, []).append(seconds)
    return replay_runs(runs, stopper, arrivals, eval_items=EVAL_ITEMS, **params)


class _Trial:
    def __init__(self, trial_id):
        self.trial_id = trial_id


def scheduler_stops(runs: dict, stopper: str, params: dict, order: list | None = None) -> dict:
    """Each run's evals after step 0 handed to a fresh :func:`scheduler` (the call Tune makes per result),
    run by run or in ``order`` (``[(run name, step, ...), ...]``); ``{run name: step of its STOP or None}``."""
    from ray.tune.schedulers import TrialScheduler

    sched = scheduler(stopper, params)
    if order is None:
        order = [(name, int(step)) for name, run in runs.items() for step in run.step[1:]]
    stops = dict.fromkeys(runs)
    for name, step, *_ in order:
        run = runs[name]
        if stops[name] is not None:
            continue
        i = int(np.flatnonzero(run.step == step)[0])
        result = {METRIC: float(run.eval_score[i]), "train_loss": float(run.train_loss[i]),
                  "proxy_reward": float(run.proxy_reward[i]), "step": int(step)}
        if sched.on_trial_result(None, _Trial(name), result) == TrialScheduler.STOP:
            stops[name] = int(step)
    return stops


def table(arms: dict, labels: dict) -> list[dict]:
    rows = []
    for arm, out in arms.items():
        jobs = out["jobs"]
        stopped = {n for n, j in jobs.items() if j["stop_step"] is not None}
        hacking = {n for n, h in labels.items() if h}
        tp = len(stopped & hacking)
        rows.append({"arm": arm, "makespan_s": max(j["end_s"] for j in jobs.values()),
                     "mean_jct_s": float(np.mean([j["end_s"] for j in jobs.values()])),
                     "cpu_h": sum(j["wall_s"] for j in jobs.values()) / 3600, "stopped": len(stopped),
                     "precision": tp / len(stopped) if stopped else float("nan"),
                     "recall": tp / len(hacking) if hacking else float("nan")})
    return rows


def start_ray(ray, attempts: int = 3) -> None:
    """A local Ray of 2 CPUs. Ray waits a fixed 30 s for its raylet to register; on a loaded machine (load
    above 12 here) that can time out, so a start that timed out is shut down and tried again."""
    for attempt in range(attempts):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            return
        except Exception as e:   # Ray raises a bare Exception for this
            if "timed out during startup" not in str(e) or attempt == attempts - 1:
                raise
            ray.shutdown()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the runs' logs, Ray's results and table.json")
    parser.add_argument("--jobs", type=int, default=8)
    args = parser.parse_args(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    import ray

    from evalstop_gym.curvelog import label_run
    from evalstop_gym.overopt.trl_backend import sft_folder

    settings = job_settings(args.jobs)
    for s in settings:   # the SFT models, built once before the clock starts (every arm shares them)
        sft_folder(s, os.path.join(args.out, "work", "models"))
    start_ray(ray)
    try:
        arms = {arm: run_arm(arm, settings, args.out) for arm in ARMS}
    finally:
        ray.shutdown()
    runs = logged_runs(args.out)
    labels = {n: bool(label_run(r, evals=EVALS).hacking) for n, r in runs.items()}
    rows = table(arms, labels)
    replay = {}
    for arm, spec in ARMS.items():
        if spec is None:
            continue
        order = arms[arm]["order"]
        # the simulator's checkpoints at the live arrival times of this arm's evals: the live order
        sim, asked = simulated_stops(runs, spec[0], order, **spec[1])
        own, _ = simulated_stops(runs, spec[0], **spec[1])   # the simulator's own clock, for comparison
        live = {n: j["stop_step"] for n, j in arms[arm]["jobs"].items()}
        same = sorted(n for n in runs if live[n] == sim[n])
        # the evals each trial of this arm saw are the full run's evals up to its stop (deterministic runs)
        seen = logged_runs(args.out, arm)
        prefix = all(np.array_equal(seen[n].eval_score, runs[n].eval_score[:seen[n].step.size]) for n in runs)
        # the rule on the full runs' evals, in the order Tune handed them over live
        ordered = scheduler_stops(runs, spec[0], spec[1], order)
        # the simulator asked about the evals in the order Tune delivered them (a run's last eval is not judged)
        same_order = asked == [(n, step) for n, step, _ in order if step < STEPS]
        replay[arm] = {"live": live, "simulated": sim, "same": len(same) == len(runs), "agree": len(same),
                       "prefix": prefix, "live_order": ordered == live, "same_order": same_order,
                       "own_clock": own, "agree_own_clock": sum(live[n] == own[n] for n in runs)}
    print(f"{'arm':<11} {'makespan s':>10} {'mean JCT s':>10} {'CPU-h':>7} {'stopped':>7} {'precision':>9} "
          f"{'recall':>6}")
    for r in rows:
        print(f"{r['arm']:<11} {r['makespan_s']:>10.0f} {r['mean_jct_s']:>10.0f} {r['cpu_h']:>7.4f} "
              f"{r['stopped']:>7} {r['precision']:>9.2f} {r['recall']:>6.2f}")
    print(f"hacking (gold): {sum(labels.values())} of {len(labels)} jobs")
    for arm, rep in replay.items():
        print(f"replay {arm}: the simulator, its checkpoints at the live arrival times, stops {rep['agree']} of "
              f"{len(runs)} jobs at the live stop step (asked in the live order: {rep['same_order']}; on its own "
              f"clock {rep['agree_own_clock']} of {len(runs)}); live evals = the full runs' evals up to the stop: {rep['prefix']}; the same stops from the logs "
              f"in Tune's order of results: {rep['live_order']}; "
              f"live stops {sorted((n, s) for n, s in rep['live'].items() if s)}")
    result = {"table": rows, "labels": labels, "replay": replay, "arms": arms}
    with open(os.path.join(args.out, "table.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
