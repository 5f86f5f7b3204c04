"""Collective benchmark harness: one torchrun job measures every op x size x timing mode.

Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend gloo \
        --ops all_reduce,all_gather --sizes 1MiB,16MiB --out comm.csv

Timing modes (CSV column `timing`):
- events: CUDA events around `iters` back-to-back ops on the stream (nccl-tests' default);
- graph:  the `iters` ops captured once in a CUDA graph and replayed (nccl-tests -G);
- host:   host clock with a device synchronisation around every single op (what a naive loop sees).
Per trial, time_us = elapsed / iters on each rank, then the max over ranks.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from distbench.schema import COMM_COLUMN_NAMES
from distbench.sizes import parse_size

DTYPES = ("float32", "float64", "bfloat16", "float16", "int32")
DEVICE_TIMINGS = ("events", "graph")


@dataclass(frozen=True)
class Point:
    """One planned measurement (op, size, timing) of a job; the harness emits `trials` rows for it."""
    op: str
    size_bytes: int
    timing: str
    inplace: bool = False


def job_timings(backend: str, timings: list[str]) -> list[str]:
    # Without CUDA there is no stream to time: Gloo measures with the host clock only.
    if backend == "gloo":
        return ["host"]
    return list(dict.fromkeys(timings))


def plan_points(ops: list[str], sizes: list[int], timings: list[str], inplace=(False,)) -> list[Point]:
    """The measurement order shared by the harness and the launcher (which fills in after a crash)."""
    from distbench.ops import OPS, placements

    points = []
    for op in ops:
        op_sizes = sizes if OPS[op].moves_data else [0]
        for size in op_sizes:
            for timing in timings:
                for ip in placements(OPS[op], list(inplace)):
                    points.append(Point(op, size, timing, ip))
    return points


def base_row(args, point: Point, count: int) -> dict:
    return {
        "backend": args.backend, "world_size": args.world_size, "op": point.op, "dtype": args.dtype,
        "nccl_env": args.nccl_env_label, "timing": point.timing, "inplace": point.inplace,
        "size_bytes": point.size_bytes, "count": count, "trial": 0, "iters": args.iters,
        "time_us": math.nan, "algbw_gbps": math.nan, "busbw_gbps": math.nan, "correct": None,
        "status": "ok", "message": "",
    }


def bandwidths(size_bytes: int, time_us: float, factor: float) -> tuple[float, float]:
    """nccl-tests: algbw = size / time; busbw = algbw * factor (GB/s = 1e9 bytes/s)."""
    if not size_bytes or not time_us or math.isnan(factor):
        return math.nan, math.nan
    algbw = size_bytes / (time_us * 1e-6) / 1e9
    return algbw, algbw * factor


def check_placement(records: list[dict]) -> str | None:
    """Return an error message when two ranks share a GPU (seed 004's most common scaling bug)."""
    seen: dict[str, int] = {}
    for r in records:
        key = r.get("uuid")
        if not key:
            continue
        host_key = f"{r.get('hostname')}/{key}"
        if host_key in seen:
            return (f"ranks {seen[host_key]} and {r['rank']} share one GPU ({key} on {r.get('hostname')}, "
                    f"CUDA_VISIBLE_DEVICES={r.get('cuda_visible_devices')!r}, LOCAL_RANK={r.get('local_rank')}). "
                    "Launch one process per GPU: torchrun --nproc_per_node=<number of GPUs>, and do not "
                    "restrict CUDA_VISIBLE_DEVICES to fewer GPUs than ranks per node.")
        seen[host_key] = r["rank"]
    return None


# --- everything below runs inside the torchrun ranks ------------------------------------------

def _placement(rank: int, local_rank: int, device) -> dict:
    import torch

    rec = {"rank": rank, "local_rank": local_rank, "hostname": socket.gethostname(), "pid": os.getpid(),
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": str(device),
           "device_index": device.index, "pci_bus_id": None, "uuid": None, "gpu_name": None}
    if device.type == "cuda":
        from distbench.probes.env import gpu_identity

        ident = gpu_identity(torch.cuda.get_device_properties(device))
        rec.update(gpu_name=ident["name"], uuid=ident["uuid"], pci_bus_id=ident["pci_bus_id"])
    return rec


class Harness:
    def __init__(self, args):
        import torch
        import torch.distributed as dist

        self.args, self.torch, self.dist = args, torch, dist
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        args.world_size = self.world_size
        if args.backend == "nccl":
            if not torch.cuda.is_available():
                raise SystemExit("distbench error: backend nccl needs CUDA, but torch.cuda.is_available() is False on this host")
            visible = torch.cuda.device_count()
            if self.local_rank >= visible:
                raise SystemExit(
                    f"distbench error: rank {self.rank} has LOCAL_RANK {self.local_rank} but only {visible} GPU(s) are visible "
                    f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}): use at most {visible} "
                    "processes per node with NCCL")
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        timeout = dt.timedelta(seconds=args.op_timeout_s)
        kw = {"device_id": self.device} if args.backend == "nccl" else {}
        dist.init_process_group(args.backend, timeout=timeout, **kw)
        # Bookkeeping (placement, agreement, max over ranks) runs on a separate Gloo group, as
        # nccl-tests uses MPI for it: it must not depend on the NCCL settings under test (with
        # NCCL_ALGO=Tree, NCCL has no algorithm for all_gather) nor add traffic to the timed comm.
        self.ctrl = dist.new_group(backend="gloo") if args.backend == "nccl" else None
        self.dtype = getattr(torch, args.dtype)
        self.elem_bytes = torch.empty((), dtype=self.dtype).element_size()
        self.cuda = self.device.type == "cuda"

    # Every rank votes; all take the worst outcome, so no rank is left waiting in a collective.
    def agree(self, ok: bool) -> bool:
        t = self.torch.tensor([1 if ok else 0], dtype=self.torch.int32)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN, group=self.ctrl)
        return bool(t.item())

    def max_over_ranks(self, values: list[float]) -> list[float]:
        t = self.torch.tensor(values, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.ctrl)
        return t.tolist()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def placement(self) -> list[dict]:
        rec = _placement(self.rank, self.local_rank, self.device)
        out = [None] * self.world_size
        self.dist.all_gather_object(out, rec, group=self.ctrl)
        return out

    def measure(self, point: Point, emit) -> None:
        from distbench.ops import OPS, Ctx, element_count

        torch, args = self.torch, self.args
        spec = OPS[point.op]
        ctx = Ctx(self.rank, self.world_size, self.device, self.dtype, args.backend)
        count = element_count(spec, point.size_bytes, self.elem_bytes, self.world_size)
        size_bytes = count * self.elem_bytes if spec.moves_data else 0
        point = Point(point.op, size_bytes, point.timing, point.inplace) if spec.moves_data and count else point
        row = base_row(args, point, count)

        def emit_status(status, message):
            emit([{**row, "trial": t, "status": status, "message": message} for t in range(args.trials)])

        if self.world_size < spec.min_world_size:
            return emit_status("skipped", f"{point.op} needs world size >= {spec.min_world_size}")
        if spec.moves_data and count == 0:
            return emit_status("skipped", f"size too small for one {args.dtype} element per rank")
        if point.timing in DEVICE_TIMINGS and not self.cuda:
            return emit_status("skipped", f"timing {point.timing} needs CUDA")
        if point.timing == "graph" and not spec.graph_capturable:
            return emit_status("skipped", f"{point.op} cannot be captured in a CUDA graph (host-side sync)")

        bufs, err = None, None
        try:
            bufs = (spec.make_inplace if point.inplace and not spec.inplace else spec.make)(ctx, count)
        except torch.OutOfMemoryError as e:
            err = ("oom", f"allocating {size_bytes} B buffers: {str(e).splitlines()[0]}")
        except RuntimeError as e:  # CPU allocation failure or unsupported dtype
            kind = "oom" if "alloc" in str(e).lower() or "memory" in str(e).lower() else "failed"
            err = (kind, str(e).splitlines()[0])
        if not self.agree(err is None):
            bufs = None
            self._release()
            return emit_status(*(err or ("oom", "another rank could not allocate its buffers")))

        try:
            correct = self._check(spec, ctx, bufs)
            times_us = self._time(spec, ctx, bufs, point.timing)
            err = None
        except torch.OutOfMemoryError as e:
            err, correct, times_us = ("oom", str(e).splitlines()[0]), None, None
        except RuntimeError as e:
            err, correct, times_us = ("failed", str(e).splitlines()[0][:300]), None, None
        ok = self.agree(err is None)
        bufs = None
        self._release()
        if not ok:
            return emit_status(*(err or ("failed", "another rank failed this measurement")))

        times_us = self.max_over_ranks(times_us)
        factor = spec.bus_factor(self.world_size)
        rows = []
        for t, time_us in enumerate(times_us):
            algbw, busbw = bandwidths(size_bytes, time_us, factor)
            status = "ok" if correct is not False else "wrong"
            msg = "" if status == "ok" else "result differs from the expected values on at least one rank"
            rows.append({**row, "trial": t, "time_us": time_us, "algbw_gbps": algbw, "busbw_gbps": busbw,
                         "correct": correct, "status": status, "message": msg})
        emit(rows)

    def _release(self):
        if self.cuda:
            self.torch.cuda.empty_cache()

    def _check(self, spec, ctx, bufs) -> bool | None:
        if bufs.expected is None:
            spec.run(ctx, bufs)
            self.sync()
            return None
        spec.run(ctx, bufs)
        self.sync()
        got = bufs.recv
        ok = bool(self.torch.equal(got, bufs.expected()))
        return self.agree(ok)

    def _time(self, spec, ctx, bufs, timing: str) -> list[float]:
        torch, args = self.torch, self.args
        run = lambda: spec.run(ctx, bufs)  # noqa: E731
        for _ in range(args.warmup):
            run()
        self.sync()
        graph = None
        if timing == "graph":
            # Capture on a side stream after warm-up (communicators exist), as torch.cuda.graph expects.
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(args.iters):
                    run()
            graph.replay()
            self.sync()
        times = []
        for _ in range(args.trials):
            run()  # one un-timed op aligns the ranks before the clock starts
            self.sync()
            if timing == "host":
                total = 0.0
                for _ in range(args.iters):
                    t0 = time.perf_counter()
                    run()
                    self.sync()
                    total += time.perf_counter() - t0
                times.append(total / args.iters * 1e6)
                continue
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            if graph is not None:
                graph.replay()
            else:
                for _ in range(args.iters):
                    run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / args.iters)
        del graph
        return times


def csv_value(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return f"{v:.6g}" if isinstance(v, float) else v


def _csv_writer(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "w", newline="")
    w = csv.DictWriter(f, fieldnames=COMM_COLUMN_NAMES)
    w.writeheader()
    f.flush()

    def emit(rows):
        for r in rows:
            w.writerow({k: csv_value(v) for k, v in r.items()})
        f.flush()
    return f, emit


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.comm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=("nccl", "gloo"), required=True)
    p.add_argument("--ops", default="all_reduce", help="comma-separated op names")
    p.add_argument("--sizes", default="1MiB", help="comma-separated sizes, e.g. 8,1MiB,1GB")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--timing", default="events", help="comma-separated: events,graph,host")
    p.add_argument("--inplace", default="false", help="comma-separated: false,true (nccl-tests' out-of-place / in-place)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--op-timeout-s", type=int, default=300, help="process-group timeout per collective")
    p.add_argument("--nccl-env-label", default="default", help="label written to the nccl_env column")
    p.add_argument("--out", required=True, help="CSV to write (rank 0); atomically renamed when complete")
    p.add_argument("--placement-out", help="JSON with every rank's GPU placement")
    args = p.parse_args(argv)
    from distbench.ops import OPS

    args.ops = [o for o in args.ops.split(",") if o]
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        p.error(f"unknown op(s) {unknown}; allowed: {sorted(OPS)}")
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    args.timing = job_timings(args.backend, [t for t in args.timing.split(",") if t])
    flags = {"false": False, "true": True}
    bad_ip = [v for v in args.inplace.split(",") if v not in flags]
    if bad_ip:
        p.error(f"unknown --inplace value(s) {bad_ip}; allowed: false, true")
    args.inplace = [flags[v] for v in args.inplace.split(",")]
    bad = [t for t in args.timing if t not in ("events", "graph", "host")]
    if bad:
        p.error(f"unknown timing(s) {bad}; allowed: events, graph, host")
    return args


def partial_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def main(argv=None) -> int:
    args = parse_args(argv)
    h = Harness(args)
    out = Path(args.out)
    records = h.placement()
    problem = check_placement(records)
    if h.rank == 0 and args.placement_out:
        from distbench.io import atomic_write_json
        atomic_write_json(args.placement_out, {"ranks": records, "error": problem})
    if problem:
        print(f"distbench error: {problem}", file=sys.stderr)
        h.dist.destroy_process_group()
        return 3
    f, emit = _csv_writer(partial_path(out)) if h.rank == 0 else (None, lambda rows: None)
    for point in plan_points(args.ops, args.sizes, args.timing, args.inplace):
        if h.rank == 0:
            print(f"distbench: measuring {point.op} {point.size_bytes} B {point.timing}{' in-place' if point.inplace else ''}", file=sys.stderr, flush=True)
        h.measure(point, emit)
    h.dist.barrier(group=h.ctrl)
    if f is not None:
        f.close()
        os.replace(partial_path(out), out)
    h.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
