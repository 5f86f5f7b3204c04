"""The training prediction checked against measured larger runs of the same node: for each
configuration measured on 1 GPU and at a larger world size, predict_training fed only the rows it
would have had at the smaller world sizes (distbench.predict.scaling.check_training_config), its
efficiency there against the measured one, and the numbers that say why where they differ:

- the step: predicted against measured at the checked world size;
- the communication: the modelled gradient collectives at the checked world size against the
  measured comm_alone time there, and the exposed part predicted against the one measured;
- compute: the compute-only time the prediction assumed (the fit's) against the one measured at the
  checked world size (the model holds compute constant), and compute_drift_points, how far the
  predicted efficiency moves when given the measured one;
- noise: the per-step spread of the measured efficiency, 100 eff sqrt(cv_1^2 + cv_N^2) points, from
  the summary's step_time_ms_cv at 1 GPU and at N, and the standard error of the efficiency of the
  two medians, 100 eff 1.2533 sqrt(cv_1^2 / n_1 + cv_N^2 / n_N) (n: n_steps; the median's standard
  error under a normal spread), median_se_points;
- the efficiency measured at the fit's largest world size: a measured efficiency that falls from 1
  to 2 GPUs and rises from 2 to 4 is noise or a change between runs, not scaling.

Analysis only: numpy, pandas, distbench.predict.
"""

from __future__ import annotations

import math

import pandas as pd

from distbench.predict.model import DEFAULT_PRESET
from distbench.predict.scaling import _num, _training_rows, check_training_config

GOAL_POINTS = 5.0  # the efficiency error a prediction is meant to stay within
COLUMNS = ("dataset", "model", "strategy", "config", "fitted_on", "checked_at", "link", "predicted_eff_pct",
           "measured_eff_pct", "error_points", "within_goal", "predicted_step_ms", "measured_step_ms",
           "step_error_pct", "predicted_comm_ms", "measured_comm_alone_ms", "predicted_exposed_ms",
           "measured_exposed_ms", "predicted_overhead_ms", "fit_compute_ms", "measured_compute_ms", "compute_drift_points",
           "spread_points", "median_se_points", "measured_eff_pct_at_fit", "note")


def _at(g: pd.DataFrame, n: int):
    ws = pd.to_numeric(g["world_size"], errors="coerce")
    at = g[ws == n]
    return at.iloc[0] if len(at) else None


def spread_points(g: pd.DataFrame, n: int) -> float:
    """The per-step spread of the measured efficiency step(1) / step(n) in percentage points: 100 eff
    sqrt(cv_1^2 + cv_n^2), the step times' coefficients of variation (step_time_ms_cv) combined."""
    one, at = _at(g, 1), _at(g, n)
    if one is None or at is None:
        return math.nan
    cv1, cvn = _num(one.get("step_time_ms_cv")), _num(at.get("step_time_ms_cv"))
    eff = _num(one["step_time_ms_median"]) / _num(at["step_time_ms_median"])
    return 100 * eff * math.sqrt(cv1**2 + cvn**2) if not (math.isnan(cv1) or math.isnan(cvn)) else math.nan


def median_se_points(g: pd.DataFrame, n: int) -> float:
    """The standard error of the measured efficiency step(1) / step(n), in points, from the two medians'
    standard errors (1.2533 sd / sqrt(n_steps), sd = cv x median)."""
    one, at = _at(g, 1), _at(g, n)
    if one is None or at is None:
        return math.nan
    vals = [_num(r.get(k)) for r in (one, at) for k in ("step_time_ms_cv", "n_steps")]
    if any(math.isnan(v) for v in vals) or vals[1] < 1 or vals[3] < 1:
        return math.nan
    eff = _num(one["step_time_ms_median"]) / _num(at["step_time_ms_median"])
    return 100 * eff * 1.2533 * math.sqrt(vals[0] ** 2 / vals[1] + vals[2] ** 2 / vals[3])


def selfcheck(summary: pd.DataFrame, dataset: str, fit_sets=((1,), (1, 2)), check_ws: int = 4,
              preset=DEFAULT_PRESET, links=None, note: str = "") -> pd.DataFrame:
    """One row per configuration, fit set and link: predict_training fitted on the rows at each of
    fit_sets (only those whose world sizes were all measured) and checked at check_ws, with the
    controls of the module docstring. links: {label: Link or None (the preset's intra link)}."""
    links = links or {f"preset {preset}": None}
    d, keys = _training_rows(summary)
    rows = []
    for kv, g in d.groupby(keys, sort=True, dropna=False) if len(d) and keys else ():
        cfg = dict(zip(keys, kv if isinstance(kv, tuple) else (kv,)))
        measured_ws = {int(w) for w in pd.to_numeric(g["world_size"])}
        at = _at(g, check_ws)
        if at is None:
            continue
        for fit in fit_sets:
            if not set(fit) <= measured_ws:
                continue
            for label, link in links.items():
                c = check_training_config(g, fit, check_ws, preset, link)
                if c is None:
                    continue
                ref = _at(g, c["ref_world_size"])
                fit_compute = _num(ref["compute_only_ms_median"])
                meas_compute = _num(at["compute_only_ms_median"])
                # how the predicted efficiency moves had it been given the compute measured at check_ws
                step = c["step_time_ms_predicted"]
                drift = 100 * c["efficiency_predicted"] * (step / (step + meas_compute - fit_compute) - 1)
                err = c["error_points"]
                rows.append({
                    "dataset": dataset, "model": cfg.get("model"), "strategy": cfg.get("strategy", "ddp"),
                    "config": cfg.get("config"), "fitted_on": c["fit_world_sizes"], "checked_at": check_ws,
                    "link": label, "predicted_eff_pct": 100 * c["efficiency_predicted"],
                    "measured_eff_pct": 100 * c["efficiency_measured"], "error_points": err,
                    "within_goal": abs(err) <= GOAL_POINTS, "predicted_step_ms": c["step_time_ms_predicted"],
                    "measured_step_ms": c["step_time_ms_measured"],
                    "step_error_pct": 100 * (c["step_time_ms_predicted"] / c["step_time_ms_measured"] - 1),
                    "predicted_comm_ms": c["comm_ms_predicted"],
                    "measured_comm_alone_ms": _num(at.get("comm_alone_ms_median", at.get("allreduce_alone_ms_median"))),
                    "predicted_exposed_ms": c["exposed_comm_ms_predicted"],
                    "measured_exposed_ms": _num(at.get("exposed_comm_ms")),
                    "predicted_overhead_ms": c["overhead_ms"],
                    "fit_compute_ms": fit_compute, "measured_compute_ms": meas_compute,
                    "compute_drift_points": drift, "spread_points": spread_points(g, check_ws),
                    "median_se_points": median_se_points(g, check_ws),
                    "measured_eff_pct_at_fit": (100 * _num(_at(g, 1)["step_time_ms_median"]) / _num(ref["step_time_ms_median"])
                                                if c["ref_world_size"] > 1 else math.nan),
                    "note": note})
    return pd.DataFrame(rows, columns=COLUMNS)
