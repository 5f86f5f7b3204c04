"""One node's NCCL sweeps, read together: the rows a fit may use (`_usable`), the series keys, and
NCCL's calibrated model of one series with what the node's other ops say about it (`calibrate`: the
ring loop's bubble from all_reduce against all_gather / reduce_scatter, nccl_channels section 3). Used by the report's prediction
(distbench.predict.tables) and the self-check (distbench.predict.selfcheck) alike.

Analysis code: numpy, pandas, the standard library and distbench.predict only.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distbench.predict.model import MODELLED_OPS, NAN, SERIES_KEYS
from distbench.predict.nccl_channels import BUBBLE_OPS, bubble_from_etas
from distbench.predict.nccl_model import CalibratedComm, fit_calibrated


def _truthy(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    return str(v).strip().lower() in ("true", "1", "yes")


def _usable(df: pd.DataFrame) -> pd.DataFrame:
    """Rows to fit or compare: status ok, correct True, a modelled op, a size and a time > 0."""
    d = df.copy()
    if "status" in d:
        d = d[d["status"].astype(str) == "ok"]
    if "correct" in d:
        # astype(bool): on no rows map() gives an object Series, which [] would read as column names
        d = d[d["correct"].map(_truthy).astype(bool)]
    d = d[d["op"].isin(MODELLED_OPS)]
    d["size_bytes"] = pd.to_numeric(d["size_bytes"], errors="coerce")
    d["time_us_median"] = pd.to_numeric(d["time_us_median"], errors="coerce")
    return d[(d["size_bytes"] > 0) & (d["time_us_median"] > 0)]


def _keys(df: pd.DataFrame, with_world_size: bool = True) -> list[str]:
    return [k for k in SERIES_KEYS if k in df.columns and (with_world_size or k != "world_size")]


def _match(d: pd.DataFrame, keys, values: dict) -> pd.DataFrame:
    """The rows of d whose `keys` equal those of `values` (a missing value matches missing)."""
    for k in keys:
        if k in d.columns and k in values:
            d = d[d[k].isna()] if pd.isna(values[k]) else d[d[k] == values[k]]
    return d


def calibrate(comm_summary: pd.DataFrame, series: dict, sizes, times_us, n0: int, topo=None,
              algorithms=("tree", "ring")) -> CalibratedComm:
    """fit_calibrated on one series' sweep at n0 with what the node's other ops say: the ring loop's
    bubble for all_reduce, all_gather and reduce_scatter (series_bubble). ValueError as fit_calibrated."""
    cal = fit_calibrated(series["op"], sizes, times_us, int(n0), topo, algorithms)
    return cal.with_bubble(series_bubble(comm_summary, series, int(n0))) if series["op"] in BUBBLE_OPS else cal


def series_bubble(comm_summary: pd.DataFrame, series: dict, n0: int) -> float:
    """The ring loop's bubble b (nccl_model section 3) of the node a series was measured on: from
    the Simple efficiency of all_reduce and that of all_gather / reduce_scatter (their mean) fitted
    on the same node's sweeps at n0 ranks with the series' backend, dtype, timing, NCCL settings and
    rank aggregation (any in/out of place: their median). NaN where the node measured only one
    side, or the ratio gives no b (nccl_model.bubble_from_etas)."""
    d = _usable(comm_summary)
    if not len(d):
        return NAN
    d = _match(d, [k for k in _keys(d) if k not in ("op", "inplace", "world_size")], series)
    d = d[pd.to_numeric(d["world_size"], errors="coerce") == int(n0)]
    etas = {}
    for op in BUBBLE_OPS:
        vals = []
        sweeps = d[d["op"] == op]
        for g in ([g for _, g in sweeps.groupby("inplace", dropna=False)] if "inplace" in d.columns else [sweeps]):
            if g["size_bytes"].nunique() < 3:
                continue
            try:
                f = fit_calibrated(op, g["size_bytes"], g["time_us_median"], int(n0)).protos["Simple"]
            except ValueError:
                continue
            if f.pinned:
                vals.append(f.eta)
        if vals:
            etas[op] = float(np.median(vals))
    gather = [etas[o] for o in ("all_gather", "reduce_scatter") if o in etas]
    if "all_reduce" not in etas or not gather:
        return NAN
    return bubble_from_etas(etas["all_reduce"], float(np.mean(gather)), int(n0))
