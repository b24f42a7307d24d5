"""Where a fitted world's RLHF runs miss the library's: the fit report's shape statistics split by KL regime.

    PYTHONPATH=. python3 docs/regime_shapes.py [--world PATH] [--library PATH] [--runs 2000] [--seed 7919]

The fit report (`evalstop-gym calibrate`) compares the library's runs and the world's per job type. This script
splits each side's RLHF runs by the regime the per-run fit finds (`evalstop_gym.fit.kl_regimes`: a KL that a
penalty holds, "held", against one that grows until the policy's ceiling or the run's end, "free"), so the
same rule sorts the library's runs and the world's, reading only what a trainer logs. Per regime it prints,
for the library and for `--runs` RLHF runs sampled from the world (`evalstop_gym.fitreport.world_runs`, seed
`--seed`): the share of runs whose gold peaks by checkpoint 0, 1, 2 and 3, and the p10 / p50 / p90 of the peak
index, the drop after the peak, the lag-1 autocorrelation of gold steps and the per-run fit's gold lag
(`RunFit.lag`), each with its two-sample KS p-value. docs/calibration.md ("By KL regime") quotes its output.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np
from scipy.stats import ks_2samp

from evalstop_gym import fit, fitreport
from evalstop_gym.checks import ConfigError
from evalstop_gym.config import GROUNDED_WORLD, calibration_of, check_range
from evalstop_gym.data import TRL_LIBRARY_VARIED, trl_library
from evalstop_gym.files import load_yaml

STATISTICS = ("peak index", "drop after the peak", "lag-1 autocorr of gold steps", "gold lag")
EARLY = 4   # the peak shares printed: by checkpoint 0 .. EARLY - 1


def regimes(runs: dict) -> dict[str, list[dict]]:
    """The RLHF runs of ``runs`` that the per-run fit accepts, as ``{"held": [...], "free": [...]}`` of their
    :func:`evalstop_gym.fitreport.run_shape` statistics plus ``"gold lag"`` (the fit's lag)."""
    named = [(name, run) for name, run in runs.items() if fit.job_type_of(name) == "rlhf"]
    fitted = [(run, f) for (_, run), f in ((nr, fit.fit_run(nr[1])) for nr in named) if f is not None]
    penalised, _ = fit.kl_regimes([f for _, f in fitted])
    out = {"held": [], "free": []}
    for (run, f), held in zip(fitted, penalised):
        out["held" if held else "free"].append({**fitreport.run_shape(run), "gold lag": f.lag})
    return out


def values(shapes: list[dict], name: str) -> np.ndarray:
    v = np.array([s[name] for s in shapes], dtype=float)
    return v[np.isfinite(v)]


def rows(library: dict, world: dict) -> list[dict]:
    """Per regime and statistic: the library's and the world's quantiles and the KS p-value (NaN with fewer than 2
    values on a side); per regime also the early peak shares."""
    lib, wld = regimes(library), regimes(world)
    out = []
    for regime in ("held", "free"):
        a, b = lib[regime], wld[regime]
        for name in STATISTICS:
            va, vb = values(a, name), values(b, name)
            p = float(ks_2samp(va, vb).pvalue) if min(va.size, vb.size) >= 2 else math.nan
            q = (lambda v: tuple(np.quantile(v, [0.1, 0.5, 0.9])) if v.size else (math.nan,) * 3)
            out.append({"regime": regime, "statistic": name, "runs": (va.size, vb.size), "library": q(va),
                        "world": q(vb), "ks_p": p})
        peaks = (values(a, "peak index"), values(b, "peak index"))
        early = [tuple(float(np.mean(v <= i)) if v.size else math.nan for i in range(EARLY)) for v in peaks]
        out.append({"regime": regime, "statistic": "peaked by checkpoint 0 / 1 / 2 / 3",
                    "runs": tuple(v.size for v in peaks), "library": early[0], "world": early[1], "ks_p": math.nan})
    return out


def table(out: list[dict]) -> str:
    lines = ["| regime | statistic | library | world | runs (library / world) | KS p |", "|---|---|---|---|---|---|"]
    for r in out:
        digits = 2 if r["statistic"].startswith("peaked") else 1 if r["statistic"] == "peak index" else 3
        fmt = (lambda t: " / ".join(f"{x:.{digits}f}" for x in t))
        p = "" if math.isnan(r["ks_p"]) else f"{r['ks_p']:.3g}"
        lines.append(f"| {r['regime']} | {r['statistic']} | {fmt(r['library'])} | {fmt(r['world'])} | "
                     f"{r['runs'][0]} / {r['runs'][1]} | {p} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default=GROUNDED_WORLD, help="a fitted world file (default: the grounded world)")
    ap.add_argument("--library", default=TRL_LIBRARY_VARIED, help="the curve log it was fitted to")
    ap.add_argument("--runs", type=int, default=2000, help="RLHF runs sampled from the world (default %(default)s)")
    ap.add_argument("--seed", type=int, default=fitreport.REPORT_SEED,
                    help="seed of the world's samples (default %(default)s; not the fit's own, 0)")
    args = ap.parse_args()
    try:
        check_range("runs", args.runs, 10, 100_000, integer=True)
        if args.seed == fit.FIT_SEED:
            raise ConfigError("seed", args.seed, f"any seed but {fit.FIT_SEED}, the fit's own samples'")
        cal = calibration_of(args.world)
        share = load_yaml(args.world).get("provenance", {}).get("rlhf_exploitable", 0.6)
        library = trl_library(args.library)
    except (ConfigError, OSError) as e:
        sys.exit(f"regime_shapes.py: error: {e}")
    world = fitreport.world_runs(cal, library, share, fit.REF_EVALS, args.runs, args.seed)
    world = {n: r for n, r in world.items() if fit.job_type_of(n) == "rlhf"}
    print(f"RLHF runs by KL regime: {args.library} against {len(world)} runs of {args.world} (seed {args.seed})")
    print(table(rows(library, world)))


if __name__ == "__main__":
    main()
