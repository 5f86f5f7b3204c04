"""Compute slowed by communication, measured (issue 40): the compute kernels of traced real steps
against the same kernels of traced compute-only steps, and the step split in four parts that add up.

Both traces come from the same job (distbench.training.inspect: `step/` and `compute_only/`, one
Chrome trace per rank, `traced_steps` steps each, one after the other). Per step window
(distbench.traces.steps.step_windows) the GPU timeline is cut into exclusive states, first match
wins: a compute kernel running (HTA's computation kernels: not NCCL, not memory, no "Sync"), else a
communication kernel (NCCL) running alone (exposed communication), else a memory copy/set or other
GPU work, else idle (the host did not keep the GPU busy). The states add up to the step exactly.

- compute slowdown = Σ over kernel names run in both traces of (summed time per step in the real
  step − in the compute-only step): the same kernels, slower while communication runs beside them.
- extra kernels = kernels of the real step that the compute-only step does not run, by name (DDP's
  gradient scaling and bucket copies; under FSDP the optimizer, which compute-only skips), less the
  reverse.

The split of the timed step (medians from training.csv; the trace's figures per step, median over
the traced steps, rank by rank, then the slowest rank's, as the step runs at its pace):

    compute        = compute_only_ms (timed)
    slowdown       = compute slowdown (traces)
    exposed_comm   = NCCL running with no compute kernel beside it (traces)
    rest           = step − compute − slowdown − exposed_comm, named from the traces:
                     extra kernels (optimizer / communication bookkeeping), memory copies, host gaps
                     (idle time beyond the compute-only step's), and `unexplained` = rest − named.

It adds up within noise when |unexplained| is within the phases' noise allowance
(distbench.training.analysis.summary.noise_allowance_ms): the traces then explain the step."""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

from distbench.traces.overlap import is_compute_kernel, is_nccl_kernel, load_trace, union
from distbench.traces.steps import step_windows

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
OPTIMIZER_RE = re.compile(r"multi_tensor_apply|foreach|adam|sgd|fused_.*optim", re.I)
STATES = ("compute", "exposed_comm", "memory_other", "idle")


def _clip(intervals, lo, hi):
    return [(max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi]


def _length(intervals) -> float:
    return sum(e - s for s, e in intervals)


def _minus(a, b):
    """Parts of the disjoint sorted intervals `a` not covered by the disjoint sorted intervals `b`."""
    out, j = [], 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def step_states(events: list[dict], windows=None) -> list[dict]:
    """Per traced step (or per given (start, end) window): its wall time and its four exclusive states
    (us), and the summed time of each kernel name in it (`kernels`: {name: us})."""
    gpu = [e for e in events if str(e.get("cat", "")).lower() in GPU_CATEGORIES]
    names = [str(e.get("name", "")) for e in gpu]
    iv = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu]
    compute = union(i for i, n, e in zip(iv, names, gpu) if e.get("cat") == "kernel" and is_compute_kernel(n))
    comm = union(i for i, n in zip(iv, names) if is_nccl_kernel(n))
    busy = union(iv)
    out = []
    for lo, hi in (step_windows(events) if windows is None else windows):
        c = _clip(compute, lo, hi)
        x = _minus(_clip(comm, lo, hi), c)
        b = _clip(busy, lo, hi)
        other = _length(b) - _length(c) - _length(x)
        kernels: dict[str, float] = defaultdict(float)
        for (s, e), n, ev in zip(iv, names, gpu):
            if lo <= s < hi and ev.get("cat") == "kernel" and is_compute_kernel(n):
                kernels[n] += e - s
        out.append({"step_us": hi - lo, "compute": _length(c), "exposed_comm": _length(x),
                    "memory_other": max(other, 0.0), "idle": (hi - lo) - _length(b), "kernels": dict(kernels)})
    return out


def span_states(events: list[dict]) -> dict:
    """The four states over the GPU span (first GPU event's start to the last one's end), HTA's window
    for its temporal breakdown: compute and idle are HTA's compute and idle time, exposed_comm +
    memory_other its non-compute time."""
    gpu = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
           if str(e.get("cat", "")).lower() in GPU_CATEGORIES]
    if not gpu:
        return {}
    return step_states(events, [(min(s for s, _ in gpu), max(e for _, e in gpu))])[0]


def _median(values) -> float:
    v = [x for x in values if x == x]
    return statistics.median(v) if v else math.nan


def rank_split(step_trace, compute_trace) -> dict:
    """One rank's trace figures per step (ms, medians over the traced steps): the states of the real
    and the compute-only steps, the compute slowdown and the extra kernels (optimizer, other)."""
    events = load_trace(step_trace)
    if not any(str(e.get("cat", "")).lower() in GPU_CATEGORIES for e in events):
        return {}  # a CPU run's trace (Gloo): no GPU timeline to split, so no figure, never zeros
    real, alone = step_states(events), step_states(load_trace(compute_trace))
    if not real or not alone:
        return {}
    names_r = {n for s in real for n in s["kernels"]}
    names_c = {n for s in alone for n in s["kernels"]}
    both = names_r & names_c

    def per_step(states, names):
        return _median(sum(t for n, t in s["kernels"].items() if n in names) for s in states)

    def per_step_opt(states, names, optimizer: bool):
        return _median(sum(t for n, t in s["kernels"].items() if n in names and bool(OPTIMIZER_RE.search(n)) == optimizer)
                       for s in states)

    only_r, only_c = names_r - names_c, names_c - names_r
    out = {k: _median(s[k] for s in real) / 1e3 for k in STATES}
    out["step_trace_ms"] = _median(s["step_us"] for s in real) / 1e3
    out["compute_only_trace_ms"] = _median(s["step_us"] for s in alone) / 1e3
    out["compute_only_idle_ms"] = _median(s["idle"] for s in alone) / 1e3
    out["compute_only_memory_ms"] = _median(s["memory_other"] for s in alone) / 1e3
    out["compute_kernels_step_ms"] = per_step(real, both) / 1e3
    out["compute_kernels_alone_ms"] = per_step(alone, both) / 1e3
    out["slowdown_ms"] = out["compute_kernels_step_ms"] - out["compute_kernels_alone_ms"]
    out["optimizer_extra_ms"] = (per_step_opt(real, only_r, True) - per_step_opt(alone, only_c, True)) / 1e3
    out["other_extra_ms"] = (per_step_opt(real, only_r, False) - per_step_opt(alone, only_c, False)) / 1e3
    out["n_traced_steps"] = len(real)
    return out


def job_trace_split(inspect_dir) -> dict:
    """The slowest rank's rank_split (by its real step's trace time) of a job's inspect directory, with
    `rank`; {} where the traces are missing or CPU-only (no GPU kernels: NaN figures)."""
    d = Path(inspect_dir)
    best = {}
    for path in sorted((d / "step").glob("trace_rank*.json.gz")):
        rank = int(re.sub(r"\D", "", path.name.split(".")[0]))
        other = d / "compute_only" / path.name
        if not other.exists():
            continue
        r = rank_split(path, other)
        if r and (not best or r["step_trace_ms"] > best["step_trace_ms"]):
            best = {**r, "rank": rank}
    return best


def four_part_split(step_ms: float, compute_ms: float, trace: dict, allowance_ms: float) -> dict:
    """The timed step in four parts (module docstring), with the rest named and the check that the
    parts add up: adds_up is |unexplained| <= allowance_ms (NaN inputs: not decided)."""
    slowdown, exposed = trace.get("slowdown_ms", math.nan), trace.get("exposed_comm", math.nan)
    rest = step_ms - compute_ms - slowdown - exposed
    host_gaps = trace.get("idle", math.nan) - trace.get("compute_only_idle_ms", math.nan)
    memory = trace.get("memory_other", math.nan) - trace.get("compute_only_memory_ms", math.nan)
    named = {"optimizer_ms": trace.get("optimizer_extra_ms", math.nan),
             "comm_bookkeeping_ms": trace.get("other_extra_ms", math.nan),
             "memory_copies_ms": memory, "host_gaps_ms": host_gaps}
    unexplained = rest - sum(named.values())
    adds_up = abs(unexplained) <= allowance_ms if unexplained == unexplained and allowance_ms == allowance_ms else None
    return {"compute_ms": compute_ms, "compute_slowdown_ms": slowdown, "exposed_comm_ms": exposed, "rest_ms": rest,
            **{f"rest_{k}": v for k, v in named.items()}, "rest_unexplained_ms": unexplained,
            "allowance_ms": allowance_ms, "adds_up": adds_up}
