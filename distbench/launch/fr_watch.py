"""Inside every rank: a thread that writes this rank's Flight Recorder buffer and Python stacks when
the launcher asks (distbench.launch.hang.TRIGGER appears in the job's dump directory).

A thread, not a signal handler: a rank stuck in a collective sits in C++ with its main thread, where
a Python signal handler never runs; a file, not a signal, so it reaches ranks under a torchrun agent
and on other nodes (a shared results directory). The thread looks once per POLL_S (a stat call),
which costs nothing measurable beside a collective; DISTBENCH_FLIGHT_RECORDER=0 turns it off with the
recorder, for the cost measurement (benchmarks/runs/flight_recorder_cost.sh)."""

from __future__ import annotations

import faulthandler
import os
import threading
import time
from pathlib import Path

from distbench.launch.hang import CPU_PREFIX, DUMP_DIR_ENV, DUMP_PREFIX, TRIGGER, flight_recorder_on

POLL_S = 0.5


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def dump_now(torch, rank: int, directory: Path, backend: str) -> None:
    """This rank's stacks (every thread's, main included, wherever it is blocked) then its Flight
    Recorder buffers, each written whole under a temporary name then renamed (the launcher waits for
    rank_<r>, so the rest is there before it). torch keeps one recorder per event type: NCCL's
    (CUDA events, `_dump_nccl_trace`) and the CPU one Gloo records into (`_dump_fr_trace`). An NCCL
    job's rank_<r> is NCCL's, its Gloo bookkeeping group's goes to CPU_PREFIX<r>."""
    directory = Path(directory)
    tmp = directory / f".stack_{rank}.tmp"
    with open(tmp, "w") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
    os.replace(tmp, directory / f"stack_{rank}.txt")
    c10d = torch._C._distributed_c10d
    nccl = getattr(c10d, "_dump_nccl_trace", None) if backend == "nccl" else None
    try:
        if nccl is not None:
            if hasattr(c10d, "_dump_fr_trace"):
                _write(directory / f"{CPU_PREFIX}{rank}", c10d._dump_fr_trace())
            data = nccl()
        else:
            data = c10d._dump_fr_trace()
    except (AttributeError, RuntimeError) as e:  # a torch without these dumps, or the recorder off
        (directory / f"error_{rank}.txt").write_text(f"{type(e).__name__}: {e}\n")
        return
    _write(directory / f"{DUMP_PREFIX}{rank}", data)


_started: list[threading.Thread] = []


def start(torch, rank: int, backend: str) -> threading.Thread | None:
    """Watch for the launcher's trigger (a daemon thread), when the launcher gave a dump directory;
    once per process (a shared launch, distbench.launch.batch, builds a rank context per configuration)."""
    directory = os.environ.get(DUMP_DIR_ENV)
    if not directory or not flight_recorder_on(os.environ):
        return None
    if _started:
        return _started[0]
    trigger = Path(directory) / TRIGGER

    def watch():
        while not trigger.exists():
            time.sleep(POLL_S)
        dump_now(torch, rank, Path(directory), backend)

    t = threading.Thread(target=watch, name="distbench-fr-watch", daemon=True)
    t.start()
    _started.append(t)
    return t


# How a collective that outlived the process group's timeout (op_timeout_s) reads: Gloo's "Timed out
# waiting ... for recv", NCCL's watchdog "Watchdog caught collective operation timeout".
TIMEOUT_TEXT = ("timed out", "timeout")
# How long the rank whose collective timed out waits for every rank's dump (it stops waiting as soon as
# all are there: a second on a quiet host). 5 s was once too short in CI, with both test workers
# running real launches on 2 cores: the hung rank's dump came late, the job read as failed instead of
# hung (tests/launch/test_hang.py). The wait comes after op_timeout_s (300 s by default), so 15 s costs
# a hung job little.
TIMEOUT_DUMP_WAIT_S = 15.0


def dump_on_timeout(error: BaseException, world_size: int, wait_s: float = TIMEOUT_DUMP_WAIT_S) -> bool:
    """A collective on this rank outlived the process group's timeout: a hang seen from the inside,
    long before the job's own time limit (op_timeout_s 300 s against job_timeout_s 1800 s by
    default). Have every rank write its dump now (the launcher's trigger), while the ranks are still
    where they parted, and wait up to wait_s for them; the launcher analyses the dumps when the job
    ends (distbench.launch.torchrun). True when it asked."""
    directory = os.environ.get(DUMP_DIR_ENV)
    if not directory or not flight_recorder_on(os.environ):
        return False
    if not any(t in str(error).lower() for t in TIMEOUT_TEXT):
        return False
    directory = Path(directory)
    (directory / TRIGGER).touch()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and len(list(directory.glob(f"{DUMP_PREFIX}*"))) < world_size:
        time.sleep(0.1)
    return True
