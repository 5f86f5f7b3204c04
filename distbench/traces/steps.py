"""The profiled steps' wall time in one rank's torch.profiler trace (Chrome/Perfetto JSON events).

launch/profiling.py `profile_pass` wraps each profiled call in ``record_function("distbench_step_<i>")``
(a training step, or a comm op), so the trace has one CPU span (``cat == "user_annotation"``) per
call; the GPU copy of that annotation (``gpu_user_annotation``) is not used.

On a GPU the CPU span is not the step: the training step (`h.step(sync_grads=True)`) launches its
kernels and returns without waiting for them (nothing in it synchronizes; the all-reduce runs on
NCCL's stream), so the GPU finishes well after the span ends. In the committed H100 trace (mlp,
4 ranks) the spans were 6.2 ms and the unprofiled step 11.8 ms. So each step ends where the later
of its CPU span and its last GPU event (kernel, copy or set whose launch, linked by
``args.correlation`` to a ``cuda_runtime``/``cuda_driver`` event, lies in the span) ends, and a
step's time is the gap from the previous step's end (the first step: from its span's start):

    end_i  = max(span_i end, last GPU event launched in span_i ends)
    step_i = end_i - end_(i-1),   end_(-1) = span_0 start

That is what the harness times (training/trainer.py `timed`: a CUDA event recorded after each call, a step is
the gap between two events), and the same H100 trace gives 11.7 ms by it. On CPU (no GPU events)
a step ends with its span, and the gap is the span plus the few microseconds between two calls,
as the harness's host clock reads it. Launches are found by time, on any thread of the process:
DDP launches its backward kernels and all-reduces from autograd's threads while the step's own
thread waits in backward().
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass

STEP_SPAN_RE = re.compile(r"^distbench_step_(\d+)$")
_GPU_EVENT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


@dataclass(frozen=True)
class ProfiledSteps:
    """One rank's profiled steps: each step's wall time (ms, in step order) and their median."""

    step_ms: tuple[float, ...]

    @property
    def n_steps(self) -> int:
        return len(self.step_ms)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.step_ms) if self.step_ms else math.nan


def _correlation(event: dict):
    return (event.get("args") or {}).get("correlation")


def profiled_steps(events: list[dict]) -> ProfiledSteps:
    """The profiled steps of one rank's complete events (traces.overlap.load_trace)."""
    return ProfiledSteps(tuple((end - start) / 1e3 for start, end in step_windows(events)))


def step_windows(events: list[dict]) -> list[tuple[float, float]]:
    """Each profiled step's (start, end) in the trace's microseconds: from the previous step's end (the
    first: its span's start) to its own end (the module's docstring)."""
    spans = sorted((e for e in events if STEP_SPAN_RE.match(str(e.get("name", "")))
                    and str(e.get("cat", "")).lower() != "gpu_user_annotation"), key=lambda e: float(e["ts"]))
    if not spans:
        return []
    launched_at = {}
    for e in events:
        if str(e.get("cat", "")).lower() in _LAUNCH_CATEGORIES and _correlation(e) is not None:
            launched_at[_correlation(e)] = float(e["ts"])
    bounds = [(float(s["ts"]), float(s["ts"]) + float(s["dur"])) for s in spans]
    ends = [end for _, end in bounds]
    starts = [start for start, _ in bounds]
    for e in events:
        if str(e.get("cat", "")).lower() not in _GPU_EVENT_CATEGORIES:
            continue
        at = launched_at.get(_correlation(e))
        if at is None:
            continue
        for i, (start, end) in enumerate(bounds):
            if start <= at < end:
                ends[i] = max(ends[i], float(e["ts"]) + float(e["dur"]))
                break
    for i in range(1, len(ends)):  # a stream runs its work in order: no step ends before the one it follows
        ends[i] = max(ends[i], ends[i - 1])
    previous = [starts[0]] + ends[:-1]
    return list(zip(previous, ends))
