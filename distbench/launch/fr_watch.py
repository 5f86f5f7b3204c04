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


def start(torch, rank: int, backend: str) -> threading.Thread | None:
    """Watch for the launcher's trigger (a daemon thread), when the launcher gave a dump directory."""
    directory = os.environ.get(DUMP_DIR_ENV)
    if not directory or not flight_recorder_on(os.environ):
        return None
    trigger = Path(directory) / TRIGGER

    def watch():
        while not trigger.exists():
            time.sleep(POLL_S)
        dump_now(torch, rank, Path(directory), backend)

    t = threading.Thread(target=watch, name="distbench-fr-watch", daemon=True)
    t.start()
    return t
