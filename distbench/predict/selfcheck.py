"""The communication self-check: for a measured comm_summary with NCCL rows at two or more world
sizes, calibrate NCCL's per-protocol model (distbench.predict.nccl_model, section 2) on the smallest
world size of every series (op, dtype, timing, ...), predict each larger world size and compare with
what was measured there, size by size; the old two-regime envelope (distbench.predict.model) beside
it for comparison. Also: NCCL's protocol choice checked against a TUNING log, and the 8-GPU ring
prediction at 1 GiB.

Errors are rel_err_pct = 100 (predicted / measured - 1): negative = predicted too fast. Bands:
"< 1 MiB" and ">= 1 MiB" (`band_of`). The goal it is held against: |error| within 15% at >= 1 MiB
and within 25% below, on every op (`GOAL_LARGE_PCT`, `GOAL_SMALL_PCT`).

Analysis code: numpy, pandas, the standard library and distbench.core / distbench.predict only.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from distbench.predict.model import LARGE_BYTES, NAN, SERIES_KEYS
from distbench.predict.nccl_model import (FLOOR_BYTES, NcclTopo, _bw_time, _fill_time, calib_table,
                                          fit_calibrated, nccl_choice, tuning_table)
from distbench.predict.node_fit import _usable, calibrate
from distbench.predict.tables import validate

GOAL_LARGE_PCT = 15.0  # |error| at >= 1 MiB
GOAL_SMALL_PCT = 25.0  # |error| below 1 MiB
BANDS = ("< 1 MiB", ">= 1 MiB")
CHECK_COLUMNS = ("dataset", "op", "dtype", "timing", "nccl_env", "inplace", "rank_agg", "fit_world_size",
                 "check_world_size", "size_bytes", "band", "time_us_measured", "time_us_predicted", "rel_err_pct",
                 "algorithm", "protocol", "bubble", "time_us_no_bubble", "rel_err_pct_no_bubble",
                 "time_us_envelope", "rel_err_pct_envelope",
                 "time_us_oracle_bw", "rel_err_pct_oracle_bw", "time_us_oracle_bw_simple",
                 "rel_err_pct_oracle_bw_simple", "time_us_oracle_lat", "rel_err_pct_oracle_lat",
                 "time_us_in_sample", "rel_err_pct_in_sample")
# The controls beside the prediction (check_table): what each replaces of the fit at the smallest
# world size by what was measured at the world size checked.
CONTROLS = {
    "oracle_bw": "the 2-rank fit with Simple's bandwidth efficiency (and every protocol's, scaled alike) "
                 "set to the one measured at the largest sizes of the checked world size",
    "oracle_bw_simple": "as oracle_bw, with only Simple's efficiency replaced (LL and LL128 keep the 2-rank "
                        "fit's)",
    "oracle_lat": "the 2-rank fit with every protocol's start-up and the timing floor moved so that the "
                  "median predicted time at <= 64 KiB equals the one measured at the checked world size",
    "in_sample": "fitted on the checked world size itself and compared there (the model form's own error)",
}
# The controls are taken from the fit without the ring loop's bubble (nccl_model section 3): each
# replaces what changes with n by what was measured at n, which the bubble would scale a second time.
# The column no_bubble is that fit's own prediction: the bubble's share of the change.


def band_of(size_bytes) -> np.ndarray:
    """The size band of each size: "< 1 MiB" or ">= 1 MiB"."""
    s = np.asarray(size_bytes, dtype=float)
    return np.where(s >= LARGE_BYTES, BANDS[1], BANDS[0])


def rel_err_pct(predicted, measured) -> np.ndarray:
    return 100.0 * (np.asarray(predicted, float) / np.asarray(measured, float) - 1.0)


def _series_keys(d: pd.DataFrame) -> list[str]:
    return [k for k in SERIES_KEYS if k in d.columns and k not in ("world_size", "backend")]


def check_table(comm_summary: pd.DataFrame, dataset: str = "", topo: NcclTopo | None = None,
                envelope: bool = True) -> pd.DataFrame:
    """One row per (series, larger world size, size) measured: the calibrated model fitted at the
    smallest world size >= 2 of the series, its prediction, NCCL's (algorithm, protocol) at that
    size, and (envelope) the old envelope's prediction from the same world size."""
    d = _usable(comm_summary)
    if "backend" in d:
        d = d[d["backend"].astype(str) == "nccl"]
    if not len(d):
        return pd.DataFrame(columns=CHECK_COLUMNS)
    d = d.assign(world_size=pd.to_numeric(d["world_size"]).astype(int))
    keys = _series_keys(d)
    env = None
    if envelope:
        sizes = sorted(w for w in d["world_size"].unique() if w >= 2)
        parts = [validate(d, sizes[0], w, nccl=False) for w in sizes[1:]]
        parts = [p for p in parts if len(p)]
        env = pd.concat(parts, ignore_index=True) if parts else None
    rows = []
    for kv, g in d.groupby(keys, sort=True, dropna=False):
        kv = kv if isinstance(kv, tuple) else (kv,)
        series = dict(zip(keys, kv))
        ws = sorted(w for w in g["world_size"].unique() if w >= 2)
        if len(ws) < 2:
            continue
        base = g[g["world_size"] == ws[0]].sort_values("size_bytes")
        if base["size_bytes"].nunique() < 3:
            continue
        cal = calibrate(d, series, base["size_bytes"], base["time_us_median"], ws[0], topo)
        bubble = cal.bubble if cal.bubble > 0 else np.nan
        for w in ws[1:]:
            m = g[g["world_size"] == w].sort_values("size_bytes")
            pred = cal.predict(m["size_bytes"].to_numpy(float), int(w))
            flat = cal.with_bubble(0.0).predict(m["size_bytes"].to_numpy(float), int(w))["time_us"]
            e = None
            if env is not None:
                e = env
                for k in keys:
                    if k in e.columns:
                        e = e[e[k].isna()] if pd.isna(series[k]) else e[e[k] == series[k]]
                col = "time_us_envelope" if "time_us_envelope" in e else "time_us_predicted"
                e = e[e["check_world_size"] == w].set_index("size_bytes")[col]
            ctl = controls(cal.with_bubble(0.0), m["size_bytes"].to_numpy(float), m["time_us_median"].to_numpy(float), int(w), topo)
            for i, (_, r) in enumerate(m.iterrows()):
                s = int(r["size_bytes"])
                meas = float(r["time_us_median"])
                tp = float(pred["time_us"][i])
                te = float(e.get(s, np.nan)) if e is not None else np.nan
                rows.append({"dataset": dataset, **{k: series.get(k) for k in CHECK_COLUMNS if k in series},
                             "fit_world_size": int(ws[0]), "check_world_size": int(w), "size_bytes": s,
                             "band": band_of(s).item(), "time_us_measured": meas, "time_us_predicted": tp,
                             "rel_err_pct": float(rel_err_pct(tp, meas)), "algorithm": pred["algorithm"][i],
                             "protocol": pred["protocol"][i], "bubble": float(bubble),
                             "time_us_no_bubble": float(flat[i]), "rel_err_pct_no_bubble": float(rel_err_pct(flat[i], meas)),
                             "time_us_envelope": te,
                             "rel_err_pct_envelope": float(rel_err_pct(te, meas)) if np.isfinite(te) else np.nan,
                             **{f"{c}_{k}": (float(v[i]) if c == "time_us" else float(rel_err_pct(v[i], meas)))
                                for k, v in ctl.items() for c in ("time_us", "rel_err_pct")}})
    return pd.DataFrame(rows, columns=list(CHECK_COLUMNS))


def asymptote_eta(cal, sizes, times_us, n: int, top_bytes: float = 64 * 2**20,
                  top_points: int = 3) -> float:
    """The Simple bandwidth efficiency (measured / NCCL's algBw, as ProtoFit.eta) of a measured sweep
    at n ranks, from its largest sizes where NCCL runs Simple (those >= top_bytes if top_points of
    them, else the top_points largest): 1 / the least-squares slope of the time over NCCL's
    bandwidth time plus the fit's pipeline fill (nccl_model section 2). NaN with fewer than two such sizes or no positive slope."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    order = np.argsort(s)
    s, t = s[order], t[order]
    algos, protos, _ = cal.choice(s, n)
    m = protos == "Simple"
    s, t, algos = s[m], t[m], algos[m]
    big = np.flatnonzero(s >= top_bytes)
    idx = big if len(big) >= top_points else np.arange(max(0, len(s) - top_points), len(s))
    if len(np.unique(s[idx])) < 2:
        return np.nan
    topo = cal.topo.with_ranks(n)
    tab = calib_table(cal.op, topo)
    phi = cal.protos["Simple"].phi  # the fit's pipeline fill, so that the slope is the bandwidth's alone
    x = np.array([_bw_time(cal.op, topo, a, "Simple", si, tab[(cal.op, a, "Simple")][1])
                  + phi * _fill_time(cal.op, topo, a, "Simple", si, tab[(cal.op, a, "Simple")][1])
                  for a, si in zip(algos[idx], s[idx])])
    slope = float(np.polyfit(x, t[idx], 1)[0])
    return 1.0 / slope if slope > 0 else NAN


def controls(cal, sizes, times_us, n: int, topo: NcclTopo | None = None) -> dict:
    """The controls' predicted times at the sizes measured at n ranks (CONTROLS): {"oracle_bw",
    "oracle_bw_simple", "oracle_lat", "in_sample"} -> array (NaN where the measured sweep at n cannot set the control:
    fewer than two sizes where NCCL runs Simple, no size <= 64 KiB, fewer than three sizes)."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    nan = np.full(s.shape, np.nan)
    in_sample = nan
    if len(np.unique(s)) >= 3:
        try:
            in_sample = fit_calibrated(cal.op, s, t, n, topo, cal.algorithms).predict(s, n)["time_us"]
        except ValueError:
            pass
    oracle_bw = oracle_bw_simple = oracle_lat = nan
    # send_recv on NCCL's p2p split (cal.p2p): the ring form's oracles do not apply to it
    eta = asymptote_eta(cal, s, t, n) if cal.p2p is None else np.nan
    if np.isfinite(eta):
        oracle_bw = cal.with_eta(eta).predict(s, n)["time_us"]
        oracle_bw_simple = cal.with_eta(eta, ("Simple",)).predict(s, n)["time_us"]
    small = s <= FLOOR_BYTES
    if small.any() and cal.p2p is None:
        pred = cal.predict(s, n)["time_us"]
        shift = float(np.median(t[small]) - np.median(pred[small]))
        oracle_lat = cal.with_startup_shift(shift).predict(s, n)["time_us"]
    return {"oracle_bw": np.asarray(oracle_bw, float), "oracle_bw_simple": np.asarray(oracle_bw_simple, float),
            "oracle_lat": np.asarray(oracle_lat, float), "in_sample": np.asarray(in_sample, float)}


CONTROL_SUMMARY_COLUMNS = ("dataset", "op", "timing", "band", "n", "goal_pct", "max_abs_err_pct",
                           "median_abs_err_pct", "max_abs_err_pct_oracle_bw", "median_abs_err_pct_oracle_bw",
                           "max_abs_err_pct_oracle_bw_simple", "median_abs_err_pct_oracle_bw_simple",
                           "max_abs_err_pct_oracle_lat", "median_abs_err_pct_oracle_lat",
                           "max_abs_err_pct_in_sample", "median_abs_err_pct_in_sample", "band_oracle",
                           "worst_size_bytes_band_oracle", "worst_protocol_band_oracle", "verdict")


def _verdict(band: str, goal: float, actual: float, oracle_bw: float, oracle_bw_simple: float, oracle_lat: float,
             in_sample: float) -> str:
    """Why a (dataset, op, timing, band) misses the goal, read off the controls' max |error|: the
    band's own oracle (bandwidth at >= 1 MiB, latency below) within the goal: the rise with n it
    replaces (at >= 1 MiB also the Simple-only bandwidth oracle); else the in-sample fit within the goal: something else that changes with n; else the
    model form's own error (it cannot follow even the world size it is fitted on)."""
    if np.isfinite(actual) and actual <= goal:
        return "met"
    oracle, what = (oracle_bw, "asymptote's rise with n") if band == BANDS[1] else (oracle_lat, "floor's rise with n")
    if np.isfinite(oracle) and oracle <= goal:
        return f"{what} (oracle within goal)"
    if band == BANDS[1] and np.isfinite(oracle_bw_simple) and oracle_bw_simple <= goal:
        return "Simple asymptote's rise with n (Simple-only oracle within goal; LL's does not rise)"
    if np.isfinite(in_sample) and in_sample <= goal:
        return "other change with n (oracle misses, in-sample within goal)"
    if not np.isfinite(in_sample) and not np.isfinite(oracle):
        return "no control (too few sizes at the checked world size)"
    return "model form's own error (in-sample misses too)"


def control_summary(check: pd.DataFrame, by=("dataset", "op", "timing")) -> pd.DataFrame:
    """Per group and band: max and median |error| of the prediction and of each control (CONTROLS),
    the band's own oracle (bandwidth at >= 1 MiB, latency below) with the size and NCCL protocol of
    its largest |error| (what remains once the oracle replaces what changes with n), and the verdict
    (`_verdict`)."""
    columns = [*by, *(c for c in CONTROL_SUMMARY_COLUMNS if c not in by)]
    if not len(check):
        return pd.DataFrame(columns=columns)
    rows = []
    for kv, g in check.groupby([*by, "band"], sort=True, dropna=False):
        kv = kv if isinstance(kv, tuple) else (kv,)
        goal = GOAL_LARGE_PCT if kv[-1] == BANDS[1] else GOAL_SMALL_PCT
        row = {**dict(zip([*by, "band"], kv)), "n": len(g), "goal_pct": goal}
        for suffix in ("", "_oracle_bw", "_oracle_bw_simple", "_oracle_lat", "_in_sample"):
            a = g[f"rel_err_pct{suffix}"].abs()
            row[f"max_abs_err_pct{suffix}"] = a.max() if a.notna().any() else np.nan
            row[f"median_abs_err_pct{suffix}"] = a.median() if a.notna().any() else np.nan
        oracle = "oracle_bw" if kv[-1] == BANDS[1] else "oracle_lat"
        a = g[f"rel_err_pct_{oracle}"].abs()
        worst = g.loc[a.idxmax()] if a.notna().any() else None
        row.update(band_oracle=oracle, worst_size_bytes_band_oracle=int(worst["size_bytes"]) if worst is not None
                   else pd.NA, worst_protocol_band_oracle=worst["protocol"] if worst is not None else pd.NA)
        row["verdict"] = _verdict(kv[-1], goal, row["max_abs_err_pct"], row["max_abs_err_pct_oracle_bw"],
                                  row["max_abs_err_pct_oracle_bw_simple"], row["max_abs_err_pct_oracle_lat"],
                                  row["max_abs_err_pct_in_sample"])
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def summarize(check: pd.DataFrame, by=("dataset", "op", "timing")) -> pd.DataFrame:
    """Per group and band: n, median and max |error| (new model and envelope), and whether the goal
    holds (max |error| within GOAL_LARGE_PCT at >= 1 MiB, GOAL_SMALL_PCT below)."""
    if not len(check):
        return pd.DataFrame()
    c = check.assign(abs_err=check["rel_err_pct"].abs(), abs_env=check["rel_err_pct_envelope"].abs())
    rows = []
    for kv, g in c.groupby([*by, "band"], sort=True, dropna=False):
        kv = kv if isinstance(kv, tuple) else (kv,)
        goal = GOAL_LARGE_PCT if kv[-1] == BANDS[1] else GOAL_SMALL_PCT
        rows.append({**dict(zip([*by, "band"], kv)), "n": len(g), "median_abs_err_pct": g["abs_err"].median(),
                     "max_abs_err_pct": g["abs_err"].max(), "goal_pct": goal,
                     "meets_goal": bool(g["abs_err"].max() <= goal),
                     "median_abs_err_pct_envelope": g["abs_env"].median(),
                     "max_abs_err_pct_envelope": g["abs_env"].max()})
    return pd.DataFrame(rows)


def per_size(check: pd.DataFrame, by=("dataset", "op", "timing", "check_world_size")) -> pd.DataFrame:
    """Relative error per size (columns) for each group (rows), median over dtypes and other keys."""
    if not len(check):
        return pd.DataFrame()
    return check.pivot_table(index=list(by), columns="size_bytes", values="rel_err_pct", aggfunc="median")


# ---------------------------------------------------------------- the regimes against NCCL's own log
_TUNE = re.compile(r"(?P<op>AllReduce|AllGather|ReduceScatter|Broadcast|Reduce): (?P<bytes>\d+) Bytes -> "
                   r"Algo (?P<algo>\w+) proto (?P<proto>\w+)")
_LOG_OPS = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
            "Broadcast": "broadcast", "Reduce": "reduce"}
_PROTO = {"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple"}


def log_choices(text: str, n_ranks: int) -> pd.DataFrame:
    """NCCL's "<Op>: N Bytes -> Algo A proto P" TUNING lines (2.19+) as (op, size_bytes, algorithm,
    protocol), size_bytes in nccl-tests' convention (the line prints all_gather's and
    reduce_scatter's per-rank count: times n_ranks). One row per (op, size)."""
    rows = []
    for m in _TUNE.finditer(text):
        op = _LOG_OPS[m.group("op")]
        b = int(m.group("bytes")) * (n_ranks if op in ("all_gather", "reduce_scatter") else 1)
        rows.append({"op": op, "size_bytes": b, "algorithm": m.group("algo").lower(),
                     "protocol": _PROTO.get(m.group("proto").upper(), m.group("proto"))})
    return pd.DataFrame(rows, columns=["op", "size_bytes", "algorithm", "protocol"]).drop_duplicates(
        ["op", "size_bytes"])


def compare_log_choices(logged: pd.DataFrame, topo: NcclTopo) -> pd.DataFrame:
    """NCCL's model's (algorithm, protocol) beside the logged one, per op and size."""
    tab = tuning_table(topo)
    out = []
    for op, g in logged.groupby("op", sort=True):
        a, p, _ = nccl_choice(tab, op, g["size_bytes"].to_numpy(float))
        out.append(g.assign(model_algorithm=a, model_protocol=p,
                            agrees=(a == g["algorithm"].to_numpy()) & (p == g["protocol"].to_numpy())))
    return pd.concat(out, ignore_index=True) if out else logged.assign(model_algorithm=[], model_protocol=[],
                                                                       agrees=[])


# ---------------------------------------------------------------- 8 GPUs
def predict_busbw(comm_summary: pd.DataFrame, op: str, fit_world_size: int, n: int, size_bytes: float,
                  timing: str = "graph", dtype: str = "float32", topo: NcclTopo | None = None) -> dict:
    """Calibrate `op` at fit_world_size (NCCL rows, NCCL defaults, `timing`, `dtype`, out of place
    where both are measured) and predict it at n ranks: time, bus bandwidth, NCCL's choice."""
    from distbench.predict.model import bus_factor

    d = _usable(comm_summary)
    d = d[(d["backend"] == "nccl") & (d["op"] == op) & (pd.to_numeric(d["world_size"]) == fit_world_size)
          & (d["timing"] == timing) & (d["dtype"] == dtype)]
    if "nccl_env" in d:
        d = d[d["nccl_env"].astype(str) == "default"]
    if "inplace" in d and d["inplace"].nunique() > 1:
        d = d[~d["inplace"].astype(str).str.lower().eq("true")]
    series = {"backend": "nccl", "op": op, "timing": timing, "dtype": dtype, "nccl_env": "default"}
    cal = calibrate(comm_summary, series, d["size_bytes"], d["time_us_median"], fit_world_size, topo)
    bubble = cal.bubble if cal.bubble > 0 else np.nan
    pred = cal.predict([size_bytes], n)
    t = float(pred["time_us"][0])
    return {"op": op, "fit_world_size": fit_world_size, "gpus": n, "size_bytes": size_bytes, "time_us": t,
            "busbw_gbps": size_bytes / (1e3 * t) * bus_factor(op, n), "algorithm": pred["algorithm"][0],
            "protocol": pred["protocol"][0], "bubble": float(bubble)}
