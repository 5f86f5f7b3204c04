"""Progress beacons: where each rank is, and how many collectives (or steps) it has completed, so that
a launcher whose job ran past its time limit can tell a hung job from a slow one and name the rank
that stopped, in every family, without the Flight Recorder.

Rank side: one small file per rank (`<dir>/rank_<r>`, PROGRESS_DIR_ENV names the directory) mapped
into memory. `at(where)` says where the rank is going ("all_reduce 128 MiB, trial 37"), `done(n)`
adds completed work. Each is a handful of stores into the mapping, no system call, made outside
every timed region (the harnesses call them between trials or steps), so nothing timed changes.
A seqlock (an odd generation while writing) lets the launcher read a record whole without a lock.

Launcher side (torch-free): `read_all` reads every rank's record; `process_state` reads what the
kernel says of a rank's process (/proc/<pid>/stat: stopped, uninterruptible, zombie, gone); `judge`
takes two readings a few seconds apart and the states and says whether the job is still progressing
(`timeout`), or stopped (`hung`), and who stopped first.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path

PROGRESS_DIR_ENV = "DISTBENCH_PROGRESS_DIR"
PREFIX = "rank_"
# generation, position (at() calls), completed, updated_ns, longest_gap_ns, expect_ns, unit, where
_FORMAT = "<QQQQQQ16s200s"
_UNIT_AT = 48
_SIZE = struct.calcsize(_FORMAT)
_WHERE_BYTES, _UNIT_BYTES = 200, 16


class Beacon:
    """This rank's record; a no-op (every method returns at once) when the launcher gave no directory."""

    def __init__(self, directory: str | os.PathLike | None, rank: int, unit: str = "collectives"):
        self._map = None
        self.generation = self.position = self.completed = self.updated_ns = self.longest_gap_ns = self.expect_ns = 0
        self.unit, self.where = unit, ""
        self._last_done_ns = 0
        if not directory:
            return
        try:
            path = Path(directory) / f"{PREFIX}{rank}"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, _SIZE)
                self._map = mmap.mmap(fd, _SIZE)
            finally:
                os.close(fd)
        except OSError:  # progress is forensics, never a reason for a measurement to fail
            self._map = None
        self._write()

    def at(self, where: str, expect_s: float = 0.0) -> None:
        """The rank is now going into `where` (every rank makes the same calls in the same order),
        which it expects to take up to about expect_s (0: no idea; a bigger message than any before
        takes longer than any gap seen so far, and must not be called hung for it)."""
        self.position += 1
        self.where = where
        self.expect_ns = int(max(0.0, expect_s) * 1e9)
        self.updated_ns = time.time_ns()
        self._write()

    def done(self, n: int = 1) -> None:
        """n more collectives (or steps: the beacon's unit) completed."""
        now = time.time_ns()
        if self._last_done_ns:  # the longest wait between two completions: how slow "slow" is for this job
            self.longest_gap_ns = max(self.longest_gap_ns, now - self._last_done_ns)
        self._last_done_ns = now
        self.completed += n
        self.updated_ns = now
        self._write(label=False)

    def alive(self) -> None:
        """Something completed that is not counted in the beacon's unit (a bookkeeping collective)."""
        self.updated_ns = time.time_ns()
        self._write(label=False)

    def _write(self, label: bool = True) -> None:
        m = self._map
        if m is None:
            return
        self.generation += 1  # odd: being written
        struct.pack_into("<Q", m, 0, self.generation)
        struct.pack_into("<QQQQQ", m, 8, self.position, self.completed, self.updated_ns, self.longest_gap_ns,
                         self.expect_ns)
        if label:
            struct.pack_into("16s200s", m, _UNIT_AT, self.unit.encode()[:_UNIT_BYTES], self.where.encode()[:_WHERE_BYTES])
        self.generation += 1  # even: whole
        struct.pack_into("<Q", m, 0, self.generation)


_BEACON: Beacon | None = None


def beacon(rank: int | None = None, unit: str = "collectives") -> Beacon:
    """This process's beacon (made on first use from PROGRESS_DIR_ENV and RANK)."""
    global _BEACON
    if _BEACON is None:
        r = int(os.environ.get("RANK", 0)) if rank is None else rank
        _BEACON = Beacon(os.environ.get(PROGRESS_DIR_ENV), r, unit)
    return _BEACON


# --------------------------------------------------------------------------------- launcher side
@dataclass(frozen=True)
class Reading:
    """One rank's record as the launcher read it."""
    rank: int
    position: int
    completed: int
    updated_ns: int
    longest_gap_ns: int
    expect_ns: int
    unit: str
    where: str


def read_rank(path: Path, rank: int) -> Reading | None:
    """One record, read whole (retried while a write is under way); None if absent or unreadable."""
    for _ in range(50):
        try:
            data = Path(path).read_bytes()
        except OSError:
            return None
        if len(data) < _SIZE:
            return None
        gen, position, completed, updated, gap, expect, unit, where = struct.unpack(_FORMAT, data[:_SIZE])
        if gen % 2 == 0 and struct.unpack("<Q", Path(path).read_bytes()[:8])[0] == gen:
            return Reading(rank, position, completed, updated, gap, expect, unit.rstrip(b"\0").decode(errors="replace"),
                           where.rstrip(b"\0").decode(errors="replace"))
        time.sleep(0.001)
    return None


def read_all(directory: Path, world_size: int) -> dict[int, Reading]:
    """Every rank's record that exists in the directory."""
    out = {}
    for r in range(world_size):
        if (reading := read_rank(Path(directory) / f"{PREFIX}{r}", r)) is not None:
            out[r] = reading
    return out


# /proc/<pid>/stat's state letter (proc(5)) as an operator reads it; R and S are a live process
_STATES = {"T": "process stopped", "t": "process stopped (traced)", "D": "process in uninterruptible sleep (D)",
           "Z": "process exited, not yet reaped (zombie)", "X": "process dead"}


def process_state(pid: int | None, returncode: int | None = None) -> str | None:
    """What the kernel says of a rank's process when it is not running normally ('process stopped',
    'exited with code 3', ...), or None when it is running or sleeping as a waiting rank does."""
    if returncode is not None:
        return f"process exited with code {returncode}"
    if pid is None:
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "process gone"
    m = re.search(r"\)\s+(\S)", stat)
    return _STATES.get(m.group(1)) if m else None


@dataclass(frozen=True)
class Judgement:
    """What the launcher concludes of a job past its limit."""
    status: str  # 'timeout' (still progressing, or too slow to tell) or 'hung'
    message: str
    culprits: tuple[int, ...] = ()
    waiting: tuple[int, ...] = ()  # the ranks that waited for the culprits
    undecided: bool = False  # a stall still shorter than a hang: another reading may decide it


HUNG_MIN_STALL_S = 5.0  # no completion for this long at least before a job is called hung
HUNG_GAP_FACTOR = 3.0  # ... and for this many times its longest wait between two completions so far


def _ranks(ranks) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks[:8])) + (
        f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def progressed(first: dict[int, Reading], second: dict[int, Reading]) -> int:
    """Work completed between two readings, summed over ranks that have both (the most of any rank)."""
    return max((second[r].completed - first[r].completed for r in second if r in first), default=0)


def stall_s(readings: dict[int, Reading], now_ns: int) -> float:
    """How long since any rank last completed or began anything."""
    last = max((r.updated_ns for r in readings.values()), default=0)
    return (now_ns - last) / 1e9 if last else float("inf")


def slowest_s(readings: dict[int, Reading]) -> float:
    """The longest wait between two completions so far, or the rank's own expectation for the step it is in."""
    return max((max(r.longest_gap_ns, r.expect_ns) for r in readings.values()), default=0) / 1e9


def hung_threshold_s(readings: dict[int, Reading]) -> float:
    """How long a stall must last to be called a hang rather than a slow step."""
    return max(HUNG_MIN_STALL_S, HUNG_GAP_FACTOR * slowest_s(readings))


def judge(first: dict[int, Reading], second: dict[int, Reading], gap_s: float, world_size: int,
          states: dict[int, str | None], now_ns: int | None = None) -> Judgement:
    """first, second: readings gap_s apart; states: process_state of each rank this launcher can see.
    Still progressing -> timeout; a rank whose process is stopped/gone, or a stall longer than
    hung_threshold_s -> hung, naming who stopped first; else timeout, too slow to tell."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    moved = progressed(first, second)
    unit = next((r.unit for r in second.values()), "collectives")
    if moved > 0:
        return Judgement("timeout", f"still progressing: {moved:,} {unit} in the last {gap_s:.1f} s")
    abnormal = {r: s for r, s in states.items() if s}
    if not second and not abnormal:
        return Judgement("timeout", "no rank reported its progress (none had reached its harness)")
    stalled = stall_s(second, now_ns)
    if not abnormal and second and not any(r.completed for r in second.values()):
        # setup (imports, model build, process group) is not a collective: a job cut short there is slow
        wheres = "; ".join(sorted({r.where for r in second.values()}))
        return Judgement("timeout", f"no rank had completed its first {unit} yet (in: {wheres})")
    if not abnormal and stalled < hung_threshold_s(second):
        return Judgement("timeout", f"no {unit} completed in the last {stalled:.1f} s, but this job's slowest "
                         f"took or was expected to take {slowest_s(second):.1f} s: too slow to tell from a hang",
                         undecided=True)
    return _hung(second, abnormal, world_size, unit)


def _hung(readings: dict[int, Reading], abnormal: dict[int, str], world_size: int, unit: str) -> Judgement:
    silent = [r for r in range(world_size) if r not in readings]
    if abnormal:
        culprits = sorted(abnormal)
    elif silent:
        culprits = silent
    else:  # the rank(s) furthest behind: every rank makes the same at() calls in the same order
        low = min(r.position for r in readings.values())
        behind = [r for r, x in readings.items() if x.position == low]
        culprits = behind if len(behind) < len(readings) else []
    waiting = [r for r in readings if r not in culprits]
    if not culprits:
        where = "; ".join(sorted({x.where for x in readings.values()}))
        return Judgement("hung", f"every rank stopped completing {unit} in {where} (no rank's process is "
                         "stopped or behind the others: a deadlock, or the network between them)")
    parts = []
    for r in culprits:
        why = abnormal.get(r) or ("wrote no progress: never started, or its node is unreachable" if r in silent
                                  else "its process runs, but it is behind the others")
        here = f" in {readings[r].where}, after {readings[r].completed:,} {unit}" if r in readings else ""
        parts.append(f"rank {r} stopped responding ({why}){here}")
    text = "; ".join(parts)
    if waiting:
        wheres = sorted({readings[r].where for r in waiting})
        text += f"; {_ranks(waiting)} waited" + (f" in {wheres[0]}" if len(wheres) == 1 and wheres[0] not in text else "")
    return Judgement("hung", text, tuple(culprits), tuple(sorted(waiting)))
