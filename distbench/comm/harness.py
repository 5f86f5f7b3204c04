"""Collective benchmark harness: one torchrun job measures every op x size x timing mode.

Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend gloo \
        --ops all_reduce,all_gather --sizes 1MiB,16MiB --out comm.csv

What one trial measures, per timing mode (CSV column `timing`):
- events: a CUDA event before and after `iters` back-to-back ops on the current stream, after one
  aligning op and a device synchronisation; time per op = elapsed / iters.
- graph:  the `iters` ops are captured once in a CUDA graph (after warm-up on the capture stream);
  per trial the graph is replayed `graph_launches` times between two CUDA events (nccl-tests -G);
  time per op = elapsed / (iters x graph_launches).
- host:   host clock around every single op followed by a device synchronisation (what a naive
  loop sees); time per op = the mean of those. Gloo (CPU) only has this mode.
events and graph trials also take the host clock around the issuing loop alone (after the start
event is recorded, before the end event; nothing waits inside): `host_issue_us`, the host's time to
issue one op. Where the GPU runs each op faster than the host issues the next, the events measure
that issuing (torch's per-call host cost at small sizes, not link latency): such a point is
host-bound (distbench.comm.contract.host_bound), and the report and the live table say so.
Each rank times its own ops; every rank's time per trial is kept (comm_ranks.csv) and the row's
`time_us` aggregates them as `rank_agg` says: `max` (default: the slowest rank bounds the step of
a synchronous job), or nccl-tests' `avg`, `min`, `rank0`.

How this differs from nccl-tests (which our figures are compared with): nccl-tests times with a
host clock around `iters` launches followed by a stream synchronisation (after a barrier), and
by default reports the average over ranks (`-a 1`). CUDA events exclude the host's final
synchronisation and start when the GPU reaches the first op, so for a stream kept busy they
measure the same interval; `max` over ranks is >= nccl-tests' average by the spread between ranks,
which comm_ranks.csv and the `time_us_rank_min` / `time_us_rank_max` columns show.

Checks: every op's output is compared exactly with the expected values on every rank, twice: once
eagerly before warm-up (on the first buffer set), and once after the timed trials (on every set) through the same mechanism that was timed
(eager ops for events/host; for graph, a replay of the timed graph itself when each of its ops
works on its own buffer set, else of a graph captured the same way with one op per buffer set),
after re-writing the inputs and poisoning the outputs. The checks are never inside a timed region.

Buffers rotate: where `iters` copies of a point's buffers fit in `rotate_bytes`, op j of a trial
works on copy j (as nccl-tests shifts its buffer offset per iteration), so a small size is not
flattered by data that stays in a cache between ops.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass

from distbench.core.ops_spec import SPECS, element_count, placements
from distbench.core.choices import DEVICE_TIMINGS, RANK_AGGS
from distbench.core.units import human_bytes
from distbench.launch.ranks import RankContext, node_count, ranks_text
from distbench.launch.fr_watch import dump_on_timeout
from distbench.comm.contract import COMM_RANK_COLUMN_NAMES

DEFAULT_ROTATE_BYTES = 256 * 2**20


@dataclass(frozen=True)
class Point:
    """One planned measurement (op, size, timing) of a job; the harness emits `trials` rows for it."""
    op: str
    size_bytes: int
    timing: str
    inplace: bool = False
    traffic: str = "none"  # all_to_all_v's traffic matrix (distbench.comm.traffic); "none" for other ops


def job_timings(backend: str, timings: list[str]) -> list[str]:
    # Without CUDA there is no stream to time: Gloo measures with the host clock only.
    if backend == "gloo":
        return ["host"]
    return list(dict.fromkeys(timings))


def plan_points(ops: list[str], sizes: list[int], timings: list[str], inplace=(False,),
                traffic=("uniform",), graph_max_bytes: int = 0) -> list[Point]:
    """The measurement order shared by the harness and the launcher (which fills in after a crash).
    graph_max_bytes > 0: graph timing only up to that size (comm.graph_max_bytes)."""
    from distbench.comm.traffic import NONE

    points = []
    for op in ops:
        spec = SPECS[op]
        for pattern in (list(dict.fromkeys(traffic)) if spec.takes_traffic else [NONE]):
            for size in (sizes if spec.moves_data else [0]):
                for timing in timings:
                    if timing == "graph" and 0 < graph_max_bytes < size:
                        continue
                    for ip in placements(spec, list(inplace)):
                        points.append(Point(op, size, timing, ip, pattern))
    return points


def base_row(args, point: Point, count: int, size_bytes: int) -> dict:
    """A point's row before timing: `point` as planned (its size is the requested one), measured at
    `size_bytes` (count elements; spec.element_count rounds split ops down)."""
    return {
        "backend": args.backend, "world_size": args.world_size, "nodes": args.nodes, "op": point.op,
        "traffic": point.traffic, "dtype": args.dtype,
        "nccl_env": args.nccl_env_label, "timing": point.timing, "inplace": point.inplace,
        "size_bytes": size_bytes, "requested_bytes": point.size_bytes, "count": count, "trial": 0, "iters": ops_per_trial(args, point.timing),
        "rank_agg": args.rank_agg, "time_us": math.nan, "time_us_rank_min": math.nan,
        "time_us_rank_max": math.nan, "slowest_rank": None, "arrival_skew_us": math.nan, "last_rank": None,
        "host_issue_us": math.nan,
        "algbw_gbps": math.nan, "busbw_gbps": math.nan,
        "busiest_rank": None, "busiest_rank_bytes": None, "busiest_rank_time_us": math.nan,
        "correct": None, "status": "ok", "message": "",
    }


def ops_per_trial(args, timing: str) -> int:
    return args.iters * (args.graph_launches if timing == "graph" else 1)


def bandwidths(size_bytes: int, time_us: float, factor: float) -> tuple[float, float]:
    """nccl-tests: algbw = size / time; busbw = algbw * factor (GB/s = 1e9 bytes/s)."""
    if not size_bytes or not time_us or math.isnan(factor):
        return math.nan, math.nan
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * factor


def aggregate_over_ranks(per_rank: list[float], how: str) -> float:
    """One trial's time from every rank's time: max | avg | min | rank0 (nccl-tests' -a 3/1/2/0)."""
    if how == "max":
        return max(per_rank)
    if how == "min":
        return min(per_rank)
    if how == "avg":
        return sum(per_rank) / len(per_rank)
    if how == "rank0":
        return per_rank[0]
    raise ValueError(f"rank_agg {how!r}: allowed {', '.join(RANK_AGGS)}")


def rotation_slots(footprint_bytes: int, iters: int, rotate_bytes: int) -> int:
    """How many copies of a point's buffers the timed ops rotate through (1 = no rotation)."""
    if footprint_bytes <= 0 or rotate_bytes <= 0:
        return 1
    return max(1, min(iters, rotate_bytes // footprint_bytes))


# --- everything below runs inside the torchrun ranks ------------------------------------------

class Harness(RankContext):
    def __init__(self, args):
        super().__init__(args.backend, args.op_timeout_s)
        self.args = args
        args.world_size, args.nodes = self.world_size, node_count()
        self.slow_ms = test_slow_ms(self.rank)
        self.hang_at, self.measured = test_hang_point(self.rank), 0
        # the last trial's time per op, and per op and byte: how long the next step should take, so
        # that a bigger message than any before is not called hung for its size (distbench.launch.progress)
        self.op_s, self.op_s_per_byte, self.size_bytes = 0.0, 0.0, 0
        self.dtype = getattr(self.torch, args.dtype)
        self.elem_bytes = self.torch.empty((), dtype=self.dtype).element_size()

    def measure(self, point: Point, emit) -> None:
        from distbench.comm.ops import TORCH_OPS, Ctx

        torch, args = self.torch, self.args
        spec, torch_op = SPECS[point.op], TORCH_OPS[point.op]
        ctx = Ctx(self.rank, self.world_size, self.device, self.dtype, args.backend, point.traffic)
        count = element_count(spec, point.size_bytes, self.elem_bytes, self.world_size)
        size_bytes = count * self.elem_bytes if spec.moves_data else 0
        row = base_row(args, point, count, size_bytes if spec.moves_data and count else point.size_bytes)
        self.arrivals_us, self.issue_us = [], []
        self.where = f"{point.op} {human_bytes(row['size_bytes'])} ({point.timing})"
        self.size_bytes = row["size_bytes"]
        self.op_s = max(self.op_s, self.op_s_per_byte * self.size_bytes)
        self.beacon.at(f"{self.where}: buffers")

        def emit_status(status, message):
            emit([{**row, "trial": t, "status": status, "message": message} for t in range(args.trials)], [])

        load = None
        if spec.takes_traffic and count:
            from distbench.comm.ops import a2av_counts
            from distbench.comm.traffic import TrafficError, busiest
            try:
                load = busiest(a2av_counts(ctx, count))
            except TrafficError as e:  # a matrix file written for another world size
                return emit_status("skipped", str(e))
            row.update(busiest_rank=load.rank, busiest_rank_bytes=load.elements * self.elem_bytes)
        if self.world_size < spec.min_world_size:
            return emit_status("skipped", f"{point.op} needs world size >= {spec.min_world_size}")
        if spec.moves_data and count == 0:
            return emit_status("skipped", f"size too small for one {args.dtype} element per rank")
        if point.timing in DEVICE_TIMINGS and not self.cuda:
            return emit_status("skipped", f"timing {point.timing} needs CUDA")
        if point.timing == "graph" and not spec.graph_capturable:
            return emit_status("skipped", f"{point.op} cannot be captured in a CUDA graph (host-side sync)")

        make = torch_op.make_inplace if point.inplace and not spec.always_inplace else torch_op.make
        # send + recv (+ the expected values, built once for the check)
        footprint = 3 * size_bytes
        n_slots = rotation_slots(footprint, args.iters, args.rotate_bytes)
        slots, err = [], None
        try:
            slots = [make(ctx, count) for _ in range(n_slots)]
        except torch.OutOfMemoryError as e:
            err = ("oom", f"allocating {n_slots} x {size_bytes} B buffers: {str(e).splitlines()[0]}")
        except RuntimeError as e:  # CPU allocation failure or unsupported dtype
            kind = "oom" if "alloc" in str(e).lower() or "memory" in str(e).lower() else "failed"
            err = (kind, str(e).splitlines()[0])
        if not self.agree(err is None):
            slots = None
            self._release()
            return emit_status(*(err or ("oom", "another rank could not allocate its buffers")))

        if self.measured == self.hang_at:  # test-only: DISTBENCH_TEST_HANG_RANK, this rank skips the collective
            while True:
                time.sleep(1)
        self.measured += 1
        try:
            # Before warm-up one buffer set is enough: the check after timing covers every set.
            self.beacon.at(f"{self.where}: check before timing", self.op_s)
            before = self._check(ctx, slots[:1], lambda: torch_op.run(ctx, slots[0]))
            times_us, after = self._time_and_check(torch_op, ctx, slots, point.timing)
            err = None
        except torch.OutOfMemoryError as e:
            err, before, after, times_us = ("oom", str(e).splitlines()[0]), None, None, None
        except RuntimeError as e:
            dump_on_timeout(e, self.world_size)  # a collective past op_timeout_s: every rank's dump, now
            err, before, after, times_us = ("failed", str(e).splitlines()[0][:300]), None, None, None
        ok = self.agree(err is None)
        slots = None
        self._release()
        if not ok:
            return emit_status(*(err or ("failed", "another rank failed this measurement")))

        code = {None: -1.0, True: 1.0, False: 0.0}
        # One gather: [check before, check after, trial times..., trial arrivals..., trial issue times...]
        # from every rank.
        trials = args.trials
        # when each rank was ready to start each trial (NaN where a timing path records none)
        arrivals_us = self.arrivals_us if len(self.arrivals_us) == trials else [math.nan] * trials
        issue_us = self.issue_us if len(self.issue_us) == trials else [math.nan] * trials
        per_rank = self.gather_rows([code[before], code[after], *times_us, *arrivals_us, *issue_us])
        correct, message = self._verdict(per_rank, point.timing)
        factor = spec.bus_factor(self.world_size)
        rows, rank_rows = [], []
        for t in range(trials):
            trial_times = [r[2 + t] for r in per_rank]
            arrivals = [r[2 + trials + t] for r in per_rank]
            issues = [r[2 + 2 * trials + t] for r in per_rank]
            first = min(arrivals)
            time_us = aggregate_over_ranks(trial_times, args.rank_agg)
            algbw, busbw = bandwidths(size_bytes, time_us, factor)
            if load is not None:
                row["busiest_rank_time_us"] = trial_times[load.rank]
            rows.append({**row, "trial": t, "time_us": time_us, "time_us_rank_min": min(trial_times),
                         "time_us_rank_max": max(trial_times),
                         "slowest_rank": max(range(self.world_size), key=trial_times.__getitem__),
                         "arrival_skew_us": max(arrivals) - first,
                         # the slowest host: in a collective every rank waits for the last op it issues
                         "host_issue_us": math.nan if any(math.isnan(x) for x in issues) else max(issues),
                         "last_rank": None if math.isnan(first) else max(range(self.world_size), key=arrivals.__getitem__),
                         "algbw_gbps": algbw, "busbw_gbps": busbw, "correct": correct,
                         "status": "ok" if correct is not False else "wrong", "message": message})
            rank_rows += [{k: row[k] for k in COMM_RANK_COLUMN_NAMES if k in row}
                          | {"trial": t, "rank": r, "time_us": tr, "arrival_us": arrivals[r] - first,
                             "host_issue_us": issues[r]}
                          for r, tr in enumerate(trial_times)]
        emit(rows, rank_rows)

    def _verdict(self, per_rank: list[list[float]], timing: str) -> tuple[bool | None, str]:
        if all(r[0] < 0 for r in per_rank):
            return None, ""
        how = {"graph": "the timed CUDA graph's replay", "events": "the timed eager ops",
               "host": "the timed eager ops"}[timing]
        bad_before = [i for i, r in enumerate(per_rank) if r[0] == 0]
        bad_after = [i for i, r in enumerate(per_rank) if r[1] == 0]
        parts = []
        if bad_before:
            parts.append(f"before timing (eager op) on rank(s) {ranks_text(bad_before)}")
        if bad_after:
            parts.append(f"after {how} on rank(s) {ranks_text(bad_after)}")
        if parts:
            return False, "result differs from the expected values " + "; ".join(parts)
        return True, ""

    def _release(self):
        if self.cuda:
            self.torch.cuda.empty_cache()

    def _run_each_slot(self, torch_op, ctx, slots) -> None:
        for b in slots:
            torch_op.run(ctx, b)

    def _check(self, ctx, slots, run_once) -> bool | None:
        """Re-write inputs, poison outputs, run one op per buffer set via `run_once`, compare exactly.
        Returns this rank's verdict (None when the op has nothing to check)."""
        if slots[0].expected is None:
            return None
        for b in slots:
            b.init()
        run_once()
        self.sync()
        expected = slots[0].expected()
        return all(bool(self.torch.equal(b.recv, expected)) for b in slots)

    def _time_and_check(self, torch_op, ctx, slots, timing: str) -> tuple[list[float], bool | None]:
        torch, args = self.torch, self.args
        n_slots = len(slots)

        def run(j):
            torch_op.run(ctx, slots[j % n_slots])

        # Warm up on the stream the graph is captured on (as nccl-tests does), so NCCL's lazy
        # per-stream setup happens outside the capture.
        stream = torch.cuda.Stream(self.device) if timing == "graph" else None
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(self.device))
        self.beacon.at(f"{self.where}: warm-up", self.op_s * args.warmup)
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            for j in range(args.warmup):
                run(j)
        self.sync()
        self.beacon.done(args.warmup)
        graph = check_graph = None
        if timing == "graph":
            graph = self._capture(stream, [lambda j=j: run(j) for j in range(args.iters)])
            graph.replay()
            self.sync()
        times, self.arrivals_us, self.issue_us = [], [], []
        for trial in range(args.trials):
            # between two trials, outside the clock: where this rank is going (distbench.launch.progress)
            self.beacon.at(f"{self.where}, trial {trial}", self.op_s * (1 + ops_per_trial(args, timing)))
            run(0)  # one un-timed op aligns the ranks before the clock starts
            self.sync()
            # When this rank is ready to issue the trial's first op (wall clock, µs): after the
            # aligning op every rank should be here at once, so a rank that is consistently late
            # is a straggler (its host is slow), and the others wait for it in the first op.
            if self.slow_ms:  # test-only: DISTBENCH_TEST_SLOW_RANK makes one rank late on purpose
                time.sleep(self.slow_ms / 1e3)
            self.arrivals_us.append(time.time_ns() / 1e3)
            if timing == "host":
                total = 0.0
                for j in range(args.iters):
                    t0 = time.perf_counter()
                    run(j)
                    self.sync()
                    total += time.perf_counter() - t0
                times.append(total / args.iters * 1e6)
                self.issue_us.append(math.nan)  # the host clock is the measurement itself
                self._trial_done(times[-1], 1 + args.iters)
                continue
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            # The host's time to issue the timed ops (no synchronisation inside): when the events'
            # time per op is no more than this, the GPU was waiting for the host.
            t0 = time.perf_counter()
            if graph is not None:
                for _ in range(args.graph_launches):
                    graph.replay()
            else:
                for j in range(args.iters):
                    run(j)
            issued = time.perf_counter() - t0
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / ops_per_trial(args, timing))
            self.issue_us.append(issued * 1e6 / ops_per_trial(args, timing))
            self._trial_done(times[-1], 1 + ops_per_trial(args, timing))

        # Check what was timed, outside the timed region.
        self.beacon.at(f"{self.where}: check after timing", self.op_s * n_slots)
        if graph is not None:
            if n_slots < args.iters:  # the timed graph repeats ops on one buffer set: one op per set instead
                check_graph = self._capture(stream, [lambda j=j: run(j) for j in range(n_slots)])
            replay = (check_graph or graph).replay
            after = self._check(ctx, slots, replay)
        else:
            after = self._check(ctx, slots, lambda: self._run_each_slot(torch_op, ctx, slots))
        del graph, check_graph
        return times, after

    def _trial_done(self, op_us: float, ops: int) -> None:
        """A trial ended (outside the clock): its ops count as progress, its time per op sets the next expectation."""
        self.op_s = op_us * 1e-6
        # the latest point's (sizes ascend): scaled linearly to the next size, which over-estimates (safe)
        self.op_s_per_byte = self.op_s / max(self.size_bytes, 1)
        self.beacon.done(ops)

    def _capture(self, stream, ops):
        graph = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(graph, stream=stream):
            for op in ops:
                op()
        return graph


def test_slow_ms(rank: int) -> float:
    """Test-only: DISTBENCH_TEST_SLOW_RANK=<rank>:<ms> makes that rank arrive <ms> late at every
    timed trial (what a slow host does), so the straggler analysis can be checked for real."""
    spec = os.environ.get("DISTBENCH_TEST_SLOW_RANK", "")
    if not spec:
        return 0.0
    slow_rank, ms = spec.split(":")
    return float(ms) if int(slow_rank) == rank else 0.0


def test_hang_point(rank: int) -> int | None:
    """Test-only: DISTBENCH_TEST_HANG_RANK=<rank>:<n> makes that rank skip the first collective of
    the job's n-th measured point (0-based) and wait in host code instead, as a rank stuck outside
    the collectives does: the others wait in it until the launcher's time limit, whose hang forensics
    (distbench.launch.hang) must name that rank and collective."""
    spec = os.environ.get("DISTBENCH_TEST_HANG_RANK", "")
    if not spec:
        return None
    hang_rank, point = spec.split(":")
    return int(point) if int(hang_rank) == rank else None


def profile_ops(h: Harness, args) -> None:
    """Traces on request: after the timed sweep, every op of the job run --profile-steps times at the
    largest size (its first traffic matrix) under torch.profiler, one trace per rank. Eager ops, no
    check, nothing written to the CSV: the trace shows what the timed ops do, it is not a measurement."""
    from distbench.comm.ops import TORCH_OPS, Ctx
    from distbench.launch.profiling import profile_pass

    size = max(args.sizes) if args.sizes else 0
    runs = []
    for op in args.ops:
        spec = SPECS[op]
        ctx = Ctx(h.rank, h.world_size, h.device, h.dtype, args.backend, args.traffic[0] if spec.takes_traffic else "none")
        count = element_count(spec, size, h.elem_bytes, h.world_size)
        if h.world_size < spec.min_world_size or (spec.moves_data and not count):
            continue
        runs.append((TORCH_OPS[op], ctx, TORCH_OPS[op].make(ctx, count)))

    def one_of_each():
        for torch_op, ctx, b in runs:
            torch_op.run(ctx, b)
    try:
        path = profile_pass(h.torch, one_of_each, args.profile_steps, args.profile_dir, h.rank, h.cuda, h.sync)
        h.say(f"profile: {len(runs)} op(s) x {args.profile_steps} traced at {size} B, rank {h.rank}: {path}")
    except RuntimeError as e:  # torch.OutOfMemoryError included: the measured rows are already written
        print(f"distbench: profile: no trace on rank {h.rank}: {str(e).splitlines()[0]}", file=sys.stderr, flush=True)
    runs.clear()
    h._release()
