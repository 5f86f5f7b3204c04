"""training.inspect's tables, from the jobs' `inspect/` directories, the training summary,
the comm family's summary (the standalone figures) and the matmul sweep:

- training_instep.csv: one row per bucket (op, dtype, size) of each job's timed steps
  (distbench.training.analysis.instep.BUCKET_COLUMNS), with its sentence;
- training_split.csv: one row per job: the four-part split (four_part_split, below), whether it adds
  up, the bounds check redone with the measured slowdown and the named rest, MFU against the spec
  peak and against the achievable one, and the headline naming the step's largest cost.

The per-step figures of a job's traces (distbench.traces.split.job_trace_split: the GPU timeline's
states, the compute slowdown, the extra kernels) are handed in by the caller (`trace_split`). The
workflow's step reads them from the table the traces' step writes, training_trace_split.csv
(distbench.traces.split_step; read_trace_split, below): the training family reads no trace itself,
and distbench.traces imports no family.

The split of the timed step (medians from training.csv; the trace's figures per step, median over
the traced steps, rank by rank, then those of the rank the others waited for: job_trace_split):

    compute        = compute_only_ms (timed)
    slowdown       = compute slowdown (traces)
    exposed_comm   = NCCL running with no compute kernel beside it (traces)
    rest           = step − compute − slowdown − exposed_comm, named from the traces:
                     extra kernels (optimizer / communication bookkeeping), memory copies, host gaps
                     (idle time beyond the compute-only step's), and `unexplained` = rest − named.

It adds up within noise when |unexplained| is within the phases' noise allowance
(distbench.training.analysis.summary.noise_allowance_ms): the traces then explain the step.

When the traced steps are slower than the timed ones (the profiler records every host operation, so a
host-bound step, e.g. FSDP2's many small ones, slows under it while GPU kernels keep their durations),
the profiler's added time (traced − timed step) is taken off the host gaps, up to the host gaps the
traces measured: a host-bound GPU idles while the profiler runs on the host. `profiler_host_ms` says
how much was taken. What it cannot explain (the added time beyond the host gaps: a peer's slowed host
showing as exposed communication) stays unexplained, and the split then does not add up
(benchmarks/results/instep-mlp-fsdp-h100x2-2026-11-27: the control that the MLP's FSDP step is
host-bound)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from distbench.training.analysis.instep import BUCKET_COLUMNS, FAR_BELOW_RATIO, PARTS, bucket_table, job_instances
from distbench.training.analysis.summary import check_bounds

# a job's inspect directory -> its traces' per-step figures ({} without GPU traces):
# distbench.traces.split.job_trace_split, or read_trace_split's reader of its table
TraceSplit = Callable[[Path], dict]

# training_trace_split.csv's figures that are not floats (distbench.traces.split.TRACE_SPLIT_FIELDS)
TRACE_SPLIT_INTS = ("rank", "n_traced_steps")
TRACE_SPLIT_BOOLS = ("compute_only_traced",)

SPLIT_COLUMNS = ("job", "model", "strategy", "world_size", "source", "note", "step_ms", "step_trace_ms", "compute_ms",
                 "compute_slowdown_ms", "exposed_comm_ms", "rest_ms", "rest_optimizer_ms", "rest_comm_bookkeeping_ms",
                 "rest_memory_copies_ms", "rest_host_gaps_ms", "rest_unexplained_ms", "profiler_host_ms", "allowance_ms",
                 "adds_up",
                 "bounds_ok", "bounds_note", "tflops_per_device", "mfu_spec", "spec_peak_tflops", "mfu_achievable",
                 "achievable_tflops", "achievable_sm_clock_mhz", "achievable_power_limit_w", "largest_cost",
                 "headline")


def achievable_peak(matmul: pd.DataFrame | None, device: str, dtype: str) -> dict:
    """The best TFLOP/s of the sweep on `device` in `dtype` (the slowest GPU's best: a synchronous job
    runs at its pace), with the SM clock and power limit it ran at; {} without a sweep row."""
    if matmul is None or matmul.empty:
        return {}
    ok = matmul[(matmul["status"] == "ok") & (matmul["dtype"] == dtype) & (matmul["device_name"] == device)]
    if ok.empty:
        return {}
    best = ok.loc[ok.groupby("device_index")["tflops"].idxmax()]
    slowest = best.loc[best["tflops"].idxmin()]
    return {"achievable_tflops": float(slowest["tflops"]), "achievable_sm_clock_mhz": slowest.get("sm_clock_mhz"),
            "achievable_power_limit_w": slowest.get("power_limit_w")}


def four_part_split(step_ms: float, compute_ms: float, trace: dict, allowance_ms: float) -> dict:
    """The timed step in four parts (module docstring), with the rest named and the check that the
    parts add up: adds_up is |unexplained| <= allowance_ms (NaN inputs: not decided). Traced steps
    slower than the timed step by more than the allowance: the profiler's added time comes off the
    host gaps, at most all of them (`profiler_host_ms`; module docstring)."""
    if trace.get("compute_only_traced") is False:
        return step_only_split(step_ms, trace, allowance_ms)
    slowdown, exposed = trace.get("slowdown_ms", math.nan), trace.get("exposed_comm", math.nan)
    rest = step_ms - compute_ms - slowdown - exposed
    host_gaps = trace.get("idle", math.nan) - trace.get("compute_only_idle_ms", math.nan)
    added = trace.get("step_trace_ms", math.nan) - step_ms
    profiler_host = 0.0
    if added == added and allowance_ms == allowance_ms and added > allowance_ms and host_gaps == host_gaps:
        profiler_host = min(added, max(host_gaps, 0.0))
        host_gaps -= profiler_host
    memory = trace.get("memory_other", math.nan) - trace.get("compute_only_memory_ms", math.nan)
    named = {"optimizer_ms": trace.get("optimizer_extra_ms", math.nan),
             "comm_bookkeeping_ms": trace.get("other_extra_ms", math.nan),
             "memory_copies_ms": memory, "host_gaps_ms": host_gaps}
    unexplained = rest - sum(named.values())
    adds_up = abs(unexplained) <= allowance_ms if unexplained == unexplained and allowance_ms == allowance_ms else None
    return {"compute_ms": compute_ms, "compute_slowdown_ms": slowdown, "exposed_comm_ms": exposed, "rest_ms": rest,
            **{f"rest_{k}": v for k, v in named.items()}, "rest_unexplained_ms": unexplained,
            "profiler_host_ms": profiler_host, "allowance_ms": allowance_ms, "adds_up": adds_up}


def step_only_split(step_ms: float, trace: dict, allowance_ms: float) -> dict:
    """The split of a layout with no compute-only step (fsdp_tp: tensor parallel's all-reduces sit inside
    forward and backward), from its real step's GPU timeline alone: compute = the compute kernels'
    time, their slowdown by communication included (not separable without a compute-only step: NaN);
    exposed communication = NCCL running with no compute kernel beside it; the rest = memory copies and
    host gaps (all the step's idle time: no compute-only step to set it beside), the profiler's added
    time taken off the host gaps as in four_part_split. Optimizer and bookkeeping kernels are compute
    kernels here (NaN: named only against a compute-only step)."""
    compute, exposed = trace.get("compute", math.nan), trace.get("exposed_comm", math.nan)
    rest = step_ms - compute - exposed
    host_gaps = trace.get("idle", math.nan)
    added = trace.get("step_trace_ms", math.nan) - step_ms
    profiler_host = min(added, max(host_gaps, 0.0)) if added == added and added > allowance_ms else 0.0
    host_gaps -= profiler_host
    named = {"optimizer_ms": math.nan, "comm_bookkeeping_ms": math.nan,
             "memory_copies_ms": trace.get("memory_other", math.nan), "host_gaps_ms": host_gaps}
    unexplained = rest - named["memory_copies_ms"] - host_gaps
    adds_up = abs(unexplained) <= allowance_ms if unexplained == unexplained and allowance_ms == allowance_ms else None
    return {"compute_ms": compute, "compute_slowdown_ms": math.nan, "exposed_comm_ms": exposed, "rest_ms": rest,
            **{f"rest_{k}": v for k, v in named.items()}, "rest_unexplained_ms": unexplained,
            "profiler_host_ms": profiler_host, "allowance_ms": allowance_ms, "adds_up": adds_up}


def headline(row: dict, buckets: list[dict]) -> str:
    """The step's largest cost beyond compute, in plain words; and, when the collectives inside the step
    run far below their standalone speed, that the link is fine and the overlap is what costs."""
    parts = {k: row.get(k) for k in PARTS if row.get(k) == row.get(k) and row.get(k) is not None}
    if not parts:
        return "no trace split: the step's costs are not measured"
    key = max(parts, key=parts.get)
    step = row["step_ms"]
    text = (f"{row['job']}: beyond {row['compute_ms']:.1f} ms of compute, the largest cost of the "
            f"{step:.1f} ms step is {PARTS[key]} ({parts[key]:.1f} ms, {parts[key] / step:.0%})")
    if key == "rest_ms":
        named = {"optimizer": row.get("rest_optimizer_ms"), "communication bookkeeping kernels":
                 row.get("rest_comm_bookkeeping_ms"), "memory copies": row.get("rest_memory_copies_ms"),
                 "host gaps": row.get("rest_host_gaps_ms")}
        named = {k: v for k, v in named.items() if v == v and v is not None}
        if named:
            top = max(named, key=named.get)
            text += f", mostly {top} ({named[top]:.1f} ms)"
    ratios = [b["ratio"] for b in buckets if b["ratio"] == b["ratio"]]
    if ratios and min(ratios) < FAR_BELOW_RATIO:
        text += ("; the collectives ran far below their standalone speed inside the step: the link is fine, "
                 "the overlap costs")
    return text + "."


def job_split(job: str, summary_row: dict, inspect_dir, buckets: list[dict], about: dict, matmul,
              trace_split: TraceSplit) -> dict:
    step, compute = float(summary_row["step_time_ms_median"]), float(summary_row["compute_only_ms_median"])
    allowance = float(summary_row.get("bounds_allowance_ms") or math.nan)
    trace = trace_split(inspect_dir)
    parts = four_part_split(step, compute, trace, allowance)
    note = about.get("note", "")
    if trace and abs(trace["step_trace_ms"] - step) > allowance:
        note = (note + "; " if note else "") + (f"the traced steps took {trace['step_trace_ms']:.1f} ms against "
                                                 f"{step:.1f} ms timed: the profiler slowed them")
        if parts["profiler_host_ms"] > 0:
            note += (f", and {parts['profiler_host_ms']:.1f} ms of that is taken off the host gaps (the GPU idled "
                     "while the profiler ran on the host)")
    if not trace:
        note = (note + "; " if note else "") + "no GPU traces: the four-part split is a GPU-timeline figure"
    elif trace.get("compute_only_traced") is False:
        note = (note + "; " if note else "") + ("no compute-only step (tensor parallel communicates inside "
                                                 "forward): compute includes its slowdown by communication")
        compute = parts["compute_ms"]
    # the bounds check with what the traces measured: step <= compute + slowdown + comm alone + named rest
    extra = sum(v for k, v in parts.items() if k.startswith("rest_") and k != "rest_unexplained_ms" and v == v)
    slow = parts["compute_slowdown_ms"] if parts["compute_slowdown_ms"] == parts["compute_slowdown_ms"] else 0.0
    ok, bnote = check_bounds(step, compute, float(summary_row.get("comm_alone_ms_median") or math.nan) + slow + extra,
                             allowance, int(summary_row["world_size"]))
    ach = achievable_peak(matmul, str(summary_row.get("device_name")), str(summary_row.get("dtype")))
    tflops = float(summary_row.get("tflops_per_device") or math.nan)
    row = {"job": job, "model": summary_row["model"], "strategy": summary_row["strategy"],
           "world_size": summary_row["world_size"], "source": about.get("source"), "note": note, "step_ms": step,
           "step_trace_ms": trace.get("step_trace_ms", math.nan), **parts, "bounds_ok": ok,
           "bounds_note": (bnote + " (compute slowdown and the named rest measured in the traces)") if bnote else "",
           "tflops_per_device": tflops, "mfu_spec": summary_row.get("mfu"),
           "spec_peak_tflops": summary_row.get("peak_tflops"),
           "mfu_achievable": tflops / ach["achievable_tflops"] if ach else math.nan, **ach}
    row["largest_cost"] = max((k for k in PARTS if row.get(k) == row.get(k)), key=lambda k: row[k], default="")
    row["headline"] = headline(row, buckets)
    return row


def instep_tables(jobs: dict, summary: pd.DataFrame, comm_summary: pd.DataFrame | None,
                  matmul: pd.DataFrame | None, trace_split: TraceSplit) -> tuple[pd.DataFrame, pd.DataFrame]:
    """({job name: (summary-row selector dict, inspect dir)}, ..., the traces' reader) -> (bucket table,
    split table)."""
    comm_rows = [] if comm_summary is None else comm_summary.astype(str).to_dict("records")
    buckets, splits = [], []
    for job, (select, inspect_dir) in jobs.items():
        rows = summary
        for k, v in select.items():
            rows = rows[rows[k].astype(str) == str(v)]
        if rows.empty:
            continue
        srow = rows.iloc[0].to_dict()
        instances, about = job_instances(inspect_dir, job)
        b = bucket_table(instances, about, comm_rows, str(srow["strategy"]))
        buckets += b
        splits.append(job_split(job, srow, inspect_dir, b, about, matmul, trace_split))
    return pd.DataFrame(buckets, columns=list(BUCKET_COLUMNS)), pd.DataFrame(splits, columns=list(SPLIT_COLUMNS))


def job_key(job_dir) -> str:
    """A job's name in these tables, from its directory (.../<backend>/<model>/ws<N>/<config>: the
    training family's job directory, under results/<label>/training/ or not)."""
    return "/".join(Path(job_dir).parts[-4:])


def trace_split_of(table: pd.DataFrame) -> TraceSplit:
    """training_trace_split.csv (distbench.traces.split_step: a row per job, `job` its directory under
    results/<label>/), read as text (dtype=str, keep_default_na=False) -> the reader instep_tables takes:
    a job's inspect directory -> the figures job_trace_split gave, typed again (floats read back
    exactly as written, ints, booleans; an empty cell a figure not given), {} where its status says the
    job had no GPU traces. A job without a row is an error: the table is older than the jobs."""
    from distbench.core.contract import SchemaError

    by_job = {}
    for r in table.to_dict("records"):
        figures = {}
        if r["status"] == "ok":
            for k, v in r.items():
                if k in ("job", "status") or v == "":
                    continue
                figures[k] = v == "True" if k in TRACE_SPLIT_BOOLS else int(v) if k in TRACE_SPLIT_INTS else float(v)
        by_job[job_key(r["job"])] = figures

    def trace_split(inspect_dir) -> dict:
        key = job_key(Path(inspect_dir).parent)
        if key not in by_job:
            raise SchemaError(f"training_trace_split.csv has no row for the job {key}: it was made before this "
                              "job's traces; remake it (rule training_trace_split)")
        return by_job[key]

    return trace_split


def read_trace_split(path) -> TraceSplit:
    """trace_split_of the training_trace_split.csv at `path`."""
    return trace_split_of(pd.read_csv(path, dtype=str, keep_default_na=False))


def write_instep_tables(inspect_dirs, summary_csv, comm_summary_csv, matmul_csv, out_instep, out_split,
                        trace_split: TraceSplit) -> str:
    """The workflow's aggregate (rule aggregate_training_instep): every multi-rank job's inspect
    directory (.../<backend>/<model>/ws<N>/<config>/inspect: the training family's job directory) ->
    training_instep.csv and training_split.csv. The comm summary and the matmul sweep are optional
    (None: not in this run); trace_split gives a job's traces' figures (read_trace_split).
    Returns a line per job for the rule's log: what was recorded, and how."""
    from distbench.core.io import atomic_write_text

    jobs = {}
    for d in inspect_dirs:
        backend, model, ws, config = Path(d).parts[-5:-1]
        if int(ws.removeprefix("ws")) < 2:
            continue  # one rank has no collective inside its step to record
        jobs[job_key(Path(d).parent)] = (
            {"backend": backend, "model": model, "world_size": ws.removeprefix("ws"), "config": config}, Path(d))
    summary = pd.read_csv(summary_csv)
    comm = pd.read_csv(comm_summary_csv) if comm_summary_csv else None
    matmul = pd.read_csv(matmul_csv) if matmul_csv else None
    buckets, splits = instep_tables(jobs, summary, comm, matmul, trace_split)
    atomic_write_text(out_instep, buckets.to_csv(index=False))
    atomic_write_text(out_split, splits.to_csv(index=False))
    return "\n".join(f"{r['job']}: {r['source']}" + (f" ({r['note']})" if r["note"] else "") + f"; {r['headline']}"
                     for r in splits.to_dict("records")) or "no multi-rank job inspected"
