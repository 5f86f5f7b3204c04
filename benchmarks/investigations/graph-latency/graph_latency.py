"""Where does our CUDA-graph small-message latency differ from nccl-tests -G?

Run on 2 GPUs (benchmarks/runs/latency_run.sh does, with the NVLS-off variables set):

    python3 -m torch.distributed.run --standalone --nproc_per_node=2 benchmarks/investigations/graph-latency/graph_latency.py --out results.csv

and, with no GPU, to print the table of a finished CSV next to nccl-tests' output files:

    python3 benchmarks/investigations/graph-latency/graph_latency.py --compare results.csv --nccl-tests G10=nccl_tests_G10.txt --nccl-tests G0=...

Background. distbench.comm's `graph` timing (Harness._time) warms up with `warmup` eager ops on the
default stream, captures `iters` (20) ops into one CUDA graph on torch.cuda.graph's own side stream,
replays it once, and then per trial runs one eager aligning op + synchronize, records a start event,
replays the graph ONCE, records an end event: time per op = elapsed / iters, max over ranks. At 2 ranks
that gave 8.4-11.2 us per all_reduce at 8 B-64 KiB; nccl-tests -G 10 gives 6.0-7.5 us. nccl-tests
captures -n 20 ops, does a host barrier, then launches the graph 10 times back to back and times the
launches with a HOST clock up to a stream sync; it reports the MEAN over ranks (-a 1, its default).

Every variant below measures float32 in-place dist.all_reduce (as the harness does) on ones, with the
same alignment before each trial (one eager all_reduce + torch.cuda.synchronize(), plus a Gloo barrier
where stated), and reports per-rank time per op; the table gives, per size, the median over trials of
the max over ranks and of the mean over ranks. What each variant isolates:

1. baseline               today's harness method exactly (the reference for everything else).
2. capture_stream_warmup  warm-up on the very side stream that the capture then uses
                          (torch.cuda.graph(g, stream=s)): is the warm-up stream a factor?
3. replays_10             the same 20-op graph replayed 10 times between the events (200 ops, as -G 10):
                          amortizes the one-off cost of a launch (host launch latency of the first replay,
                          the rank-arrival skew paid by the first all_reduce) over 10x more ops.
4. graph_200              one 200-op graph replayed once: amortization in one launch; against replays_10
                          it shows the per-launch gap between back-to-back graph launches.
5. host_clock_10          nccl-tests' own method: Gloo barrier, host perf_counter around 10 back-to-back
                          replays + torch.cuda.synchronize(). Same clock as the nccl-tests figure.
6. prequeued              start event + 10 replays queued behind a GPU-side torch.cuda._sleep (~sleep_us),
                          so all host launch cost is hidden: pure device time of 200 ops.
   prequeued_1            the same with ONE replay (20 ops): baseline minus host launch cost, directly.
7. skew                   arrival skew between the ranks at the start of a trial: each rank reads
                          time.monotonic_ns() (one system-wide clock: the ranks share a host) right
                          before it records the start event, after align + Gloo barrier. The CSV's
                          time_us_per_op column then holds this rank's offset from the earliest rank in
                          us (NOT per op; ops_per_trial = 0): max over ranks = spread.
   skew_sync              the same after the baseline's alignment only (eager op + sync, no barrier).
8. eager_events_200       200 eager ops between events (the harness' `events` mode, 10x longer).

A check runs after each variant (buffer re-filled with ones, one eager all_reduce, expect world_size).
CSV: one row per (variant, size, trial, rank): variant,size_bytes,trial,rank,time_us_per_op,ops_per_trial.
Standalone on purpose: needs only torch (the device image has no distbench installed).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time

VARIANTS = ("baseline", "capture_stream_warmup", "replays_10", "graph_200", "host_clock_10",
            "prequeued", "prequeued_1", "skew", "skew_sync", "eager_events_200")
SKEW_VARIANTS = ("skew", "skew_sync")
COLUMNS = ("variant", "size_bytes", "trial", "rank", "time_us_per_op", "ops_per_trial")
UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 10**6, "mb": 10**6, "mib": 2**20,
         "g": 10**9, "gb": 10**9, "gib": 2**30}


def parse_size(text: str) -> int:
    s = text.strip().lower()
    num = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(num):]
    if unit not in UNITS or not num:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 8, 1KiB, 64KiB, 1MiB)")
    return int(float(num) * UNITS[unit])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="8,1KiB,64KiB,1MiB", help="comma-separated message sizes")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated subset of {','.join(VARIANTS)}")
    p.add_argument("--iters", type=int, default=20, help="ops per captured graph (the harness' iters)")
    p.add_argument("--replays", type=int, default=10, help="graph launches per trial in *_10 / prequeued (-G)")
    p.add_argument("--warmup", type=int, default=5, help="eager warm-up ops before each variant")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--sleep-us", type=float, default=1000.0, help="GPU-side wait that prequeued variants hide launches behind")
    p.add_argument("--timeout-s", type=int, default=120, help="process-group timeout")
    p.add_argument("--out", help="CSV to write (rank 0)")
    p.add_argument("--compare", metavar="CSV", help="no GPU: print the summary of CSV (next to --nccl-tests files)")
    p.add_argument("--nccl-tests", action="append", default=[], metavar="LABEL=FILE",
                   help="nccl-tests output to compare with (out-of-place time column), repeatable")
    args = p.parse_args(argv)
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    args.variants = [v for v in args.variants.split(",") if v]
    bad = [v for v in args.variants if v not in VARIANTS]
    if bad:
        p.error(f"unknown variant(s) {bad}; allowed: {', '.join(VARIANTS)}")
    if not args.compare and not args.out:
        p.error("--out is required (or --compare CSV)")
    return args


# --- summaries (no GPU needed) ------------------------------------------------------------------

def summarize(rows) -> dict:
    """rows: dicts with COLUMNS. Returns {(variant, size): {"max": .., "mean": .., "ranks": {r: median}, "n": trials}}."""
    by_trial: dict = {}
    for r in rows:
        key = (r["variant"], int(r["size_bytes"]))
        by_trial.setdefault(key, {}).setdefault(int(r["trial"]), {})[int(r["rank"])] = float(r["time_us_per_op"])
    out = {}
    for key, trials in by_trial.items():
        maxes = [max(t.values()) for t in trials.values()]
        means = [statistics.fmean(t.values()) for t in trials.values()]
        ranks = sorted({rk for t in trials.values() for rk in t})
        out[key] = {"max": statistics.median(maxes), "mean": statistics.median(means),
                    "ranks": {rk: statistics.median([t[rk] for t in trials.values() if rk in t]) for rk in ranks},
                    "n": len(trials)}
    return out


def fmt_size(n: int) -> str:
    for unit, f in (("MiB", 2**20), ("KiB", 1024)):
        if n >= f and n % f == 0:
            return f"{n // f}{unit}"
    return f"{n}B"


def print_table(summary: dict, file=sys.stdout) -> None:
    variants = [v for v in VARIANTS if any(k[0] == v for k in summary)]
    sizes = sorted({k[1] for k in summary})
    cell = 17
    head = f"{'variant':<22}" + "".join(f" {fmt_size(s):>{cell}}" for s in sizes)
    print("\nus per op: median over trials of [max over ranks / mean over ranks]", file=file)
    print("(skew rows: arrival spread in us, not per op: max = spread, mean = spread/2 at 2 ranks)", file=file)
    print(head, file=file)
    for v in variants:
        cells = []
        for s in sizes:
            d = summary.get((v, s))
            cells.append(f"{d['max']:.2f} / {d['mean']:.2f}" if d else "-")
        print(f"{v:<22}" + "".join(f" {c:>{cell}}" for c in cells), file=file)
    nranks = max((len(d["ranks"]) for d in summary.values()), default=0)
    if 0 < nranks <= 4:
        print("\nper-rank medians (us/op): " + " / ".join(f"r{r}" for r in range(nranks)), file=file)
        print(head, file=file)
        for v in variants:
            cells = []
            for s in sizes:
                d = summary.get((v, s))
                cells.append("/".join(f"{d['ranks'].get(r, math.nan):.2f}" for r in range(nranks)) if d else "-")
            print(f"{v:<22}" + "".join(f" {c:>{cell}}" for c in cells), file=file)


def parse_nccl_tests(path: str) -> dict:
    """{size_bytes: (out-of-place time us, in-place time us)} from an nccl-tests stdout file."""
    res = {}
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return res
    for line in lines:
        tok = line.split()
        if len(tok) < 10 or line.lstrip().startswith("#") or not tok[0].isdigit():
            continue
        try:
            res[int(tok[0])] = (float(tok[5]), float(tok[9]))
        except ValueError:
            continue
    return res


def compare(args) -> int:
    with open(args.compare, newline="") as f:
        summary = summarize(list(csv.DictReader(f)))
    print_table(summary)
    refs = []
    for spec in args.nccl_tests:
        label, _, path = spec.partition("=")
        refs.append((label, parse_nccl_tests(path or label)))
    graph_variants = [v for v in VARIANTS if v not in SKEW_VARIANTS and v != "eager_events_200"]
    sizes = sorted({k[1] for k in summary})
    shown = ("replays_10", "host_clock_10", "prequeued")
    print("\nours: us/op, median over trials of max|mean over ranks (nccl-tests reports the MEAN over ranks);")
    print("nccl-tests: out-of-place time column, us")
    hdr = f"{'size':>6} {'baseline max|mean':>17}" + "".join(f" {v:>15}" for v in shown)
    hdr += f" {'best graph variant (max)':>34}" + "".join(f" {('nt ' + lbl):>10}" for lbl, _ in refs)
    print(hdr)
    for s in sizes:
        def mm(v):
            d = summary.get((v, s))
            return f"{d['max']:.2f}|{d['mean']:.2f}" if d else "-"
        cand = [(summary[(v, s)]["max"], v) for v in graph_variants if (v, s) in summary]
        best = f"{min(cand)[1]} {min(cand)[0]:.2f}" if cand else "-"
        line = f"{fmt_size(s):>6} {mm('baseline'):>17}" + "".join(f" {mm(v):>15}" for v in shown) + f" {best:>34}"
        line += "".join(f" {(f'{ref[s][0]:.2f}' if s in ref else '-'):>10}" for _, ref in refs)
        print(line)
    missing = [lbl for lbl, ref in refs if not ref]
    if missing:
        print(f"(no nccl-tests rows parsed for: {', '.join(missing)})")
    return 0


# --- measurement (torchrun ranks) -----------------------------------------------------------------

class VariantFailed(Exception):
    pass


class Bench:
    def __init__(self, args, torch, dist, dev, ctrl, rank, world):
        self.args, self.torch, self.dist, self.dev, self.ctrl = args, torch, dist, dev, ctrl
        self.rank, self.world = rank, world
        self.buf = None
        self.cycles_per_us = None

    def op(self):
        self.dist.all_reduce(self.buf)

    def sync(self):
        self.torch.cuda.synchronize(self.dev)

    def barrier(self):
        self.dist.barrier(group=self.ctrl)

    def agree(self, ok: bool) -> bool:
        t = self.torch.tensor([1 if ok else 0], dtype=self.torch.int32)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN, group=self.ctrl)
        return bool(t.item())

    def gather(self, values: list, dtype=None) -> list[list]:
        t = self.torch.tensor(values, dtype=dtype or self.torch.float64)
        out = [self.torch.zeros_like(t) for _ in range(self.world)]
        self.dist.all_gather(out, t, group=self.ctrl)
        return [o.tolist() for o in out]

    def align(self, barrier: bool = False):
        """The alignment that precedes every trial: one eager all_reduce + sync (+ Gloo barrier)."""
        self.op()
        self.sync()
        if barrier:
            self.barrier()

    def warm(self, stream=None):
        torch = self.torch
        if stream is None:
            for _ in range(self.args.warmup):
                self.op()
        else:
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(self.args.warmup):
                    self.op()
            torch.cuda.current_stream().wait_stream(stream)
        self.sync()

    def capture(self, n: int, stream=None):
        """As Harness._time: capture n ops, replay once, sync."""
        torch = self.torch
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(n):
                self.op()
        g.replay()
        self.sync()
        return g

    def events(self):
        E = self.torch.cuda.Event
        return E(enable_timing=True), E(enable_timing=True)

    def event_trials(self, launch, ops: int, barrier: bool = False) -> list[float]:
        times = []
        for _ in range(self.args.trials):
            self.align(barrier)
            start, end = self.events()
            start.record()
            launch()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / ops)
        return times

    def calibrate_sleep(self) -> float:
        """Cycles of torch.cuda._sleep per microsecond on this rank's GPU (its own clock)."""
        torch = self.torch
        torch.cuda._sleep(1000)
        self.sync()
        rates = []
        for _ in range(3):
            start, end = self.events()
            start.record()
            torch.cuda._sleep(2_000_000)
            end.record()
            end.synchronize()
            rates.append(2_000_000 / (start.elapsed_time(end) * 1e3))
        return statistics.median(rates)


# Each variant: fn(b, ready) -> (times_us_per_op for this rank per trial, ops_per_trial, note).
# It calls ready() once its setup (warm-up, capture) is done: all ranks agree there before any trial.

def v_baseline(b, ready):
    b.warm()
    g = b.capture(b.args.iters)
    ready()
    return b.event_trials(g.replay, b.args.iters), b.args.iters, ""


def v_capture_stream_warmup(b, ready):
    s = b.torch.cuda.Stream(device=b.dev)
    b.warm(stream=s)
    g = b.capture(b.args.iters, stream=s)
    ready()
    return b.event_trials(g.replay, b.args.iters), b.args.iters, ""


def v_replays_10(b, ready):
    b.warm()
    g = b.capture(b.args.iters)
    ready()
    R = b.args.replays

    def launch():
        for _ in range(R):
            g.replay()
    return b.event_trials(launch, b.args.iters * R), b.args.iters * R, ""


def v_graph_200(b, ready):
    b.warm()
    n = b.args.iters * b.args.replays
    t0 = time.perf_counter()
    g = b.capture(n)
    cap_s = time.perf_counter() - t0
    ready()
    return b.event_trials(g.replay, n), n, f"capture+first replay of {n} ops took {cap_s:.2f} s"


def v_host_clock_10(b, ready):
    b.warm()
    g = b.capture(b.args.iters)
    ready()
    R, ops = b.args.replays, b.args.iters * b.args.replays
    times = []
    for _ in range(b.args.trials):
        b.align(barrier=True)
        t0 = time.perf_counter()
        for _ in range(R):
            g.replay()
        b.sync()
        times.append((time.perf_counter() - t0) * 1e6 / ops)
    return times, ops, ""


def _prequeued(b, ready, replays):
    torch = b.torch
    b.warm()
    g = b.capture(b.args.iters)
    if b.cycles_per_us is None:
        b.cycles_per_us = b.calibrate_sleep()
    cycles = int(b.args.sleep_us * b.cycles_per_us)
    ready()
    ops = b.args.iters * replays
    times, late = [], 0
    for _ in range(b.args.trials):
        b.align()
        start, end = b.events()
        torch.cuda._sleep(cycles)
        start.record()
        for _ in range(replays):
            g.replay()
        end.record()
        late += bool(start.query())  # the sleep ended before the host finished queueing: not hidden
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / ops)
    note = f"sleep {b.args.sleep_us:g} us = {cycles} cycles"
    if late:
        note += f"; WARNING {late}/{b.args.trials} trials: the GPU reached the start event before the host had queued everything (raise --sleep-us)"
    return times, ops, note


def v_prequeued(b, ready):
    return _prequeued(b, ready, b.args.replays)


def v_prequeued_1(b, ready):
    return _prequeued(b, ready, 1)


def _skew(b, ready, barrier):
    b.warm()
    g = b.capture(b.args.iters)
    ready()
    offsets, times = [], []
    for _ in range(b.args.trials):
        b.align(barrier=barrier)
        start, end = b.events()
        t_ns = time.monotonic_ns()
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / b.args.iters)
        # Bookkeeping after the timed part (Gloo): every rank's arrival time.
        arrivals = [row[0] for row in b.gather([t_ns], dtype=b.torch.int64)]
        offsets.append((t_ns - min(arrivals)) / 1e3)
    per_rank = b.gather(times)
    worst = [max(col) for col in zip(*per_rank)]
    note = f"event time of those trials: median of max over ranks {statistics.median(worst):.2f} us/op"
    return offsets, 0, note


def v_skew(b, ready):
    return _skew(b, ready, barrier=True)


def v_skew_sync(b, ready):
    return _skew(b, ready, barrier=False)


def v_eager_events_200(b, ready):
    b.warm()
    ready()
    n = b.args.iters * b.args.replays

    def launch():
        for _ in range(n):
            b.op()
    return b.event_trials(launch, n), n, ""


FUNCS = {"baseline": v_baseline, "capture_stream_warmup": v_capture_stream_warmup, "replays_10": v_replays_10,
         "graph_200": v_graph_200, "host_clock_10": v_host_clock_10, "prequeued": v_prequeued,
         "prequeued_1": v_prequeued_1, "skew": v_skew, "skew_sync": v_skew_sync,
         "eager_events_200": v_eager_events_200}


def run_variant(b, name):
    """(times, ops, note) or (None, 0, error). A failure in setup is agreed on by all ranks, so no
    rank is left in a collective; a failure during trials kills the job (torchrun ends the others)."""
    agreed = []

    def ready():
        agreed.append(True)
        if not b.agree(True):
            raise VariantFailed("another rank failed in setup")

    try:
        return FUNCS[name](b, ready)
    except VariantFailed as e:
        return None, 0, str(e)
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if agreed:
            print(f"graph_latency: rank {b.rank}: {name} failed during trials: {msg}", file=sys.stderr, flush=True)
            raise
        b.agree(False)
        return None, 0, msg


def check(b) -> bool:
    b.buf.fill_(1.0)
    b.op()
    b.sync()
    ok = bool((b.buf == float(b.world)).all().item())
    return b.agree(ok)


def measure(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print("graph_latency: CUDA is not available (torch.cuda.is_available() is False): CUDA graphs and NCCL "
              "need GPUs; run this under torchrun on a machine with one GPU per rank.", file=sys.stderr)
        return 2
    import torch.distributed as dist
    import datetime as dt

    rank, local, world = int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    if local >= torch.cuda.device_count():
        print(f"graph_latency: LOCAL_RANK {local} but only {torch.cuda.device_count()} GPU(s) visible", file=sys.stderr)
        return 2
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev, timeout=dt.timedelta(seconds=args.timeout_s))
    ctrl = dist.new_group(backend="gloo")
    b = Bench(args, torch, dist, dev, ctrl, rank, world)
    if rank == 0:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else "?"
        print(f"graph_latency: torch {torch.__version__}, NCCL {nccl}, {world} ranks, "
              f"{torch.cuda.get_device_name(dev)}; NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}", flush=True)

    # Global warm-up so the first variant at the first size pays no first-use costs (communicator
    # buffers, first capture / instantiation of an NCCL graph).
    b.buf = torch.ones(max(args.sizes) // 4 or 1, dtype=torch.float32, device=dev)
    for _ in range(20):
        b.op()
    b.sync()
    b.buf = torch.ones(2, dtype=torch.float32, device=dev)
    b.warm()
    g = b.capture(args.iters)
    g.replay()
    b.sync()
    del g
    b.barrier()

    f = w = None
    if rank == 0:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        f = open(args.out, "w", newline="")
        w = csv.writer(f)
        w.writerow(COLUMNS)
    rows, failed = [], []
    t_start = time.perf_counter()
    for size in args.sizes:
        count = max(size // 4, 1)
        for name in args.variants:
            b.buf = torch.ones(count, dtype=torch.float32, device=dev)
            b.sync()
            t0 = time.perf_counter()
            times, ops, note = run_variant(b, name)
            ok_local = times is not None
            if not b.agree(ok_local):
                if rank == 0:
                    print(f"graph_latency: {name} {size} B skipped: {note}", flush=True)
                failed.append((name, size, note))
                torch.cuda.empty_cache()
                continue
            correct = check(b)
            per_rank = b.gather(times)
            if rank == 0:
                for r, vals in enumerate(per_rank):
                    for t, v in enumerate(vals):
                        row = {"variant": name, "size_bytes": size, "trial": t, "rank": r,
                               "time_us_per_op": v, "ops_per_trial": ops}
                        rows.append(row)
                        w.writerow([name, size, t, r, f"{v:.4f}", ops])
                f.flush()
                worst = statistics.median([max(c) for c in zip(*per_rank)])
                print(f"graph_latency: {size:>8} B {name:<22} median(max) {worst:8.2f}"
                      f"{' us' if name in SKEW_VARIANTS else ' us/op'}  check {'ok' if correct else 'FAILED'}"
                      f"  ({time.perf_counter() - t0:.1f} s){'  ' + note if note else ''}", flush=True)
            if not correct:
                failed.append((name, size, "all_reduce result check failed"))
            b.buf = None
            torch.cuda.empty_cache()
    b.barrier()
    if rank == 0:
        f.close()
        print(f"graph_latency: measured in {time.perf_counter() - t_start:.1f} s; wrote {args.out}")
        print_table(summarize(rows))
        for name, size, msg in failed:
            print(f"graph_latency: PROBLEM {name} {size} B: {msg}")
    dist.destroy_process_group()
    return 1 if failed else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compare:
        return compare(args)
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
