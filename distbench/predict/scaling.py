"""Section 4 of the prediction (distbench.predict.model's docstring): the training step's scaling
efficiency at N GPUs from the measured training_summary (compute, the overlap window and the
exposed communication at the measured world sizes) and the modelled gradient collectives, and the
in-node check that fits one configuration on its smaller world sizes and compares at a larger one.
Split from distbench.predict.tables, which reads the tables and writes the prediction's CSVs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distbench.core.layout_spec import layout_of
from distbench.predict.cluster import _nodes, predict_hierarchical
from distbench.predict.model import _CLUSTER_OPS, DEFAULT_GPU_COUNTS, DEFAULT_PRESET, NAN, _as_link, get_preset

def _key_dict(keys, values) -> dict:
    values = values if isinstance(values, tuple) else (values,)
    return dict(zip(keys, values))


def _num(v) -> float:
    try:
        return NAN if v is None or pd.isna(v) else float(v)
    except (TypeError, ValueError):
        return NAN


TRAINING_KEYS = ("backend", "model", "strategy", "hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size",
                 "lora_rank", "compile", "batch_size", "scaling", "dtype", "optimizer", "bucket_cap_mb",
                 "gradient_as_bucket_view", "static_graph", "broadcast_buffers", "comm_hook", "grad_accum",
                 "nccl_env", "config")
TRAINING_OUT = ("ref_world_size", "preset", "algorithm", "gpus", "nodes", "gpus_per_node", "intra_alpha_us",
                "intra_beta_gbps", "intra_fixed_us", "inter_alpha_us", "inter_beta_gbps", "grad_bytes", "n_buckets",
                "compute_only_ms", "comm_alone_ms_measured", "exposed_comm_ms_measured", "step_time_ms_measured",
                "overlap_window_ms", "overhead_ms", "comm_model_ms_at_ref", "comm_ms", "exposed_comm_ms",
                "step_time_ms", "step_time_ms_1gpu", "efficiency", "measured_world_sizes", "check_fit_world_sizes",
                "check_world_size", "check_efficiency_predicted", "check_efficiency_measured", "check_error_points",
                "band_points", "note")



def training_comm_ms(row, n_gpus: int, intra, inter, gpus_per_node: int, algorithm: str = "hierarchical") -> float:
    """Modelled gradient communication of one optimizer step at n_gpus, in ms (section 4)."""
    n = int(n_gpus)
    grad = _num(row.get("grad_bytes"))
    if n <= 1 or math.isnan(grad) or grad <= 0:
        return 0.0
    nb = _num(row.get("n_buckets"))
    nb = int(nb) if not math.isnan(nb) and nb >= 1 else 1

    def t(op, total):
        algo = algorithm if op in _CLUSTER_OPS[algorithm] else "hierarchical"
        return nb * predict_hierarchical(op, total / nb, n, intra, inter, gpus_per_node, algo)

    if (spec := layout_of(row.get("strategy"))) is not None and spec.sharded and not spec.group:  # FSDP over every rank
        params = _num(row.get("params_total"))
        param_bytes = params * (2 if str(row.get("dtype")) == "bfloat16" else 4) if not math.isnan(params) else grad
        us = 2 * t("all_gather", param_bytes) + t("reduce_scatter", grad)
    else:
        us = t("all_reduce", grad)
    return float(us) / 1e3


def _measured_step(g: pd.DataFrame, n: int) -> float:
    """The measured median step of the rows of one configuration at world size n (NaN if none)."""
    at = g[pd.to_numeric(g["world_size"], errors="coerce") == n]
    return _num(at["step_time_ms_median"].iloc[0]) if len(at) and "step_time_ms_median" in at else NAN


def _config_prediction(g: pd.DataFrame, gpu_counts, p, li, algorithm: str) -> list[dict]:
    """The rows of one configuration (its summary rows at every measured world size) predicted at
    gpu_counts: the output columns of predict_training without the configuration's keys."""
    ref = g.iloc[int(np.argmax(pd.to_numeric(g["world_size"]).to_numpy()))]
    n_ref = int(ref["world_size"])
    compute = _num(ref["compute_only_ms_median"])
    step_meas = _num(ref.get("step_time_ms_median"))
    comm_alone = _num(ref.get("comm_alone_ms_median"))
    exposed = _num(ref.get("exposed_comm_ms"))
    if math.isnan(exposed):
        exposed = step_meas - compute
    exposed_pos = max(exposed, 0.0) if not math.isnan(exposed) else 0.0
    notes = []
    floor = 0.0  # exposed time a 1-rank run pays for its gradient sync, which the collectives at N replace
    if n_ref < 2 or math.isnan(comm_alone):
        window = 0.0
        overhead = exposed_pos if n_ref >= 2 else 0.0
        notes.append("no multi-rank run: overlap window assumed 0" if n_ref < 2
                     else "no comm_alone time: overlap window assumed 0")
        if n_ref < 2:
            # FSDP2 on one rank still gathers and reduce-scatters (local copies): 23.7 ms exposed of its
            # 167 ms on H100, 23.9 at 2 ranks, 20.7 at 4 (benchmarks/results/training-lm-h100x4-2026-11-26):
            # the same time, not added to the collectives' but a floor under them
            floor = exposed_pos
    else:
        window = max(0.0, comm_alone - exposed_pos)
        overhead = max(0.0, exposed_pos - comm_alone)
    if str(ref.get("scaling", "weak")) == "strong":
        notes.append("strong scaling: predicted at the measured per-rank batch (as weak)")
    # Efficiency is against one GPU: where that step was measured it is the denominator, since
    # compute + overhead leaves out what a 1-rank run still pays (FSDP2's local gathers and copies,
    # DDP's bucket copies).
    step1 = _measured_step(g, 1)
    if math.isnan(step1) or step1 <= 0:
        step1 = compute + overhead + floor
    else:
        notes.append("1-GPU step measured")
    at_ref = training_comm_ms(ref, n_ref, li, p.inter, p.gpus_per_node, algorithm)
    measured_ws = ",".join(str(w) for w in sorted({int(w) for w in pd.to_numeric(g["world_size"])}))
    rows = []
    for n in gpu_counts:
        gg, m = _nodes(n, p.gpus_per_node)
        comm = training_comm_ms(ref, n, li, p.inter, p.gpus_per_node, algorithm)
        exp_n = max(floor, comm - window)
        step = compute + overhead + exp_n
        rows.append({"ref_world_size": n_ref, "preset": p.name, "algorithm": algorithm, "gpus": int(n),
                     "nodes": m, "gpus_per_node": gg, "intra_alpha_us": li.alpha_us,
                     "intra_beta_gbps": li.beta_gbps, "intra_fixed_us": li.fixed_us, "inter_alpha_us": p.inter.alpha_us,
                     "inter_beta_gbps": p.inter.beta_gbps, "grad_bytes": ref.get("grad_bytes"),
                     "n_buckets": ref.get("n_buckets"), "compute_only_ms": compute, "comm_alone_ms_measured": comm_alone,
                     "exposed_comm_ms_measured": exposed, "step_time_ms_measured": step_meas,
                     "overlap_window_ms": window, "overhead_ms": overhead, "comm_model_ms_at_ref": at_ref,
                     "comm_ms": comm, "exposed_comm_ms": exp_n, "step_time_ms": step,
                     "step_time_ms_1gpu": step1, "efficiency": step1 / step if step > 0 else NAN,
                     "measured_world_sizes": measured_ws, "note": "; ".join(notes)})
    return rows


def check_training_config(g: pd.DataFrame, fit_world_sizes, check_ws: int, preset=DEFAULT_PRESET, intra=None,
                          algorithm: str = "hierarchical") -> dict | None:
    """The training prediction of one configuration checked on its own node: fitted on its rows at
    fit_world_sizes only (what the predictor would have had there), predicted at check_ws and
    compared with the efficiency measured there (step at 1 GPU / step at check_ws). None when a
    1-GPU step, a fit row or the check row is missing. error_points = predicted - measured, in
    percentage points (negative: the prediction is pessimistic)."""
    p = get_preset(preset)
    li = _as_link(intra) if intra is not None else p.intra
    ws = pd.to_numeric(g["world_size"], errors="coerce")
    fit = g[ws.isin([int(w) for w in fit_world_sizes])]
    step1, step_n = _measured_step(g, 1), _measured_step(g, int(check_ws))
    if not len(fit) or math.isnan(step1) or math.isnan(step_n) or step_n <= 0 or int(check_ws) in set(ws[fit.index]):
        return None
    pred = _config_prediction(fit, [int(check_ws)], p, li, algorithm)[0]
    measured = step1 / step_n
    return {"fit_world_sizes": ",".join(str(int(w)) for w in sorted(set(ws[fit.index]))),
            "check_world_size": int(check_ws), "efficiency_predicted": pred["efficiency"],
            "efficiency_measured": measured, "error_points": 100 * (pred["efficiency"] - measured),
            "step_time_ms_predicted": pred["step_time_ms"], "step_time_ms_measured": step_n,
            "comm_ms_predicted": pred["comm_ms"], "exposed_comm_ms_predicted": pred["exposed_comm_ms"],
            "overhead_ms": pred["overhead_ms"],
            "ref_world_size": pred["ref_world_size"]}


def _training_rows(training_summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The usable rows of a training summary (status ok, a compute time) and its configuration keys."""
    d = training_summary.copy()
    if "comm_alone_ms_median" not in d and "allreduce_alone_ms_median" in d:  # tables before the rename
        d["comm_alone_ms_median"] = d["allreduce_alone_ms_median"]
    if "status" in d:
        d = d[d["status"].astype(str) == "ok"]
    d = d[pd.to_numeric(d["compute_only_ms_median"], errors="coerce").notna()]
    return d, [k for k in TRAINING_KEYS if k in d.columns]


def predict_training(training_summary: pd.DataFrame, preset=DEFAULT_PRESET, gpu_counts=DEFAULT_GPU_COUNTS,
                     intra=None, algorithm: str = "hierarchical") -> pd.DataFrame:
    """Step time and weak-scaling efficiency of each training configuration at each GPU count
    (section 4). `preset`: a PRESETS name or a ClusterPreset; `intra`: a Link replacing the
    preset's intra-node link (e.g. a measured one, `pick_link`). The efficiency's 1-GPU step is the
    measured one where the configuration ran on 1 GPU (else compute + overhead).

    The in-node check (check_* columns, the same on every row of a configuration): where the
    configuration was measured on 1 GPU and at two or more world sizes, the same prediction fitted
    on the world sizes below the largest and compared there (check_training_config). band_points:
    |check_error_points| on the rows beyond the checked world size (the prediction carries at least
    that error there), empty within it or where nothing was checked."""
    p = get_preset(preset)
    li = _as_link(intra) if intra is not None else p.intra
    d, keys = _training_rows(training_summary)
    rows = []
    if len(d) and keys:
        for kv, g in d.groupby(keys, sort=True, dropna=False):
            ws = sorted({int(w) for w in pd.to_numeric(g["world_size"])})
            check = (check_training_config(g, ws[:-1], ws[-1], p, li, algorithm)
                     if len(ws) >= 2 and ws[0] == 1 else None)
            base = _key_dict(keys, kv)
            for r in _config_prediction(g, gpu_counts, p, li, algorithm):
                if check is not None:
                    beyond = r["gpus"] > check["check_world_size"]
                    r.update(check_fit_world_sizes=check["fit_world_sizes"],
                             check_world_size=check["check_world_size"],
                             check_efficiency_predicted=check["efficiency_predicted"],
                             check_efficiency_measured=check["efficiency_measured"],
                             check_error_points=check["error_points"],
                             band_points=abs(check["error_points"]) if beyond else NAN)
                rows.append({**base, **r})
    return pd.DataFrame(rows, columns=[*keys, *TRAINING_OUT])
