"""Communication/computation overlap of one rank's torch.profiler trace (Chrome/Perfetto JSON).

Definition (Holistic Trace Analysis, ``TraceAnalysis.get_comm_comp_overlap``: "the percentage of
time the communication kernels overlap with computation kernels"), per rank trace:

    overlap_fraction = |union(comm) ∩ union(compute)| / |union(comm)|

a fraction in [0, 1]; HTA reports it times 100. Each class is first merged into a union of
intervals, so nested or concurrent events of one class are never counted twice; the denominator
is the wall time during which *any* communication is in flight, not a sum of durations. With no
communication at all the fraction is NaN (0/0 is undefined; it is not silently 0 or 1).

What counts as what
-------------------
The trace is read from ``prof.export_chrome_trace(path)`` (``.json`` or ``.json.gz``); only
complete events (``ph == "X"``, ``ts``/``dur`` in microseconds) are used.

* GPU trace (it has events of ``cat == "kernel"``): only kernels are used, because the device
  timeline is what overlaps. Communication = NCCL kernels (see ``NCCL_KERNEL_PATTERNS``: current
  ``ncclDevKernel_*`` names of NCCL >= 2.19, the older ``ncclKernel_*`` ones, and the NCCL <= 2.6
  ``nccl<Coll>Kernel_*`` ones); computation = every other kernel. Memory copies/sets
  (``cat`` "gpu_memcpy"/"gpu_memset") are neither, as in HTA, and CPU ops are ignored.
* CPU-only trace (no kernels, e.g. the Gloo backend on CPU): communication = the ``gloo:<coll>``
  events (``gloo:all_reduce``, ``gloo:broadcast``, ...). Computation = ``aten::`` ops that are not
  nested (same thread, inside in time) in a collective op (``COLLECTIVE_OP_PREFIXES``).

Why ``gloo:*`` and not ``c10d::allreduce_`` / ``record_param_comms`` on CPU: in a real trace of a
DDP job on Gloo (torch 2.13, CPU) the main thread has ``c10d::allreduce_`` ops of tens of
microseconds: they only *enqueue* the collective and return a Work (the op is asynchronous).
The collective itself runs on a Gloo worker thread, which the profiler records as a
``gloo:all_reduce`` event (a ``user_annotation``) lasting from the start of the algorithm until
its result is ready (milliseconds), including any wait for the peers, like an NCCL kernel's
duration on a GPU. ``record_param_comms`` was absent from that trace (it appears with NCCL).
So ``gloo:*`` spans the real communication time; ``c10d::*`` and ``record_param_comms`` are only
used to keep their nested ``aten::`` ops out of the computation.

Limits
------
* CPU traces: Gloo runs collectives on its own threads, so what is measured is the fraction of
  the time a Gloo collective is in flight during which some profiled thread (in DDP, the main
  thread running the backward pass) executes an ``aten::`` op. It is overlap in time, not in
  resources: on a small host the collective and the compute share cores. Time the main thread
  spends blocked waiting for a collective (no op recorded) counts as not overlapped, as it should.
  A CPU trace without ``gloo:*`` events (another CPU backend, or a torch that does not record
  them) reports no communication (NaN), rather than guessing from enqueue-only ops.
* GPU traces: as in HTA, a kernel's time is its device time; an NCCL kernel's duration includes
  its wait for the peers, so a late rank shows as long, possibly overlapped, communication.
* One file is one rank; events from several devices in one file are merged into one timeline.

Temporal breakdown (HTA's ``TraceAnalysis.get_temporal_breakdown``, hta/analyzers/breakdown_analysis.py)
--------------------------------------------------------------------------------------------------
Per rank, over the GPU events' span (HTA's "kernel_time": the end of the last GPU event minus the
start of the first; GPU events = kernels, memory copies and memory sets, the events with a stream):

    idle        = span - |union(all GPU events)|        (no kernel, copy or set running)
    compute     = |union(computation kernels)|
    non-compute = span - compute - idle                  (communication or memory, and no compute)

each also as a percentage of the span. A computation kernel is, as in HTA's ``get_kernel_type``, a
kernel that is neither NCCL nor a memory copy/set and whose name has no "Sync" (HTA counts those as
"other", hence non-compute). It is a device-timeline figure: a CPU-only trace has no GPU events, so
its breakdown is NaN ("not available on CPU"), never a made-up CPU analogue. HTA drops the kernels
of the last ``ProfilerStep`` when a trace has two or more; our traces (launch/profiling.py) record
no ProfilerStep, so HTA keeps every kernel too and so does this module. HTA also rounds each event's
``ts``/``dur`` down to whole microseconds; the figures here keep the fractions (sub-microsecond per
event, far below a percentage point).

Command line: ``python -m distbench.traces.overlap TRACE [TRACE...]`` prints one line per trace.
"""

from __future__ import annotations

import bisect
import gzip
import json
import math
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from distbench.traces.steps import profiled_steps

Interval = tuple[float, float]

# NCCL kernel names, as HTA recognises them (its rule: the name starts with "nccl" ... "Kernel").
# Each NCCL generation named its kernels differently, and traces of all of them are around:
NCCL_KERNEL_PATTERNS = (
    r"ncclDevKernel_",  # NCCL >= 2.19: ncclDevKernel_AllReduce_Sum_f32_RING_LL(...), ncclDevKernel_Generic
    r"ncclKernel_",  # NCCL 2.7 - 2.18: ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)
    r"nccl\w*Kernel",  # NCCL <= 2.6: ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)
)
_NCCL_KERNEL_RE = re.compile(r"(?:void\s+)?(?:" + "|".join(NCCL_KERNEL_PATTERNS) + ")")

# Trace categories of GPU events. Only "kernel" events are compute or communication; memory
# copies/sets are neither (HTA's "memory" kernels), so they are ignored.
KERNEL_CATEGORIES = ("kernel",)

# CPU-only traces. The Gloo worker thread records each collective it runs as "gloo:<collective>"
# (gloo:all_reduce, gloo:broadcast, gloo:all_gather, ...): that event spans the communication.
GLOO_COMM_PREFIXES = ("gloo:",)
# Ops that belong to a collective call but are not its communication time: c10d::allreduce_ etc.
# (the asynchronous enqueue on the calling thread) and record_param_comms (the profiler's record of
# a collective's parameters). aten:: ops nested in these, or in gloo:*, are not computation.
COLLECTIVE_OP_PREFIXES = GLOO_COMM_PREFIXES + ("c10d::", "record_param_comms")
# CPU computation: the ATen operators.
COMPUTE_OP_PREFIXES = ("aten::",)

# The temporal breakdown's GPU events (HTA: the events with a stream): kernels, copies, sets.
GPU_EVENT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
# HTA's memory kernels (utils.MEMORY_KERNEL_RE) and the names it counts as neither compute nor
# memory (its NCCL_COMPUTE_KERNEL_RE beyond NCCL: any "Memcpy"/"Sync" in the name, "Memset" first).
_MEMORY_KERNEL_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(r"(.*Memcpy)|(Memset)|(.*Sync)")


@dataclass(frozen=True)
class Overlap:
    """One rank's overlap. Times are wall-clock microseconds of the interval unions."""

    comm_us: float  # time with any communication in flight
    compute_us: float  # time with any computation running
    overlapped_us: float  # time with both
    overlap_fraction: float  # overlapped_us / comm_us; NaN when comm_us == 0
    n_comm_events: int  # communication events found (before the union)
    source: str  # "gpu_kernels" or "cpu_ops"


@dataclass(frozen=True)
class TemporalBreakdown:
    """One rank's temporal breakdown (HTA's definition, see the module's docstring). Microseconds;
    every field is NaN for a trace without GPU events (CPU-only)."""

    span_us: float  # first GPU event's start to last one's end (HTA: kernel_time)
    idle_us: float  # no GPU event running
    compute_time_us: float  # a computation kernel running
    non_compute_time_us: float  # only communication/memory (or "other") kernels running

    def pct(self, us: float) -> float:
        """`us` as a percentage of the span (NaN when there is no span)."""
        return 100 * us / self.span_us if self.span_us > 0 else math.nan

    @property
    def idle_pct(self) -> float:
        return self.pct(self.idle_us)

    @property
    def compute_time_pct(self) -> float:
        return self.pct(self.compute_time_us)

    @property
    def non_compute_time_pct(self) -> float:
        return self.pct(self.non_compute_time_us)


def load_trace(path) -> list[dict]:
    """The complete events (``ph == "X"``) of a Chrome trace JSON, plain or gzip-compressed."""
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":  # gzip magic number, whatever the file is called
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data  # the array form
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e and "dur" in e]


def union(intervals) -> list[Interval]:
    """The union of [start, end) intervals as sorted, disjoint intervals (empty ones dropped)."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def total_length(intervals) -> float:
    """The length covered by the intervals (each point once)."""
    return sum(end - start for start, end in union(intervals))


def intersection_length(a, b) -> float:
    """The length covered by both the intervals of `a` and those of `b`."""
    a, b = union(a), union(b)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        start = max(a[i][0], b[j][0])
        end = min(a[i][1], b[j][1])
        if end > start:
            total += end - start
        if a[i][1] < b[j][1]:  # advance whichever interval ends first
            i += 1
        else:
            j += 1
    return total


def is_nccl_kernel(name: str) -> bool:
    return _NCCL_KERNEL_RE.match(name) is not None


def is_gloo_comm_op(name: str) -> bool:
    return name.startswith(GLOO_COMM_PREFIXES)


def _interval(event: dict) -> Interval:
    start = float(event["ts"])
    return start, start + float(event["dur"])


def _is_kernel(event: dict) -> bool:
    return str(event.get("cat", "")).lower() in KERNEL_CATEGORIES


def _not_nested_in(events: list[dict], enclosing: list[dict]) -> list[dict]:
    """The events that do not lie, on their own thread, inside one of the `enclosing` events."""
    spans: dict[tuple, list[Interval]] = defaultdict(list)
    for e in enclosing:
        spans[(e.get("pid"), e.get("tid"))].append(_interval(e))
    merged = {thread: union(iv) for thread, iv in spans.items()}
    starts = {thread: [s for s, _ in iv] for thread, iv in merged.items()}
    kept = []
    for e in events:
        thread = (e.get("pid"), e.get("tid"))
        start, end = _interval(e)
        inside = False
        if thread in merged:
            k = bisect.bisect_right(starts[thread], start) - 1  # the last span starting at or before e
            inside = k >= 0 and end <= merged[thread][k][1]
        if not inside:
            kept.append(e)
    return kept


def classify(events: list[dict]) -> tuple[list[dict], list[dict], str]:
    """(communication events, computation events, source) of one rank's complete events."""
    kernels = [e for e in events if _is_kernel(e)]
    if kernels:
        comm = [e for e in kernels if is_nccl_kernel(e.get("name", ""))]
        compute = [e for e in kernels if not is_nccl_kernel(e.get("name", ""))]
        return comm, compute, "gpu_kernels"
    comm = [e for e in events if is_gloo_comm_op(e.get("name", ""))]
    collective = [e for e in events if e.get("name", "").startswith(COLLECTIVE_OP_PREFIXES)]
    aten = [e for e in events if e.get("name", "").startswith(COMPUTE_OP_PREFIXES)]
    return comm, _not_nested_in(aten, collective), "cpu_ops"


def overlap_from_events(events: list[dict]) -> Overlap:
    """The overlap of one rank's complete events (as `load_trace` returns them)."""
    comm, compute, source = classify(events)
    comm_iv = union(_interval(e) for e in comm)
    compute_iv = union(_interval(e) for e in compute)
    comm_us = total_length(comm_iv)
    overlapped_us = intersection_length(comm_iv, compute_iv)
    fraction = overlapped_us / comm_us if comm_us > 0 else math.nan
    return Overlap(comm_us=comm_us, compute_us=total_length(compute_iv), overlapped_us=overlapped_us,
                   overlap_fraction=fraction, n_comm_events=len(comm), source=source)


def is_compute_kernel(name: str) -> bool:
    """A computation kernel as HTA's get_kernel_type decides: not NCCL, not memory, no "Sync"."""
    return not (is_nccl_kernel(name) or _MEMORY_KERNEL_RE.match(name) or _NOT_COMPUTE_RE.match(name))


def breakdown_from_events(events: list[dict]) -> TemporalBreakdown:
    """The temporal breakdown of one rank's complete events (as `load_trace` returns them)."""
    gpu = [e for e in events if str(e.get("cat", "")).lower() in GPU_EVENT_CATEGORIES]
    busy = union(_interval(e) for e in gpu)
    if not busy:  # a CPU-only trace: the breakdown is a device-timeline figure
        return TemporalBreakdown(math.nan, math.nan, math.nan, math.nan)
    span_us = busy[-1][1] - busy[0][0]
    idle_us = span_us - total_length(busy)
    # HTA classifies every GPU event by its name alone (copies and sets are named Memcpy/Memset)
    compute_us = total_length(_interval(e) for e in gpu if is_compute_kernel(e.get("name", "")))
    return TemporalBreakdown(span_us=span_us, idle_us=idle_us, compute_time_us=compute_us,
                             non_compute_time_us=span_us - compute_us - idle_us)


def breakdown_from_trace(path) -> TemporalBreakdown:
    """The temporal breakdown of one rank's trace file (.json or .json.gz)."""
    return breakdown_from_events(load_trace(path))


def overlap_from_trace(path) -> Overlap:
    """The overlap of one rank's trace file (``prof.export_chrome_trace``; .json or .json.gz)."""
    return overlap_from_events(load_trace(path))


# compute_us is the overlap's computation (every non-NCCL kernel); compute_time_us is the temporal
# breakdown's (HTA's computation kernels, over the GPU span). The breakdown columns are NaN on CPU.
BREAKDOWN_COLUMNS = ("gpu_span_us", "idle_us", "compute_time_us", "non_compute_time_us", "idle_pct",
                     "compute_time_pct", "non_compute_time_pct")
# The profiled steps (distbench.traces.steps): how many, and this rank's median step wall time, which
# the report compares with the job's unprofiled step time (traces.section).
STEP_COLUMNS = ("n_profiled_steps", "profiled_step_ms")
TABLE_COLUMNS = ("family", "job", "mode", "rank", "trace", "source", "comm_us", "compute_us", "overlapped_us",
                 "overlap_fraction", "n_comm_events", "note") + BREAKDOWN_COLUMNS + STEP_COLUMNS


def breakdown_row(b: TemporalBreakdown) -> dict:
    """The BREAKDOWN_COLUMNS of one rank."""
    return {"gpu_span_us": b.span_us, "idle_us": b.idle_us, "compute_time_us": b.compute_time_us,
            "non_compute_time_us": b.non_compute_time_us, "idle_pct": b.idle_pct,
            "compute_time_pct": b.compute_time_pct, "non_compute_time_pct": b.non_compute_time_pct}


def overlap_table(trace_dirs: dict) -> list[dict]:
    """One row per rank trace in each job's trace directory ({directory: {"family", "job"}}), and one
    row without a trace for a directory that has none (its manifest's note says why)."""
    rows = []
    for directory, about in trace_dirs.items():
        directory = Path(directory)
        manifest = directory / "profile.json"
        info = json.loads(manifest.read_text()) if manifest.exists() else {"mode": "?", "note": "no manifest"}
        base = {"family": about["family"], "job": about["job"], "mode": info.get("mode"), "note": info.get("note", "")}
        traces = sorted(directory.glob("trace_rank*.json.gz"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0))
        for path in traces:
            events = load_trace(path)  # read once, for every figure
            o = overlap_from_events(events)
            steps = profiled_steps(events)
            rows.append({**base, "rank": int(re.sub(r"\D", "", path.name.split(".")[0])), "trace": str(path),
                         "source": o.source, "comm_us": o.comm_us, "compute_us": o.compute_us,
                         "overlapped_us": o.overlapped_us, "overlap_fraction": o.overlap_fraction,
                         "n_comm_events": o.n_comm_events, **breakdown_row(breakdown_from_events(events)),
                         "n_profiled_steps": steps.n_steps, "profiled_step_ms": steps.median_ms})
        if not traces:
            rows.append({**base, "rank": None, "trace": "", "source": "", "comm_us": math.nan, "compute_us": math.nan,
                         "overlapped_us": math.nan, "overlap_fraction": math.nan, "n_comm_events": 0,
                         **{c: math.nan for c in BREAKDOWN_COLUMNS}, "n_profiled_steps": 0,
                         "profiled_step_ms": math.nan})
    return rows


def write_overlap_table(trace_dirs: dict, out_csv) -> None:
    """results/<label>/tables/trace_overlap.csv (TABLE_COLUMNS), written atomically."""
    from distbench.core.io import atomic_write_text, csv_text

    atomic_write_text(out_csv, csv_text(overlap_table(trace_dirs), TABLE_COLUMNS))


def format_breakdown(b: TemporalBreakdown) -> str:
    if math.isnan(b.span_us):
        return "temporal breakdown: not available on CPU (no GPU kernels)"
    return (f"temporal breakdown over {b.span_us:.1f} us: idle {b.idle_pct:.1f}%  compute {b.compute_time_pct:.1f}%  "
            f"non-compute {b.non_compute_time_pct:.1f}%")


def format_line(path, o: Overlap, b: TemporalBreakdown | None = None) -> str:
    pct = "n/a (no communication found)" if math.isnan(o.overlap_fraction) else f"{100 * o.overlap_fraction:.1f}%"
    line = (f"{path}: overlap {pct}  comm {o.comm_us:.1f} us ({o.n_comm_events} events)  "
            f"compute {o.compute_us:.1f} us  overlapped {o.overlapped_us:.1f} us  [{o.source}]")
    return line if b is None else f"{line}  {format_breakdown(b)}"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print("usage: python -m distbench.traces.overlap TRACE [TRACE...]\n"
              "  communication/computation overlap and temporal breakdown of each torch.profiler Chrome trace "
              "(.json, .json.gz)",
              file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    status = 0
    for path in args:
        try:
            events = load_trace(path)
            print(format_line(path, overlap_from_events(events), breakdown_from_events(events)))
        except (OSError, ValueError) as exc:  # unreadable or not JSON: say so, go on with the rest
            print(f"{path}: error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
