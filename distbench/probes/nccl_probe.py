"""NCCL's own account: a short job of one process per rank with NCCL_DEBUG=INFO, never during timed runs
(the logging slows small messages). Each op runs once per size; the rank logs are parsed into
channels, transports, rings/trees and the algorithm/protocol NCCL chose per size.

    python -m distbench.probes.nccl_probe --world-size 2 --out nccl.json --log-dir logs/
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,GRAPH,ENV,TUNING"}


def worker(ops: list[str], sizes: list[int]) -> int:
    import torch
    import torch.distributed as dist

    from distbench.comm.ops import TORCH_OPS, Ctx
    from distbench.core.ops_spec import SPECS, element_count

    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    ctx = Ctx(dist.get_rank(), dist.get_world_size(), device, torch.float32, "nccl")
    for op in ops:
        spec, torch_op = SPECS[op], TORCH_OPS[op]
        if ctx.world_size < spec.min_world_size or not spec.moves_data:
            continue
        for size in sizes:
            count = element_count(spec, size, 4, ctx.world_size)
            if count:
                torch_op.run(ctx, torch_op.make(ctx, count))
                torch.cuda.synchronize()
    dist.destroy_process_group()
    return 0


def _run_ranks(world_size: int, worker_args: list[str], env: dict, log_path: Path, timeout_s: int) -> list[int] | None:
    """Start the probe's ranks as the benchmark jobs start theirs on one node (distbench.launch.torchrun):
    one process per rank with torchrun's environment, no agent (its own `import torch` and exit cost
    ~5 s of the probe's ~11 s on a 2-GPU host); DISTBENCH_ONE_NODE_LAUNCH=torchrun brings the agent
    back. Every rank's output goes to log_path. Their exit codes, or None when cut at timeout_s (the
    whole process group is killed: nothing is left behind)."""
    from distbench.launch.processes import wait_all
    from distbench.launch.torchrun import ONE_NODE_LAUNCH_ENV, direct_rank_envs

    if env.get(ONE_NODE_LAUNCH_ENV, "direct") == "torchrun":
        starts = [([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    f"--nproc_per_node={world_size}", *worker_args], env)]
    else:
        starts = [([sys.executable, *worker_args], {**env, **rank_env}) for rank_env in direct_rank_envs(world_size)]
    with open(log_path, "w") as log:
        procs = [subprocess.Popen(cmd, env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
                 for cmd, e in starts]
        late = wait_all(procs, timeout_s)
    codes = None if late else [p.returncode for p in procs]
    return codes


def run_probe(world_size: int, ops: list[str], sizes: list[int], job_env: dict, out_json, log_dir,
              timeout_s: int = 300) -> dict:
    from distbench.core.io import atomic_write_json
    from distbench.probes.nccl_algo import algo_by_size, describe_algo_ranges
    from distbench.probes.nccl_log import parse_nccl_log_files

    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    for old in log_dir.glob("nccl.*.log"):
        old.unlink()
    env = {**os.environ, **job_env, **DEBUG_ENV, "OMP_NUM_THREADS": "1",
           "NCCL_DEBUG_FILE": str(log_dir.resolve() / "nccl.%h.%p.log")}
    # the ranks read the ops and sizes from JSON, as a family's job reads its job.json: nothing is joined
    # into a string and parsed again
    params = log_dir / "probe_params.json"
    atomic_write_json(params, {"ops": list(ops), "sizes": [int(s) for s in sizes]})
    worker_args = ["-m", "distbench.probes.nccl_probe", "--worker", "--params", str(params)]
    result: dict = {"available": False, "world_size": world_size}
    codes = _run_ranks(world_size, worker_args, env, log_dir / "torchrun.log", timeout_s)
    if codes is None:
        result["reason"] = f"probe job killed after {timeout_s} s"
    elif any(codes):
        result["reason"] = f"probe job exited with code {max(codes, key=abs)}; see {log_dir / 'torchrun.log'}"
    logs = sorted(log_dir.glob("nccl.*.log"))
    if logs:
        try:
            parsed = parse_nccl_log_files(logs)
            rows = algo_by_size(parsed)
            result.update(parsed, available=True, algo_by_size=rows,
                          algo_ranges=describe_algo_ranges(rows) if rows else None,
                          log_files=[str(p) for p in logs])
        except ValueError as e:
            result.setdefault("reason", str(e))
    elif "reason" not in result:
        result["reason"] = "NCCL wrote no debug log"
    atomic_write_json(out_json, result)
    return result


def _ops_and_sizes(p: argparse.ArgumentParser, ops_text: str, sizes_text: str) -> tuple[list[str], list[int]]:
    """--ops and --sizes as the probe runs them, or a usage error (exit 2) naming the flag."""
    from distbench.core.ops_spec import OPS
    from distbench.core.sizes import parse_size

    ops = [o for o in ops_text.split(",") if o]
    unknown = [o for o in ops if o not in OPS]
    if not ops or unknown:
        p.error(f"--ops: unknown op(s) {unknown or [ops_text]}; allowed: {', '.join(OPS)}")
    try:
        sizes = [parse_size(s) for s in sizes_text.split(",") if s.strip()]
    except ValueError as e:
        p.error(f"--sizes: {e} (bytes, or a number with a unit: 8,1MiB)")
    if not sizes or min(sizes) < 1:
        p.error(f"--sizes: expected sizes of at least 1 byte, got {sizes_text!r}")
    return ops, sizes


# The ranks' ops and sizes as run_probe writes them: bounded as a comm job's (the config's op names and sizes).
PROBE_PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["ops", "sizes"],
    "properties": {"ops": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                   "sizes": {"type": "array", "minItems": 1, "items": {"$ref": "#/definitions/size/oneOf/0"}}},
}


def _read_params(path) -> tuple[list[str], list[int]]:
    """The worker's ops and sizes from run_probe's JSON (read as a job's job.json is: a regular file of
    bounded size), or exit 2 naming the file and the key."""
    from distbench.core.ops_spec import OPS
    from distbench.launch.job_record import JobRecordError, exit_usage, problems_of, read_json_file
    from distbench.workloads.job_fields import config_schema

    try:
        given = read_json_file(path)
        schema = {**PROBE_PARAMS_SCHEMA, "definitions": config_schema()["definitions"]}
        problems = problems_of(schema, given)
        if not problems:
            problems = [f"ops: unknown op {o!r}" for o in given["ops"] if o not in OPS]
        if problems:
            raise JobRecordError(f"{path}: " + "; ".join(problems))
    except JobRecordError as e:
        exit_usage(e)
    return list(given["ops"]), list(given["sizes"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distbench.probes.nccl_probe")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--ops", default="all_reduce")
    p.add_argument("--sizes", default=",".join(str(8 * 4**k) for k in range(15)))
    p.add_argument("--params", help=argparse.SUPPRESS)  # the ranks' ops and sizes, as JSON (run_probe)
    p.add_argument("--out", default="nccl.json")
    p.add_argument("--log-dir", default="nccl_logs")
    args = p.parse_args(argv)
    if args.params:
        ops, sizes = _read_params(args.params)
    else:
        ops, sizes = _ops_and_sizes(p, args.ops, args.sizes)
    if args.worker:
        return worker(ops, sizes)
    res = run_probe(args.world_size, ops, sizes, {}, args.out, args.log_dir)
    print(res.get("algo_ranges") or res.get("reason"))
    return 0 if res["available"] else 1


if __name__ == "__main__":
    sys.exit(main())
