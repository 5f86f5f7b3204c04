"""Processes started in their own session (a process group each), ended with everything they started:
the benchmark launcher's job (distbench.launch.torchrun), the NCCL probe's ranks and the health
check's per-node readings share these; the launcher's ranks and the node locks' ssh holders
(distbench.launch.joblock) end when the process that started them dies. Torch-free."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import time

POLL_S = 0.1


def die_with_parent() -> None:
    """In the forked child before exec: ask the kernel to send SIGTERM when its parent dies, even by
    SIGKILL (Linux prctl PR_SET_PDEATHSIG; a no-op elsewhere). The "parent" is the *thread* that forked
    it (prctl(2): "the 'parent' in this case is considered to be the thread that created this
    process"): a child that must outlive the calling thread is started with popen_for_life."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


# The one thread popen_for_life forks from; it lives until the interpreter exits.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="distbench-spawner")


def popen_for_life(command: list[str], **popen_kwargs) -> subprocess.Popen:
    """Popen with die_with_parent, forked from a thread that lives as long as this process: the child
    gets SIGTERM when this process ends, by SIGKILL too, and never because the calling thread ended.
    (A node lock taken in a waiter thread had its ssh holders killed, and the lock let go, when that
    thread returned.)"""
    return _SPAWNER.submit(subprocess.Popen, command, preexec_fn=die_with_parent, **popen_kwargs).result()


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
