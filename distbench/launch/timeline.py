"""Where a job's time goes before and after its measurements: its per-job fixed cost.

Each rank marks its phases (wall clock) with `mark`; the launcher sets DISTBENCH_TIMELINE_DIR for
the job, every rank writes its marks there when it exits, and the launcher turns them into one
breakdown per job (`breakdown`), kept in the job's placement.json (provenance.timeline) and printed
in its log. Without DISTBENCH_TIMELINE_DIR, `mark` only appends to a list: nothing is written.

A rank's marks, in order (absent where the family has no such phase):
  process_start   the interpreter started (from /proc: the kernel's start time of this process)
  torch_import    `import torch` begins (distbench.launch.ranks.RankContext)
  torch_imported  ... done
  device_set      CUDA device chosen (NCCL) / none (Gloo)
  pg_ready        the process group under test is up (NCCL: communicator made eagerly, device_id)
  ctrl_ready      the Gloo bookkeeping group is up
  measure_start   the first measurement begins (after placement check, model build for training)
  measure_end     the last measurement ended
  written         the job's CSVs are complete (rank 0)
  exit            the process is about to exit (atexit)
Torch-free: the launcher imports it.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from distbench.core.io import atomic_write_text

ENV = "DISTBENCH_TIMELINE_DIR"
_marks: list[tuple[str, float]] = []
_registered = False


def process_start_time() -> float | None:
    """This process's start (epoch seconds, to the kernel's clock tick), None where /proc is missing.
    /proc/self/stat gives the start in ticks since boot; /proc/uptime the seconds since boot now (the
    boot time in /proc/stat is whole seconds, too coarse for a breakdown of a few seconds)."""
    try:
        now = time.time()
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime, after the comm field
        return now - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def mark(phase: str) -> None:
    """Record that this rank reached `phase` now (first mark also records the process start)."""
    global _registered
    if not _marks:
        start = process_start_time()
        if start is not None:
            _marks.append(("process_start", start))
    _marks.append((phase, time.time()))
    if not _registered and os.environ.get(ENV):
        _registered = True
        atexit.register(_write)


def finish() -> None:
    """Mark `exit` and write this rank's marks now: for a main that leaves by os._exit (no atexit)."""
    _write()


def _write() -> None:
    if not os.environ.get(ENV) or any(phase == "exit" for phase, _ in _marks):
        return
    _marks.append(("exit", time.time()))
    rank = os.environ.get("RANK", "0")
    try:
        atomic_write_text(Path(os.environ[ENV]) / f"rank{rank}.json", json.dumps({"rank": int(rank), "marks": _marks}))
    except OSError:  # the breakdown is a diagnosis: never fail a job for it
        pass


# The job's phases as the breakdown reports them: (name, from mark, to mark), over the ranks.
PIECES = (
    ("agent_and_spawn_s", "launch", "process_start"),       # torchrun's agent (or none) until the rank exists
    ("interpreter_s", "process_start", "torch_import"),    # Python and distbench imports
    ("import_torch_s", "torch_import", "torch_imported"),
    ("device_and_pg_init_s", "torch_imported", "pg_ready"),  # CUDA context, NCCL communicator / Gloo
    ("ctrl_group_s", "pg_ready", "ctrl_ready"),
    ("setup_s", "ctrl_ready", "measure_start"),             # placement check, model build, warm-up structure
    ("measure_s", "measure_start", "measure_end"),
    ("write_s", "measure_end", "written"),
    ("teardown_s", "written", "exit"),                       # process group destroyed, interpreter exit
    ("agent_exit_s", "exit", "launcher_done"),               # the last rank's exit until the launcher sees it
)


LAST_OF_REPEATED = ("measure_end", "written", "exit")


@dataclass(frozen=True)
class Breakdown:
    """One job's wall time by phase (seconds; each the latest rank's, as the job waits for it)."""
    wall_s: float
    pieces: dict
    fixed_cost_s: float  # wall time minus the measurements: what every job pays whatever it measures

    def as_dict(self) -> dict:
        return {"wall_s": round(self.wall_s, 3), "fixed_cost_s": round(self.fixed_cost_s, 3),
                **{k: round(v, 3) for k, v in self.pieces.items()}}

    def text(self) -> str:
        parts = ", ".join(f"{k[:-2]} {v:.2f}" for k, v in self.pieces.items())
        return f"job {self.wall_s:.2f} s, fixed cost {self.fixed_cost_s:.2f} s ({parts})"


def read_marks(directory) -> list[dict]:
    """Every rank's marks written under `directory` ({'rank', 'marks': [[phase, t], ...]})."""
    out = []
    for path in sorted(Path(directory).glob("rank*.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return out


def breakdown(ranks: list[dict], launch_t: float, done_t: float) -> Breakdown | None:
    """The job's breakdown from its ranks' marks and the launcher's own start and end (epoch s).
    Each phase boundary is taken at the latest rank that reached it (the job waits for it)."""
    if not ranks:
        return None
    latest: dict[str, float] = {"launch": launch_t, "launcher_done": done_t}
    for r in ranks:
        mine: dict[str, float] = {}
        for phase, t in r["marks"]:
            # A batch launch (distbench.launch.batch) marks each configuration: the set-up is its
            # first configuration's, the measurements run until its last one's end.
            if phase in LAST_OF_REPEATED or phase not in mine:
                mine[phase] = t
        for phase, t in mine.items():
            latest[phase] = max(latest.get(phase, t), t)
    pieces = {}
    for name, a, b in PIECES:
        if a in latest and b in latest:
            pieces[name] = max(0.0, latest[b] - latest[a])
    wall = done_t - launch_t
    return Breakdown(wall, pieces, wall - pieces.get("measure_s", 0.0))
