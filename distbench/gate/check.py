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
   On NCCL it runs with NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV and one NCCL_DEBUG_FILE per rank
   (under gate_nccl/): NCCL's own account of the transport between the GPUs and of the NCCL_* variables
   it took, kept in readings.json beside `nvidia-smi topo -m`'s links and NVML's NVLink state and the
   gate's own NCCL_* environment (distbench.gate.transport judges them).

Both run with this host's lock held (distbench.launch.hostlock, as every benchmark measurement and
health load does): a gate never measures beside a benchmark job, nor one beside it. A busy host is
waited for (the step names the holder; the wait counts in the budget) or, under mode fail, refused:
nothing is read and the gate fails naming the holder. The lock's record goes into readings.json and
the comm job's placement file (provenance.host_lock), as a benchmark job's does.

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
# what the comm job's launcher may take after its limit, and the least time the collective starts with
# (defined with the least budget they make up)
from distbench.gate.inputs import MIN_COLLECTIVE_S, TEARDOWN_S

NCCL_LARGE = 1 << 30  # the published figures hold from 1 GiB (distbench.core.references)
GLOO_LARGE = 16 << 20  # comm.gloo.max_bytes' default: Gloo's busbw plateaus by ~8 MiB on CPU
SMALL = 8
GLOO_RANKS = 2
GATE_NCCL_ENV = {"NCCL_GRAPH_MIXING_SUPPORT": "0"}
LOCK_SCOPE = "this host: the gate's health load and collective, one benchmark measurement at a time on it"


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


def nccl_log_env(log_dir: Path) -> dict:
    """NCCL's own account of the collective (distbench.gate.transport): its INFO lines of subsystems
    INIT (the "Channel .. via P2P|SHM|NET" connection lines) and ENV ("NCCL_X set by environment to
    V."), one file per rank (%h host, %p pid). Init-time lines only: the timed loop logs nothing. In the
    job's own environment (job_env), not its NCCL settings: the comm table's nccl_env label, which a
    baseline is matched on, stays the gate's."""
    from distbench.gate.transport import DEBUG_SUBSYS, LOG_PATTERN

    return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": DEBUG_SUBSYS, "NCCL_DEBUG_FILE": str(log_dir / LOG_PATTERN)}


def run_comm(backend: str, world_size: int, out_dir: Path, timeout_s: float) -> tuple[str, Path]:
    from distbench.comm.job import run_comm_job
    from distbench.comm.plan import CommJob
    from distbench.gate.transport import LOG_DIR, log_files
    from distbench.launch.planning import nccl_env_label

    env = GATE_NCCL_ENV if backend == "nccl" else {}
    job = CommJob(backend, "float32", world_size, nccl_env_label(env), dict(env))
    out_csv = out_dir / "gate_comm.csv"
    params = comm_params(backend, timeout_s)
    if backend == "nccl":
        log_dir = out_dir / LOG_DIR
        log_dir.mkdir(parents=True, exist_ok=True)
        for old in log_files(log_dir):  # an earlier gate's logs in a reused --out are never read as this one's
            old.unlink(missing_ok=True)
        params["job_env"] = {**params["job_env"], **nccl_log_env(log_dir)}
    status = run_comm_job(job, params, out_csv, out_dir / "gate_placement.json", out_dir / "gate_comm.log")
    return status, out_csv


def nccl_account(out_dir: Path) -> dict:
    """NCCL's account of this run's collective (distbench.gate.transport.read_logs), from its per-rank logs."""
    from distbench.gate.transport import LOG_DIR, log_files, read_logs

    return read_logs(log_files(out_dir / LOG_DIR))


def nvls_setting(env=None) -> bool | None:
    """NVLink SHARP as this environment sets it (NCCL_NVLS_ENABLE), None where NCCL decides."""
    value = (os.environ if env is None else env).get("NCCL_NVLS_ENABLE")
    return None if value is None else value.strip() not in ("0", "")


def _lock(job: str, out_dir: Path, mode: str, step):
    """This host's lock, held (distbench.launch.hostlock.HostLock, as distbench.launch.joblock takes a
    job's), or the HostBusy that refuses it. A busy host under mode wait: the step names the holder
    first, so a gate whose budget runs out while it waits says who held the host."""
    from distbench.launch.hostlock import HostBusy, HostLock, describe, read_holder

    try:
        lock = HostLock(job, out_dir, "fail").acquire()  # free: held at once, no wait to say
        lock.mode = mode  # the provenance states the mode the gate was run under
        return lock
    except HostBusy:
        if mode == "fail":
            raise
    lock = HostLock(job, out_dir, mode)
    step(f"waiting for the host lock {lock.path}, held by {describe(read_holder(lock.path))}")
    return lock.acquire()


def _note_lock(placement: Path, lock) -> None:
    """The lock in the comm job's placement file, as distbench.launch.joblock records a job's."""
    try:
        data = json.loads(placement.read_text())
    except (OSError, ValueError):
        return
    if isinstance(data, dict):
        data.setdefault("provenance", {})["host_lock"] = lock.provenance(LOCK_SCOPE)
        atomic_write_json(placement, data)


def take(out_dir: Path, expected_gpus: int | None, load_s: float, deadline: float, host: str | None,
         lock_mode: str = "wait") -> dict:
    from distbench.launch.hostlock import HostBusy, holding

    readings: dict = {"steps": [], "host": host}
    path = out_dir / "readings.json"

    def step(name: str):
        readings["step"] = name
        readings["steps"].append({"step": name, "started_s": round(time.monotonic() - t0, 2)})
        atomic_write_json(path, readings)

    t0 = time.monotonic()
    step("taking the host lock")
    try:
        lock = _lock(f"node gate ({host or 'this node'})", out_dir, lock_mode, step)
    except HostBusy as e:
        readings.update(host_busy=e.why, comm_status="not run: the host lock was not held")
        step("done")
        return readings
    readings["host_lock"] = lock.provenance(LOCK_SCOPE)
    with holding(lock):  # the health load inside read_health holds the same lock (a nested hold)
        _readings(readings, out_dir, expected_gpus, load_s, deadline, host, step)
        if (out_dir / "gate_placement.json").exists():
            _note_lock(out_dir / "gate_placement.json", lock)
    step("done")
    return readings


def _readings(readings: dict, out_dir: Path, expected_gpus: int | None, load_s: float, deadline: float,
              host: str | None, step) -> None:
    from distbench.core.references import link_peak
    from distbench.pipeline.plan import detect_gpus
    from distbench.health.readings import read_health
    from distbench.probes.nvml import nvlink_state

    gpus, source = detect_gpus()
    readings.update(gpus=gpus, gpus_source=source, cuda_visible=os.environ.get("CUDA_VISIBLE_DEVICES"))
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
        return
    if backend == "nccl":  # what the hardware offers between the GPUs, beside what NCCL will use
        from distbench.gate.transport import LOG_DIR, compact_nvlink, compact_topology, nccl_environment
        from distbench.probes.topology import probe_topology

        step("topology (nvidia-smi topo -m)")
        readings.update(topology=compact_topology(probe_topology()), nvlink=compact_nvlink(nv),
                        nccl_env_vars=nccl_environment(os.environ), nccl_log_dir=str(out_dir / LOG_DIR))
    left = deadline - time.monotonic() - TEARDOWN_S
    step(f"collective check ({backend}, {world_size} ranks)")
    if left < MIN_COLLECTIVE_S:
        readings["comm_status"] = f"no time left for the collective check ({left + TEARDOWN_S:.0f} s of the budget)"
    else:
        status, csv = run_comm(backend, world_size, out_dir, left)
        readings.update(comm_status=status, comm_csv=str(csv))
        if backend == "nccl":
            readings["nccl"] = nccl_account(out_dir)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distbench.gate.check", description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True)
    p.add_argument("--gpus", type=int, default=0)
    p.add_argument("--load-s", type=float, default=0.0)
    p.add_argument("--deadline-s", type=float, required=True, help="seconds from now this process must be done by")
    p.add_argument("--host", default=None)
    p.add_argument("--host-lock", choices=("wait", "fail"), default="wait")
    a = p.parse_args(argv)
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    take(out, a.gpus or None, a.load_s, time.monotonic() + a.deadline_s, a.host, a.host_lock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
