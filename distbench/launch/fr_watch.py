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

from distbench.launch.hang import DUMP_DIR_ENV, DUMP_PREFIX, TRIGGER, flight_recorder_on

POLL_S = 0.5


def dump_now(torch, rank: int, directory: Path) -> None:
    """This rank's stacks (every thread's, main included, wherever it is blocked) then its Flight
    Recorder buffer, each written whole under a temporary name then renamed (the launcher waits for
    rank_<r>, so a stack is there before it)."""
    directory = Path(directory)
    tmp = directory / f".stack_{rank}.tmp"
    with open(tmp, "w") as f:
        faulthandler.dump_traceback(file=f, all_threads=True)
    os.replace(tmp, directory / f"stack_{rank}.txt")
    try:
        data = torch._C._distributed_c10d._dump_fr_trace()
    except (AttributeError, RuntimeError) as e:  # a torch without the generic dump, or the recorder off
        (directory / f"error_{rank}.txt").write_text(f"{type(e).__name__}: {e}\n")
        return
    tmp = directory / f".{DUMP_PREFIX}{rank}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, directory / f"{DUMP_PREFIX}{rank}")


def start(torch, rank: int) -> threading.Thread | None:
    """Watch for the launcher's trigger (a daemon thread), when the launcher gave a dump directory."""
    directory = os.environ.get(DUMP_DIR_ENV)
    if not directory or not flight_recorder_on(os.environ):
        return None
    trigger = Path(directory) / TRIGGER

    def watch():
        while not trigger.exists():
            time.sleep(POLL_S)
        dump_now(torch, rank, Path(directory))

    t = threading.Thread(target=watch, name="distbench-fr-watch", daemon=True)
    t.start()
    return t
