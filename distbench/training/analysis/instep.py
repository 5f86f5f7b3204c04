"""In-step collectives (config `training.inspect: true`): every collective of a training
job's timed steps, read from what the job left in its `inspect/` directory
(distbench.training.inspect), set beside the same collective alone.

Sources, best first (column `source`):
- `inspector`: NCCL's Inspector plugin, one JSON line per collective per rank
  (`inspector/<host>-pid<pid>.log`: op, coll_sn, coll_msg_size_bytes, coll_exec_time_us timed by the
  kernel, algbw/busbw). Phase step's timed steps lie between the harness's two marker all-reduces
  (MARK_START_BYTES, MARK_END_BYTES), found by sequence number on each rank.
- `profiler`: where Inspector did not load, the NCCL kernels of the traced real steps
  (`step/trace_rank<r>.json.gz`; bytes from the kernel's "In/Out msg nelems" and dtype). These are
  `traced_steps` extra steps after the timed ones, not the timed steps themselves.
- `gloo`: a CPU run's Gloo collectives (`gloo:<op>` spans of Gloo's thread in the traced steps): op
  and time only; the profiler records no size there, so no bandwidth.

One instance = one collective on every rank (matched by sequence number, or by order in the
trace). Its time is the fastest rank's: a rank's kernel time includes waiting for its peers, and the
last rank to arrive waits least (benchmarks/investigations/nccl-inspector: rank 0 52 us, rank 1 9 us
for the same 1 MiB all_reduce). Sizes are nccl-tests' and the comm family's: the whole buffer
(all_gather's output, reduce_scatter's input; NCCL and Inspector give the per-rank part), and
busbw = size / time × the op's bus factor (all_reduce 2(n-1)/n, all_gather and reduce_scatter
(n-1)/n, broadcast 1). Algorithm and protocol are NCCL's own word (NCCL_DEBUG_SUBSYS=TUNING lines,
`inspector/nccl_tuning.*.log`): Inspector's JSON has none, and a kernel's name is not the algorithm
it ran (in NCCL 2.28 a 64 MiB all_reduce runs in `..._RING_LL` while NCCL logs RING/SIMPLE).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path

MARK_START_BYTES = 4099 * 4  # distbench.training.inspect.MARK_START_ELEMS float32 (no harness import here)
MARK_END_BYTES = 4111 * 4
OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "_allgather_base": "all_gather",
       "allgather_into_tensor_coalesced": "all_gather", "reducescatter": "reduce_scatter",
       "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
       "broadcast": "broadcast", "reduce": "reduce", "alltoall": "all_to_all", "all_to_all": "all_to_all"}
DTYPE_BYTES = {"Float": 4, "float32": 4, "BFloat16": 2, "bfloat16": 2, "Half": 2, "float16": 2, "Double": 8,
               "Int": 4, "Long": 8, "Byte": 1, "Char": 1}
DTYPES = {"Float": "float32", "BFloat16": "bfloat16", "Half": "float16", "Double": "float64"}
_TUNING_RE = re.compile(r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)")
# ranks: the collective's own group (a 2D layout's tensor-parallel, shard or replicate group), which its
# bus bandwidth and the standalone figure beside it are taken at; not the job's world size
INSTANCE_COLUMNS = ("job", "source", "rank_count", "index", "op", "dtype", "size_bytes", "ranks", "time_us",
                    "busbw_gbps", "algo", "proto")
BUCKET_COLUMNS = ("job", "source", "op", "dtype", "size_bytes", "ranks", "n", "per_step", "time_us_median", "time_us_p5",
                  "time_us_p95", "busbw_gbps_median", "busbw_gbps_p5", "busbw_gbps_p95", "algo", "proto",
                  "standalone_busbw_gbps", "ratio", "standalone_note", "sentence")


def snake(op: str) -> str:
    """NCCL's and torch's op names as the comm family's: AllReduce, allreduce -> all_reduce."""
    key = op.replace("_", "").lower() if op not in OPS else op
    return OPS.get(key, OPS.get(op, re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()))


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' bus bandwidth factor of `op` at `n` ranks."""
    if n < 2:
        return 0.0
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
            "all_to_all": (n - 1) / n}.get(op, 1.0)


def whole_bytes(op: str, nccl_bytes: int, n: int) -> int:
    """The buffer size nccl-tests names (all_gather's output, reduce_scatter's input) from NCCL's
    per-rank count of bytes."""
    return int(nccl_bytes) * n if op in ("all_gather", "reduce_scatter") else int(nccl_bytes)


def busbw_gbps(op: str, size_bytes: float, time_us: float, n: int) -> float:
    if not time_us or time_us <= 0 or math.isnan(time_us):
        return math.nan
    return size_bytes / (time_us * 1e-6) / 1e9 * bus_factor(op, n)


# ---------------------------------------------------------------- Inspector
def read_inspector(directory) -> dict[int, list[dict]]:
    """{rank: its coll_perf records in the order Inspector wrote them} of the data-parallel
    communicator (the one with the most records) from an Inspector dump directory; {} when none."""
    by_comm: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(Path(directory).glob("*.log")):
        if path.name.startswith("nccl_tuning"):
            continue
        for line in path.read_text(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut short by the job's end
            perf, head = rec.get("coll_perf"), rec.get("header") or {}
            if not isinstance(perf, dict) or "coll_sn" not in perf:
                continue
            by_comm[head.get("id", "")][int(head.get("rank", -1))].append(
                {**perf, "n_ranks": int(head.get("n_ranks", 1))})
    if not by_comm:
        return {}
    return dict(max(by_comm.values(), key=lambda r: sum(len(v) for v in r.values())))


def timed_window(records: list[dict]) -> list[dict] | None:
    """The records written between the start marker and the end marker (None: no such pair), without
    the harness's 4-byte alignment all-reduce. NCCL numbers each kind of collective on its own
    (coll_sn is per function: an all-gather and an all-reduce may share a number), so the markers
    bound the window by the order Inspector wrote the records in, which is the order they completed
    in: the start marker and the end marker are each waited for, so nothing of the timed steps
    completes before the one or after the other (checked on 2x H100: the window held exactly 20 steps'
    collectives of each kind, benchmarks/results/instep-h100x2-2026-11-27)."""
    start = end = None
    for i, p in enumerate(records):
        size = int(p["coll_msg_size_bytes"])
        if p["coll"] == "AllReduce" and size == MARK_START_BYTES:
            start, end = i, None
        elif p["coll"] == "AllReduce" and size == MARK_END_BYTES and start is not None and end is None:
            end = i
    if start is None or end is None:
        return None
    window = records[start + 1:end]
    if window and window[0]["coll"] == "AllReduce" and int(window[0]["coll_msg_size_bytes"]) <= 8:
        window = window[1:]  # the alignment (trainer.TrainingHarness.align) after the start marker
    return window


def inspector_instances(directory) -> tuple[list[dict], str]:
    """(instances of the timed steps, '' or why there are none) from an Inspector dump directory.
    Ranks are matched by (op, coll_sn); the instances are in rank 0's order."""
    ranks = read_inspector(directory)
    if not ranks:
        return [], "no Inspector records (the plugin did not load, or wrote nothing)"
    windows = {r: timed_window(recs) for r, recs in sorted(ranks.items())}
    if any(w is None for w in windows.values()):
        return [], "Inspector's records have no marked timed steps on every rank"
    keyed = [{(p["coll"], int(p["coll_sn"])): p for p in w} for w in windows.values()]
    first = next(iter(windows.values()))
    out = []
    for i, p in enumerate(first):
        key = (p["coll"], int(p["coll_sn"]))
        same = [k[key] for k in keyed if key in k]
        op, n = snake(p["coll"]), int(p["n_ranks"])
        size = whole_bytes(op, int(p["coll_msg_size_bytes"]), n)
        t = min(float(q["coll_exec_time_us"]) for q in same)
        out.append({"source": "inspector", "rank_count": len(same), "index": i, "op": op, "dtype": "",
                    "size_bytes": size, "ranks": n, "time_us": t, "busbw_gbps": busbw_gbps(op, size, t, n)})
    missing = sum(1 for r in out if r["rank_count"] < len(keyed))
    return out, (f"{missing} collective(s) of the timed steps were not recorded on every rank" if missing else "")


def tuning_choices(directory) -> dict[tuple[str, int], tuple[str, str]]:
    """{(op, NCCL's bytes): (algorithm, protocol)} from NCCL's TUNING lines, the most frequent choice."""
    seen: dict[tuple[str, int], dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
    for path in Path(directory).glob("nccl_tuning*"):
        for m in _TUNING_RE.finditer(path.read_text(errors="replace")):
            seen[(snake(m.group(1)), int(m.group(2)))][(m.group(3), m.group(4))] += 1
    return {k: max(v, key=v.get) for k, v in seen.items()}


# ---------------------------------------------------------------- the profiler's record
def _events(path) -> list[dict]:
    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]


def trace_collectives(path) -> list[dict]:
    """One rank's collectives in trace order: NCCL kernels (GPU), else Gloo's `gloo:<op>` spans (CPU)."""
    events = sorted(_events(path), key=lambda e: float(e["ts"]))
    out = []
    for e in events:
        name, args = str(e.get("name", "")), e.get("args") or {}
        if e.get("cat") == "kernel" and name.startswith(("ncclDevKernel", "ncclKernel")):
            op = snake(str(args.get("Collective name") or name.split("_")[1]))
            n = int(args.get("Group size") or 1)
            dt = str(args.get("dtype", ""))
            elems = int(args.get("Out msg nelems" if op == "all_gather" else "In msg nelems") or 0)
            size = elems * DTYPE_BYTES.get(dt, 0)
            out.append({"op": op, "dtype": DTYPES.get(dt, dt.lower()), "size_bytes": size or math.nan,
                        "time_us": float(e["dur"]), "n": n, "source": "profiler"})
        elif name.startswith("gloo:"):
            out.append({"op": snake(name[5:]), "dtype": "", "size_bytes": math.nan, "time_us": float(e["dur"]),
                        "n": 0, "source": "gloo"})
    return out


def profiler_instances(step_dir) -> tuple[list[dict], str]:
    """Instances of the traced real steps (every rank's trace, matched by order), or why none."""
    per_rank = [trace_collectives(p) for p in sorted(Path(step_dir).glob("trace_rank*.json.gz"))]
    per_rank = [r for r in per_rank if r]
    if not per_rank:
        return [], "no collective in the traced steps' traces"
    n = min(len(r) for r in per_rank)
    out = []
    for i in range(n):
        same = [r[i] for r in per_rank]
        first = same[0]
        t = min(c["time_us"] for c in same)
        ranks = first["n"] or len(per_rank)
        bw = busbw_gbps(first["op"], first["size_bytes"], t, ranks) if first["source"] == "profiler" else math.nan
        out.append({"source": first["source"], "rank_count": len(same), "index": i, "op": first["op"],
                    "dtype": first["dtype"], "size_bytes": first["size_bytes"], "ranks": ranks, "time_us": t,
                    "busbw_gbps": bw})
    return out, ""


# ---------------------------------------------------------------- a job's record
def job_instances(inspect_dir, job: str = "") -> tuple[list[dict], dict]:
    """Every collective instance of one job (INSTANCE_COLUMNS) and what was recorded, how
    ({source, note, timed_steps, traced_steps, world_size, backend})."""
    d = Path(inspect_dir)
    manifest = json.loads((d / "inspect.json").read_text()) if (d / "inspect.json").exists() else {}
    about = {k: manifest.get(k) for k in ("backend", "world_size", "timed_steps", "traced_steps", "dtype")}
    rows, why = inspector_instances(d / "inspector") if (d / "inspector").is_dir() else ([], "")
    notes = [] if not why else [why]
    steps = about.get("timed_steps")
    if not rows:
        rows, why2 = profiler_instances(d / "step")
        steps = about.get("traced_steps")
        notes += [why2] if why2 else []
    choices = tuning_choices(d / "inspector") if (d / "inspector").is_dir() else {}
    n = int(about.get("world_size") or 1)
    for r in rows:
        r["ranks"] = int(r.get("ranks") or n)  # Gloo's spans name no group: the job's world
        group = r["ranks"]
        per_rank = r["size_bytes"] / group if r["op"] in ("all_gather", "reduce_scatter") else r["size_bytes"]
        algo, proto = choices.get((r["op"], int(per_rank)), ("", "")) if r["size_bytes"] == r["size_bytes"] else ("", "")
        r.update(job=job, algo=algo, proto=proto)
        if not r["dtype"]:
            r["dtype"] = _grad_dtype(r["op"], about.get("dtype"))
    source = rows[0]["source"] if rows else "none"
    if source == "gloo":
        notes.append("Gloo on CPU: the profiler records each collective's op and time on Gloo's thread, not its size, "
                     "so no bandwidth; Inspector and NCCL's algorithm choice are NCCL's")
    elif source == "profiler":
        notes.append(f"Inspector did not load: the NCCL kernels of {steps} traced steps after the timed ones")
    return rows, {**about, "source": source, "steps": steps, "note": "; ".join(x for x in notes if x)}


def _grad_dtype(op: str, dtype) -> str:
    """Inspector gives no dtype: DDP and FSDP reduce gradients in fp32 (no compression hook) and FSDP
    gathers parameters in the model's dtype."""
    return (dtype or "") if op == "all_gather" else "float32"


# ---------------------------------------------------------------- buckets, beside the collective alone
# in-step busbw / standalone busbw: at or above CONTENTION_RATIO the collective ran as it does alone;
# below FAR_BELOW_RATIO the link is not what limits the step, the overlap with compute is.
CONTENTION_RATIO = 0.9
# the step's costs beyond compute (training_split.csv's columns), in plain words: the headline names the largest
PARTS = {"compute_slowdown_ms": "compute slowed down while communicating",
         "exposed_comm_ms": "exposed communication", "rest_ms": "the rest"}
FAR_BELOW_RATIO = 0.5


def _quantiles(values) -> tuple[float, float, float]:
    v = sorted(x for x in values if x == x)
    if not v:
        return math.nan, math.nan, math.nan

    def q(p):
        k = (len(v) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return v[lo] + (v[hi] - v[lo]) * (k - lo)

    return statistics.median(v), q(0.05), q(0.95)


# the comm family's timings that give a collective's device time, as the in-step figure is (kernel time),
# best first: graph replay (no host between ops), then CUDA events where the host kept ahead of the GPU
# (its summary's host_bound false). Host timing is the host clock, never set beside a kernel's time.
DEVICE_TIMINGS = ("graph", "events")
# in-step busbw / standalone busbw above this is faster inside the step than alone: not "as fast"
FASTER_RATIO = 1.1


def _true(value) -> bool:
    """A summary cell read as text ('True', 'False', 'nan', '<NA>', ''): the comm family's host_bound."""
    return str(value).strip().lower() in ("true", "1", "1.0", "yes")


def _neighbours(points: list[tuple[float, float, bool]], size: float):
    """The two measured points around `size` (the same point twice when it was measured), or None."""
    for p in points:
        if p[0] == size:
            return p, p
    for p0, p1 in zip(points, points[1:]):
        if p0[0] <= size <= p1[0]:
            return p0, p1
    return None


def standalone_busbw(comm_rows: list[dict], backend: str, world_size: int, op: str, dtype: str,
                     size: float) -> tuple[float, str]:
    """The comm family's median busbw for `op` in `dtype` at `size` bytes measured the way the in-step
    figure is, as device time (interpolated in log size between its two nearest measured sizes; NCCL's
    defaults, in-place or not as it ran: its all_reduce is in place, as DDP's), or NaN and why not.
    At each size graph timing where it measured that size, else events timing (the two agree within 1%
    from 16 MiB up: comm.graph_max_bytes). Where a neighbouring figure is host-bound (the comm
    summary's host_bound: the GPU waited for the host, so the figure is torch's per-call host cost) or
    only the host clock timed the op, the two are not comparable and no figure is given."""
    rows = [r for r in comm_rows if r.get("backend") == backend and int(r.get("world_size") or 0) == world_size
            and r.get("op") == op and r.get("dtype") == dtype and r.get("status", "ok") == "ok"
            and str(r.get("nccl_env", "default")) == "default"]

    by_size: dict[float, tuple[float, float, bool, str]] = {}
    for timing in reversed(DEVICE_TIMINGS):  # at each size the first of DEVICE_TIMINGS measured there
        for r in rows:
            if r.get("timing", "events") != timing or r.get("busbw_gbps_median") in (None, ""):
                continue
            bw = float(r["busbw_gbps_median"])
            if bw == bw:
                by_size[float(r["size_bytes"])] = (float(r["size_bytes"]), bw, _true(r.get("host_bound")), timing)
    if size != size:
        return math.nan, "no size recorded"
    points = sorted(by_size.values())
    if not points:
        if rows:
            return math.nan, (f"not comparable: the comm family timed {op} in {dtype} at {world_size} ranks by the "
                              "host clock only, the in-step figure is kernel time (comm.timing: graph or events)")
        return math.nan, (f"the comm family measured no {op} in {dtype} at {world_size} ranks (to set one beside it: "
                          f"{op} in comm.ops, {dtype} in comm.dtypes)")
    found = _neighbours(points, size)
    if found is None:
        return math.nan, (f"{size:.0f} B is outside the comm family's {op} sizes "
                          f"({points[0][0]:.0f}-{points[-1][0]:.0f} B; comm.sizes sets them)")
    (s0, b0, h0, t0), (s1, b1, h1, t1) = found
    if h0 or h1:
        return math.nan, ("not comparable: the standalone figure is host-bound at this size (the comm family's "
                          f"{t0 if h0 else t1} timing: the GPU waited for the host, the in-step figure is kernel "
                          "time); graph timing measures it (comm.timing graph, up to comm.graph_max_bytes)")
    if s1 == s0:
        return b0, ""
    f = (math.log(size) - math.log(s0)) / (math.log(s1) - math.log(s0))
    return b0 + f * (b1 - b0), ""


def verdict_of(ratio: float) -> str:
    if ratio != ratio:
        return ""
    if ratio > FASTER_RATIO:
        # seen on 4x H200 (HSDP's last 401 MiB reduce_scatter at 225%, above the link's line rate): the
        # kernel of the rank that waited least starts after its peers have pushed part of their data
        return ("faster inside the step than alone: not a link figure (the kernel of the rank that waited least "
                "can start after its peers sent part of the data), or the standalone figure is low")
    if ratio >= CONTENTION_RATIO:
        return "as fast as alone"
    if ratio < FAR_BELOW_RATIO:
        return "far below alone: the link is fine, the overlap with compute is what costs"
    return "contention with compute"


def bucket_sentence(strategy: str, b: dict, world_size: int | None = None) -> str:
    """'DDP's 64 MiB buckets reached 181 GB/s inside the step, 76% of the 238 GB/s the same all_reduce
    reaches alone: contention with compute.' (or what is missing). A collective of a smaller group than
    the job's `world_size` (a 2D layout's) says so: "(48 per step, in groups of 2 of the 4 ranks)"."""
    from distbench.core.units import human_bytes, human_gbps, human_time_us

    # fsdp_tp's all_reduces are tensor parallel's (activations, and their gradients in backward): no buckets
    from distbench.core.layout_spec import SPECS

    spec = SPECS.get(str(strategy))
    who = f"{spec.short if spec else strategy}'s"
    size = human_bytes(b["size_bytes"]) if b["size_bytes"] == b["size_bytes"] else "unsized"
    what = "buckets" if b["op"] == "all_reduce" and not (spec and spec.tensor_parallel) else f"{b['op']}s"
    if b["busbw_gbps_median"] != b["busbw_gbps_median"]:
        return (f"{who} {b['op']}s took {human_time_us(b['time_us_median'])} each inside the step (median of {b['n']}); "
                f"no bandwidth: {b.get('standalone_note') or 'no size recorded'}.")
    # two sizes a few KiB apart print alike ("64 MiB"): how many per step tells them apart
    per, ranks = b.get("per_step", math.nan), b.get("ranks")
    said = [f"{per:.3g} per step"] if per == per and per > 0 else []
    if world_size and ranks and ranks == ranks and int(ranks) < world_size:
        said.append(f"in groups of {int(ranks)} of the {world_size} ranks")
    each = f" ({', '.join(said)})" if said else ""
    head = f"{who} {size} {what}{each} reached {human_gbps(b['busbw_gbps_median'])} inside the step"
    if b["ratio"] != b["ratio"]:
        note = str(b["standalone_note"])
        return f"{head}; {note}." if note.startswith("not comparable") else f"{head}; nothing to set it beside: {note}."
    return (f"{head}, {b['ratio']:.0%} of the {human_gbps(b['standalone_busbw_gbps'])} the same {b['op']} reaches "
            f"alone: {verdict_of(b['ratio'])}.")


def bucket_table(instances: list[dict], about: dict, comm_rows: list[dict], strategy: str) -> list[dict]:
    """One row per (op, dtype, size, group ranks) of a job's instances: count, per step, time and busbw
    median and p5-p95, NCCL's algorithm/protocol, the standalone busbw at the group's ranks and the
    ratio, the sentence."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    world = int(about.get("world_size") or 1)
    for r in instances:
        groups[(r["source"], r["op"], r["dtype"], r["size_bytes"], int(r.get("ranks") or world))].append(r)
    out = []
    steps = about.get("steps") or 0
    for (source, op, dtype, size, ranks), rs in sorted(groups.items(), key=lambda kv: -sum(r["time_us"] for r in kv[1])):
        t, t5, t95 = _quantiles(r["time_us"] for r in rs)
        bw, bw5, bw95 = _quantiles(r["busbw_gbps"] for r in rs)
        # beside the same collective alone over as many ranks as its group (TP 2 inside 4 ranks: at 2)
        alone, note = (standalone_busbw(comm_rows, str(about.get("backend")), ranks, op, dtype, size) if bw == bw else
                       (math.nan, "no size recorded" if size != size else "no time recorded"))
        b = {"job": rs[0]["job"], "source": source, "op": op, "dtype": dtype, "size_bytes": size, "ranks": ranks,
             "n": len(rs),
             "per_step": len(rs) / steps if steps else math.nan, "time_us_median": t, "time_us_p5": t5,
             "time_us_p95": t95, "busbw_gbps_median": bw, "busbw_gbps_p5": bw5, "busbw_gbps_p95": bw95,
             "algo": rs[0]["algo"], "proto": rs[0]["proto"], "standalone_busbw_gbps": alone,
             "ratio": bw / alone if alone == alone and alone > 0 else math.nan, "standalone_note": note}
        b["sentence"] = bucket_sentence(strategy, b, world)
        out.append(b)
    return out
