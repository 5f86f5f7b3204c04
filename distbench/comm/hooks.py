"""What the pipeline asks of the comm family besides its plan (its manifest names each function): the
config checks its schema cannot state, what a job's buffers take on the host that runs it, and the
few jobs the quick answer runs. Torch-free: the Snakefile calls them while the DAG is built.
"""

from __future__ import annotations

import functools
import math

from distbench.comm.plan import job_params, pairs_job
from distbench.core.manifest import HostNeed
from distbench.core.judged import node_gpus
from distbench.core.shown import shown
from distbench.core.units import human_bytes
from distbench.launch.planning import nccl_env_label_problems, quick_world_size

# --- the config -----------------------------------------------------------------------------------


def _size_problems(sizes) -> list[str]:
    """comm.sizes: a sweep or list of at most MAX_SIZES distinct sizes, counted without building it."""
    from distbench.core.sizes import MAX_SIZES, min_step_factor, parse_size, sweep_count

    if isinstance(sizes, dict):
        lo, hi, step = parse_size(sizes["min_bytes"]), parse_size(sizes["max_bytes"]), sizes["step_factor"]
        if lo > hi:
            return [f"config key comm.sizes: min_bytes {shown(sizes['min_bytes'])} is larger than max_bytes "
                    f"{shown(sizes['max_bytes'])}"]
        n = sweep_count(lo, hi, step)
        if n > MAX_SIZES:
            return [f"config key comm.sizes.step_factor: {shown(step)} makes {n:,} sizes from {human_bytes(lo)} "
                    f"to {human_bytes(hi)}; at most {MAX_SIZES} sizes are allowed, so use a step_factor of "
                    f"at least {min_step_factor(lo, hi):.4g} for this range"]
        return []
    n = len({parse_size(s) for s in sizes})
    return [f"config key comm.sizes: {n:,} distinct sizes; at most {MAX_SIZES} are allowed"] if n > MAX_SIZES else []


def config_check(config: dict) -> list[str]:
    """The comm keys' problems the schema cannot state (the manifest's config_check): the sizes' count,
    comm.gloo's ops and world sizes against the lists they pick from, the NCCL settings' labels, and
    the traffic matrix files (read now, so a missing or ragged one stops the run before any job)."""
    from distbench.comm.traffic import validate as traffic_problems

    comm = config["comm"]
    problems = _size_problems(comm["sizes"])
    gloo_ops = comm["gloo"].get("ops", "auto")
    if gloo_ops != "auto":
        problems += [f"config key comm.gloo.ops[{i}]: {op} is not in comm.ops {comm['ops']}"
                     for i, op in enumerate(gloo_ops) if op not in comm["ops"]]
    gloo_sizes = comm["gloo"]["world_sizes"]
    if gloo_sizes != "auto" and config["world_sizes"] != "auto":  # auto: the plan names what it leaves out
        problems += [f"config key comm.gloo.world_sizes[{i}]: {ws} is not in world_sizes {config['world_sizes']}"
                     for i, ws in enumerate(gloo_sizes) if ws not in config["world_sizes"]]
    problems += nccl_env_label_problems("comm.nccl_env", comm["nccl_env"])
    problems += [f"config key comm.traffic: {m}" for m in traffic_problems(comm["traffic"])]
    return problems


# --- the host's memory ----------------------------------------------------------------------------

# Each op's peak above its process for a size of S bytes, measured as peaks: on CPU (torch 2.13,
# 2 Gloo ranks, RSS through RUSAGE_CHILDREN, one op and size per job, iters 1, no rotation) and on
# 2 H200s (torch 2.11, NCCL, events and graph timing, nvidia-smi's memory.used every 50 ms):
# a x S (send, receive and the check's expected values) plus b int64 index arrays of the op's element
# count (the all_to_all check builds them: 14 S at float32 and 26 S at bfloat16, on CPU and GPU alike),
# the larger of the two machines (all_reduce 2.25 S on the GPU, 2 S on CPU). all_to_all_v's receiving
# side scales with its busiest receiver (op_bytes).
OP_PEAK = {"all_reduce": (2.25, 0.0), "broadcast": (2.25, 0.0), "reduce_scatter": (2.5, 0.0), "send_recv": (3.5, 0.0),
           "all_gather": (3.5, 0.0), "all_to_all": (2.0, 6.0), "barrier": (0.0, 0.0)}
UNKNOWN_OP_PEAK = (3.5, 6.0)  # an op added since: the largest of the measured ones
PAIRS_PEAK = 3.0  # the pair matrix: send, receive and the check's expected values
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "int32": 4}


@functools.lru_cache(maxsize=256)  # every dtype and NCCL setting of a world size asks again
def _busiest_share(traffic: str, n: int) -> float:
    """all_to_all_v: what its busiest receiver gets, as a multiple of the uniform share (1 to n)."""
    from distbench.comm.traffic import TrafficError, parse_traffic, weights

    try:
        t = parse_traffic(traffic)
        if t.kind == "zipf":  # every row alike: rank 0 receives n / sum((d + 1)^-S) shares
            return n / math.fsum((d + 1) ** -t.exponent for d in range(n))
        w = weights(t, n)
    except TrafficError:  # a file for another world size: the job skips it
        return 1.0
    total = math.fsum(map(math.fsum, w))
    return max(math.fsum(row[d] for row in w) for d in range(n)) * n / total if total > 0 else 1.0


def op_bytes(op: str, size: int, elem_bytes: int, share: float = 1.0) -> float:
    """One rank's peak above its process for one op at `size` bytes (OP_PEAK)."""
    count = size // elem_bytes
    if op == "all_to_all_v":  # send S; receive, expected and index arrays as its busiest receiver gets
        # (uniform at float32: 5.5 S on CPU, 6.15 S on the GPU; zipf:50 at 2 ranks 10 S on CPU)
        return size + share * (2.0 * size + 1.5 * 8 * count)
    a, b = OP_PEAK.get(op, UNKNOWN_OP_PEAK)
    return a * size + b * 8 * count


def host_needs(config: dict, plan: dict, job) -> HostNeed:
    """A comm job's buffers per rank above its process (the manifest's host_needs): at its largest
    point, which point, the same for the job's sizes capped at any size, and its largest size."""
    p = job_params(config, job.backend, job.nccl_env_label, job.world_size,
                   beside_nccl=bool(plan["world_sizes"].get("nccl")), ops=job.ops)
    elem = DTYPE_BYTES.get(job.dtype, 8)
    share = max((_busiest_share(t, job.world_size) for t in p.get("traffic", [])), default=1.0)
    pairs = p["pairs_sizes"] if pairs_job(config, plan, job) else []

    def point(op: str, size: int) -> float:
        footprint = 3 * size  # the harness's own: send, receive, expected (distbench.comm.harness)
        slots = max(1, min(p["iters"], p["rotate_bytes"] // footprint)) if p["rotate_bytes"] > 0 else 1
        return op_bytes(op, size, elem, share) + (slots - 1) * footprint

    def at_size(cap: int) -> float:
        sizes = [min(s, cap) for s in p["sizes"]]
        return max([point(op, s) for s in set(sizes) for op in p["ops"]]
                   + [PAIRS_PEAK * min(s, cap) for s in pairs] + [0.0])

    worst, where = 0.0, ""
    for size in p["sizes"]:
        for op in p["ops"]:
            if point(op, size) > worst:
                worst, where = point(op, size), f"{op} at {human_bytes(size)}"
    for size in pairs:
        if PAIRS_PEAK * size > worst:
            worst, where = PAIRS_PEAK * size, f"the pair matrix at {human_bytes(size)}"
    return HostNeed(worst, where, at_size, max([*p["sizes"], *pairs, 1]),
                    keys="comm.sizes, comm.gloo.max_bytes, comm.pairs_sizes", gpu_keys="comm.sizes, comm.pairs_sizes")


# --- the quick answer -----------------------------------------------------------------------------


def quick(config: dict, plan: dict, cores: int) -> list:
    """The comm jobs of the quick answer (the manifest's quick): those of the first backend the plan
    runs (NCCL where GPUs exist, else Gloo) at one world size, the one the Verdict judges, with every
    dtype and NCCL setting the plan has there."""
    jobs = plan["jobs"].get("comm") or []
    if not jobs or (node_gpus(plan) == 1 and not any(j.backend == "nccl" for j in jobs)):
        return []  # one GPU: no collective between GPUs to judge; Gloo's CPU processes would not answer it
    backend = jobs[0].backend  # config order: NCCL first where it runs
    of = [j for j in jobs if j.backend == backend]
    ws = quick_world_size(config, plan, backend, sorted({j.world_size for j in of}), cores)
    return [j for j in of if j.world_size == ws]
