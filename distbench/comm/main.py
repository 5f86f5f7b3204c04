"""comm's main (`python -m distbench.comm`, see distbench.comm.harness for what it measures): its
command line, the CSV paths beside --out, the live nccl-tests-style table on stdout,
and `main`, which runs every point of the job through distbench.comm.harness.Harness and writes the
CSVs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distbench.comm.contract import (
    COMM_COLUMN_NAMES, COMM_RANK_COLUMN_NAMES, HOST_BOUND_FACTOR, PAIRS_COLUMN_NAMES, host_bound,
)
from distbench.comm.harness import DEFAULT_ROTATE_BYTES, Harness, job_timings, plan_points, profile_ops
from distbench.core.ops_spec import OPS, SPECS
from distbench.core.choices import BACKENDS, DTYPES, NCCL_TESTS_TYPES, RANK_AGGS, TIMINGS
from distbench.core.io import PartialCsvs
from distbench.core.sizes import parse_size
from distbench.launch.placement import gather_and_check
from distbench.launch.timeline import mark


def ranks_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}_ranks{out.suffix or '.csv'}")


def pairs_path(out: Path) -> Path:
    return out.with_name("pairs.csv")


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.comm", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", help="a job's job.json, as its rule writes it (distbench.launch.in_rule): its "
                                    "backend, dtype, NCCL settings' label and every value that shapes the "
                                    "measurements are read from there, as plain JSON (the flags below are ignored)")
    p.add_argument("--backend", choices=BACKENDS)
    p.add_argument("--ops", default="all_reduce", help=f"comma-separated op names: {','.join(OPS)}")
    p.add_argument("--sizes", default="1MiB", help="comma-separated sizes, e.g. 8,1MiB,1GB")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--timing", default="events", help=f"comma-separated: {','.join(TIMINGS)}")
    p.add_argument("--inplace", default="false", help="comma-separated: false,true (nccl-tests' out-of-place / in-place)")
    p.add_argument("--traffic", action="append",
                   help="all_to_all_v's traffic matrix, repeatable: uniform (default), zipf:S, file:PATH "
                        "(distbench.comm.traffic)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--graph-launches", type=int, default=1,
                   help="graph timing: replays of the captured `iters` ops per trial (nccl-tests -G)")
    p.add_argument("--graph-max-bytes", type=int, default=0,
                   help="graph timing only up to this many bytes (0: every size)")
    p.add_argument("--rank-agg", choices=RANK_AGGS, default="max",
                   help="how a trial's per-rank times become time_us (nccl-tests -a: rank0/avg/min/max)")
    p.add_argument("--rotate-bytes", default=str(DEFAULT_ROTATE_BYTES),
                   help="rotate among up to `iters` copies of a point's buffers while they fit in this many bytes (0: off)")
    p.add_argument("--op-timeout-s", type=int, default=300, help="process-group timeout per collective")
    p.add_argument("--nccl-env-label", default="default", help="label written to the nccl_env column")
    p.add_argument("--out", required=True, help="CSV to write (rank 0); atomically renamed when complete")
    p.add_argument("--ranks-out", help="per-rank times CSV (default: <out stem>_ranks.csv beside --out)")
    p.add_argument("--placement-out", help="JSON with every rank's GPU placement")
    p.add_argument("--pairs-sizes", default="",
                   help="the GPU-pair matrix after the sweep: bytes per transfer, comma-separated (empty: off)")
    p.add_argument("--pairs-iters", type=int, default=20, help="pair matrix: transfers per timed trial")
    p.add_argument("--pairs-trials", type=int, default=3, help="pair matrix: timed trials per pair and size")
    p.add_argument("--pairs-out", help="pair matrix CSV (default: pairs.csv beside --out; header only when off)")
    p.add_argument("--profile-dir", help="after the sweep, run each op --profile-steps times at the largest size "
                                         "under torch.profiler; each rank's Chrome trace goes here (distbench.launch.profiling)")
    p.add_argument("--profile-steps", type=int, default=3, help="ops per op recorded by --profile-dir")
    args = p.parse_args(argv)
    if args.params:
        return _from_job_json(args, p)
    if not args.backend:
        p.error("--backend (or --params) is required")
    args.pairs_sizes = [parse_size(s) for s in args.pairs_sizes.split(",") if s]

    args.ops = [o for o in args.ops.split(",") if o]
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        p.error(f"unknown op(s) {unknown}; allowed: {', '.join(OPS)}")
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    bad = [t for t in args.timing.split(",") if t and t not in TIMINGS]
    if bad:
        p.error(f"unknown timing(s) {bad}; allowed: {', '.join(TIMINGS)}")
    args.timing = job_timings(args.backend, [t for t in args.timing.split(",") if t])
    flags = {"false": False, "true": True}
    bad_ip = [v for v in args.inplace.split(",") if v not in flags]
    if bad_ip:
        p.error(f"unknown --inplace value(s) {bad_ip}; allowed: false, true")
    args.inplace = [flags[v] for v in args.inplace.split(",")]
    args.rotate_bytes = parse_size(args.rotate_bytes)
    from distbench.comm.traffic import validate

    args.traffic = args.traffic or ["uniform"]
    bad_traffic = validate(args.traffic)
    if bad_traffic:
        p.error("; ".join(bad_traffic))
    for name in ("iters", "trials", "graph_launches"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def _from_job_json(args, p: argparse.ArgumentParser):
    """The job's values from its job.json, checked against the comm record (distbench.comm.record.COMM_RECORD:
    the config schema's bounds) before any process group exists, then set as they are: lists of ints
    stay lists of ints, nothing is joined into a string and parsed again. A bad file or value exits 2
    naming the file and the key."""
    from distbench.comm.record import COMM_RECORD
    from distbench.comm.traffic import validate
    from distbench.launch.job_record import JobRecordError, exit_usage, read_for_ranks
    from distbench.launch.job_values import apply
    from distbench.workloads.job_fields import config_schema

    record = read_for_ranks(args.params, COMM_RECORD, config_schema())
    apply(args, record.arguments(COMM_RECORD))
    args.traffic = args.traffic or ["uniform"]
    problems = validate(args.traffic)  # a file:PATH matrix is read here: the schema checks its name only
    if problems:
        exit_usage(JobRecordError(f"{args.params}: job.traffic: " + "; ".join(problems)))
    return args


TABLE_HEADER = (f"#{'size':>11} {'count':>12} {'type':>8} {'redop':>6} {'root':>5} {'time':>9} {'algbw':>8} "
                f"{'busbw':>8} {'#wrong':>6}  {'timing':>6} {'place':>7} {'size':>9} {'time':>9}  status\n"
                f"#{'(B)':>11} {'(elements)':>12} {'':>8} {'':>6} {'':>5} {'(us)':>9} {'(GB/s)':>8} {'(GB/s)':>8}")
# Under the header of a device-timed job: what the mark after a line's status means.
HOST_BOUND_LEGEND = (f"# host-bound (issue X): time <= {HOST_BOUND_FACTOR:g} x the host's time to issue one op (X): the GPU "
                     "waited for the host, so the time is torch's per-call host cost, not link latency (see graph timing)")


def table_line(rows: list[dict]) -> str:
    """One point as a line of nccl-tests' table (its column order; median over the trials, as our
    CSV's summary), then our timing mode, in/out of place, the size and time as the report writes
    them (distbench.core.units) and the status. #wrong: 0 when the exact check passed, 'wrong' when it
    failed, N/A when not checked. A host-bound point (distbench.comm.contract.host_bound) ends with
    "host-bound (issue X)", X the host's time to issue one op."""
    from distbench.core.units import human_bytes, human_time_us

    r = rows[0]
    head = (f"{r['size_bytes']:>12} {r['count']:>12} {NCCL_TESTS_TYPES.get(r['dtype'], r['dtype']):>8} "
            f"{SPECS[r['op']].redop:>6} {SPECS[r['op']].root:>5}")
    tail = f"{r['timing']:>6} {'in' if r['inplace'] else 'out':>7} {human_bytes(r['size_bytes']):>9}"
    if r["status"] not in ("ok", "wrong"):
        return f"{head} {'':>9} {'':>8} {'':>8} {'N/A':>6}  {tail} {'':>9}  {r['status']}: {r['message']}"

    def med(key):
        vals = sorted(x[key] for x in rows if x.get(key) is not None and x[key] == x[key])
        return vals[len(vals) // 2] if vals else float("nan")

    wrong = {True: "0", False: "wrong"}.get(r["correct"], "N/A")
    t = med("time_us")
    issue = med("host_issue_us")
    bound = f"  host-bound (issue {human_time_us(issue)})" if host_bound(t, issue) else ""
    return (f"{head} {t:>9.2f} {med('algbw_gbps'):>8.2f} {med('busbw_gbps'):>8.2f} {wrong:>6}  "
            f"{tail} {human_time_us(t):>9}  {r['status']}{bound}")


def _median_text(rows: list[dict]) -> str:
    if rows[0]["status"] not in ("ok", "wrong"):
        return f"{rows[0]['status']}: {rows[0]['message']}"
    times = sorted(r["time_us"] for r in rows)
    t = times[len(times) // 2]
    return f"{t:.2f} us, {rows[0]['size_bytes'] * (2 if rows[0]['mode'] == 'bi' else 1) / (t * 1e3):.2f} GB/s"


def main(argv=None) -> int:
    args = parse_args(argv)
    h = Harness(args)
    out = Path(args.out)
    ranks_out = Path(args.ranks_out) if args.ranks_out else ranks_path(out)
    records, problem = gather_and_check(h.dist, h.ctrl, h.rank, h.local_rank, h.device, h.world_size,
                                        args.placement_out)
    if problem:
        print(f"distbench error: {problem}", file=sys.stderr)
        h.dist.destroy_process_group()
        return 3
    # Per-rank rows of a point are written before its rows: a finished row always has its per-rank
    # times on disk; comm.csv is renamed last, so its presence means the job completed.
    pairs_out = Path(args.pairs_out) if args.pairs_out else pairs_path(out)
    writer = (PartialCsvs([(out, COMM_COLUMN_NAMES), (ranks_out, COMM_RANK_COLUMN_NAMES), (pairs_out, PAIRS_COLUMN_NAMES)])
              if h.rank == 0 else None)

    shown = {"series": None}

    def emit(rows, rank_rows):
        if writer:
            writer.write(1, rank_rows)
            writer.write(0, rows)
            # the live table, on stdout as each point completes (a long sweep shows its progress)
            series = (rows[0]["op"], rows[0]["traffic"], rows[0]["dtype"])
            if series != shown["series"]:
                shown["series"] = series
                traffic = "" if rows[0]["traffic"] == "none" else f" (traffic {rows[0]['traffic']})"
                print(f"#\n# {rows[0]['op']}{traffic}, {rows[0]['dtype']}, {h.world_size} rank(s), {args.backend}, "
                      f"time = median over {args.trials} trials of the per-op time ({args.rank_agg} over ranks)\n"
                      f"{TABLE_HEADER}" + (f"\n{HOST_BOUND_LEGEND}" if args.backend != "gloo" else ""), flush=True)
            print(table_line(rows), flush=True)

    mark("measure_start")
    for point in plan_points(args.ops, args.sizes, args.timing, args.inplace, args.traffic, args.graph_max_bytes):
        if h.rank == 0:
            print(f"distbench: measuring {point.op} {point.size_bytes} B {point.timing}{' in-place' if point.inplace else ''}"
                  f"{'' if point.traffic == 'none' else ' traffic ' + point.traffic}", file=sys.stderr, flush=True)
        h.measure(point, emit)
    if args.pairs_sizes and h.world_size > 1:
        from distbench.comm.pairs import measure_pair, plan_pairs

        def emit_pair(rows):
            if writer:
                writer.write(2, rows)
                r = rows[0]
                arrow = "->" if r["mode"] == "uni" else "<->"
                print(f"# pair {r['src']} {arrow} {r['dst']} {r['size_bytes']} B: {_median_text(rows)}", flush=True)

        for pair in plan_pairs(h.world_size, args.pairs_sizes):
            measure_pair(h, pair, records, emit_pair)
    if args.profile_dir:
        profile_ops(h, args)
    h.dist.barrier(group=h.ctrl)
    mark("measure_end")
    if writer is not None:
        writer.close()
    mark("written")
    h.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
