"""``bench --leaderboard-run OUT``: the leaderboard from nothing, in one resumable command.

Stages, each a ``bench`` of its own folder under ``OUT`` (docs/bench.md, *Regenerating the leaderboard*):

1. ``tuned/``: ``bench --tune``: every family tuned with the same budget (:data:`~.tune.FAMILY_BUDGET`) on validation seeds;
   ``tuned/results.json`` holds the tuning (reused as it is when it matches the suite, the code and
   the budget);
2. ``scored/``: ``bench --tuned tuned/results.json`` of every family's tuned pair and every built-in
   pair at its defaults (:func:`builtin_pairs`): one sweep, the reference arms played once;
3. ``learned/`` (``learned=True`` only): the shipped learned recipes (:data:`LEARNED_RECIPES`: stop-policies, schedulers)
   trained with the documented ``evalstop-gym train`` commands into ``learned/models/`` (a folder
   holding its ``model.zip`` is reused); the learned family :data:`LEARNED_FAMILY` tuned with
   :data:`~.tune.BUDGET` trials (:func:`~.tune.tune_learned`, each a training run, :func:`train_trial`); then
   the shipped models and the best trial's scored against the same tuning;
4. ``leaderboard.md`` (and ``leaderboard_out``) from the stages' results files.

Every run is kept in its stage's ``runs.jsonl`` / ``tune.jsonl`` (the experiment runner's records),
so an interrupted regeneration, started again, plays only what is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..config import UsageError
from ..files import write_atomic
from .policies import check_file_names
from .run import RESULTS_FILE, run_bench
from .suite import DEFAULT_SUITE, suite, suite_hash

TUNED, SCORED, LEARNED, BOARD = "tuned", "scored", "learned", "leaderboard.md"


@dataclass(frozen=True)
class Recipe:
    """A shipped learned recipe, trained as docs/learned.md trains it (``train --out runs/<name>``, run in the
    models folder, so a scheduler recipe's ``stop_model: runs/<stop-policy>`` would name the one trained there)."""

    name: str
    env: str
    algo: str
    hyperparams: str      # a file under evalstop_gym/agents/hyperparams/ (or an absolute path)


# The realistic world's recipes of docs/learned.md: its two stop-policies, then its two learned schedulers, each
# over one of them (``stop_model: runs/stop-realistic[-quality]``, the one trained just before in this folder). A
# scheduler trained on nodes of 8 GPUs plays the rows whose cluster it runs on (bench.arms.rows_of: nodes, not the
# flat pool, whose observations lack the node block); about 12 CPU seconds per 200-job episode here.
LEARNED_RECIPES: tuple[Recipe, ...] = (
    Recipe("stop-realistic", "EvalStop-StopControl-v0", "ppo", "ppo-realistic.yml"),
    Recipe("stop-realistic-quality", "EvalStop-StopControl-v0", "ppo", "ppo-realistic-quality.yml"),
    Recipe("scheduler-realistic", "EvalStop-Cluster-v0", "maskable-ppo", "maskable-ppo-realistic.yml"),
    Recipe("scheduler-realistic-quality", "EvalStop-Cluster-v0", "maskable-ppo", "maskable-ppo-realistic-quality.yml"),
)
# The learned family, tuned with tune.BUDGET trials (tune.tune_learned): ppo-realistic.yml with its
# time weight searched; the two recipes above are two points of it (w = 1 and w = 0.175).
LEARNED_FAMILY = LEARNED_RECIPES[0]


def builtin_pairs() -> list[str]:
    """Every registered scheduler alone, then with every registered stopper at its defaults."""
    from ..baselines import SCHEDULERS, STOPPERS

    return [s if t == "none" else f"{s}+{t}" for s in SCHEDULERS for t in STOPPERS]


def family_policies(tuning: dict[str, Any]) -> list[str]:
    """Each tuned family's pair as a ``--policy`` text (its scheduler and parameters from ``tuning``)."""
    from .policies import builtin

    return [builtin(f["scheduler"], f["stopper"], **f["params"]).text for f in tuning["families"].values()]


def _fresh_tuning(path: Path, suite_name: str, budget: int, per_scheduler: bool = False) -> bool:
    """Whether ``path`` is a finished tuning of this suite, code, budget and kind (stage 1 need not run again)."""
    from . import results as res
    from .. import __version__
    from .fingerprint import fingerprint

    if not path.is_file():
        return False
    try:
        data = res.load(path, suite_name=suite_name)
    except UsageError:
        return False
    t = data.get("tuning") or {}
    return (data["suite_hash"], data["code"], data["version"], t.get("trials"), bool(t.get("per_scheduler"))) == (
        suite_hash(suite_name), fingerprint(), __version__, budget, per_scheduler)


def train_recipe(recipe: Recipe, models: Path, echo: Callable[[str], None], name: str | None = None,
                 hyperparams: Path | None = None) -> Path:
    """Train ``recipe`` into ``models/runs/<name>`` (default its name) with the documented command, run in
    ``models`` (so a scheduler's ``stop_model: runs/<stop-policy>`` is the model trained here), from the
    recipe's hyperparameter file or ``hyperparams``; a finished folder is reused."""
    name = name or recipe.name
    folder = models / "runs" / name
    if (folder / "model.zip").is_file() and (folder / "config.json").is_file():
        return folder
    hp = hyperparams or Path(__file__).resolve().parents[1] / "agents" / "hyperparams" / recipe.hyperparams
    cmd = [sys.executable, "-m", "evalstop_gym.cli", "train", "--env", recipe.env, "--algo", recipe.algo,
           "--hyperparams", str(hp.resolve()), "--out", f"runs/{name}"]   # resolved: the command runs in models
    if folder.exists():   # an interrupted training: start it again
        cmd.append("--force")
    echo(f"leaderboard-run: training {name} (evalstop-gym train --env {recipe.env} --algo {recipe.algo} "
         f"--hyperparams {hp.name if hyperparams else recipe.hyperparams} --out runs/{name}, in {models})")
    models.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(cmd, cwd=models, env=env)
    if done.returncode != 0 or not (folder / "model.zip").is_file():
        raise UsageError(f"training {name} failed (exit {done.returncode}); run the same command again "
                         "to retry it (finished models and runs are kept)")
    return folder


def train_trial(recipe: Recipe, params: dict[str, float], models: Path, echo: Callable[[str], None]) -> Path:
    """One trial of the learned family: ``recipe`` trained with its reward's time terms (``jct_h``,
    ``queue_h``) at ``-params["time_weight"]`` each (:data:`~.tune.LEARNED_SPACE`), into
    ``models/runs/<recipe>-w<weight>`` from a copy of its hyperparameter file that changes only that."""
    import yaml

    w = params["time_weight"]
    name = f"{recipe.name}-w{w:g}"
    shipped = Path(__file__).resolve().parents[1] / "agents" / "hyperparams" / recipe.hyperparams
    hp = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    env_kwargs = hp[recipe.env].setdefault("env_kwargs", {})
    env_kwargs["reward_weights"] = {**env_kwargs.get("reward_weights", {}), "jct_h": -w, "queue_h": -w}
    path = models / "tuning" / f"{name}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(hp, sort_keys=False)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return train_recipe(recipe, models, echo, name=name, hyperparams=path)


def regenerate(out: str | os.PathLike, *, suite_name: str = DEFAULT_SUITE, budget: int | None = None,
               learned: bool = False, backend: str = "local", workers: int = 1, ray_address: str | None = None,
               progress: bool = True, leaderboard_out: str | os.PathLike | None = None, command: str = "",
               echo: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
               per_scheduler: bool = False) -> str:
    """Run every stage (module docstring) in ``out``; return the leaderboard's Markdown. ``per_scheduler``: the
    tuning stage tunes each scheduler and stopper pair on its own (:func:`~.tune.tune_families`)."""
    from . import results as res
    from .tune import BUDGET, FAMILY_BUDGET

    learned_budget = BUDGET if budget is None else budget   # each trial a training run
    budget = FAMILY_BUDGET if budget is None else budget
    suite(suite_name)   # a bad name fails before anything runs
    if leaderboard_out is not None and not Path(leaderboard_out).resolve().parent.is_dir():
        raise UsageError(f"--leaderboard-out {leaderboard_out}: its folder does not exist")
    if leaderboard_out is not None and Path(leaderboard_out).is_dir():
        raise UsageError(f"--leaderboard-out {leaderboard_out}: is a folder; name the page's file")
    root = Path(out)
    kw = dict(suite_name=suite_name, backend=backend, workers=workers, ray_address=ray_address,
              progress=progress, echo=lambda _t: None)
    stages = 3 + learned
    tuned = root / TUNED / RESULTS_FILE
    if _fresh_tuning(tuned, suite_name, budget, per_scheduler):
        echo(f"leaderboard-run: [1/{stages}] tuning: reusing {tuned}")
    else:
        echo(f"leaderboard-run: [1/{stages}] tuning every family ({budget} trials each) on validation seeds")
        run_bench(["srtf-est+evalstop:k=2"], out=root / TUNED, tune=True, budget=budget, per_scheduler=per_scheduler,
                  command=f"{command} (stage 1: bench --tune --budget {budget}"
                          f"{' --per-scheduler' if per_scheduler else ''} --out {root / TUNED})", **kw)
    tuning = res.load(tuned, suite_name=suite_name)["tuning"]
    check_file_names(tuning, tuned, allowed=frozenset())   # a reused file names registered policies only
    policies = _distinct(family_policies(tuning) + builtin_pairs())
    echo(f"leaderboard-run: [2/{stages}] scoring {len(policies)} policies (every tuned family, every built-in "
         "pair at its defaults) on the test seeds")
    run_bench(policies, out=root / SCORED, tuned=tuned,
              command=f"{command} (stage 2: bench --tuned {tuned} with every tuned family and built-in pair)", **kw)
    files = [root / SCORED / RESULTS_FILE]
    if learned:
        from ..experiments.runner import ResultStore
        from .tune import tune_learned

        models_dir = root / LEARNED / "models"
        echo(f"leaderboard-run: [3/{stages}] the learned recipes: {', '.join(r.name for r in LEARNED_RECIPES)}; "
             f"the learned family {LEARNED_FAMILY.name} tuned ({learned_budget} trials, each a training run)")
        models = [str(train_recipe(r, models_dir, echo)) for r in LEARNED_RECIPES]
        played = [r for r in suite(suite_name) if r.missing() is None]
        learned_tuning = tune_learned(played, ResultStore(root / LEARNED / "tune.jsonl"),
                                      lambda p: train_trial(LEARNED_FAMILY, p, models_dir, echo),
                                      budget=learned_budget,
                                      backend=backend, workers=workers, ray_address=ray_address, progress=progress)
        learned_tuning["family"] = LEARNED_FAMILY.name
        models.append(learned_tuning["best"]["model"])
        run_bench(_distinct(models), out=root / LEARNED, tuned=tuned, learned_tuning=learned_tuning,
                  command=f"{command} (stage 3: the learned recipes and the tuned learned family, bench --tuned "
                          f"{tuned})", **kw)
        files.append(root / LEARNED / RESULTS_FILE)
    echo(f"leaderboard-run: [{stages}/{stages}] the leaderboard")
    text = res.leaderboard(files, command=command)
    write_atomic(root / BOARD, text, field="leaderboard-out")   # all or nothing: a full disk keeps the old page
    echo(f"leaderboard-run: wrote {root / BOARD}")
    if leaderboard_out is not None:
        text = publish(files, Path(leaderboard_out))
        echo(f"leaderboard-run: wrote {leaderboard_out} and its results files in {Path(leaderboard_out).with_suffix('')}")
    return text


def publish(files: Sequence[Path], page: Path) -> str:
    """Copy the stages' results files beside ``page`` (``docs/leaderboard.md``: into ``docs/leaderboard/``) and
    write the page from the copies, so ``bench --leaderboard docs/leaderboard/*.json --leaderboard-out
    docs/leaderboard.md`` renders it again byte for byte, and anyone can add a row with ``--leaderboard``."""
    import shutil

    from . import results as res

    folder = page.with_suffix("")
    folder.mkdir(exist_ok=True)
    copies = []
    for i, f in enumerate(files, 1):   # numbered: a glob lists them in the stages' order, which the page keeps
        copy = folder / f"{i}-{f.parent.name}.json"
        shutil.copyfile(f, copy)
        copies.append(os.path.relpath(copy))
    text = res.leaderboard(copies)
    write_atomic(page, text, field="leaderboard-out")
    return text


def _distinct(texts: Sequence[str]) -> list[str]:
    """``texts`` less those naming a policy an earlier one names (a tuned family left at its defaults)."""
    from .policies import parse_policy

    labels: set[str] = set()
    out = []
    for t in texts:
        label = parse_policy(t).label
        if label not in labels:
            labels.add(label)
            out.append(t)
    return out

