"""The cost model (distbench.predict.model, whose docstring has every formula) applied to the measured
tables: fit_table (section 1 over comm_summary), predict_cluster (section 3), predict_training
(section 4), validate (section 5), and the CLI that writes them:
python -m distbench.predict.tables results/<label>/tables/comm_summary.csv [--training
results/<label>/tables/training_summary.csv] [--preset nvlink4-ib400] --out-dir DIR writes alpha_beta.csv,
prediction_comm.csv, prediction_training.csv and prediction_validation.csv.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from distbench.core.io import atomic_write_csv
from distbench.core.readers import read_json, remake
from distbench.core.section import oversubscribed, ranks_per_host
from distbench.core.sizes import parse_size
from distbench.predict.cluster import _nodes, predict_hierarchical
from distbench.predict.scaling import TRAINING_KEYS, TRAINING_OUT, _key_dict, _num, predict_training
from distbench.predict.nccl_model import CalibratedComm
from distbench.predict.node_fit import _keys, _match, _truthy, _usable, calibrate  # noqa: F401
from distbench.predict.model import (
    _CLUSTER_OPS, CLUSTER_ALGORITHMS, DEFAULT_GPU_COUNTS, DEFAULT_PRESET, DEFAULT_SIZES, LARGE_BYTES, MIN_POINTS,
    MODELLED_OPS, NAN, PRESETS, SERIES_KEYS, TOLERANCE, Link, bus_factor, cost_coefficients, fit_alpha_beta,
    get_preset, predict_collective, series_algorithm, solve_alpha_split, split_alpha,
)


# ================================================================ reading the tables




FIT_COLUMNS = ("algorithm", "n_points", "alpha_us", "beta_gbps", "alpha_fixed_us", "alpha_hop_us", "alpha_source",
               "link_alpha_us", "link_beta_gbps", "max_rel_err_pct", "median_rel_err_pct", "n_within",
               "tolerance_pct", "fit_from_bytes", "fit_to_bytes", "alpha_to_bytes", "beta_from_bytes",
               "measured_from_bytes", "measured_to_bytes", "busbw_gbps_max_measured")


def fit_table(comm_summary: pd.DataFrame, tolerance: float = TOLERANCE, min_bytes=None, max_bytes=None,
              preset=DEFAULT_PRESET) -> pd.DataFrame:
    """One fit per series of comm_summary (section 1), with its per-link figures (section 2).

    Columns: the series keys present (backend, op, dtype, nccl_env, timing, inplace, rank_agg,
    world_size), then FIT_COLUMNS. alpha_us, beta_gbps: the envelope at that world size;
    alpha_fixed_us + a(n) alpha_hop_us: its latency split (alpha_source "world_sizes": solved over
    the fits of the same series at two or more world sizes >= 2; "preset": alpha_hop = the
    `preset`'s intra-node per-hop latency); link_alpha_us = alpha_hop_us; link_beta_gbps = beta
    b(n), the busbw asymptote. fit_from_bytes..fit_to_bytes: where the envelope holds (the longest
    run of sizes within `tolerance`); alpha_to_bytes / beta_from_bytes: the sizes that set alpha
    (up to) and beta (from); measured_from/to_bytes: the sizes fitted. min_bytes/max_bytes
    restrict the sizes fitted (numbers or strings such as "1MiB")."""
    hop_preset = get_preset(preset).intra.alpha_us
    d = _usable(comm_summary)
    if min_bytes is not None:
        d = d[d["size_bytes"] >= parse_size(min_bytes)]
    if max_bytes is not None:
        d = d[d["size_bytes"] <= parse_size(max_bytes)]
    keys = _keys(d)
    rows = []
    if len(d):
        for kv, g in d.groupby(keys, sort=True, dropna=False):
            if g["size_bytes"].nunique() < MIN_POINTS:
                continue
            row = _key_dict(keys, kv)
            fit = fit_alpha_beta(g["size_bytes"], g["time_us_median"], tolerance)
            algo = series_algorithm(row["op"], row.get("nccl_env"))
            n = int(row.get("world_size", 1))
            a, b = cost_coefficients(row["op"], n, algo)
            busbw = pd.to_numeric(g.get("busbw_gbps_median", pd.Series(dtype=float)), errors="coerce")
            row.update(
                algorithm=algo, n_points=fit.n_points, alpha_us=fit.alpha_us, beta_gbps=fit.beta_gbps,
                link_beta_gbps=fit.beta_gbps * b if b > 0 else NAN, _a=a,
                max_rel_err_pct=100 * fit.max_rel_err, median_rel_err_pct=100 * fit.median_rel_err,
                n_within=fit.n_within, tolerance_pct=100 * tolerance,
                fit_from_bytes=fit.holds_from_bytes, fit_to_bytes=fit.holds_to_bytes,
                alpha_to_bytes=fit.alpha_to_bytes, beta_from_bytes=fit.beta_from_bytes,
                measured_from_bytes=float(g["size_bytes"].min()), measured_to_bytes=float(g["size_bytes"].max()),
                busbw_gbps_max_measured=float(busbw.max()) if busbw.notna().any() else NAN)
            rows.append(row)
    out = pd.DataFrame(rows, columns=[*keys, *FIT_COLUMNS, "_a"])
    if not len(out):
        return out.drop(columns="_a")
    # the latency split: per series (all keys but world_size), over its world sizes >= 2
    series_keys = [k for k in keys if k != "world_size"]
    groups = out.groupby(series_keys, sort=False, dropna=False).groups if series_keys else {(): out.index}
    split = {}  # index -> (alpha_fixed, alpha_hop, source)
    for idx in groups.values():
        part = out.loc[idx]
        multi = part[part["_a"] > 0]
        if multi["_a"].nunique() >= 2:
            fixed, hop = solve_alpha_split(multi["_a"], multi["alpha_us"])
            split.update({i: (fixed, hop, "world_sizes") for i in multi.index})
        else:
            split.update({i: (*split_alpha(out.at[i, "alpha_us"], out.at[i, "_a"], hop_preset), "preset")
                          for i in multi.index})
    none = (NAN, NAN, pd.NA)
    out["alpha_fixed_us"] = [split.get(i, none)[0] for i in out.index]
    out["alpha_hop_us"] = [split.get(i, none)[1] for i in out.index]
    out["alpha_source"] = [split.get(i, none)[2] for i in out.index]
    out["link_alpha_us"] = out["alpha_hop_us"]
    return out.drop(columns="_a")


def _fit_link(f) -> Link:
    """The Link of one fit_table row: (alpha_hop, busbw asymptote, alpha_fixed)."""
    fixed = _num(f.get("alpha_fixed_us", 0.0))
    return Link(_num(f["link_alpha_us"]), _num(f["link_beta_gbps"]), 0.0 if math.isnan(fixed) else fixed)


# ================================================================ section 3: cluster tables
CLUSTER_COLUMNS = ("backend", "op", "dtype", "nccl_env", "timing", "inplace", "rank_agg", "fit_world_size",
                   "intra_source", "preset", "algorithm", "gpus", "nodes", "gpus_per_node", "size_bytes", "time_us",
                   "algbw_gbps", "busbw_gbps", "intra_alpha_us", "intra_beta_gbps", "intra_fixed_us", "inter_alpha_us",
                   "inter_beta_gbps", "in_fit_range", "model", "nccl_algo", "nccl_proto")


def _valid_link(link: Link) -> bool:
    return (math.isfinite(link.alpha_us) and link.alpha_us >= 0 and not math.isnan(link.beta_gbps)
            and link.beta_gbps > 0)


def predict_cluster(fits: pd.DataFrame | None, preset=DEFAULT_PRESET, sizes=DEFAULT_SIZES,
                    gpu_counts=DEFAULT_GPU_COUNTS, algorithms=CLUSTER_ALGORITHMS,
                    include_preset_intra: bool = True, comm_summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """Collective times at each GPU count and size (section 3).

    For every row of `fits` (fit_table) with a usable link, its measured per-link alpha/beta is the
    intra-node link (intra_source "measured"); the inter-node link and the GPUs per node are the
    preset's. With include_preset_intra (or without fits), every modelled op is also predicted
    with the preset's own intra-node link (intra_source "preset", series columns empty). Each op
    gets every algorithm in `algorithms` that models it. in_fit_range: the size lies where the
    measured fit holds (empty for preset rows).

    With `comm_summary` (the table `fits` came from), an NCCL series on one node (N <= the preset's
    GPUs per node) is predicted by NCCL's per-protocol model calibrated on that series' own sweep
    (distbench.predict.nccl_model; model "nccl"): the "ring" and "tree" rows with that algorithm
    only, the "hierarchical" row (one node: no hierarchy) with NCCL's own choice, nccl_algo and
    nccl_proto what it runs at each size. Across nodes, a Gloo series, a preset link or a series
    with fewer than 3 sizes keep the envelope (model "envelope", nccl_algo/nccl_proto empty): the
    calibration knows one node's protocols only."""
    p = get_preset(preset)
    sizes = np.array([parse_size(s) for s in sizes], dtype=float)
    cases = []  # (series dict, intra link, source, fit range, NCCL calibration or None)
    if fits is not None and len(fits):
        for _, r in fits.iterrows():
            link = _fit_link(r)
            if not _valid_link(link):
                continue
            series = {k: r[k] for k in SERIES_KEYS if k in fits.columns and k != "world_size"}
            series["fit_world_size"] = r.get("world_size", pd.NA)
            cal = _nccl_calibration(comm_summary, r) if comm_summary is not None else None
            cases.append((series, link, "measured", (r.get("fit_from_bytes", NAN), r.get("fit_to_bytes", NAN)), cal))
    if include_preset_intra or not cases:
        cases += [({"op": op}, p.intra, "preset", None, None) for op in MODELLED_OPS]
    rows = []
    for series, intra, source, holds, cal in cases:
        op = series["op"]
        for algo in algorithms:
            if op not in _CLUSTER_OPS[algo]:
                continue
            for n in gpu_counts:
                g, m = _nodes(n, p.gpus_per_node)
                t = np.atleast_1d(predict_hierarchical(op, sizes, n, intra, p.inter, p.gpus_per_node, algo))
                nccl = _nccl_predict(cal, sizes, n, algo) if cal is not None and m == 1 else None
                if nccl is not None:
                    t = nccl["time_us"]
                for i, (s, tu) in enumerate(zip(sizes, t)):
                    algbw = s / (1e3 * tu) if tu > 0 else NAN
                    in_range = (pd.NA if holds is None or pd.isna(holds[0]) else
                                bool(float(holds[0]) <= s <= float(holds[1])))
                    rows.append({**series, "intra_source": source, "preset": p.name, "algorithm": algo, "gpus": int(n),
                                 "nodes": m, "gpus_per_node": g, "size_bytes": int(s), "time_us": float(tu),
                                 "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, int(n)) if n > 1 else NAN,
                                 "intra_alpha_us": intra.alpha_us, "intra_beta_gbps": intra.beta_gbps,
                                 "intra_fixed_us": intra.fixed_us,
                                 "inter_alpha_us": p.inter.alpha_us, "inter_beta_gbps": p.inter.beta_gbps,
                                 "in_fit_range": in_range, "model": "envelope" if nccl is None else "nccl",
                                 "nccl_algo": pd.NA if nccl is None else nccl["algorithm"][i],
                                 "nccl_proto": pd.NA if nccl is None else nccl["protocol"][i]})
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)


def _nccl_calibration(comm_summary: pd.DataFrame, fit_row) -> CalibratedComm | None:
    """NCCL's per-protocol model calibrated on the measured sweep behind one fit_table row (same
    series and world size): None for a non-NCCL series, one rank, or fewer than 3 sizes."""
    if str(fit_row.get("backend", "nccl")) != "nccl":
        return None
    n0 = _num(fit_row.get("world_size"))
    if math.isnan(n0) or n0 < 2:
        return None
    d = _usable(comm_summary)
    g = _match(d, [k for k in _keys(d) if k != "world_size"], dict(fit_row))
    g = g[pd.to_numeric(g["world_size"], errors="coerce") == n0]
    if g["size_bytes"].nunique() < 3:
        return None
    # NCCL_ALGO=Ring / Tree: NCCL chooses among that algorithm's protocols only (tree: all_reduce)
    algo = re.search(r"NCCL_ALGO=([A-Za-z_]+)", str(fit_row.get("nccl_env") or ""))
    algorithms = ("tree", "ring")
    if algo and algo.group(1).lower() in ("ring", "tree"):
        algorithms = ("tree",) if algo.group(1).lower() == "tree" and fit_row["op"] == "all_reduce" else ("ring",)
    try:
        return calibrate(d, dict(fit_row), g["size_bytes"], g["time_us_median"], int(n0), algorithms=algorithms)
    except ValueError:
        return None


def _nccl_predict(cal: CalibratedComm, sizes, n: int, algorithm: str = "hierarchical") -> dict | None:
    """The calibrated model at n ranks on one node: {'time_us', 'algorithm', 'protocol'}; "ring" and
    "tree" restrict NCCL's choice to that algorithm, "hierarchical" (the same on one node) leaves it
    NCCL's. None at one rank."""
    if int(n) < 2:
        return None
    if algorithm in ("ring", "tree") and cal.op not in ("all_to_all", "send_recv") and len(cal.algorithms) > 1:
        cal = replace(cal, algorithms=(algorithm,))
    return cal.predict(np.asarray(sizes, dtype=float), int(n))


def pick_link(fits: pd.DataFrame, op: str = "all_reduce", backend: str = "nccl",
              timing_preference=("graph", "events", "host")) -> Link | None:
    """The per-link figures of one fitted series: `op` on `backend` with NCCL defaults, the first
    timing of `timing_preference` present, then the most sizes within the tolerance, then the
    largest world size. None if there is none."""
    if fits is None or not len(fits):
        return None
    f = fits[(fits["op"] == op) & (fits["backend"] == backend)]
    if "nccl_env" in f:
        f = f[f["nccl_env"].astype(str) == "default"]
    f = f[f["link_beta_gbps"].notna() & (f["link_beta_gbps"] > 0)]
    if not len(f):
        return None
    rank = {t: i for i, t in enumerate(timing_preference)}
    f = f.assign(_t=f["timing"].map(lambda t: rank.get(t, len(rank))) if "timing" in f else 0)
    f = f.sort_values(["_t", "n_within", "world_size"], ascending=[True, False, False])
    return _fit_link(f.iloc[0])


# ================================================================ section 5: validation
VALIDATION_COLUMNS = ("algorithm", "fit_world_size", "check_world_size", "size_bytes", "time_us_predicted",
                      "time_us_measured", "rel_err_pct", "in_fit_range", "fit_max_rel_err_pct", "alpha_fixed_us",
                      "alpha_hop_us", "alpha_source", "link_beta_gbps", "model", "nccl_algo", "nccl_proto",
                      "time_us_envelope", "rel_err_pct_envelope")


def validate(comm_summary: pd.DataFrame, fit_ws: int, check_ws: int, tolerance: float = TOLERANCE,
             preset=DEFAULT_PRESET, nccl: bool = True) -> pd.DataFrame:
    """Fit every series at world size fit_ws only (the rows at other world sizes are never seen by
    the fit, so alpha_hop is the `preset`'s intra-node per-hop latency), predict it at check_ws
    (alpha_fixed + a(check_ws) alpha_hop + b(check_ws) S / beta_link, section 2) and compare with
    the measured medians there, one row per (series, size) measured at check_ws: rel_err_pct =
    100 (predicted / measured - 1). in_fit_range: the size is where the envelope at fit_ws holds.

    With `nccl`, an NCCL series is predicted by NCCL's per-protocol model calibrated on its sweep at
    fit_ws (distbench.predict.nccl_model; model "nccl", nccl_algo/nccl_proto what NCCL's model runs
    at check_ws); a Gloo series (no protocols) or one with fewer than 3 sizes keeps the envelope
    (model "envelope"). time_us_envelope / rel_err_pct_envelope: the envelope's prediction on every
    row, for comparison. The alpha/beta columns are the envelope's fit either way."""
    d = _usable(comm_summary)
    keys = _keys(d, with_world_size=False)
    out_cols = [*keys, *VALIDATION_COLUMNS]
    if not len(d):
        return pd.DataFrame(columns=out_cols)
    ws = pd.to_numeric(d["world_size"])
    fits = fit_table(d[ws == int(fit_ws)], tolerance, preset=preset)
    check = d[ws == int(check_ws)]
    rows = []
    for _, f in fits.iterrows():
        link = _fit_link(f)
        if not _valid_link(link):
            continue
        m = check
        for k in keys:
            m = m[m[k].isna()] if pd.isna(f[k]) else m[m[k] == f[k]]
        if not len(m):
            continue
        m = m.sort_values("size_bytes")
        env = np.atleast_1d(predict_collective(f["op"], m["size_bytes"].to_numpy(float), int(check_ws), link,
                                               f["algorithm"]))
        cal = _nccl_calibration(d, f) if nccl else None
        npred = cal.predict(m["size_bytes"].to_numpy(float), int(check_ws)) if cal is not None else None
        pred = npred["time_us"] if npred is not None else env
        for i, ((_, r), tp) in enumerate(zip(m.iterrows(), pred)):
            meas = float(r["time_us_median"])
            s = float(r["size_bytes"])
            in_range = (False if pd.isna(f["fit_from_bytes"]) else
                        bool(float(f["fit_from_bytes"]) <= s <= float(f["fit_to_bytes"])))
            rows.append({**{k: f[k] for k in keys}, "algorithm": f["algorithm"], "fit_world_size": int(fit_ws),
                         "check_world_size": int(check_ws), "size_bytes": int(s), "time_us_predicted": float(tp),
                         "time_us_measured": meas, "rel_err_pct": 100 * (float(tp) / meas - 1),
                         "in_fit_range": in_range, "fit_max_rel_err_pct": f["max_rel_err_pct"],
                         "alpha_fixed_us": link.fixed_us, "alpha_hop_us": link.alpha_us,
                         "alpha_source": f["alpha_source"], "link_beta_gbps": link.beta_gbps,
                         "model": "envelope" if npred is None else "nccl",
                         "nccl_algo": pd.NA if npred is None else npred["algorithm"][i],
                         "nccl_proto": pd.NA if npred is None else npred["protocol"][i],
                         "time_us_envelope": float(env[i]), "rel_err_pct_envelope": 100 * (float(env[i]) / meas - 1)})
    return pd.DataFrame(rows, columns=out_cols)


def validation_summary(validation: pd.DataFrame, large_bytes=LARGE_BYTES) -> pd.DataFrame:
    """Per series and world-size pair: the number of sizes and the median and max |rel_err_pct|,
    over all sizes, over those in the fit's range and over the large sizes (>= large_bytes, 1 MiB:
    the `_large` columns)."""
    if not len(validation):
        return pd.DataFrame()
    keys = [c for c in validation.columns
            if c in SERIES_KEYS or c in ("algorithm", "fit_world_size", "check_world_size")]
    v = validation.assign(abs_err_pct=validation["rel_err_pct"].abs())
    large = parse_size(large_bytes)
    rows = []
    for kv, g in v.groupby(keys, sort=True, dropna=False):
        inr = g[g["in_fit_range"].map(_truthy)]
        big = g[pd.to_numeric(g["size_bytes"]) >= large]
        rows.append({**_key_dict(keys, kv), "n_sizes": len(g), "median_abs_err_pct": g["abs_err_pct"].median(),
                     "max_abs_err_pct": g["abs_err_pct"].max(), "n_in_fit_range": len(inr),
                     "median_abs_err_pct_in_range": inr["abs_err_pct"].median() if len(inr) else NAN,
                     "max_abs_err_pct_in_range": inr["abs_err_pct"].max() if len(inr) else NAN,
                     "n_large": len(big), "median_abs_err_pct_large": big["abs_err_pct"].median() if len(big) else NAN,
                     "max_abs_err_pct_large": big["abs_err_pct"].max() if len(big) else NAN})
    return pd.DataFrame(rows)


def validate_all(comm_summary: pd.DataFrame, tolerance: float = TOLERANCE, preset=DEFAULT_PRESET,
                 nccl: bool = True, env: dict | None = None) -> pd.DataFrame:
    """validate() from the smallest world size >= 2 of the table to each larger one. With `env`
    (env.json), a Gloo world size whose ranks outnumber the host's cores takes no part: its ranks
    time-share the cores (a smoke test, distbench.core.judged.oversubscribed), so its times measure
    that contention, and a model checked against them would be judged on it."""
    d = _usable(comm_summary)
    if env and len(d):
        d = d[~smoke_tests(d, env)]
    sizes = sorted({int(w) for w in pd.to_numeric(d["world_size"]) if w >= 2}) if len(d) else []
    parts = [validate(d, sizes[0], w, tolerance, preset, nccl) for w in sizes[1:]]
    parts = [p for p in parts if len(p)]
    if parts:
        return pd.concat(parts, ignore_index=True)
    return pd.DataFrame(columns=[*_keys(d, with_world_size=False), *VALIDATION_COLUMNS])


def smoke_tests(d: pd.DataFrame, env: dict) -> pd.Series:
    """Per row of a comm table: whether its ranks outnumber the cores of a host (env.json's cpu_count;
    Gloo only), by the rule the Verdict judges with (distbench.core.section.oversubscribed, ranks_per_host)."""
    backend = d["backend"].astype(str) if "backend" in d else pd.Series("gloo", index=d.index)
    ws = pd.to_numeric(d["world_size"]).astype(int)
    crowded = {(b, w): oversubscribed(ranks_per_host(d[backend == b], w, "nodes"), b, env) is not None
               for b, w in set(zip(backend, ws))}
    return pd.Series([crowded[(b, w)] for b, w in zip(backend, ws)], index=d.index, dtype=bool)


# ================================================================ which runs a GPU cluster is predicted from
def measured_on_gpus(*tables: pd.DataFrame | None) -> bool:
    """Whether any of the tables (comm_summary, training_summary, alpha_beta) has an NCCL row, i.e.
    the run measured GPUs. A CPU run (Gloo only) has none: its link fits are CPU processes over
    shared memory or TCP and its compute times a CPU's, so a cluster of the preset's GPUs predicted
    from them would describe no machine (a laptop's run predicted 99.7-100% efficiency at 8-64 GPUs).
    Such a run gets the fits and their check on its own world sizes (validate_all) and no
    prediction_comm / prediction_training rows (their columns only)."""
    return any(t is not None and "backend" in t and (t["backend"].astype(str) == "nccl").any() for t in tables)


# ================================================================ CLI
def _int_list(text: str) -> list[int]:
    return [int(x) for x in str(text).split(",") if x.strip()]


def _size_list(text: str) -> list[int]:
    return [parse_size(x.strip()) for x in str(text).split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m distbench.predict.tables",
        description="Fit alpha-beta models to comm_summary.csv and predict collectives and training at larger "
                    "GPU counts (see the module docstring for the formulas).")
    ap.add_argument("comm_summary", help="results/<label>/tables/comm_summary.csv")
    ap.add_argument("--training", help="results/<label>/tables/training_summary.csv (optional)")
    ap.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS),
                    help=f"cluster preset for the inter-node link and GPUs per node (default {DEFAULT_PRESET})")
    ap.add_argument("--out-dir", required=True, help="where to write the four CSVs")
    ap.add_argument("--gpus", default=",".join(map(str, DEFAULT_GPU_COUNTS)), type=_int_list,
                    help="GPU counts to predict (comma-separated)")
    ap.add_argument("--sizes", default="1KiB,64KiB,1MiB,16MiB,64MiB,256MiB,1GiB", type=_size_list,
                    help="message sizes for prediction_comm.csv (comma-separated, e.g. 1MiB,1GiB)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE,
                    help=f"|relative error| within which a fit holds (default {TOLERANCE})")
    ap.add_argument("--env", help="probe/env.json: the check leaves out Gloo world sizes above its cpu_count (smoke tests)")
    ap.add_argument("--training-intra", choices=("preset", "measured"), default="preset",
                    help="intra-node link for the training prediction: the preset's, or the measured NCCL "
                         "all_reduce fit (default preset)")
    args = ap.parse_args(argv)

    p = get_preset(args.preset)
    try:
        for n in args.gpus:
            _nodes(n, p.gpus_per_node)  # fail early on a count that does not fill whole nodes
    except ValueError as e:
        ap.error(f"--gpus: {e}")
    for path in (args.comm_summary, args.training):
        if path and not Path(path).is_file():
            ap.error(f"no such file: {path}")
    comm = pd.read_csv(args.comm_summary)
    summary = pd.read_csv(args.training) if args.training else None
    out = Path(args.out_dir)
    gpus = measured_on_gpus(comm, summary)

    fits = fit_table(comm, args.tolerance, preset=p)
    atomic_write_csv(out / "alpha_beta.csv", fits)
    cluster = (predict_cluster(fits, p, args.sizes, args.gpus, comm_summary=comm) if gpus
               else pd.DataFrame(columns=CLUSTER_COLUMNS))
    atomic_write_csv(out / "prediction_comm.csv", cluster)
    if not gpus:
        print("distbench.predict.tables: no NCCL row (a CPU run): no GPU-cluster prediction; prediction_comm.csv and "
              "prediction_training.csv hold their columns only", file=sys.stderr)
        training = pd.DataFrame(columns=[*TRAINING_KEYS, *TRAINING_OUT])
    elif args.training:
        intra = pick_link(fits) if args.training_intra == "measured" else None
        if args.training_intra == "measured" and intra is None:
            print("distbench.predict.tables: no NCCL all_reduce fit: the training prediction uses the preset's intra link",
                  file=sys.stderr)
        training = predict_training(summary, p, args.gpus, intra)
    else:
        training = pd.DataFrame(columns=[*TRAINING_KEYS, *TRAINING_OUT])
    atomic_write_csv(out / "prediction_training.csv", training)
    validation = validate_all(comm, args.tolerance, p, env=read_json(args.env, remake(args.env)) if args.env else None)
    atomic_write_csv(out / "prediction_validation.csv", validation)

    print(f"distbench.predict.tables: {len(fits)} fits, {len(training)} training predictions, "
          f"{len(validation)} validation points -> {out}")
    if len(validation):
        summ = validation["rel_err_pct"].abs()
        print(f"  validation: median |error| {summ.median():.1f}%, max {summ.max():.1f}% over {len(summ)} points")
        big = validation[pd.to_numeric(validation["size_bytes"]) >= LARGE_BYTES]["rel_err_pct"].abs()
        if len(big):
            print(f"  validation >= 1 MiB: median |error| {big.median():.1f}%, max {big.max():.1f}% "
                  f"over {len(big)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
