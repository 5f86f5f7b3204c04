"""The memory family's report section: one sentence per job, the per-rank parts table, the memory
snapshots, its figures, and its Verdict headlines (always "measured": there is no reference to hold a
batch size against). Fragments: templates/memory.*.j2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.core.contract import to_bool
from distbench.core.section import Headline, Measure, ReportInputs, Section, SummaryPart, pct_cell, table
from distbench.core.units import count_noun, counts_noun, human_bytes
from distbench.memory.analysis.summary import capped_text, human, is_capped, largest_text, memory_findings

TEMPLATES = Path(__file__).parent / "templates"


def build(inputs: ReportInputs) -> dict | None:
    """The memory family's section: one sentence per job, then one row per job (None when the run
    had no memory jobs). Snapshots (memory.snapshot) are listed by path."""
    s = inputs.table("memory_summary")
    if s is None or s.empty:
        return None
    headers = ["model", "config", "ws", "batch", "parameters", "gradients", "optimizer", "activations",
               "activations per sample", "peak allocated", "of device", "unexplained", "estimate off by",
               "largest batch that fits", "status"]
    rows = []
    for _, r in s.sort_values(["model", "config", "world_size"]).iterrows():
        rows.append([r["model"], r["config"], int(r["world_size"]), r["largest_measured_batch"],
                     human(r["params_bytes"]), human(r["grads_bytes"]), human(r["optimizer_bytes"]),
                     human(r["activations_bytes"]), human(r["activation_bytes_per_sample"]),
                     None if pd.isna(r["peak_allocated_bytes"]) else human(r["peak_allocated_bytes"]),
                     pct_cell(r["peak_share"]), None if pd.isna(r["unexplained_bytes"]) else human(r["unexplained_bytes"]),
                     None if pd.isna(r["estimate_error_bytes"]) else human(r["estimate_error_bytes"]),
                     _largest_cell(r),
                     r["status"]])
    # the run's memory jobs sit beside its tables: results/<label>/{tables,memory}
    run_dir = inputs.path("memory_summary").parent.parent
    snapshots = sorted(str(p) for p in (run_dir / "memory").glob("*/*/*/*/snapshot.pickle"))
    return {"findings": memory_findings(s), "table": table(headers, rows), "snapshots": snapshots,
            "note": ("Per rank, at the largest measured batch. Parts are counted from the tensors (unique storages: "
                     "distbench/memory/accounting.py); activations are what autograd saves for backward. The peak "
                     "is the allocator's over a fresh wrapper's (DDP's or FSDP2's) first two real steps at that batch, as "
                     "a training run starts (under DDP the second rebuilds its buckets). Unexplained = that peak - the parts "
                     "(DDP's buckets without gradient_as_bucket_view and the rebuild's second set, temporaries, "
                     "workspaces); the estimate is parameters, gradients and optimizer state by formula. The largest "
                     "batch that fits is the search's answer run again as real steps, gradients synced (its own "
                     "peak beside it).")}


def _largest_cell(r):
    """The table's "largest batch that fits": the batch ("at least" it when the search stopped at its
    cap), the peak of its real steps, or why there is none."""
    if pd.isna(r["largest_batch_fits"]):
        return r["search_note"] or None
    cell = capped_text(r["largest_batch_fits"]) if is_capped(r) else str(int(r["largest_batch_fits"]))
    if pd.notna(r.get("largest_batch_peak_allocated_bytes")):
        cell += f", peak {human(r['largest_batch_peak_allocated_bytes'])}"
    return cell


def memory_headlines(memory: pd.DataFrame | None, gpus: int | None = None) -> list[Headline]:
    """Per model and configuration: the largest batch that fits at the smallest world size the search
    ran at (memory.search_at largest searches at the largest one only), else the largest batch
    measured at the smallest world size. Each peak is said beside the batch it belongs to: the
    confirm's at the largest batch, the measured one at the largest measured batch. On a node with one
    GPU (`gpus`) they come right after the language models' MFU (`lead`: docs/report.md, "Node shapes")."""
    if memory is None or memory.empty:
        return []
    lead = 1 if gpus == 1 else 0
    out, unsearched = [], []
    for (model, config), g in memory.groupby(["model", "config"], sort=True):
        searched = g[g["largest_batch_fits"].notna()] if "largest_batch_fits" in g else g.iloc[:0]
        r = (searched if not searched.empty else g).sort_values("world_size").iloc[0]
        who = f"{model} ({config}) at {count_noun(r['world_size'], 'rank')}"
        if str(r["status"]) not in ("ok", "oom"):
            out.append(Headline("memory", f"{who}: {r['status']}", "failing", str(r.get("message") or ""), lead=lead))
            continue
        measured = pd.notna(r.get("largest_measured_batch")) and pd.notna(r.get("peak_allocated_bytes"))
        split = (f"measured split at batch {int(r['largest_measured_batch'])}: peak "
                 f"{human_bytes(int(r['peak_allocated_bytes']))} allocated") if measured else ""
        if pd.notna(r.get("largest_batch_fits")):
            text = f"{who}: largest batch that fits: {largest_text(r)}" + (f"; {split}" if split else "")
            if is_capped(r):
                reason = ("searched on the GPU with real DDP steps (gradients synced): every batch up to the cap "
                          "ran, so the limit is higher; raise memory.search_max_batch to find it")
            elif to_bool(r.get("largest_batch_confirmed")) is False:
                reason = "searched on the GPU by an older harness (doubling, then bisection), each try under no_sync"
            else:
                reason = ("searched on the GPU with a fresh DDP wrapper's first real steps per try (gradients "
                          "synced, optimizer state present), then confirmed by real steps at that batch")
        elif pd.notna(r.get("largest_measured_batch")) and str(r.get("backend")) != "nccl" and not measured:
            unsearched.append(((model, config), int(r["world_size"]), int(r["largest_measured_batch"])))
            continue
        elif pd.notna(r.get("largest_measured_batch")):
            b = int(r["largest_measured_batch"])
            text = f"{who}: batches up to {b} per rank measured" + (
                f", peak {human_bytes(int(r['peak_allocated_bytes']))} allocated at batch {b}" if measured else "")
            note = r.get("search_note")
            reason = (str(note) if isinstance(note, str) and note else
                      "no search here (it runs for DDP on a GPU with memory.search on)" if str(r.get("backend")) == "nccl"
                      else "no search here: it runs for DDP under NCCL with memory.search on (a CPU run's memory "
                           "has no device limit to search for)")
        else:
            continue
        out.append(Headline("memory", text, "measured", reason, lead=lead))
    return out + _unsearched_headlines(unsearched, lead)


# a CPU run's memory rows: measured, nothing to search, no device peak: one Verdict row says it for all
CPU_NO_SEARCH = ("no search here: it runs for DDP under NCCL with memory.search on (a CPU run's memory has no device "
                 "limit to search for); the split per configuration is in the Memory section")


def _unsearched_headlines(rows: list[tuple[tuple, int, int]], lead: int) -> list[Headline]:
    """The configurations measured on CPU (no search, no device peak), in one row where there are several:
    five rows saying 'batches up to 4 per rank measured' crowded a CPU run's Verdict."""
    if len(rows) == 1:
        (model, config), ws, b = rows[0]
        text = f"{model} ({config}) at {count_noun(ws, 'rank')}: batches up to {b} per rank measured"
        return [Headline("memory", text, "measured", CPU_NO_SEARCH, lead=lead)]
    if not rows:
        return []
    at = counts_noun([ws for _, ws, _ in rows], "rank")
    batches = sorted({b for _, _, b in rows})
    upto = str(batches[0]) if len(batches) == 1 else f"{batches[0]}-{batches[-1]}"
    names = ", ".join(f"{model} {config}" for (model, config), _, _ in rows)
    text = f"{len(rows)} configurations at {at} ({names}): batches up to {upto} per rank measured"
    return [Headline("memory", text, "measured", CPU_NO_SEARCH, lead=lead)]


def headlines(inputs: ReportInputs) -> list[Headline]:
    return memory_headlines(inputs.table("memory_summary"), gpus=inputs.node_gpus())


# Against a baseline run: the peak allocated bytes per configuration at its largest measured batch (no
# spread is recorded: the threshold alone decides)
PEAK = Measure("memory", "memory_summary.csv", ("backend", "model", "config", "world_size", "largest_measured_batch"),
               "peak_allocated_bytes", None, None, unit="B")
# summary.json's results.memory: one record per configuration
SUMMARY_FIELDS = ("model", "config", "backend", "world_size", "largest_measured_batch", "params_bytes", "grads_bytes",
                  "optimizer_bytes", "activations_bytes", "activation_bytes_per_sample", "peak_allocated_bytes",
                  "steady_peak_allocated_bytes", "estimate_error_bytes", "largest_batch_fits", "largest_batch_confirmed",
                  "largest_batch_peak_allocated_bytes", "first_batch_oom", "largest_batch_capped", "status")

# The captions of the figures (distbench.memory.analysis.plots), each what its figure draws.
FIGURE_TITLES = {
    "memory_split": "What takes the memory of a training step, per batch size",
    "memory_activations": "Activation memory vs batch size, per memory job, with each job's fit",
}
MEMORY = Section("memory", "Memory", TEMPLATES, build, headlines=headlines, figure_dirs=("figures_memory",),
                 figure_titles=FIGURE_TITLES, regressions=(PEAK,),
                 summary=SummaryPart("memory", "memory_summary", SUMMARY_FIELDS,
                                             schema=Path(__file__).with_name("summary.schema.json")))
