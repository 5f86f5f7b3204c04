"""Scaling analysis of the DDP training family, from results/<label>/tables/training.csv (tables only).

`summarize_training` turns the per-step rows (contract: `distbench.training.contract.TRAINING_COLUMNS`) into
one row per DDP configuration and world size; `add_scaling` adds throughput-based scaling
efficiency and, given a GPU-hour price, cost; `verdict` and `training_findings` turn those rows into
sentences that cite their numbers; `best_config` names the tuning winner.

The formulas, each written once (times are medians over the measured steps, in ms):

- exposed_comm_ms = step_time_ms_median − compute_only_ms_median: what gradient communication adds
  to a step beyond compute alone (the same step under no_sync). Kept raw: noise can make it
  slightly negative.
- overlap_fraction = clip(1 − exposed_comm_ms / comm_alone_ms_median, 0, 1): the share of the
  gradient all-reduce (timed alone, back to back) hidden behind backward. NaN at world size 1
  (nothing to communicate between ranks) or without an all-reduce time.
- tail_comm_ms = min(last_bucket_ms_median, max(exposed_comm_ms, 0)): the part that cannot overlap,
  since DDP all-reduces the last bucket only after backward has produced it.
- compute_slowdown_ms = max(exposed_comm_ms, 0) − tail_comm_ms: the rest of the exposed time:
  compute slowed by the collective running beside it (SMs, memory bandwidth), and any other
  communication that did not overlap.
- noise allowance = max(2 × (step_time_ms_p95 − step_time_ms_p5), 2% × step_time_ms_median); the
  bounds check compute_only ≤ step ≤ compute_only + comm_alone holds each side to within it.
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

from distbench.core.choices import STATUS_SEVERITY
from distbench.training.contract import TRAINING
from distbench.core.io import atomic_write_csv
from distbench.core.tables import combine
from distbench.training.analysis.mfu import mfu, peak_for
from distbench.core.choices import backend_name
from distbench.core.units import pct as _pct

KEYS = ("backend", "world_size", "model", "strategy", "hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size",
        "lora_rank", "compile", "batch_size", "global_batch_size", "scaling", "dtype", "optimizer", "bucket_cap_mb", "gradient_as_bucket_view", "static_graph",
        "broadcast_buffers", "comm_hook", "grad_accum", "nccl_env", "config")
METRICS = (
    "n_steps", "step_time_ms_median", "step_time_ms_p5", "step_time_ms_p95", "step_time_ms_cv",
    "compute_only_ms_median", "comm_alone_ms_median", "last_bucket_ms_median", "samples_per_s_median",
    "samples_per_s_per_device_median", "tokens_per_s_median", "tokens_per_s_per_device_median", "params_total",
    "params_trainable", "flops_per_sample", "tflops_per_device", "mfu", "peak_tflops", "peak_device", "mfu_note",
    "device_name", "attention_kernel", "exposed_comm_ms", "overlap_fraction", "tail_comm_ms",
    "compute_slowdown_ms", "grad_bytes", "n_buckets", "peak_mem_allocated_bytes", "peak_mem_reserved_bytes",
    "energy_j_per_step_median", "energy_j_per_1k_samples", "status", "message", "bounds_ok", "bounds_note",
)
SUMMARY_COLUMNS = KEYS + METRICS
SCALING_COLUMNS = ("plain_1gpu_samples_per_s", "efficiency_vs_plain_1gpu", "efficiency_vs_own_1gpu",
                   "cost_usd_per_1k_samples")

PLAIN = "plain"  # the config label of DDP's defaults (distbench.training.plan.ddp_label)
# Worst first: a job's status is the worst over its rows (as in distbench.comm.analysis.summary).
# The workload a 1-rank baseline must share with the N-rank row (besides the batch, see _batch_key).
# The strategy is not part of it: FSDP is compared with plain DDP on one rank (its own 1-rank run is
# the `fsdp` config's).
WORKLOAD = ("backend", "model", "hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size", "lora_rank", "compile",
            "scaling", "dtype", "optimizer")

NOISE_SPREAD_FACTOR = 2.0  # allowance: this many times the step's p95 − p5 spread ...
NOISE_MIN_FRACTION = 0.02  # ... but at least this fraction of the step
COMM_BOUND_FRACTION = 0.25  # exposed communication at least this share of the step: communication-bound

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


def _sig(x: float, digits: int = 3) -> str:
    """Significant digits without scientific notation: 0.0000757, 0.0125, 3.2."""
    return np.format_float_positional(float(x), precision=digits, unique=False, fractional=False, trim="-")




def noise_allowance_ms(step_ms, p5_ms=None, p95_ms=None) -> float:
    """max(NOISE_SPREAD_FACTOR × (p95 − p5), NOISE_MIN_FRACTION × step), in ms (the spread term
    drops out when p5/p95 are missing)."""
    step = _num(step_ms)
    spread = _num(p95_ms) - _num(p5_ms)
    floor = NOISE_MIN_FRACTION * step
    return floor if math.isnan(spread) else max(NOISE_SPREAD_FACTOR * spread, floor)


def _row_allowance(row) -> float:
    return noise_allowance_ms(row.get("step_time_ms_median"), row.get("step_time_ms_p5"),
                              row.get("step_time_ms_p95"))


def _median(s: pd.Series) -> float:
    s = pd.to_numeric(s, errors="coerce").dropna()
    return float(s.median()) if len(s) else NAN


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
def check_bounds(step_ms, compute_ms, allreduce_ms, allowance_ms, world_size) -> tuple[object, str]:
    """compute_only ≤ step ≤ compute_only + comm_alone, each side within `allowance_ms`.

    Returns (True/False, "" or which inequality failed), or (pd.NA, why not checked) at world size 1
    or when a number is missing.
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
        notes.append(f"step {_ms(s)} ms is faster than compute alone ({_ms(c)} ms) by {_ms(c - s)} ms, "
                     f"more than the {_ms(a)} ms noise allowance")
    if s > c + r + a:
        notes.append(f"step {_ms(s)} ms exceeds compute alone plus the all-reduce alone ({_ms(c)} + {_ms(r)} "
                     f"= {_ms(c + r)} ms) by {_ms(s - c - r)} ms, more than the {_ms(a)} ms noise allowance")
    return (not notes), "; ".join(notes)


# ---------------------------------------------------------------- summary
def _summarize_job(key: tuple, g: pd.DataFrame) -> dict:
    row = dict(zip(KEYS, key, strict=True))
    ok = g[g["status"] == "ok"]
    step_rows = ok[ok["phase"] == "step"]
    comp = ok[ok["phase"] == "compute_only"]
    ar = ok[ok["phase"] == "comm_alone"]
    t = pd.to_numeric(step_rows["step_time_ms"], errors="coerce").dropna()
    step = float(t.median()) if len(t) else NAN
    p5 = float(t.quantile(0.05)) if len(t) else NAN
    p95 = float(t.quantile(0.95)) if len(t) else NAN
    compute = _median(comp["step_time_ms"])
    allreduce = _median(ar["step_time_ms"])
    last = _median(ar["last_bucket_ms"])
    ws = int(row["world_size"])

    exposed = step - compute
    if ws == 1 or math.isnan(allreduce) or allreduce <= 0 or math.isnan(exposed):
        overlap = NAN
    else:
        overlap = float(np.clip(1 - exposed / allreduce, 0.0, 1.0))
    exposed_pos = max(exposed, 0.0) if not math.isnan(exposed) else NAN
    tail = min(last, exposed_pos) if not (math.isnan(last) or math.isnan(exposed_pos)) else NAN
    slowdown = exposed_pos - tail

    energy = _median(step_rows["energy_j"])
    gbs = _num(row["global_batch_size"])
    energy_1k = energy / gbs * 1000 if gbs > 0 else NAN

    flops = _num(_first(g["flops_per_sample"]))  # an integer count; float for the arithmetic
    sps_dev = _median(step_rows["samples_per_s_per_device"])
    device = str(_first(g["device_name"]) or "")
    tflops, mfu_value, match = mfu(flops, sps_dev, device, str(row["dtype"])) if flops == flops and sps_dev == sps_dev \
        else (NAN, NAN, peak_for(device, str(row["dtype"])))
    bounds_ok, note = check_bounds(step, compute, allreduce, noise_allowance_ms(step, p5, p95), ws)
    worst = min(g["status"].fillna("ok"), key=lambda s: STATUS_SEVERITY.get(s, -1))
    messages = [m for m in g["message"].fillna("") if str(m).strip()]
    row.update({
        "n_steps": len(t),
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
        "overlap_fraction": overlap,
        "tail_comm_ms": tail,
        "compute_slowdown_ms": slowdown,
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
    plain config (config == "plain", DDP's defaults) with the same backend, dtype and workload
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
    out = summary.copy()
    n = len(out)
    plain_x, own_x = np.full(n, NAN), np.full(n, NAN)
    for i, (_, row) in enumerate(out.iterrows()):
        plain_x[i] = _baseline(out, row, PLAIN)
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


def _with_scaling(summary: pd.DataFrame) -> pd.DataFrame:
    return summary if "efficiency_vs_plain_1gpu" in summary else add_scaling(summary)


# ---------------------------------------------------------------- verdict
def _ranks(row) -> str:
    ws = int(row["world_size"])
    unit = ("GPU" if ws == 1 else "GPUs") if str(row.get("backend")) == "nccl" else ("rank" if ws == 1 else "ranks")
    return f"{ws} {unit}"


def verdict(row) -> tuple[str, str]:
    """(label, sentence) for one summary row, from seed 003's bottleneck reading. Labels:

    - host-bound: step > compute_only + comm_alone + noise allowance, i.e. slower than compute
      plus all gradient communication done one after the other: the excess is neither (host
      overhead, launches, stragglers). Checked first, since such a step also shows large
      "exposed communication" that communication cannot explain.
    - communication-bound: exposed_comm_ms ≥ COMM_BOUND_FRACTION of the step (world size > 1).
    - compute-bound: otherwise.
    - unknown: the job is not ok or its step times are missing.
    """
    row = dict(row)
    status = str(row.get("status") or "ok")
    who = _ranks(row)
    if status != "ok":
        msg = str(row.get("message") or "").strip()
        return "unknown", f"{who} ({row.get('config')}): {status}" + (f" — {msg}" if msg else "") + "."
    step, comp = _num(row.get("step_time_ms_median")), _num(row.get("compute_only_ms_median"))
    if math.isnan(step) or math.isnan(comp):
        return "unknown", f"{who} ({row.get('config')}): no ddp or compute_only step times to judge."
    ar, exposed = _num(row.get("comm_alone_ms_median")), step - comp
    allowance = _row_allowance(row)
    ws = int(row["world_size"])
    if not math.isnan(ar) and step > comp + ar + allowance:
        return "host-bound", (
            f"{who}: each {_ms(step)} ms step takes {_ms(step - comp - ar)} ms more than compute alone "
            f"({_ms(comp)} ms) plus the whole gradient all-reduce done serially ({_ms(ar)} ms), beyond the "
            f"{_ms(allowance)} ms noise allowance: the time goes to the host (launches, Python, "
            f"synchronisation, a straggling rank), not to the GPU or the network.")
    share = exposed / step
    if ws == 1:  # one rank: DDP has nobody to talk to; what it adds over no_sync is its own overhead
        return "compute-bound", (
            f"{who}: no communication between ranks; each {_ms(step)} ms step spends {_ms(max(exposed, 0.0))} ms "
            f"({_pct(max(share, 0.0))}) beyond compute alone in DDP's own bookkeeping; compute "
            f"({_ms(comp)} ms under no_sync) dominates.")
    parts = [(f"{who}: {_ms(max(exposed, 0.0))} ms of each {_ms(step)} ms step ({_pct(max(share, 0.0))}) "
              f"is exposed communication")]
    overlap = _num(row.get("overlap_fraction"))
    if not math.isnan(overlap):
        parts.append(f"{_pct(overlap)} of the gradient all-reduce ({_ms(ar)} ms alone) overlaps backward")
    tail, slow = _num(row.get("tail_comm_ms")), _num(row.get("compute_slowdown_ms"))
    if exposed > 0 and not (math.isnan(tail) or math.isnan(slow)):
        parts.append(f"of the exposed time, {_ms(tail)} ms is the last bucket's all-reduce after backward "
                     f"ends and {_ms(slow)} ms is compute slowed by {backend_name(row.get('backend'))} "
                     f"running beside it")
    if share >= COMM_BOUND_FRACTION:
        return "communication-bound", "; ".join(parts) + "."
    parts.append(f"compute ({_ms(comp)} ms under no_sync) dominates")
    return "compute-bound", "; ".join(parts) + "."


# ---------------------------------------------------------------- best configuration and findings
@dataclass(frozen=True)
class BestConfig:
    config: str
    world_size: int
    efficiency: float  # efficiency_vs_plain_1gpu of the winner (fraction)
    plain_efficiency: float  # the plain config's at the same world size (NaN if it did not run ok)
    gain_points: float  # 100 × (efficiency − plain_efficiency): percentage points over plain DDP
    row: dict


def best_config(summary: pd.DataFrame) -> BestConfig | None:
    """At the largest world size (among ok rows with an efficiency), the ok configuration with the
    highest efficiency_vs_plain_1gpu, and its gain over plain DDP in percentage points."""
    s = _with_scaling(summary)
    if "model" in s:  # the tuning sweep is the MLP's
        s = s[s["model"].fillna("mlp") == "mlp"]
    ok = s[(s["status"] == "ok") & s["efficiency_vs_plain_1gpu"].notna() & (s["world_size"] > 1)]
    if ok.empty:
        return None
    ws = int(ok["world_size"].max())
    at = ok[ok["world_size"] == ws].sort_values(["efficiency_vs_plain_1gpu", "config"], ascending=[False, True])
    win = at.iloc[0]
    plain = at[at["config"] == PLAIN]["efficiency_vs_plain_1gpu"]
    p = float(plain.iloc[0]) if len(plain) else NAN
    e = float(win["efficiency_vs_plain_1gpu"])
    return BestConfig(str(win["config"]), ws, e, p, 100 * (e - p), win.to_dict())


def _config_name(config) -> str:
    return "plain DDP" if str(config) == PLAIN else str(config)


def _failures(s: pd.DataFrame) -> list[str]:
    bad = s[s["status"] != "ok"].copy()
    if bad.empty:
        return []
    bad["_rank"] = bad["status"].map(lambda x: STATUS_SEVERITY.get(x, -1))
    out = []
    for _, r in bad.sort_values(["_rank", "world_size", "config"]).iterrows():
        msg = str(r["message"] or "").strip()
        line = f"ws{int(r['world_size'])} config {r['config']}: {r['status']}" + (f" — {msg}" if msg else "")
        if r["status"] == "wrong":
            line = f"⚠ CORRECTNESS FAILURE: {line}; do not trust its numbers"
        out.append(line + ".")
    return out


def workload_name(r) -> str:
    """'MLP 4096x8', 'gpt 24L/32H/2048d seq 1024', 'lora r16 on gpt 24L/...'."""
    model = str(r.get("model") or "mlp")
    if model == "mlp":
        return f"MLP {int(r['hidden_dim'])}x{int(r['num_layers'])}"
    shape = f"gpt {int(r['num_layers'])}L/{_int_or(r.get('n_heads'))}H/{int(r['hidden_dim'])}d seq {_int_or(r.get('seq_len'))}"
    return f"lora r{_int_or(r.get('lora_rank'))} on {shape}" if model == "lora" else shape


def _int_or(v) -> str:
    x = _num(v)
    return "?" if math.isnan(x) else str(int(x))


def _strategy_name(r) -> str:
    if str(r.get("strategy") or "ddp") == "fsdp":
        return "FSDP"
    return _config_name(r["config"])


def lm_throughput(r) -> str | None:
    """'12,345 tokens/s (6,172 per GPU), 123 TFLOP/s per GPU, MFU 45.1% of the H100 SXM bfloat16
    peak (989.4 TFLOP/s)' for a gpt/lora row; None for the MLP."""
    if str(r.get("model") or "mlp") == "mlp":
        return None
    tok, tok_dev = _num(r.get("tokens_per_s_median")), _num(r.get("tokens_per_s_per_device_median"))
    if math.isnan(tok):
        return None
    unit = "GPU" if str(r.get("backend")) == "nccl" else "rank"
    text = f"{tok:,.0f} tokens/s ({tok_dev:,.0f} per {unit})"
    tflops, m = _num(r.get("tflops_per_device")), _num(r.get("mfu"))
    if not math.isnan(tflops):
        text += f", {_sig(tflops)} TFLOP/s per {unit}"
    if not math.isnan(m):
        text += f", MFU {_pct(m, 1)} of the {r.get('peak_device')} {r.get('dtype')} peak ({_sig(_num(r.get('peak_tflops')))} TFLOP/s)"
    return text  # no MFU: training_findings says why once


def _finding(r) -> str | None:
    compiled = ", torch.compile" if str(r.get("compile")).lower() == "true" else ""
    head = f"{workload_name(r)}, {_ranks(r)} ({_strategy_name(r)}{compiled}, {r['scaling']} scaling)"
    parts = []
    lm = lm_throughput(r)
    if lm:
        parts.append(lm)
    eff, own = _num(r.get("efficiency_vs_plain_1gpu")), _num(r.get("efficiency_vs_own_1gpu"))
    if not math.isnan(eff):
        text = f"{_pct(eff, 1)} scaling efficiency against the plain 1-GPU run"
        if str(r["config"]) != PLAIN and not math.isnan(own):
            text += f" ({_pct(own, 1)} against its own 1-GPU run)"
        parts.append(text)
    step, exposed = _num(r.get("step_time_ms_median")), _num(r.get("exposed_comm_ms"))
    if int(r["world_size"]) == 1:  # nothing to communicate: the throughput (and MFU) is the finding
        return f"{head}: " + "; ".join(parts) + "." if parts else None
    if not (math.isnan(step) or math.isnan(exposed)):
        if exposed > 0:
            parts.append(f"{_ms(exposed)} ms of each {_ms(step)} ms step is exposed communication")
        else:
            parts.append(f"no exposed communication (the {_ms(step)} ms step is {_ms(-exposed)} ms faster than "
                         f"compute alone, within noise)")
    overlap = _num(r.get("overlap_fraction"))
    if not math.isnan(overlap):
        parts.append(f"{_pct(overlap)} of gradient communication overlaps compute")
    cost = _num(r.get("cost_usd_per_1k_samples"))
    if not math.isnan(cost):
        parts.append(f"${_sig(cost)} per 1K samples")
    energy = _num(r.get("energy_j_per_1k_samples"))
    if not math.isnan(energy):
        parts.append(f"{_sig(energy)} J per 1K samples")
    bounds = r.get("bounds_ok")
    if bounds is not None and not pd.isna(bounds) and not bool(bounds):
        parts.append(f"timing check failed: {r['bounds_note']}")
    return f"{head}: " + "; ".join(parts) + "." if parts else None


def training_findings(summary: pd.DataFrame) -> list[str]:
    """Sentences for the report, each from numbers in the table (missing numbers: no clause):
    failures first (worst status first), then one per ok (world size > 1, config), plain first,
    then the best configuration at the largest world size when several were measured there."""
    if summary is None or len(summary) == 0:
        return []
    s = _with_scaling(summary)
    out = _failures(s)
    if "model" not in s:
        s = s.assign(model="mlp")
    # the language models' 1-GPU rows carry the MFU headline; the MLP's say nothing new
    ok = s[(s["status"] == "ok") & ((s["world_size"] > 1) | (s["model"] != "mlp"))].copy()
    ok["_plain"] = ok["config"] != PLAIN
    ok["_model"] = ok["model"].map({m: i for i, m in enumerate(("mlp", "gpt", "lora"))})
    for _, r in ok.sort_values(["_model", "_plain", "config", "world_size"]).iterrows():
        line = _finding(r.to_dict())
        if line:
            out.append(line)
    lm = ok[(ok["model"] != "mlp") & ok["mfu"].isna()] if "mfu" in ok else ok.iloc[0:0]
    for note in sorted(set(lm["mfu_note"].dropna().astype(str)) - {"", "nan"}):
        out.append(f"MFU: {note}.")
    out += lora_findings(s)
    best = best_config(s)
    if best is not None:
        mlp = s[s["model"] == "mlp"]
        n_configs = mlp[(mlp["status"] == "ok") & (mlp["world_size"] == best.world_size)]["config"].nunique()
        if n_configs > 1:
            line = f"{_ranks({'world_size': best.world_size, 'backend': best.row.get('backend')})}, best: " \
                   f"{_config_name(best.config)} at {_pct(best.efficiency, 1)}"
            if not math.isnan(best.gain_points):
                line += f", {best.gain_points:+.1f} points over plain DDP ({_pct(best.plain_efficiency, 1)})"
            out.append(line + ".")
    return out


def lora_findings(summary: pd.DataFrame) -> list[str]:
    """Per world size > 1 and strategy where both ran ok: what adapter-only sync does to the bytes
    and the exposed communication, against the full fine-tune of the same model."""
    s = _with_scaling(summary)
    if "model" not in s:
        return []
    ok = s[s["status"] == "ok"]
    out = []
    for _, lora in ok[(ok["model"] == "lora") & (ok["world_size"] > 1)].iterrows():
        same = (ok["model"] == "gpt") & (ok["world_size"] == lora["world_size"]) & (ok["strategy"] == lora["strategy"])
        for col in ("num_layers", "hidden_dim", "seq_len", "backend", "dtype"):
            same &= ok[col] == lora[col]
        full = ok[same]
        if full.empty:
            continue
        full = full.iloc[0]
        tb, fb = _num(lora["grad_bytes"]), _num(full["grad_bytes"])
        tp, fp = _num(lora["params_trainable"]), _num(full["params_trainable"])
        if math.isnan(tb) or math.isnan(fb) or fb <= 0:
            continue
        text = (f"lora vs full fine-tune, {_ranks(lora)} ({_strategy_name(lora)}): {_sig(tp / 1e6)}M of "
                f"{_sig(_num(lora['params_total']) / 1e6)}M parameters trainable ({_pct(tp / fp, 2)} of the full "
                f"model's {_sig(fp / 1e6)}M); {_sig(tb / 1e6)} MB of gradients synced per step instead of "
                f"{_sig(fb / 1e6)} MB")
        le, fe = _num(lora["exposed_comm_ms"]), _num(full["exposed_comm_ms"])
        if not (math.isnan(le) or math.isnan(fe)):
            text += (f"; exposed communication {_ms(max(le, 0.0))} ms of a {_ms(_num(lora['step_time_ms_median']))} ms "
                     f"step, against {_ms(max(fe, 0.0))} ms of {_ms(_num(full['step_time_ms_median']))} ms")
        le, fe = _num(lora["efficiency_vs_plain_1gpu"]), _num(full["efficiency_vs_plain_1gpu"])
        if not (math.isnan(le) or math.isnan(fe)):
            text += f"; scaling efficiency {_pct(le, 1)} against {_pct(fe, 1)}"
        out.append(text + ".")
    return out


def aggregate_training(job_csvs, out_raw, out_summary, cost_gpu_hour_usd=None) -> pd.DataFrame:
    """Training job CSVs -> results/<label>/tables/training.csv (checked against the contract) and the
    per-configuration summary with scaling efficiency, exposed communication and overlap."""
    df = combine(job_csvs, TRAINING, sort_by=("backend", "config", "world_size", "phase", "step"))
    summary = add_scaling(summarize_training(df), cost_gpu_hour_usd)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    return summary
