"""Leak audit: how well does a job's public data before its peak predict its hidden hacking label?

For every job of a synthetic world (workloads of one calibration over a range of seeds) or every run
of a curve log, and within each job type, :func:`audit` measures at evals 1, 2 and 3:

* each public feature's rank AUC for the hidden label (the Mann-Whitney statistic, ties counted
  half), oriented so that 0.5 is no information and 1.0 a perfect split whichever way the feature
  points: ``max(AUC, 1 - AUC)``;
* a small classifier's cross-validated AUC over all of that eval's features together (the history
  up to it): a standardised logistic regression and a shallow gradient-boosted tree ensemble
  (scikit-learn, the ``audit`` extra), 5-fold stratified, the better of the two reported.

The public features are what a policy's view holds about a job by its ``i``-th eval
(:mod:`evalstop_gym.view`): the observed eval scores 1..i and their changes, the proxy reward and
the training loss at those evals and their changes, the eval-set size, the user's length estimate,
the GPU demand, the tenant and the submit time. Real runs hand their labels down the same way
(:func:`evalstop_gym.curvelog.label_gold`), so a world can be compared with a library.

Leak or detection. A run whose gold curve has already peaked and fallen by eval ``i`` may be read at eval
``i`` because its decline is visible: that is detection, what a stopper is for, not a leak. So each row also
gives the same AUCs over the *pre-peak* runs only: those whose true peak checkpoint is at eval ``i`` or later
(no eval after the peak is visible yet; the peak is the first maximum of the true score over the start and
the ``E`` checkpoints, index 0 for the start). A label read from pre-peak runs is read from the run's
set-up and its rise, before any decline: that is the leak figure. Rows whose pre-peak runs have fewer than
:data:`MIN_CLASS` runs of either label show it as NaN.

Configuration. A platform also sees each job's configuration at submission (KL coefficient, learning rate,
preference pairs, model size: :class:`evalstop_gym.view.JobConfig`, in the views with ``config_visible``).
Every row therefore also gives what that configuration tells about the label: read alone (the best single
field, or the classifier over the fields) and beside the curve features (the classifier over both). A
world's configuration is its latent draws (KL coefficient, learning rate); a curve log's comes from the
manifest beside it (``tools/trl_library.py`` ships one). Without one these figures are NaN.

Seeds: the default range 700-739 is one the package never tunes or reports on
(:data:`AUDIT_SEEDS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import JOB_TYPES, ConfigError, WorkloadConfig, check_range

AUDIT_SEEDS = range(700, 740)   # never used to tune anything in the package
AUDIT_EVALS = (1, 2, 3)
MIN_CLASS = 10                  # fewer runs of either label in a job type: no AUC for it


def rank_auc(values: np.ndarray, labels: np.ndarray) -> float:
    """P(a positive's value > a negative's), ties counted half (the Mann-Whitney U over n+ n-).

    NaN values are left out. Returns NaN if either class is empty.
    """
    v, y = np.asarray(values, float), np.asarray(labels, bool)
    ok = np.isfinite(v)
    v, y = v[ok], y[ok]
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(v, kind="mergesort")
    ranks = np.empty(v.size)
    sv = v[order]
    # average ranks of ties (1-based)
    start = 0
    while start < sv.size:
        stop = start + 1
        while stop < sv.size and sv[stop] == sv[start]:
            stop += 1
        ranks[order[start:stop]] = (start + stop + 1) / 2.0
        start = stop
    u = ranks[y].sum() - pos * (pos + 1) / 2.0
    return float(u / (pos * neg))


def oriented(auc: float) -> float:
    """``max(AUC, 1 - AUC)``: how well a feature splits the labels whichever way it points."""
    return float(max(auc, 1.0 - auc)) if np.isfinite(auc) else float("nan")


@dataclass(frozen=True)
class Runs:
    """Public data and hidden labels of ``n`` runs of one job type, on a grid of ``E`` evals."""

    observed: np.ndarray     # (n, E) observed eval scores
    proxy: np.ndarray        # (n, E) proxy reward (NaN where not logged)
    loss: np.ndarray         # (n, E) training loss (NaN where not logged)
    static: dict[str, np.ndarray]   # per-run public scalars (eval_items, estimate, gpus, ...)
    hacking: np.ndarray      # (n,) hidden label
    peak: np.ndarray | None = None   # (n,) hidden: checkpoint of the true peak (0 = the start), for pre-peak rows
    # (n,) per field: each run's public configuration (KL coefficient, learning rate, data and model size;
    # NaN where unknown), what a platform sees at submission (evalstop_gym.view.JobConfig); None: not known
    config: dict[str, np.ndarray] | None = None

    def pre_peak(self, i: int) -> "Runs":
        """The runs whose true peak is at checkpoint ``i`` or later (none of their evals 1..i follows the peak)."""
        keep = self.peak >= i
        return Runs(self.observed[keep], self.proxy[keep], self.loss[keep],
                    {k: v[keep] for k, v in self.static.items()}, self.hacking[keep], self.peak[keep],
                    None if self.config is None else {k: v[keep] for k, v in self.config.items()})


def config_features(runs: Runs) -> dict[str, np.ndarray]:
    """The configuration fields that vary between the runs (``config:<field>``); empty without a configuration."""
    return {f"config:{k}": v for k, v in (runs.config or {}).items() if np.unique(v[np.isfinite(v)]).size > 1}


def features(runs: Runs, i: int) -> dict[str, np.ndarray]:
    """The public features of every run at its ``i``-th eval (1-based): that eval's values, their changes
    since the previous eval, and the history's earlier values (so the classifier sees all of it)."""
    out: dict[str, np.ndarray] = {}
    for name, arr in (("score", runs.observed), ("proxy", runs.proxy), ("loss", runs.loss)):
        if not np.any(np.isfinite(arr[:, :i])):
            continue
        for j in range(1, i + 1):
            out[f"{name}@{j}"] = arr[:, j - 1]
            if j > 1:
                out[f"d{name}@{j}"] = arr[:, j - 1] - arr[:, j - 2]
    for name, v in runs.static.items():
        if np.unique(v[np.isfinite(v)]).size > 1:
            out[name] = v
    return out


def classifier_auc(x: np.ndarray, y: np.ndarray, seed: int = 0) -> float:
    """Best cross-validated AUC (5-fold, stratified) of a logistic regression and a small boosted-tree model."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x = np.where(np.isfinite(x), x, 0.0)
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    models = (make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)),
              HistGradientBoostingClassifier(max_iter=100, max_depth=3, learning_rate=0.1, random_state=seed))
    best = 0.5
    for m in models:
        p = cross_val_predict(m, x, y, cv=folds, method="predict_proba")[:, 1]
        best = max(best, oriented(rank_auc(p, y)))
    return best


@dataclass(frozen=True)
class AuditRow:
    job_type: str
    eval: int
    runs: int
    hacking: int
    best_feature: str
    best_feature_auc: float
    classifier_auc: float
    feature_aucs: dict[str, float]
    pre_peak_runs: int = 0               # runs not yet past their peak at this eval (module docstring)
    pre_peak_hacking: int = 0
    pre_peak_feature_auc: float = float("nan")      # best single feature over the pre-peak runs
    pre_peak_classifier_auc: float = float("nan")
    # the configuration (module docstring): read alone, and beside the curve features; NaN: no configuration
    config_auc: float = float("nan")
    with_config_auc: float = float("nan")
    pre_peak_config_auc: float = float("nan")
    pre_peak_with_config_auc: float = float("nan")

    @property
    def best_auc(self) -> float:
        return max(self.best_feature_auc, self.classifier_auc)

    @property
    def pre_peak_auc(self) -> float:
        """The leak figure: the best AUC over runs that have not peaked by this eval (NaN: too few of them)."""
        found = [a for a in (self.pre_peak_feature_auc, self.pre_peak_classifier_auc) if np.isfinite(a)]
        return max(found) if found else float("nan")


def _both_labels(y: np.ndarray) -> bool:
    return y.sum() >= MIN_CLASS and (~y).sum() >= MIN_CLASS


def _aucs(runs: Runs, i: int, classifier: bool) -> tuple[dict[str, float], str, float]:
    """Every feature's oriented AUC at eval ``i``, the best feature, and the classifier's AUC (NaN if off)."""
    y = runs.hacking.astype(bool)
    feats = features(runs, i)
    aucs = {k: oriented(rank_auc(v, y)) for k, v in feats.items()}
    best = max(aucs, key=lambda k: (aucs[k], k))
    clf = classifier_auc(np.column_stack(list(feats.values())), y) if classifier else float("nan")
    return aucs, best, clf


def _config_aucs(runs: Runs, i: int, classifier: bool, curve_best: float) -> tuple[float, float]:
    """``(configuration alone, configuration beside the curve features)`` at eval ``i``: the best single
    configuration field or classifier over them; then that, ``curve_best`` (the curve features' best) or a
    classifier over both. NaN without a varying configuration."""
    conf = config_features(runs)
    if not conf:
        return float("nan"), float("nan")
    y = runs.hacking.astype(bool)
    alone = max(oriented(rank_auc(v, y)) for v in conf.values())
    if classifier:
        alone = max(alone, classifier_auc(np.column_stack(list(conf.values())), y))
    both = max(alone, curve_best)
    if classifier:
        both = max(both, classifier_auc(np.column_stack([*features(runs, i).values(), *conf.values()]), y))
    return alone, both


def audit_runs(runs: Runs, job_type: str, evals=AUDIT_EVALS, classifier: bool = True,
               config: bool = False) -> list[AuditRow]:
    """Audit rows of one job type's runs (empty if either label has fewer than :data:`MIN_CLASS` runs); with
    ``runs.peak`` known, each row also audits the pre-peak runs alone; with ``config``, what the runs'
    configuration tells (module docstring; its classifiers triple the run time)."""
    y = runs.hacking.astype(bool)
    if not _both_labels(y):
        return []
    rows = []
    for i in evals:
        if i > runs.observed.shape[1]:
            break
        aucs, best, clf = _aucs(runs, i, classifier)
        pre = dict(zip(("config_auc", "with_config_auc"),
                       _config_aucs(runs, i, classifier, np.nanmax([aucs[best], clf])))) if config else {}
        if runs.peak is not None:
            early = runs.pre_peak(i)
            ey = early.hacking.astype(bool)
            pre.update(pre_peak_runs=int(ey.size), pre_peak_hacking=int(ey.sum()))
            if _both_labels(ey):
                e_aucs, e_best, e_clf = _aucs(early, i, classifier)
                pre.update(pre_peak_feature_auc=e_aucs[e_best], pre_peak_classifier_auc=e_clf)
                if config:
                    pre.update(zip(("pre_peak_config_auc", "pre_peak_with_config_auc"),
                                   _config_aucs(early, i, classifier, np.nanmax([e_aucs[e_best], e_clf]))))
        rows.append(AuditRow(job_type, i, int(y.size), int(y.sum()), best, aucs[best], clf, aucs, **pre))
    return rows


def world_runs(cfg: WorkloadConfig, seeds=AUDIT_SEEDS) -> dict[str, Runs]:
    """Every job of ``cfg``'s workloads over ``seeds``, grouped by job type (public arrays + labels)."""
    from .workload import generate

    parts: dict[str, list] = {t: [] for t in JOB_TYPES}
    for s in seeds:
        w = generate(cfg.replace(seed=int(s)))
        static = {"eval_items": w.items.astype(float), "estimate_h": w.est_length_h, "gpus": w.gpus.astype(float),
                  "tenant": w.tenant.astype(float), "submit_h": w.submit_h}
        for k, t in enumerate(JOB_TYPES):
            idx = np.flatnonzero(w.job_type == k)
            if idx.size:
                # the views show a proxy for RLHF jobs only (a DPO job's implicit reward margin is hidden)
                proxy = w.curves.proxy[idx] if t == "rlhf" else np.full(w.observed[idx].shape, np.nan)
                setup = w.curves.setup
                parts[t].append((w.observed[idx], proxy, w.curves.loss[idx],
                                 {n: v[idx] for n, v in static.items()}, w.hacking[idx],
                                 peak_checkpoint(w.curves.start[idx], w.curves.gold[idx]),
                                 None if setup is None else {n: v[idx] for n, v in setup.items()}))
    out = {}
    for t, ps in parts.items():
        if ps:
            out[t] = Runs(np.concatenate([p[0] for p in ps]), np.concatenate([p[1] for p in ps]),
                          np.concatenate([p[2] for p in ps]),
                          {n: np.concatenate([p[3][n] for p in ps]) for n in ps[0][3]},
                          np.concatenate([p[4] for p in ps]), np.concatenate([p[5] for p in ps]),
                          None if ps[0][6] is None else {n: np.concatenate([p[6][n] for p in ps]) for n in ps[0][6]})
    return out


def peak_checkpoint(start: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Checkpoint of each run's true peak: the first maximum of ``[start, gold_1 .. gold_E]`` (0 = the start)."""
    return np.argmax(np.column_stack([start, gold]), axis=1)


def log_runs(path: str, evals: int = 10) -> dict[str, Runs]:
    """Every run of a curve log that logs ``gold``, on ``evals`` checkpoints, labelled by the gold rule,
    grouped by the job type its name starts with (``dpo-...``; ``rlhf`` for any other name); each run's
    configuration comes from the log's manifest, if one lies beside it (:func:`manifest_settings`)."""
    from .curvelog import read_curve_log

    return logged_runs(read_curve_log(path), evals, path, settings=manifest_settings(path))


def manifest_settings(path: str) -> dict[str, dict] | None:
    """``{run name: settings}`` from the manifest a curve-log generator writes beside its log (``NAME.json``
    beside ``NAME.csv.gz``, ``NAME.csv`` or ``NAME.jsonl``, as ``tools/trl_library.py`` ships it); None if none."""
    import json
    import os

    stem = str(path)
    for ext in (".csv.gz", ".jsonl.gz", ".csv", ".jsonl"):
        if stem.endswith(ext):
            stem = stem[: -len(ext)]
            break
    meta = stem + ".json"
    if meta == str(path) or not os.path.isfile(meta):
        return None
    with open(meta, encoding="utf-8") as f:
        got = json.load(f)
    settings = got.get("settings") if isinstance(got, dict) else None
    if not isinstance(settings, list):
        return None
    return {s["name"]: s for s in settings if isinstance(s, dict) and "name" in s}


def _number(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def run_config(setting: dict | None) -> dict[str, float]:
    """A logged run's public configuration (:class:`evalstop_gym.view.JobConfig` fields) from its manifest
    entry: ``kl_coef``, ``lr``, ``pairs`` and the policy's parameter count; NaN for what it lacks."""
    s = setting or {}
    params = s.get("parameters")
    return {"kl_coef": _number(s.get("kl_coef")), "learning_rate": _number(s.get("lr")),
            "data_size": _number(s.get("pairs")),
            "model_size": _number(params.get("policy")) if isinstance(params, dict) else float("nan")}


def logged_runs(logs: dict, evals: int = 10, source: str = "curves",
                settings: dict[str, dict] | None = None) -> dict[str, Runs]:
    """:func:`log_runs` of runs already read (``{name: LoggedRun}``, e.g. :func:`evalstop_gym.data.trl_library`);
    ``settings``: each run's manifest entry (``{name: dict}``), for its configuration."""
    from .curvelog import has_gold, label_gold, resample

    check_range("evals", evals, 3, 1000, integer=True)
    groups: dict[str, list] = {}
    for run in logs.values():
        if not has_gold(run):
            continue
        # non-numeric columns are not read (curvelog): the method comes from the run's name, as the
        # generators write it (``dpo-pairs32-...``, ``rlhf-...``); anything else counts as RLHF
        head = run.name.split("-", 1)[0].lower()
        t = head if head in JOB_TYPES else "rlhf"
        cols = []
        for c in ("eval_score", "proxy_reward", "train_loss"):
            r = resample(run, c, evals)
            cols.append(np.full(evals, np.nan) if r is None else r[1])
        items = run.extra.get("eval_items")
        n_items = float(np.nanmax(items)) if items is not None and np.any(np.isfinite(items)) else np.nan
        g0, g = resample(run, "gold", evals)
        groups.setdefault(t, []).append((cols, n_items, label_gold(run, evals).hacking,
                                         int(peak_checkpoint(np.array([g0]), g[None, :])[0]),
                                         run_config(None if settings is None else settings.get(run.name))))
    if not groups:
        raise ConfigError("curves", source, "must hold runs with a gold column (the hidden true score) to audit")
    return {t: Runs(np.array([g[0][0] for g in gs]), np.array([g[0][1] for g in gs]),
                    np.array([g[0][2] for g in gs]), {"eval_items": np.array([g[1] for g in gs])},
                    np.array([g[2] for g in gs]), np.array([g[3] for g in gs]),
                    None if settings is None else {k: np.array([g[4][k] for g in gs]) for k in gs[0][4]})
            for t, gs in groups.items()}


def audit(runs: dict[str, Runs], evals=AUDIT_EVALS, classifier: bool = True, config: bool = False) -> list[AuditRow]:
    """Audit rows of every job type that has enough runs of both labels (``config``: :func:`audit_runs`)."""
    return [r for t in JOB_TYPES if t in runs for r in audit_runs(runs[t], t, evals, classifier, config)]


def best_early_auc(rows: list[AuditRow]) -> float:
    """The largest AUC (any single feature or the classifier) over the rows, all runs; 0.5 if there are none."""
    return max((r.best_auc for r in rows), default=0.5)


def labelled(runs: dict[str, Runs]) -> dict[str, tuple[int, int]]:
    """``{job type: (runs labelled hacking, runs)}``, and ``"all"``: the share the label rule marks."""
    out = {t: (int(r.hacking.sum()), int(r.hacking.size)) for t, r in runs.items()}
    out["all"] = (sum(h for h, _ in out.values()), sum(n for _, n in out.values()))
    return out


def best_of(rows: list[AuditRow], field: str) -> float:
    """The largest finite value of an AuditRow field over the rows; NaN if none has one."""
    found = [getattr(r, field) for r in rows if np.isfinite(getattr(r, field))]
    return max(found) if found else float("nan")


def best_pre_peak_auc(rows: list[AuditRow]) -> float:
    """The leak figure: the largest pre-peak AUC over the rows; NaN if no row has enough pre-peak runs."""
    return best_of(rows, "pre_peak_auc")


def table(rows: list[AuditRow]) -> str:
    """A Markdown table of the rows: all runs, then the pre-peak runs alone (``n/a``: too few of a label)."""
    lines = ["| job type | eval | runs | hacking | best feature | its AUC | classifier AUC "
             "| pre-peak runs (hacking) | pre-peak AUC |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        pre = f"{r.pre_peak_auc:.3f}" if np.isfinite(r.pre_peak_auc) else "n/a"
        lines.append(f"| {r.job_type} | {r.eval} | {r.runs} | {r.hacking} | {r.best_feature} | "
                     f"{r.best_feature_auc:.3f} | {r.classifier_auc:.3f} | {r.pre_peak_runs} ({r.pre_peak_hacking}) "
                     f"| {pre} |")
    if not rows:
        lines.append("| (no job type has both labels) | | | | | | | | |")
    return "\n".join(lines)


def _fmt(v: float) -> str:
    return f"{v:.3f}" if np.isfinite(v) else "n/a"


def config_table(rows: list[AuditRow]) -> str:
    """A Markdown table of what each run's public configuration tells: alone, and beside the curve features,
    over all runs and the pre-peak runs (``n/a``: no varying configuration, or too few runs of a label)."""
    lines = ["| job type | eval | config alone | config + curves | pre-peak: config alone | pre-peak: config + curves |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.job_type} | {r.eval} | {_fmt(r.config_auc)} | {_fmt(r.with_config_auc)} | "
                     f"{_fmt(r.pre_peak_config_auc)} | {_fmt(r.pre_peak_with_config_auc)} |")
    return "\n".join(lines)
