"""The memory family's analysis, from results/<label>/tables/memory.csv (tables only): one summary row per
memory job, and sentences for the report.

Per job (backend, world size, model, config):
- activation_bytes_per_sample: the least-squares slope of activations_bytes over the measured batch
  sizes (ok `measure` rows), with its intercept and the fit's relative residual (RMS of the
  residuals / mean activations); NaN with fewer than two batch sizes.
- at the largest measured batch: the parts, the model-state estimate error, the allocator's peak
  and what it leaves unexplained, the share of the device.
- at the largest measured batch also steady_peak_allocated_bytes: a later step's peak, DDP's
  buckets rebuilt (the peak is a fresh wrapper's first two steps, as a training run starts).
- largest_batch_fits: the largest batch whose `confirm` row ran ok (the search's answer, run again as
  real steps: distbench.memory.harness), largest_batch_confirmed true, and that row's peak
  (largest_batch_peak_allocated_bytes / _reserved_bytes: the peak of that batch, not of a measured
  one). Files from before the confirm (their search rows have no peak) have none: there it
  is the largest `search` row that ran ok, largest_batch_confirmed false (those tries ran under
  no_sync: a batch the real step may not run); a later search that stopped on a failed try before
  its confirm has no answer. first_batch_oom: the smallest batch above it that ran out of memory
  (search or confirm). All empty when there was no search, with the reason in search_note, which
  also says when no batch confirmed. largest_batch_capped: the search stopped at its cap
  (memory.search_max_batch) because that batch fit, so the largest batch that fits is at least
  largest_batch_fits (the row's search_capped; in files from before that column, a search that fit
  and never ran out of memory or failed).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from distbench.core.contract import to_bool
from distbench.memory.contract import MEMORY
from distbench.core.io import atomic_write_csv
from distbench.core.layout_spec import layout_or_baseline
from distbench.core.sizes import human_bytes
from distbench.core.tables import combine

JOB_KEYS = ("backend", "world_size", "model", "config", "strategy", "gradient_as_bucket_view", "hidden_dim",
            "num_layers", "n_heads", "seq_len", "vocab_size", "lora_rank", "dtype", "optimizer")
PARTS = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes")
SUMMARY_COLUMNS = JOB_KEYS + (
    "device_name", "params_total", "params_trainable", "batch_sizes_measured", "largest_measured_batch",
    *PARTS, "parts_bytes", "estimate_states_bytes", "estimate_error_bytes", "peak_allocated_bytes",
    "peak_reserved_bytes", "steady_peak_allocated_bytes", "unexplained_bytes", "device_total_bytes", "peak_share",
    "activation_bytes_per_sample", "activation_intercept_bytes", "activation_fit_residual",
    "largest_batch_fits", "largest_batch_confirmed", "largest_batch_peak_allocated_bytes",
    "largest_batch_peak_reserved_bytes", "largest_batch_capped", "first_batch_oom", "search_note", "status", "message",
)
# the summary's integer columns (bytes, batches, counts: nullable)
INT_COLUMNS = ("params_total", "params_trainable", "largest_measured_batch", *PARTS, "parts_bytes",
                "estimate_states_bytes", "estimate_error_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
                "steady_peak_allocated_bytes", "unexplained_bytes", "device_total_bytes", "largest_batch_fits",
                "largest_batch_peak_allocated_bytes", "largest_batch_peak_reserved_bytes", "first_batch_oom")
NAN = float("nan")


def fit_line(x, y) -> tuple[float, float, float]:
    """(slope, intercept, relative residual) of the least-squares line y = slope x + intercept; the
    residual is the RMS of the residuals divided by the mean of y. NaNs with fewer than two points."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 2 or len(set(x)) < 2:
        return NAN, NAN, NAN
    slope, intercept = np.polyfit(x, y, 1)
    rms = float(np.sqrt(np.mean((y - (slope * x + intercept)) ** 2)))
    return float(slope), float(intercept), rms / float(np.mean(y)) if np.mean(y) else NAN


def _int(v):
    return None if v is None or pd.isna(v) else int(v)


def search_capped(search: pd.DataFrame) -> bool | None:
    """Whether a job's search stopped at its cap (None: no batch fit, so there is no largest to qualify).
    The rows say so (search_capped); older files, without it, only stopped short of an out-of-memory
    at the cap: the search ends without one only there (or on a failed try)."""
    if not (search["status"] == "ok").any():
        return None
    recorded = search["search_capped"].dropna() if "search_capped" in search else pd.Series(dtype="boolean")
    if len(recorded):
        return bool(recorded.any())
    return not search["status"].isin(["oom", "failed", "hung", "timeout"]).any()


def capped_text(batch) -> str:
    """How a capped search's largest batch is said (findings, headline, the section's table)."""
    return f"at least {int(batch)} per rank (the search cap, memory.search_max_batch)"


def _largest(g: pd.DataFrame) -> dict:
    """A job's largest batch that fits, from its search and confirm rows (the module says how)."""
    search, conf = g[g["phase"] == "search"], g[g["phase"] == "confirm"]
    tried = g[g["phase"].isin(["search", "confirm"]) & g["batch_size"].notna()]
    out = {"largest_batch_fits": None, "largest_batch_confirmed": None, "largest_batch_peak_allocated_bytes": None,
           "largest_batch_peak_reserved_bytes": None, "largest_batch_capped": None, "notes": []}
    if len(conf):
        ok = conf[(conf["status"] == "ok") & conf["batch_size"].notna()].sort_values("batch_size")
        if len(ok):
            at = ok.iloc[-1]
            out.update(largest_batch_fits=_int(at["batch_size"]), largest_batch_confirmed=True,
                       largest_batch_peak_allocated_bytes=_int(at["peak_allocated_bytes"]),
                       largest_batch_peak_reserved_bytes=_int(at["peak_reserved_bytes"]),
                       largest_batch_capped=to_bool(at["search_capped"]) is True)
        else:
            top = conf["batch_size"].dropna()
            out["notes"].append(f"no batch from {_int(top.max())} down to {_int(top.min())} ran its confirm steps")
    else:
        ok = search[(search["status"] == "ok") & search["batch_size"].notna()]
        # A file from before the confirm (its tries recorded no peak): the search's own answer, tried
        # under no_sync. A later search that stopped before its confirm (a failed try) has no answer.
        if len(ok) and ok["peak_allocated_bytes"].isna().all():
            out.update(largest_batch_fits=_int(ok["batch_size"].max()), largest_batch_confirmed=False,
                       largest_batch_capped=search_capped(search))
    ooms = tried[tried["status"] == "oom"]["batch_size"]
    above = ooms[ooms > (out["largest_batch_fits"] or 0)]
    out["first_batch_oom"] = _int(above.min()) if len(above) else None
    return out


def _summarize(key, g: pd.DataFrame) -> dict:
    row = dict(zip(JOB_KEYS, key, strict=True))
    measure = g[g["phase"] == "measure"]
    ok = measure[measure["status"] == "ok"].sort_values("batch_size")
    slope, intercept, resid = fit_line(ok["batch_size"], ok["activations_bytes"])
    last = ok.iloc[-1] if len(ok) else None
    tried = g[g["phase"].isin(["search", "confirm"])]
    largest = _largest(g)
    note = "; ".join(sorted(set(tried[tried["status"].isin(["skipped", "failed", "hung", "timeout"])]["message"]
                                .fillna("").astype(str)) - {""}) + largest.pop("notes"))
    bad = g[~g["status"].isin(["ok", "skipped"]) & ~(g["phase"].isin(["search", "confirm"]) & (g["status"] == "oom"))]
    worst = "ok" if bad.empty else str(bad.iloc[0]["status"])
    row.update({
        "device_name": str(g["device_name"].dropna().iloc[0]) if g["device_name"].notna().any() else "",
        "params_total": _int(g["params_total"].dropna().iloc[0]) if g["params_total"].notna().any() else None,
        "params_trainable": _int(g["params_trainable"].dropna().iloc[0]) if g["params_trainable"].notna().any() else None,
        "batch_sizes_measured": " ".join(str(int(b)) for b in ok["batch_size"]),
        "largest_measured_batch": _int(last["batch_size"]) if last is not None else None,
        **{p: _int(last[p]) if last is not None else None for p in (*PARTS, "parts_bytes", "estimate_error_bytes",
                                                                   "peak_allocated_bytes", "peak_reserved_bytes",
                                                                   "steady_peak_allocated_bytes",
                                                                   "unexplained_bytes", "device_total_bytes")},
        "estimate_states_bytes": (_int(last["estimate_params_bytes"] + last["estimate_grads_bytes"]
                                       + last["estimate_optimizer_bytes"]) if last is not None else None),
        "peak_share": float(last["peak_share"]) if last is not None and pd.notna(last["peak_share"]) else NAN,
        "activation_bytes_per_sample": slope, "activation_intercept_bytes": intercept, "activation_fit_residual": resid,
        **largest,
        "search_note": note, "status": worst,
        "message": "" if bad.empty else "; ".join(sorted(set(bad["message"].fillna("").astype(str)) - {""}))[:500],
    })
    return row


def summarize_memory(df: pd.DataFrame) -> pd.DataFrame:
    if df is None or len(df) == 0:
        return pd.DataFrame({c: [] for c in SUMMARY_COLUMNS})
    rows = [_summarize(k, g) for k, g in df.groupby(list(JOB_KEYS), sort=True, dropna=False)]
    out = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    for col in ("largest_batch_capped", "largest_batch_confirmed"):
        out[col] = out[col].astype("boolean")
    for col in INT_COLUMNS:
        out[col] = out[col].astype("Int64")
    return out


def human(n) -> str:
    """Bytes as the reports print sizes (distbench.core.sizes.human_bytes); '?' when missing."""
    return "?" if n is None or pd.isna(n) else human_bytes(n)


def is_capped(r) -> bool:
    """A summary row's largest_batch_capped (a summary read back from CSV, or one from before the
    column: a largest batch with no out-of-memory above it was the cap)."""
    if "largest_batch_capped" not in r.index:
        return "first_batch_oom" in r.index and pd.notna(r["largest_batch_fits"]) and pd.isna(r["first_batch_oom"])
    return to_bool(r["largest_batch_capped"]) is True


def _who(r) -> str:
    unit = ("GPU" if r["world_size"] == 1 else "GPUs") if r["backend"] == "nccl" else ("rank" if r["world_size"] == 1 else "ranks")
    model = str(r["model"])
    dims = "x".join(str(int(r[k])) for k in ("hidden_dim", "num_layers") if pd.notna(r.get(k)))
    shape = (f"{'MLP' if model == 'mlp' else model} {dims}".rstrip() if pd.isna(r.get("seq_len")) else
             f"{model} {int(r['num_layers'])}L/{int(r['hidden_dim'])}d seq {int(r['seq_len'])}")
    return f"{shape}, {r['config']}, {int(r['world_size'])} {unit}"


def largest_text(r) -> str:
    """The largest batch that fits and what stands behind it, each peak beside its own batch: "42 per
    rank (a real DDP step ran at peak 126.7 GiB allocated; batch 46 ran out of memory)" (findings,
    headline). Empty when the job has none."""
    if pd.isna(r.get("largest_batch_fits")):
        return ""
    fits = int(r["largest_batch_fits"])
    said = []
    if to_bool(r.get("largest_batch_confirmed")) is False:
        said.append("an older search, each try under no_sync: no real step confirmed it")
    elif pd.notna(r.get("largest_batch_peak_allocated_bytes")):
        said.append(f"a real DDP step ran at peak {human(r['largest_batch_peak_allocated_bytes'])} allocated")
    if pd.notna(r.get("first_batch_oom")):
        said.append(f"batch {int(r['first_batch_oom'])} ran out of memory")
    if is_capped(r):
        return capped_text(fits) + "".join(f"; {s}" for s in said)
    return f"{fits} per rank" + (f" ({'; '.join(said)})" if said else "")


def memory_findings(summary: pd.DataFrame) -> list[str]:
    """One sentence per job: the split at its largest measured batch, the activation cost per
    sample, the allocator's view, the estimate's error, and the largest batch that fits (each peak
    said at the batch it belongs to)."""
    out = []
    if summary is None or len(summary) == 0:
        return out
    for _, r in summary.iterrows():
        if r["status"] != "ok" or pd.isna(r["largest_measured_batch"]):
            out.append(f"{_who(r)}: {r['status']}" + (f" — {r['message']}" if str(r["message"] or "").strip() else "") + ".")
            continue
        b = int(r["largest_measured_batch"])
        parts = (f"at batch {b} per rank: parameters {human(r['params_bytes'])}, gradients {human(r['grads_bytes'])}, "
                 f"optimizer state {human(r['optimizer_bytes'])}, activations {human(r['activations_bytes'])}")
        text = f"{_who(r)}: {parts}"
        if not math.isnan(r["activation_bytes_per_sample"]):
            text += (f"; activations grow {human(r['activation_bytes_per_sample'])} per sample "
                     f"(fit residual {100 * r['activation_fit_residual']:.1f}%)")
        if pd.notna(r["peak_allocated_bytes"]):
            text += (f"; at batch {b} the allocator's peak is {human(r['peak_allocated_bytes'])} allocated, "
                     f"{human(r['peak_reserved_bytes'])} reserved ({100 * r['peak_share']:.0f}% of the device), "
                     f"{human(r['unexplained_bytes'])} beyond the parts")
            if pd.notna(r.get("steady_peak_allocated_bytes")):
                # DDP rebuilds its buckets on a fresh wrapper's second step; FSDP2 has none to rebuild
                sharded = layout_or_baseline(r.get("strategy")).sharded
                text += (f" (a fresh {'FSDP2' if sharded else 'DDP'} wrapper's first two steps; a later step"
                         f"{'' if sharded else ', its buckets rebuilt,'} peaks at "
                         f"{human(r['steady_peak_allocated_bytes'])})")
        if pd.notna(r["estimate_error_bytes"]) and r["estimate_states_bytes"]:
            err = int(r["estimate_error_bytes"])
            text += (f"; the analytic model-state estimate ({human(r['estimate_states_bytes'])}) is "
                     + ("exact" if err == 0 else f"off by {human(abs(err))} ({'under' if err > 0 else 'over'})"))
        if pd.notna(r["largest_batch_fits"]):
            text += f"; the largest batch that fits is {largest_text(r)}"
        out.append(text + ".")
    return out


def aggregate_memory(job_csvs, out_raw, out_summary) -> pd.DataFrame:
    """Memory job CSVs -> results/<label>/tables/memory.csv (checked against the contract) and the per-job
    summary (activation cost per sample, the allocator's view, the largest batch that fits)."""
    df = combine(job_csvs, MEMORY, sort_by=("backend", "model", "config", "world_size", "phase", "batch_size"))
    summary = summarize_memory(df)
    atomic_write_csv(out_raw, df)
    atomic_write_csv(out_summary, summary)
    return summary
