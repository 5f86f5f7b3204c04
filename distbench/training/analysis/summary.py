"""Scaling analysis of the DDP training family, from results/<label>/tables/training.csv (tables only).

`summarize_training` turns the per-step rows (contract: `distbench.training.contract.TRAINING_COLUMNS`) into
one row per DDP configuration and world size; `add_scaling` adds throughput-based scaling
efficiency and, given a GPU-hour price, cost. The sentences made of those rows (`bottleneck`,
`training_findings`, `best_config`) are in distbench.training.analysis.findings.

The formulas, each written once (times are medians over the measured steps, in ms):

- exposed_comm_ms = step_time_ms_median − compute_only_ms_median: everything a step adds beyond
  compute alone (the same step under no_sync). Kept raw: noise can make it slightly negative. It is
  not all communication: see the split below.
- The step split (`step_split`), three parts that add up to the step:
    compute                = compute_only_ms_median;
    exposed_comm_capped_ms = clip(exposed_comm_ms, 0, comm_alone_ms_median): exposed communication,
                             never more than the collectives take alone (0 at world size 1: nothing
                             to communicate; NaN without a comm_alone time);
    other_ms               = step − compute − exposed_comm_capped_ms: neither compute nor the
                             collectives (host-bound or idle time, DDP's bookkeeping such as the
                             gradient copy into buckets). Negative only when the step beats compute
                             alone (noise).
- overlap_fraction = clip(1 − exposed_comm_ms / comm_alone_ms_median, 0, 1): the share of the
  gradient all-reduce (timed alone, back to back) hidden behind backward. NaN at world size 1
  (nothing to communicate between ranks) or without an all-reduce time.
- tail_comm_ms = min(last_bucket_ms_median, exposed_comm_capped_ms): the part that cannot overlap,
  since DDP all-reduces the last bucket only after backward has produced it.
- exposed_comm_other_buckets_ms = exposed_comm_capped_ms − tail_comm_ms: the other buckets'
  all-reduces that did not hide behind backward. Nothing here measures compute slowed by a
  collective running beside it (that would take a trace comparison), so no column claims it.
- bounds allowance (bounds_allowance_ms) = √(spread(compute_only)² + spread(comm_alone)²) +
  NOISE_MIN_FRACTION × step, spread = p95 − p5 of that phase's steps: the measured noise of the two
  phases the step is compared with (independent, so combined in quadrature), plus a small floor.
  The step's own spread is not in it: host jitter is part of what the check must be able to find.
  The bounds check compute_only ≤ step ≤ compute_only + comm_alone holds each side to within it.
- efficiency (seed 000) = samples_per_s_median(N, config) / (N × samples_per_s_median(1, plain)); see
  `add_scaling` for which 1-rank run is the baseline, and why strong scaling uses the same formula.
- cost_usd_per_1k_samples (seed 002) = N × gpu_hour_usd / 3600 / samples_per_s_median × 1000.
- energy_j_per_1k_samples = energy_j_per_step_median / global_batch_size × 1000.
- tflops_per_device = flops_per_sample × samples_per_s_per_device_median / 1e12 (model FLOPs, see
  distbench.workloads.gpt.flops_per_token); mfu = tflops_per_device / the device's peak for the
  dtype (distbench.training.analysis.mfu), empty with mfu_note saying why when the device is unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distbench.training.contract import COMPILE_SUFFIX, TRAINING, TRAINING_SEVERITY
from distbench.core.io import atomic_write_csv
from distbench.core.layout_spec import BASELINE, SPECS, layout_of, layout_or_baseline
from distbench.core.units import human_time_us
from distbench.core.tables import combine
from distbench.training.analysis.mfu import mfu, peak_for

KEYS = ("backend", "world_size", "model", "strategy", "shard_size", "tp_size", "hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size",
        "lora_rank", "compile", "batch_size", "global_batch_size", "scaling", "dtype", "optimizer", "bucket_cap_mb", "gradient_as_bucket_view", "static_graph",
        "broadcast_buffers", "comm_hook", "grad_accum", "nccl_env", "config")
METRICS = (
    "n_steps", "compile_time_s", "step_time_ms_median", "step_time_ms_p5", "step_time_ms_p95", "step_time_ms_cv",
    "compute_only_ms_median", "comm_alone_ms_median", "last_bucket_ms_median", "samples_per_s_median",
    "samples_per_s_per_device_median", "tokens_per_s_median", "tokens_per_s_per_device_median", "params_total",
    "params_trainable", "flops_per_sample", "tflops_per_device", "mfu", "peak_tflops", "peak_device", "mfu_note",
    "device_name", "attention_kernel", "exposed_comm_ms", "exposed_comm_capped_ms", "other_ms", "overlap_fraction",
    "tail_comm_ms", "exposed_comm_other_buckets_ms", "compute_only_ms_p5", "compute_only_ms_p95", "comm_alone_ms_p5",
    "comm_alone_ms_p95", "bounds_allowance_ms", "grad_bytes", "n_buckets", "peak_mem_allocated_bytes", "peak_mem_reserved_bytes",
    "energy_j_per_step_median", "energy_j_per_1k_samples", "status", "message", "bounds_ok", "bounds_note",
)
SUMMARY_COLUMNS = KEYS + METRICS
SCALING_COLUMNS = ("plain_1gpu_samples_per_s", "efficiency_vs_plain_1gpu", "efficiency_vs_own_1gpu",
                   "cost_usd_per_1k_samples")

PLAIN = "plain"  # the config label of DDP's defaults (distbench.training.plan.ddp_label)


def compiled(rows: pd.DataFrame) -> pd.Series:
    """Each row's `compile` as a boolean (training.lm.compile): a table from before the column, or a
    row without it, reads as eager (False); the text 'True' of a CSV read without its dtype as True."""
    if rows is None or "compile" not in rows:
        return pd.Series(False, index=getattr(rows, "index", None), dtype=bool)
    return rows["compile"].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0")).astype(bool)


def with_compile(rows: pd.DataFrame) -> pd.DataFrame:
    """The table with its `compile` column as booleans (compiled): False where a table from before it
    has none."""
    return rows.assign(compile=compiled(rows)) if rows is not None else rows


def plain_label(row) -> str:
    """The config label of the plain (DDP defaults) run a row's efficiency is taken against: 'plain', or
    'plain+compile' for a compiled row (its own mode's 1-rank run: distbench.training.plan.lm_label)."""
    return PLAIN + (COMPILE_SUFFIX if str(row.get("compile")).strip().lower() in ("true", "1", "1.0") else "")
# Worst first: a job's status is the worst over its rows (as in distbench.comm.analysis.summary).
# The workload a 1-rank baseline must share with the N-rank row (besides the batch, see _batch_key).
# The strategy is not part of it: FSDP is compared with plain DDP on one rank (its own 1-rank run is
# the `fsdp` config's).
WORKLOAD = ("backend", "model", "hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size", "lora_rank", "compile",
            "scaling", "dtype", "optimizer")

# The bounds allowance's floor, as a fraction of the step: timer granularity and the medians' own
# jitter when the phases' spreads are (nearly) zero.
NOISE_MIN_FRACTION = 0.02

NAN = float("nan")


# ---------------------------------------------------------------- small helpers
def _num(v) -> float:
    """A float, NaN for anything missing (None, pd.NA, NaN)."""
    try:
        return NAN if v is None or pd.isna(v) else float(v)
    except (TypeError, ValueError):
        return NAN


def _present(v) -> bool:
    return not math.isnan(_num(v))


def _ms(x: float) -> str:
    """Milliseconds for sentences: three significant digits, whole numbers from 100 up."""
    x = float(x)
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _time_ms(x: float) -> str:
    """A time given in ms, with the unit that fits (the README's units rule): 332 µs, 11.9 ms, 2.05 s."""
    return human_time_us(float(x) * 1e3)


def spread_ms(p5_ms, p95_ms) -> float:
    """p95 − p5 of one phase's step times, NaN when either is missing."""
    return _num(p95_ms) - _num(p5_ms)


def noise_allowance_ms(step_ms, compute_spread_ms=NAN, comm_spread_ms=NAN) -> float:
    """√(compute_spread² + comm_spread²) + NOISE_MIN_FRACTION × step, in ms: the measured noise of
    the phases the step is compared with, plus a floor (a missing spread counts as 0)."""
    spreads = [x for x in (_num(compute_spread_ms), _num(comm_spread_ms)) if not math.isnan(x)]
    return math.sqrt(sum(x * x for x in spreads)) + NOISE_MIN_FRACTION * _num(step_ms)


def row_allowance_ms(row) -> float:
    """noise_allowance_ms of one summary row, from its phases' p5/p95 (absent columns: the floor only)."""
    get = row.get
    return noise_allowance_ms(get("step_time_ms_median"),
                              spread_ms(get("compute_only_ms_p5"), get("compute_only_ms_p95")),
                              spread_ms(get("comm_alone_ms_p5"), get("comm_alone_ms_p95")))


@dataclass(frozen=True)
class StepSplit:
    """One step's median split into parts that add up to it (ms); see the module docstring.
    exposed_comm/other are NaN when unknown (no compute_only time, or no comm_alone time at world
    size > 1); tail/other_buckets also without a last-bucket time."""

    step: float
    compute: float
    beyond_compute: float  # step − compute, raw (exposed_comm_ms)
    exposed_comm: float  # capped at the collectives alone (exposed_comm_capped_ms)
    other: float  # neither compute nor the collectives (other_ms)
    tail: float  # the last bucket's all-reduce after backward (tail_comm_ms)
    other_buckets: float  # exposed_comm − tail (exposed_comm_other_buckets_ms)


def step_split(step_ms, compute_ms, comm_alone_ms, last_bucket_ms, world_size) -> StepSplit:
    """The split of a step: compute, exposed communication (never more than comm_alone), the rest."""
    step, compute, comm, last = _num(step_ms), _num(compute_ms), _num(comm_alone_ms), _num(last_bucket_ms)
    beyond = step - compute
    if int(world_size) == 1:  # nothing to communicate: whatever is beyond compute is "other"
        exposed = 0.0 if not math.isnan(beyond) else NAN
    elif math.isnan(beyond) or math.isnan(comm):
        exposed = NAN
    else:
        exposed = min(max(beyond, 0.0), max(comm, 0.0))
    other = beyond - exposed
    if exposed == 0.0:  # nothing exposed (or nothing to communicate): no tail either
        tail = 0.0
    else:
        tail = min(last, exposed) if not (math.isnan(last) or math.isnan(exposed)) else NAN
    return StepSplit(step, compute, beyond, exposed, other, tail, exposed - tail)


def row_split(row) -> StepSplit:
    """step_split of one summary row, from its medians."""
    get = row.get
    return step_split(get("step_time_ms_median"), get("compute_only_ms_median"), get("comm_alone_ms_median"),
                      get("last_bucket_ms_median"), get("world_size"))


def _median(s: pd.Series) -> float:
    s = pd.to_numeric(s, errors="coerce").dropna()
    return float(s.median()) if len(s) else NAN


def _median_p5_p95(s: pd.Series) -> tuple[float, float, float]:
    """(median, p5, p95), linear interpolation; NaNs when no value."""
    s = pd.to_numeric(s, errors="coerce").dropna()
    if not len(s):
        return NAN, NAN, NAN
    return float(s.median()), float(s.quantile(0.05)), float(s.quantile(0.95))


def _max_int(s: pd.Series):
    s = pd.to_numeric(s, errors="coerce").dropna()
    return int(s.max()) if len(s) else pd.NA


def _first(s: pd.Series):
    s = s.dropna()
    return s.iloc[0] if len(s) else None


def _first_int(s: pd.Series):
    s = pd.to_numeric(s, errors="coerce").dropna()
    return int(s.iloc[0]) if len(s) else pd.NA


# ---------------------------------------------------------------- the bounds check
def check_bounds(step_ms, compute_ms, allreduce_ms, allowance_ms, world_size,
                 collectives: str = SPECS[BASELINE].collectives_words) -> tuple[object, str]:
    """compute_only ≤ step ≤ compute_only + comm_alone, each side within `allowance_ms`.

    Returns (True/False, "" or which inequality failed), or (pd.NA, why not checked) at world size 1
    or when a number is missing. `collectives` names what the comm_alone phase replayed, in the row's
    layout's words (LayoutSpec.collectives_words: FSDP2's all-gathers and reduce-scatters, not an all-reduce).
    """
    if int(world_size) == 1:
        return pd.NA, "not checked: world size 1 has no communication between ranks"
    names = {"step": step_ms, "compute_only": compute_ms, "comm_alone": allreduce_ms}
    missing = [k for k, v in names.items() if not _present(v)]
    if missing:
        return pd.NA, f"not checked: no {', '.join(missing)} time"
    s, c, r, a = float(step_ms), float(compute_ms), float(allreduce_ms), float(allowance_ms)
    notes = []
    if c > s + a:
        notes.append(f"step {_time_ms(s)} is faster than compute alone ({_time_ms(c)}) by {_time_ms(c - s)}, "
                     f"more than the {_time_ms(a)} noise allowance (the phases' p5-p95 spreads and "
                     f"{NOISE_MIN_FRACTION:.0%} of the step)")
    if s > c + r + a:
        notes.append(f"step {_time_ms(s)} exceeds compute alone plus {collectives} alone ({_time_ms(c)} + {_time_ms(r)} "
                     f"= {_time_ms(c + r)}) by {_time_ms(s - c - r)}, more than the {_time_ms(a)} noise allowance "
                     f"(the phases' p5-p95 spreads and {NOISE_MIN_FRACTION:.0%} of the step): that much of the "
                     f"step is neither compute nor the collectives")
    return (not notes), "; ".join(notes)


# ---------------------------------------------------------------- summary
def _summarize_job(key: tuple, g: pd.DataFrame) -> dict:
    row = dict(zip(KEYS, key, strict=True))
    ok = g[g["status"] == "ok"]
    step_rows = ok[ok["phase"] == "step"]
    comp = ok[ok["phase"] == "compute_only"]
    ar = ok[ok["phase"] == "comm_alone"]
    t = pd.to_numeric(step_rows["step_time_ms"], errors="coerce").dropna()
    step, p5, p95 = _median_p5_p95(step_rows["step_time_ms"])
    compute, compute_p5, compute_p95 = _median_p5_p95(comp["step_time_ms"])
    allreduce, comm_p5, comm_p95 = _median_p5_p95(ar["step_time_ms"])
    last = _median(ar["last_bucket_ms"])
    ws = int(row["world_size"])

    split = step_split(step, compute, allreduce, last, ws)
    exposed = split.beyond_compute
    if ws == 1 or math.isnan(allreduce) or allreduce <= 0 or math.isnan(exposed):
        overlap = NAN
    else:
        overlap = float(np.clip(1 - exposed / allreduce, 0.0, 1.0))
    allowance = noise_allowance_ms(step, compute_p95 - compute_p5, comm_p95 - comm_p5)

    energy = _median(step_rows["energy_j"])
    gbs = _num(row["global_batch_size"])
    energy_1k = energy / gbs * 1000 if gbs > 0 else NAN

    flops = _num(_first(g["flops_per_sample"]))  # an integer count; float for the arithmetic
    sps_dev = _median(step_rows["samples_per_s_per_device"])
    device = str(_first(g["device_name"]) or "")
    tflops, mfu_value, match = mfu(flops, sps_dev, device, str(row["dtype"])) if flops == flops and sps_dev == sps_dev \
        else (NAN, NAN, peak_for(device, str(row["dtype"])))
    bounds_ok, note = check_bounds(step, compute, allreduce, allowance, ws,
                                   layout_or_baseline(row.get("strategy")).collectives_words)
    # A phase a layout cannot have (the 2D layouts' compute_only or comm_alone: PhaseError "skipped")
    # leaves the job ok when its real step ran; its message says why
    statuses = g["status"].fillna("ok")
    if len(step_rows) and getattr(layout_of(row.get("strategy")), "skips_a_phase", False):
        statuses = statuses[(statuses != "skipped") | (g["phase"] == "step")]
    worst = min(statuses, key=lambda s: TRAINING_SEVERITY.get(s, -1))
    messages = [m for m in g["message"].fillna("") if str(m).strip()]
    # compile_time_s: each compiled phase's own (step, compute_only: each compiles its variant of the step),
    # summed; the timed steps above never include it. Empty for an eager job (and rows from before it).
    compiled_s = pd.to_numeric(g.get("compile_time_s", pd.Series(dtype=float)), errors="coerce")
    by_phase = compiled_s.groupby(g["phase"]).first().dropna() if len(compiled_s) else compiled_s
    row.update({
        "n_steps": len(t),
        "compile_time_s": float(by_phase.sum()) if len(by_phase) else NAN,
        "step_time_ms_median": step,
        "step_time_ms_p5": p5,
        "step_time_ms_p95": p95,
        "step_time_ms_cv": float(t.std(ddof=0) / t.mean()) if len(t) > 1 and t.mean() > 0 else NAN,
        "compute_only_ms_median": compute,
        "comm_alone_ms_median": allreduce,
        "last_bucket_ms_median": last,
        "samples_per_s_median": _median(step_rows["samples_per_s"]),
        "samples_per_s_per_device_median": sps_dev,
        "tokens_per_s_median": _median(step_rows["tokens_per_s"]),
        "tokens_per_s_per_device_median": _median(step_rows["tokens_per_s_per_device"]),
        "params_total": _first_int(g["params_total"]),
        "params_trainable": _first_int(g["params_trainable"]),
        "flops_per_sample": flops,
        "tflops_per_device": tflops,
        "mfu": mfu_value,
        "peak_tflops": match.tflops if match.tflops else NAN,
        "peak_device": match.device,
        "mfu_note": match.note,
        "device_name": device,
        "attention_kernel": str(_first(g["attention_kernel"]) or ""),
        "exposed_comm_ms": exposed,
        "exposed_comm_capped_ms": split.exposed_comm,
        "other_ms": split.other,
        "overlap_fraction": overlap,
        "tail_comm_ms": split.tail,
        "exposed_comm_other_buckets_ms": split.other_buckets,
        "compute_only_ms_p5": compute_p5,
        "compute_only_ms_p95": compute_p95,
        "comm_alone_ms_p5": comm_p5,
        "comm_alone_ms_p95": comm_p95,
        "bounds_allowance_ms": allowance,
        "grad_bytes": _first_int(g["grad_bytes"]),
        "n_buckets": _first_int(g["n_buckets"]),
        "peak_mem_allocated_bytes": _max_int(g["peak_mem_allocated_bytes"]),
        "peak_mem_reserved_bytes": _max_int(g["peak_mem_reserved_bytes"]),
        "energy_j_per_step_median": energy,
        "energy_j_per_1k_samples": energy_1k,
        "status": worst,
        "message": str(messages[0]) if messages else "",
        "bounds_ok": bounds_ok,
        "bounds_note": note,
    })
    return row


def summarize_training(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and world size (columns: SUMMARY_COLUMNS).

    Step statistics come from the `step` phase's ok rows; compute_only / comm_alone /
    last_bucket medians from those phases' ok rows; status is the worst over all the job's rows,
    message the first non-empty one; peak memory the max over the job's rows. The derived columns
    follow the formulas in this module's docstring.
    """
    if df is None or len(df) == 0:
        return pd.DataFrame({c: [] for c in SUMMARY_COLUMNS})
    rows = [_summarize_job(key, g) for key, g in df.groupby(list(KEYS), sort=True, dropna=False)]
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for col in ("grad_bytes", "n_buckets", "peak_mem_allocated_bytes", "peak_mem_reserved_bytes", "params_total",
                "params_trainable"):
        out[col] = out[col].astype("Int64")
    out["bounds_ok"] = out["bounds_ok"].astype("boolean")
    out["n_steps"] = out["n_steps"].astype("int64")
    return out


# ---------------------------------------------------------------- scaling efficiency and cost
def _batch_key(row) -> str:
    # Weak scaling keeps the per-rank batch fixed; strong scaling keeps the global batch fixed, so a
    # strong-scaling 1-rank baseline is the run that does the whole global batch on one rank.
    return "global_batch_size" if str(row["scaling"]) == "strong" else "batch_size"


def ddp_only_label(config: str, nccl_env) -> str:
    """The config label without its NCCL-settings part (labels are "<ddp knobs>+<nccl label>",
    the NCCL label alone when every DDP knob is at its default)."""
    env = str(nccl_env) if isinstance(nccl_env, str) and nccl_env not in ("", "default") else ""
    if not env:
        return config
    if config == env:
        return PLAIN
    return config[: -len(env) - 1] if config.endswith("+" + env) else config


def _baseline(summary: pd.DataFrame, row, config=None) -> float:
    """samples_per_s_median of the ok 1-rank run sharing `row`'s workload (and `config`, if given)."""
    cand = summary[(summary["world_size"] == 1) & (summary["status"] == "ok")]
    for col in WORKLOAD + (_batch_key(row),):
        cand = cand[(cand[col] == row[col]).fillna(False)] if pd.notna(row[col]) else cand[cand[col].isna()]
    if config is not None:
        cand = cand[cand["config"] == config]  # the label names every DDP knob and NCCL setting
    x = pd.to_numeric(cand["samples_per_s_median"], errors="coerce").dropna()
    return float(x.iloc[0]) if len(x) else NAN


def add_scaling(summary: pd.DataFrame, cost_gpu_hour_usd: float | None = None) -> pd.DataFrame:
    """The summary plus SCALING_COLUMNS (a copy).

    efficiency_vs_plain_1gpu (seed 000) = X(N, config) / (N × X(1, plain)), with X =
    samples_per_s_median, as a fraction (0.9 = 90%). The baseline is the ok world-size-1 run of the
    plain config (config == "plain", DDP's defaults; "plain+compile" for a compiled row, whose workload
    includes `compile`) with the same backend, dtype and workload
    (model, hidden_dim, num_layers, optimizer, scaling) and the same batch: under weak scaling the
    same per-rank batch_size; under strong scaling (global batch fixed) the same global_batch_size,
    i.e. the 1-rank run that processes the whole global batch. Strong scaling uses the same
    throughput formula: with the global batch B fixed, X = B / T, so it equals the classic
    T(1) / (N × T(N)). plain_1gpu_samples_per_s is that baseline (the ideal line is N × it).

    efficiency_vs_own_1gpu is the same ratio against the configuration's own 1-rank run (same
    config label and DDP knobs; for a tuning point with NCCL settings, the 1-rank run with its DDP
    knobs and NCCL's defaults, which the plan makes), NaN when that run is absent. A configuration that is slower on
    one rank (a compression hook's casts) looks better against itself than against plain; the
    plain baseline is the fair one.

    cost_usd_per_1k_samples (seed 002) = N × cost_gpu_hour_usd / 3600 / X(N) × 1000: the GPU time
    1000 samples take, priced; NaN unless cost_gpu_hour_usd is given.
    """
    out = with_compile(summary.copy())
    n = len(out)
    plain_x, own_x = np.full(n, NAN), np.full(n, NAN)
    for i, (_, row) in enumerate(out.iterrows()):
        plain_x[i] = _baseline(out, row, plain_label(row))  # a compiled row: the compiled plain run
        own_x[i] = _baseline(out, row, row["config"])
        if np.isnan(own_x[i]):  # a tuning point's own 1-rank run has NCCL's defaults
            own_x[i] = _baseline(out, row, ddp_only_label(row["config"], row.get("nccl_env")))
    ws = pd.to_numeric(out["world_size"], errors="coerce").to_numpy(dtype=float) if n else np.array([])
    x = pd.to_numeric(out["samples_per_s_median"], errors="coerce").to_numpy(dtype=float) if n else np.array([])
    ok = (out["status"] == "ok").to_numpy(dtype=bool) if n else np.array([], dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff_plain = np.where(ok, x / (ws * plain_x), NAN)
        eff_own = np.where(ok, x / (ws * own_x), NAN)
        if cost_gpu_hour_usd is not None and n:
            cost = np.where(ok & (x > 0), ws * float(cost_gpu_hour_usd) / 3600 / x * 1000, NAN)
        else:
            cost = np.full(n, NAN)
    out["plain_1gpu_samples_per_s"] = plain_x
    out["efficiency_vs_plain_1gpu"] = eff_plain
    out["efficiency_vs_own_1gpu"] = eff_own
    out["cost_usd_per_1k_samples"] = cost
    return out


def aggregate_training(job_csvs, out_raw, out_summary, cost_gpu_hour_usd=None) -> pd.DataFrame:
    """Training job CSVs -> results/<label>/tables/training.csv (checked against the contract) and the
    per-configuration summary with scaling efficiency, exposed communication and overlap."""
    df = combine(job_csvs, TRAINING, sort_by=("backend", "config", "world_size", "phase", "step"))
    summary = add_scaling(summarize_training(df), cost_gpu_hour_usd)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    return summary
