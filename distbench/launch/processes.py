"""Processes started in their own session (a process group each), ended with everything they started:
the benchmark launcher's job (distbench.launch.torchrun), the NCCL probe's ranks and the health
check's per-node readings share these two. Torch-free."""

from __future__ import annotations

import os
import signal
import subprocess
import time

POLL_S = 0.1


def kill_group(proc: subprocess.Popen, grace_s: float = 0.0) -> None:
    """SIGTERM to the process's whole group (skipped when grace_s is 0), SIGKILL after grace_s;
    returns once it is gone, and a process it left behind in the group is killed too."""
    steps = ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10)) if grace_s > 0 else ((signal.SIGKILL, 10),)
    for sig, wait_s in steps:
        try:
            os.killpg(proc.pid, sig)
            if sig == signal.SIGTERM:  # a stopped (SIGSTOP) rank acts on SIGTERM only once continued
                os.killpg(proc.pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def wait_all(procs: list[subprocess.Popen], timeout_s: float) -> list[subprocess.Popen]:
    """Wait until every process has ended or timeout_s has passed; kill the groups of those still
    running (killed at once: nothing of theirs is worth a grace period) and return them."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(POLL_S)
    late = [p for p in procs if p.poll() is None]
    for p in late:
        kill_group(p)
    return late
