"""The gate's readings, taken in a process of their own (`python -m distbench.gate.check`, started
by distbench.gate.supervise, which kills it and everything it started when the budget is spent):

1. this node's health (distbench.health.readings.read_health: the health check's items and limits);
2. a short collective check over this node's GPUs through the comm family's own job
   (distbench.comm.job.run_comm_job: the harness, its exact checks, its time limit, its failure rows):
   all_reduce at one large size (events timing; 1 GiB on NCCL, where the published figures hold) and
   at 8 B under CUDA-graph timing (graph_max_bytes keeps graph timing to that size), with NCCL's graph
   mixing off (NCCL_GRAPH_MIXING_SUPPORT=0: under torch's c10d capture it adds ~5 µs per op, which
   nccl-tests' published latency does not have; distbench.comm.analysis.advice.rule_graph_mixing). On a
   host without GPUs: Gloo on two CPU processes at 16 MiB and 8 B (host timing), which is no GPU verdict.

Each step's result is written to readings.json as soon as it is known (atomically), so a gate cut
short by its budget still reports what it read and names the step it was in.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from distbench.core.io import atomic_write_json

NCCL_LARGE = 1 << 30  # the published figures hold from 1 GiB (distbench.comm.analysis.peak)
GLOO_LARGE = 16 << 20  # comm.gloo.max_bytes' default: Gloo's busbw plateaus by ~8 MiB on CPU
SMALL = 8
GLOO_RANKS = 2
GATE_NCCL_ENV = {"NCCL_GRAPH_MIXING_SUPPORT": "0"}
TEARDOWN_S = 12.0  # what the comm job's launcher may take after its limit: a progress look (2 s), a kill's grace


def comm_params(backend: str, timeout_s: float) -> dict:
    """The comm job's params (distbench.comm.plan.job_params' shape): one op, two sizes, a few trials."""
    large = NCCL_LARGE if backend == "nccl" else GLOO_LARGE
    p = {"ops": ["all_reduce"], "sizes": [SMALL, large], "inplace": [False], "rank_agg": "max",
         "rotate_bytes": 0, "op_timeout_s": max(10, int(timeout_s)), "job_timeout_s": max(5, int(timeout_s)),
         "job_env": {}, "pairs": False, "profile": "off", "pairs_sizes": [], "pairs_iters": 1, "pairs_trials": 1}
    if backend == "nccl":
        p.update(timing=["events", "graph"], graph_max_bytes=SMALL, warmup=5, iters=20, trials=5, graph_launches=10)
    else:
        p.update(timing=["host"], warmup=2, iters=5, trials=3, graph_launches=1)
    return p


def run_comm(backend: str, world_size: int, out_dir: Path, timeout_s: float) -> tuple[str, Path]:
    from distbench.comm.job import run_comm_job
    from distbench.comm.plan import CommJob
    from distbench.launch.planning import nccl_env_label

    env = GATE_NCCL_ENV if backend == "nccl" else {}
    job = CommJob(backend, "float32", world_size, nccl_env_label(env), dict(env))
    out_csv = out_dir / "gate_comm.csv"
    status = run_comm_job(job, comm_params(backend, timeout_s), out_csv, out_dir / "gate_placement.json",
                          out_dir / "gate_comm.log")
    return status, out_csv


def nvls_setting(env=None) -> bool | None:
    """NVLink SHARP as this environment sets it (NCCL_NVLS_ENABLE), None where NCCL decides."""
    value = (os.environ if env is None else env).get("NCCL_NVLS_ENABLE")
    return None if value is None else value.strip() not in ("0", "")


def take(out_dir: Path, expected_gpus: int | None, load_s: float, deadline: float, host: str | None) -> dict:
    from distbench.comm.analysis.peak import link_peak
    from distbench.pipeline.plan import detect_gpus
    from distbench.health.readings import read_health
    from distbench.probes.nvml import nvlink_state

    readings: dict = {"steps": [], "host": host}
    path = out_dir / "readings.json"

    def step(name: str):
        readings["step"] = name
        readings["steps"].append({"step": name, "started_s": round(time.monotonic() - t0, 2)})
        atomic_write_json(path, readings)

    t0 = time.monotonic()
    gpus, source = detect_gpus()
    readings.update(gpus=gpus, gpus_source=source)
    step("health reading")
    rows = read_health(expected_gpus or gpus or None, load_s if gpus else 0.0, host=host)
    readings["health"] = [asdict(r) for r in rows]
    readings["host"] = rows[0].host if rows else host
    nv = nvlink_state() if gpus else {"available": False, "reason": "no GPU"}
    names = [g.get("name") for g in nv.get("gpus", []) if g.get("name")]
    readings["gpu_name"] = names[0] if names else None
    readings["peak"] = link_peak(nvlink=nv, gpu_name=readings["gpu_name"]) if gpus else None
    readings["nvls"] = nvls_setting()
    backend, world_size = ("nccl", gpus) if gpus else ("gloo", GLOO_RANKS)
    readings.update(backend=backend, world_size=world_size)
    if backend == "nccl" and gpus < 2:
        readings["comm_status"] = "skipped: one GPU, no collective between GPUs to check"
        step("done")
        return readings
    left = deadline - time.monotonic() - TEARDOWN_S
    step(f"collective check ({backend}, {world_size} ranks)")
    if left < 5:
        readings["comm_status"] = f"no time left for the collective check ({left + TEARDOWN_S:.0f} s of the budget)"
    else:
        status, csv = run_comm(backend, world_size, out_dir, left)
        readings.update(comm_status=status, comm_csv=str(csv))
    step("done")
    return readings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distbench.gate.check", description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--load-s", type=float, default=0.0)
    p.add_argument("--deadline-s", type=float, required=True, help="seconds from now this process must be done by")
    p.add_argument("--host", default=None)
    a = p.parse_args(argv)
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    take(out, a.gpus or None, a.load_s, time.monotonic() + a.deadline_s, a.host)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
