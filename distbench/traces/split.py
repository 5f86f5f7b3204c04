"""Compute slowed by communication, measured: the compute kernels of traced real steps
against the same kernels of traced compute-only steps, and the per-step figures of a job's traces that
the step's four-part split is made of.

Both traces come from the same job (distbench.training.inspect: `step/` and `compute_only/`, one
Chrome trace per rank, `traced_steps` steps each, one after the other). Per step window
(distbench.traces.steps.step_windows) the GPU timeline is cut into exclusive states, first match
wins: a compute kernel running (HTA's computation kernels: not NCCL, not memory, no "Sync"), else a
communication kernel (NCCL) running alone (exposed communication), else a memory copy/set or other
GPU work, else idle (the host did not keep the GPU busy). The states add up to the step exactly.

- compute slowdown = Σ over kernel names run in both traces of (their time per step in the real
  step − in the compute-only step): the same kernels, slower while communication runs beside them.
  A kernel's time is what it adds to the GPU's compute-busy time (kernels on other streams that
  overlap it are not counted twice), so the names' times add up to the compute state.
- extra kernels = kernels of the real step that the compute-only step does not run, by name (DDP's
  gradient scaling and bucket copies; under FSDP the optimizer, which compute-only skips), less the
  reverse.

The split of the timed step in four parts that uses these figures (compute, slowdown, exposed
communication, the named rest) is the training family's: distbench.training.analysis.instep_summary
(four_part_split). It reads them as a table, one row per job (distbench.traces.split_step), so no
family imports this package."""

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


def nccl_kernels(events: list[dict]) -> list[dict]:
    """The trace's NCCL kernels, in the order they started."""
    return sorted((e for e in events if e.get("cat") == "kernel" and is_nccl_kernel(str(e.get("name", "")))),
                  key=lambda e: float(e["ts"]))


def peer_waits(rank_events: list[list[dict]]) -> list[list[float]] | None:
    """Per rank, per NCCL kernel (in start order): the microseconds it spent waiting for a peer, not
    communicating: its duration less the shortest duration of the same collective on any rank. A
    collective's kernel starts when its rank gets there and spins until every peer has, so the rank
    that arrives last runs it for the transfer alone (the in-step table times an instance the same way:
    distbench.training.analysis.instep). The k-th NCCL kernel of every rank is the same collective: a
    communicator runs its collectives in the order they were issued, the same on every rank. None
    where the ranks' NCCL kernels differ in number or names (then nothing is matched)."""
    kernels = [nccl_kernels(ev) for ev in rank_events]
    if len(kernels) < 2 or len({len(k) for k in kernels}) != 1:
        return None
    if any([str(e.get("name")) for e in k] != [str(e.get("name")) for e in kernels[0]] for k in kernels[1:]):
        return None
    shortest = [min(float(k[i]["dur"]) for k in kernels) for i in range(len(kernels[0]))]
    return [[float(e["dur"]) - m for e, m in zip(k, shortest)] for k in kernels]


def step_states(events: list[dict], windows=None, waits: list[float] | None = None) -> list[dict]:
    """Per traced step (or per given (start, end) window): its wall time and its four exclusive states
    (us), and the time each kernel name adds to the compute state in it (`kernels`: {name: us}). With `waits` (this
    rank's peer_waits), each NCCL kernel counts from when its last peer arrived: the wait before is
    idle time (the GPU waited for another rank's host), not communication; `peer_wait` says how much."""
    gpu = [e for e in events if str(e.get("cat", "")).lower() in GPU_CATEGORIES]
    names = [str(e.get("name", "")) for e in gpu]
    iv = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in gpu]
    trimmed = {}
    if waits is not None:
        for e, w in zip(nccl_kernels(events), waits):
            trimmed[id(e)] = w
        iv = [(s + trimmed.get(id(e), 0.0), t) for (s, t), e in zip(iv, gpu)]
    compute = union(i for i, n, e in zip(iv, names, gpu) if e.get("cat") == "kernel" and is_compute_kernel(n))
    comm = union(i for i, n in zip(iv, names) if is_nccl_kernel(n))
    busy = union(iv)
    out = []
    for lo, hi in (step_windows(events) if windows is None else windows):
        c = _clip(compute, lo, hi)
        x = _minus(_clip(comm, lo, hi), c)
        b = _clip(busy, lo, hi)
        other = _length(b) - _length(c) - _length(x)
        # each compute kernel's time is what it adds to the GPU's compute-busy time: kernels on
        # several streams (FSDP's copies beside the model's) overlap, and their summed durations
        # would count the overlap twice; first come, first counted (sorted by start), so the
        # names' times add up to the compute state exactly
        kernels: dict[str, float] = defaultdict(float)
        covered = -math.inf
        for (s, e), n in sorted(((i, n) for i, n, ev in zip(iv, names, gpu)
                                 if lo <= i[0] < hi and ev.get("cat") == "kernel" and is_compute_kernel(n))):
            kernels[n] += max(0.0, e - max(s, covered))
            covered = max(covered, e)
        wait = sum(trimmed.get(id(ev), 0.0) for (s, e), ev in zip(iv, gpu) if lo <= s < hi)
        out.append({"step_us": hi - lo, "compute": _length(c), "exposed_comm": _length(x),
                    "memory_other": max(other, 0.0), "idle": (hi - lo) - _length(b), "kernels": dict(kernels),
                    "peer_wait": wait})
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


def rank_split(step_trace, compute_trace, waits: list[float] | None = None) -> dict:
    """One rank's trace figures per step (ms, medians over the traced steps): the states of the real
    and the compute-only steps, the compute slowdown and the extra kernels (optimizer, other). A
    trace is a path or its loaded events; `waits`: this rank's peer_waits (step_states).

    compute_trace None: a layout with no compute-only step (fsdp_tp: tensor parallel's all-reduces sit
    inside forward and backward). Then only the real step's states are given, with
    `compute_only_traced` False: its exposed communication is still read off the GPU timeline (NCCL
    running with no compute kernel beside it), while the compute slowdown and the extra kernels, which
    need the compute-only step, are absent (NaN), never zeros."""
    events = step_trace if isinstance(step_trace, list) else load_trace(step_trace)
    if not any(str(e.get("cat", "")).lower() in GPU_CATEGORIES for e in events):
        return {}  # a CPU run's trace (Gloo): no GPU timeline to split, so no figure, never zeros
    real = step_states(events, waits=waits)
    if compute_trace is None:
        if not real:
            return {}
        out = {k: _median(s[k] for s in real) / 1e3 for k in STATES}
        return {**out, "step_trace_ms": _median(s["step_us"] for s in real) / 1e3,
                "peer_wait_ms": _median(s["peer_wait"] for s in real) / 1e3, "n_traced_steps": len(real),
                "compute_only_traced": False}
    alone = step_states(load_trace(compute_trace))
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
    out["peer_wait_ms"] = _median(s["peer_wait"] for s in real) / 1e3
    out["n_traced_steps"] = len(real)
    out["compute_only_traced"] = True
    return out


# Every figure job_trace_split gives, in this order (rank_split's, then `rank`): the columns of the
# step table that hands them to a family (distbench.traces.split_step). A layout without a compute-only
# step gives the states, step_trace_ms, peer_wait_ms, n_traced_steps, compute_only_traced and rank only.
TRACE_SPLIT_FIELDS = (*STATES, "step_trace_ms", "compute_only_trace_ms", "compute_only_idle_ms",
                      "compute_only_memory_ms", "compute_kernels_step_ms", "compute_kernels_alone_ms", "slowdown_ms",
                      "optimizer_extra_ms", "other_extra_ms", "peer_wait_ms", "n_traced_steps", "compute_only_traced",
                      "rank")


def job_trace_split(inspect_dir) -> dict:
    """The rank_split of the rank the others waited for, of a job's inspect directory, with `rank`; {}
    where the traces are missing or CPU-only (no GPU kernels: NaN figures). That rank is the one whose
    NCCL kernels waited least for a peer (peer_waits): it arrived last at the collectives, so the step
    runs at its pace and its idle time is the host gaps that set it. Its few waits, and any other
    rank's, count as idle, not communication (step_states). A rank that waited shows its peer's host
    gaps as exposed communication when they are not: the MLP under FSDP2 on 2x H100, rank 1: 29.9 ms
    exposed, 3.7 ms once its 40 ms of waiting per step is taken out, as rank 0's (tests/training/test_instep.py).
    Ties (DDP's symmetric ranks; traces whose NCCL kernels do not match): the less exposed
    communication, then the longer traced step."""
    d = Path(inspect_dir)
    best, key = {}, None
    paths = sorted((d / "step").glob("trace_rank*.json.gz"))
    if (d / "compute_only").is_dir():  # the ranks whose compute-only trace was written
        paths = [p for p in paths if (d / "compute_only" / p.name).exists()]
        alone = [d / "compute_only" / p.name for p in paths]
    else:  # a layout without a compute-only step (rank_split): the real steps alone
        alone = [None] * len(paths)
    traces = [load_trace(p) for p in paths]
    waits = peer_waits(traces) or [None] * len(paths)
    for path, events, wait, compute in zip(paths, traces, waits, alone):
        rank = int(re.sub(r"\D", "", path.name.split(".")[0]))
        r = rank_split(events, compute, wait)
        if not r:
            continue
        k = (round(r["peer_wait_ms"], 1), round(r["exposed_comm"], 1), -r["step_trace_ms"])
        if key is None or k < key:
            best, key = {**r, "rank": rank}, k
    return best
