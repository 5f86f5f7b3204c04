"""The step that reads jobs' traced steps for a family (its manifest names it, e.g. training's
training_trace_split): one table row per job with the per-step figures of its traces
(distbench.traces.split.job_trace_split). The family's own step reads that table by name, so the
family reads no trace and this package imports no family.

The table (TRACE_SPLIT_COLUMNS): `job`, the job's directory under results/<label>/ (the inspect
directory's parent, e.g. training/nccl/mlp/ws2/plain); `status`, ok where the traces gave figures and
skipped where they did not (no GPU traces: a CPU run's, or none written), its figures then empty; and
job_trace_split's figures, TRACE_SPLIT_FIELDS. An empty cell is a figure the traces did not give (a
layout without a compute-only step has no slowdown) or gave as NaN. Floats are written in full
(Python's shortest round-trip form), so a reader gets back the very numbers job_trace_split computed."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from distbench.traces.split import TRACE_SPLIT_FIELDS, job_trace_split

TRACE_SPLIT_COLUMNS = ("job", "status", *TRACE_SPLIT_FIELDS)


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return repr(v) if isinstance(v, float) else str(v)


def split_rows(jobs: dict) -> list[dict]:
    """{job: its inspect directory} -> one row per job, in the order given (module docstring)."""
    rows = []
    for job, inspect_dir in jobs.items():
        figures = job_trace_split(inspect_dir)
        rows.append({"job": job, "status": "ok" if figures else "skipped", **figures})
    return rows


def split_text(rows: list[dict]) -> str:
    """The rows as CSV, every float in full; a figure outside TRACE_SPLIT_FIELDS (one job_trace_split
    gained) is kept, after them."""
    extra = [k for r in rows for k in r if k not in TRACE_SPLIT_COLUMNS]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[*TRACE_SPLIT_COLUMNS, *dict.fromkeys(extra)], lineterminator="\n")
    w.writeheader()
    w.writerows({k: _cell(v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def job_name(inspect_dir, root) -> str:
    """The job's directory (the inspect directory's parent) relative to `root` (results/<label>/), with
    forward slashes; as given where it lies elsewhere."""
    job_dir = Path(inspect_dir).parent
    try:
        rel = Path(os.path.relpath(job_dir, root))
    except ValueError:  # another drive
        return job_dir.as_posix()
    return job_dir.as_posix() if rel.parts[:1] == ("..",) else rel.as_posix()


def write_split_table(inspect_dirs, out_csv, root) -> str:
    """Every job's inspect directory -> out_csv (atomically). Returns a line per job for the rule's log."""
    from distbench.core.io import atomic_write_text

    rows = split_rows({job_name(d, root): Path(d) for d in inspect_dirs})
    atomic_write_text(out_csv, split_text(rows))
    return "\n".join(f"{r['job']}: " + (f"rank {r['rank']}'s traces, {r['n_traced_steps']} traced steps"
                                         if r["status"] == "ok" else "no GPU traces") for r in rows) or "no job"


def split_table(sm) -> None:
    """The rule: input `inspect` (each job's inspect directory: the manifest's JobFiles("inspect")),
    output `table`. Job names are relative to results/<label>/, the table's folder's parent (every
    table lies in results/<label>/tables/)."""
    from distbench.launch.in_rule import run_in_rule

    root = Path(sm.output.table).parent.parent
    run_in_rule(sm.log[0], lambda: print(write_split_table(list(sm.input.inspect), sm.output.table, root)))
