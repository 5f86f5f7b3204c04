"""Run one benchmark job (any family) under torchrun with a bounded time, and always leave its
declared outputs behind.

Each family supplies its module, its arguments and how to fill in its CSVs when the job ends
early (`TorchrunJob.write_failure`): the rows it finished are kept, the measurement in progress is
recorded as `failed` with a readable reason, and the rest as `skipped`, so the DAG goes on and the
report shows what happened. The launcher owns the argument list (never a shell), the environment,
the time limit, the job's own process group and the placement file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from distbench.io import atomic_write_json, partial_path


@dataclass
class TorchrunJob:
    module: str  # the family's entry point, run as `python -m <module>` in every rank
    args: list[str]  # its arguments
    world_size: int
    env: dict  # the whole environment of the job (see job_environment)
    timeout_s: int
    outputs: list[Path]  # files the job must leave behind; the first one's presence means it completed
    placement_json: Path
    log_path: Path
    write_failure: Callable[[str], None] = field(repr=False)  # the family's failure rows, given the reason


def torchrun_command(job: TorchrunJob) -> list[str]:
    """An argument list (never a shell string): config values cannot be interpreted by a shell."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        f"--nproc_per_node={job.world_size}", "-m", job.module, *job.args,
    ]


def job_environment(job_env: dict, nccl_env: dict, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update({k: str(v) for k, v in job_env.items()})
    env.update({k: str(v) for k, v in nccl_env.items()})
    # Snakemake sets OMP_NUM_THREADS to the rule's threads and torchrun passes it on; collectives
    # need none, and one thread per rank keeps Gloo ranks from fighting over the cores.
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _last_error(log_text: str) -> str:
    """The most telling line of a failed job's log, for the `message` column."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    ours = [ln for ln in lines if "distbench error: " in ln]
    if ours:
        return ours[-1][ours[-1].index("distbench error: ") + len("distbench error: "):][:400]
    # A Python exception in a rank ("[rank1]: torch.OutOfMemoryError: ...").
    exc = [ln for ln in lines if re.match(r"^(\[rank\d+\]: )?[\w.]*(Error|Exception)\b.*: ", ln)
           and "ChildFailedError" not in ln]
    # torchrun's summary names the rank that failed first and how.
    root = re.search(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?\n",
                     "\n".join(lines) + "\n", re.S)
    if root:
        rank, code, sig = root.groups()
        first = f"rank {rank} exited with code {code}{' ' + sig if sig else ''} (torchrun's root cause)"
        return (first + (f"; last error: {exc[-1]}" if exc else ""))[:400]
    if exc:
        return exc[-1][:400]
    return lines[-1][:400] if lines else "no output"


def run_torchrun_job(job: TorchrunJob) -> str:
    """Run the job; return 'ok' or the failure reason. Every declared output and the placement
    file exist afterwards in every case."""
    job.log_path.parent.mkdir(parents=True, exist_ok=True)
    for path in job.outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in (path, partial_path(path)):
            stale.unlink(missing_ok=True)
    cmd = torchrun_command(job)
    t0 = time.monotonic()
    with open(job.log_path, "w") as log:
        log.write("# " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=job.env,
                                start_new_session=True)  # own process group: a timeout kills every rank
        try:
            rc = proc.wait(timeout=job.timeout_s)
            reason = None if rc == 0 else f"torchrun exited with code {rc}"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, reason = -1, f"job killed after {job.timeout_s} s (job time limit): a rank hung or was lost"
    wall_s = time.monotonic() - t0
    with open(job.log_path, "a") as log:
        log.write(f"# distbench: exit {rc} after {wall_s:.1f} s\n")
    if reason is None and all(p.exists() for p in job.outputs):
        return "ok"
    if reason is None:
        reason = "torchrun exited 0 but left no complete output"
    message = f"{reason}: {_last_error(job.log_path.read_text(errors='replace'))}"
    job.write_failure(message)
    for path in job.outputs:
        partial_path(path).unlink(missing_ok=True)
    if not Path(job.placement_json).exists():  # torchrun never got a rank as far as the placement check
        atomic_write_json(job.placement_json, {"ranks": [], "error": message})
    return message


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
