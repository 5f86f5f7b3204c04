"""One benchmark measurement at a time per host (issue 36), across every Snakemake process, checkout
and results directory: a benchmark job (comm, training, memory, node round) or a health load takes
this host's lock before it starts, and a second one waits for it, naming the run that holds it, or
refuses (config `host_lock: fail`). Probes, tables and the report take no lock.

Snakemake's own lock only catches overlapping outputs, and its `threads: workflow.cores` only keeps
the jobs of one Snakemake process apart: two runs in two directories (or two targets in one) would
each measure the other's load, and both results would be cached as valid.

The lock is `fcntl.flock` on one file per host: DISTBENCH_HOST_LOCK, else /tmp/distbench-host.lock
(a fixed path, not $TMPDIR or $XDG_RUNTIME_DIR, which differ between sessions, SLURM jobs and users
of one host). The kernel releases a flock when its holder dies, however it dies, so a dead run's
lock is taken over with nothing to clean up. The holder writes who it is (results directory, pid,
start, job) into the locked file itself: a side file replaced by rename would need a directory every
user can rename in, and renaming over the lock file would swap the inode the others lock. A waiter
believes that record only while its pid is alive with the same process start time (a dead holder's
record, or a reused pid, is not named).

Where it holds (the job's provenance says which lock was held, `host_lock` in its placement file):
one node, this host; a job over several nodes under SLURM, the host that launches it: every
benchmark job's allocation is exclusive (distbench.launch.cluster.slurm_resources: --exclusive), so
SLURM keeps a second job off its other nodes. A job over several nodes launched over ssh holds every
node's lock and the launching host's (NodesLock): each remote one by a holder process started over
ssh as the agents are (`python -m distbench.launch.joblock --hold`, distbench.launch.joblock), which locks its node when told
to, keeps the lock until its stdin ends (the release, or the launcher and so its ssh client gone)
and then exits. The locks are taken one by one in one global order, sorted by the name each machine
gives itself (lock_order), so two runs launched from different hosts over the same nodes never hold
one node each while waiting for the other's. Nodes that are one machine (same host name, boot and
lock file: two cluster.hosts names of one host, or the launching host itself) are held once. A health load
locks the node it loads, each node its own (distbench.health.load runs on every node; over
several nodes a wait there counts within that node's reading limit, distbench.health.node).

The wait is taken before the job's time limit starts and outside its measured time; Snakemake's
`benchmark:` file (the job's whole wall time) does include it, and the provenance gives `waited_s`.
Every job also records its start and end in its provenance (distbench.launch.torchrun), so
distbench.core.intervals.overlaps checks after the fact that no two benchmark measurements of a run
overlapped (the report's appendix and this module's command line read it).

Torch-free: the rule scripts and the health probe import it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from distbench.core.intervals import overlaps
from distbench.launch.invocation import process_start

LOCK_ENV = "DISTBENCH_HOST_LOCK"  # the lock file (tests give each test its own)
MODE_ENV = "DISTBENCH_HOST_LOCK_MODE"  # wait or fail, for a health load (the rule script sets it from the config)
RESULTS_ENV = "DISTBENCH_HOST_LOCK_RESULTS"  # the results directory a health load names as its holder
DEFAULT_PATH = "/tmp/distbench-host.lock"
MODES = ("wait", "fail")
POLL_S = 0.2  # how often a waiter tries again: the host is idle at most this long after a release
RECORD_WAIT_S = 1.0  # a holder writes its record right after it locks: how long a waiter lets it
MAX_RECORD_BYTES = 16384


class HostBusy(Exception):
    """The host cannot be held now: another run holds it (host_lock=fail), or the lock file cannot
    be opened at all."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def lock_path(env: dict | None = None) -> Path:
    return Path((os.environ if env is None else env).get(LOCK_ENV) or DEFAULT_PATH)


def _open(path: Path) -> tuple[int, bool]:
    """The lock file's descriptor, and whether it can be written (the holder's record). Made 0666 by
    whoever creates it, so every user's runs share it; never opened through a symlink (another
    user could plant one in /tmp). An existing file is opened without O_CREAT, which a sticky /tmp
    with fs.protected_regular refuses for another user's file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            return os.open(path, os.O_RDWR | flags), True
        except FileNotFoundError:
            pass
        except PermissionError:  # another user's file without write access: lock it, write no record
            return os.open(path, os.O_RDONLY | flags), False
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | flags, 0o666)
        except FileExistsError:
            continue  # created meanwhile: open it as it is
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # the umask took bits away
        return fd, True


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _alive(record: dict) -> bool:
    """The record's process still runs (the one that wrote it, not a reused pid). A record from
    another machine (a lock file on a shared mount) cannot be checked and is believed; one from
    this machine before its last boot is stale."""
    if record.get("host") != socket.gethostname():
        return True
    pid = record.get("pid")
    if record.get("boot_id") != _boot_id() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's live process
    start = process_start(pid)
    return start is None or start == record.get("pid_start")


def read_holder(path: Path | None = None) -> dict | None:
    """The holder's record, when it is readable and its process alive; else None."""
    try:
        with open(lock_path() if path is None else path, "rb") as f:
            record = json.loads(f.read(MAX_RECORD_BYTES).decode())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and _alive(record) else None


def _clean(value, limit: int = 300) -> str:
    """A record's field as a message shows it: printable, bounded (anyone may write the file)."""
    text = "".join(c if c.isprintable() else "?" for c in str(value))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _shown_dir(path: str) -> str:
    """A results directory as the waiter's user knows it: relative when under its own checkout."""
    with contextlib.suppress(ValueError, OSError):
        return str(Path(path).relative_to(Path.cwd()))
    return path


def describe(record: dict | None) -> str:
    """'results/<label> (pid N, since HH:MM:SS, comm job ...)', or what is known when no record is."""
    if record is None:
        return "another process (it left no record of itself that is still true)"
    try:
        since = datetime.fromisoformat(str(record.get("started"))).astimezone()
        when = since.strftime("%H:%M:%S" if since.date() == datetime.now().astimezone().date() else "%Y-%m-%d %H:%M:%S")
    except ValueError:
        when = "?"
    host = "" if record.get("host") == socket.gethostname() else f" on {_clean(record.get('host'), 80)}"
    return (f"{_clean(_shown_dir(str(record.get('results'))))} (pid {_clean(record.get('pid'), 20)}{host}, "
            f"since {when}, job {_clean(record.get('job'), 200)})")


def _say(line: str) -> None:
    """To this script's stderr (a rule's log while it runs inside distbench.launch.in_rule.logged)
    and to the process's own stderr, which Snakemake shows."""
    streams = [sys.stderr] + ([sys.__stderr__] if sys.__stderr__ is not None and sys.__stderr__ is not sys.stderr else [])
    for stream in streams:
        with contextlib.suppress(OSError, ValueError):
            print(line, file=stream, flush=True)


class HostLock:
    """One hold of the host's lock, by one job."""

    def __init__(self, job: str, results_dir=None, mode: str | None = None, path: Path | None = None):
        self.job = job
        self.results_dir = str(Path(results_dir or os.environ.get(RESULTS_ENV) or Path.cwd()).resolve())
        self.mode = mode or os.environ.get(MODE_ENV) or "wait"
        if self.mode not in MODES:
            raise ValueError(f"host_lock {self.mode!r}: allowed {', '.join(MODES)}")
        self.path = Path(path) if path is not None else lock_path()
        self.fd: int | None = None
        self.acquired: datetime | None = None
        self.waited_s = 0.0
        self.waited_for: list[str] = []

    def _try(self, fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise

    def acquire(self) -> "HostLock":
        """Take the lock: at once when the host is free; else wait (saying who holds it, again
        whenever that changes), or raise HostBusy under mode fail."""
        try:
            fd, writable = _open(self.path)
        except OSError as e:
            raise HostBusy(f"the host lock {self.path} cannot be opened ({e}); set {LOCK_ENV} to a file "
                           "this user can create or open") from None
        t0 = unknown_since = time.monotonic()
        shown = None
        try:
            while not self._try(fd):
                holder = read_holder(self.path)
                if holder is not None:
                    unknown_since = time.monotonic()
                elif time.monotonic() - unknown_since < RECORD_WAIT_S:
                    # a holder that has just locked writes its record next; one releasing clears it
                    time.sleep(POLL_S / 4)
                    continue
                text = describe(holder)
                if self.mode == "fail":
                    raise HostBusy(f"the host is busy: held by {text}; host_lock=fail refuses to wait "
                                   f"(host_lock=wait, the default, waits for it; lock file {self.path})")
                if text != shown:
                    _say(f"distbench: waiting for the host: held by {text}")
                    self.waited_for.append(text)
                    shown = text
                time.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.acquired = datetime.now(timezone.utc)
        self.waited_s = time.monotonic() - t0 if self.waited_for else 0.0
        if self.waited_for:
            _say(f"distbench: got the host after {self.waited_s:.1f} s of waiting; job {self.job} starts now")
        if writable:
            self._write_record()
        return self

    def record(self) -> dict:
        """Who holds the host, as a waiter reads it."""
        return {"pid": os.getpid(), "pid_start": process_start(os.getpid()), "host": socket.gethostname(),
                "boot_id": _boot_id(), "started": self.acquired.isoformat() if self.acquired else None,
                "results": self.results_dir, "cwd": str(Path.cwd()), "job": self.job}

    def _write_record(self) -> None:
        data = json.dumps(self.record(), sort_keys=True).encode()
        # Over the last holder's (cleared) record, then cut to length: a waiter reading meanwhile sees
        # text that does not parse, and waits for a record it can read (acquire: RECORD_WAIT_S).
        with contextlib.suppress(OSError):  # a record is for the waiters' messages; the lock holds without it
            os.pwrite(self.fd, data, 0)
            os.ftruncate(self.fd, len(data))

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)  # no record of a holder that is gone
        os.close(self.fd)  # closing the last descriptor releases the flock
        self.fd = None

    def provenance(self, scope: str) -> dict:
        """What a job's provenance says of the lock it held."""
        return {"path": str(self.path), "host": socket.gethostname(), "scope": scope, "mode": self.mode,
                "acquired": self.acquired.isoformat() if self.acquired else None,
                "waited_s": round(self.waited_s, 2), "waited_for": self.waited_for}


_HELD: dict[str, HostLock] = {}  # this process's holds by lock file: a nested hold is the outer one


@contextlib.contextmanager
def holding(lock: HostLock):
    """Hold `lock` while the block runs (acquired here unless it already is), then release it."""
    key = str(lock.path.resolve())
    if lock.fd is None:
        lock.acquire()
    _HELD[key] = lock
    try:
        yield lock
    finally:
        _HELD.pop(key, None)
        lock.release()


@contextlib.contextmanager
def hold(job: str, results_dir=None, mode: str | None = None, path: Path | None = None):
    """Hold the host while the block runs (HostBusy under mode fail when another run holds it).
    Inside a hold of the same process, a nested one holds nothing more (a flock taken twice by
    one process on two descriptors would wait for itself)."""
    lock = HostLock(job, results_dir, mode, path)
    outer = _HELD.get(str(lock.path.resolve()))
    if outer is not None:
        yield outer
        return
    with holding(lock):
        yield lock


def main(argv: list[str] | None = None) -> int:
    """`python -m distbench.launch.hostlock` says who holds the host; with results directories,
    lists their overlapping benchmark measurements (exit 1 when there are any)."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        holder = read_holder()
        print(f"{lock_path()}: " + ("free" if holder is None and _free() else f"held by {describe(holder)}"))
        return 0
    found = [line for d in argv for line in overlaps(d)]
    print("\n".join(found) if found else f"no overlapping benchmark measurements in {', '.join(argv)}")
    return 1 if found else 0


def _free() -> bool:
    try:
        fd, _ = _open(lock_path())
    except OSError:
        return False
    try:
        return HostLock("check", mode="fail")._try(fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    raise SystemExit(main())
