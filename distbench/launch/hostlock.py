"""One benchmark measurement at a time per host, across every Snakemake process, checkout
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

The lock file must be a plain file (or not exist yet): a directory, symlink, FIFO, device or socket
there is refused with LockSettingError, never waited on nor read as "held"; so are a file holding
something other than a holder's record (a mistyped path: never overwritten) and a mode other than
wait or fail. `python -m distbench.launch.hostlock` (distbench.launch.hostlock_status) says whether
the host is held, reading the lock without creating or changing anything, and checks results
directories for overlaps.

Torch-free: the rule scripts and the health probe import it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import stat
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from distbench.core.io import file_kind as mode_kind
from distbench.launch.invocation import process_start

LOCK_ENV = "DISTBENCH_HOST_LOCK"  # the lock file (tests give each test its own)
MODE_ENV = "DISTBENCH_HOST_LOCK_MODE"  # wait or fail, for a health load (the rule script sets it from the config)
RESULTS_ENV = "DISTBENCH_HOST_LOCK_RESULTS"  # the results directory a health load names as its holder
DEFAULT_PATH = "/tmp/distbench-host.lock"
MODES = ("wait", "fail")
POLL_S = 0.2  # how often a waiter tries again: the host is idle at most this long after a release
RECORD_WAIT_S = 1.0  # a holder writes its record right after it locks: how long a waiter lets it
MAX_RECORD_BYTES = 16384
# Every open of the lock file: never through a symlink (another user could plant one in /tmp), and
# never blocking (a FIFO planted there would block a plain open until a writer came; the lstat
# before each open refuses one, this covers one swapped in between).
OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class HostBusy(Exception):
    """The host cannot be held now: another run holds it (host_lock=fail), or the lock file cannot
    be opened at all."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class LockSettingError(HostBusy, ValueError):
    """The lock's setting is wrong, not the host busy: a mode other than wait or fail, or a lock file
    that is not a plain file or cannot be opened. Never waited on, whatever the mode. A HostBusy, so
    the rule scripts and the health load end saying why as they do for a busy host; a ValueError
    for a caller that passed the bad value."""


def check_mode(mode: str | None = None, env: dict | None = None) -> str:
    """The mode a hold uses: `mode` (config host_lock, or a node holder's argument), else
    DISTBENCH_HOST_LOCK_MODE, else wait. A bad one is named with where it came from."""
    env = os.environ if env is None else env
    if mode:
        source = f"host lock mode {_clean(repr(mode), 80)} (config host_lock)"
    else:
        mode = env.get(MODE_ENV) or "wait"
        source = f"{MODE_ENV}={_clean(repr(mode), 80)}"
    if mode not in MODES:
        raise LockSettingError(f"{source}: allowed {', '.join(MODES)} (wait is the default)")
    return mode


def file_kind(st: os.stat_result, path: Path | None = None) -> str | None:
    """What a lock path that is not a plain file is, in words (None for a plain file)."""
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        with contextlib.suppress(OSError):
            return f"a symlink (to {_clean(os.readlink(path), 200)})" if path is not None else "a symlink"
        return "a symlink"
    return mode_kind(st.st_mode)


def bad_path(path: Path, why: str, need: str = "a plain file this user can open") -> LockSettingError:
    """The error for a lock file that cannot serve: which file, why, and what would."""
    return LockSettingError(f"the host lock file {_clean(path)} {why}: it must be {need}, or not exist yet "
                            f"(the first run creates it); set {LOCK_ENV} to another path")


def foreign(fd: int) -> str | None:
    """What an open lock file holds when it is not a lock file a run made (empty, or a holder's
    record, perhaps with a longer old record's tail after it), in words; else None. A holder
    writes its record over the file's start and cuts it: a mistyped DISTBENCH_HOST_LOCK naming some
    other file this user can write (a config, /etc/passwd for root) would be lost."""
    try:
        size = os.fstat(fd).st_size
        head = os.pread(fd, MAX_RECORD_BYTES, 0)
    except OSError:
        return None
    if not head.strip():
        return None
    with contextlib.suppress(ValueError):
        record, _ = json.JSONDecoder().raw_decode(head.decode())
        if isinstance(record, dict) and "pid" in record:
            return None
    return f"holds {size} bytes that are no holder's record (starting {_clean(head[:24].decode(errors='replace'))!r})"


def check_kind(path: Path) -> bool:
    """Whether the lock file exists; LockSettingError when it is anything but a plain file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise bad_path(path, f"cannot be examined ({e.strerror})") from None
    kind = file_kind(st, path)
    if kind:
        raise bad_path(path, f"is {kind}")
    return True


def lock_path(env: dict | None = None) -> Path:
    return Path((os.environ if env is None else env).get(LOCK_ENV) or DEFAULT_PATH)


def _open(path: Path) -> tuple[int, bool]:
    """The lock file's descriptor, and whether it can be written (the holder's record). Made 0666 by
    whoever creates it, so every user's runs share it; never opened through a symlink (another
    user could plant one in /tmp). An existing file is opened without O_CREAT, which a sticky /tmp
    with fs.protected_regular refuses for another user's file. Anything but a plain file there is
    refused (LockSettingError): a directory or symlink there is a wrong or planted setting, and a
    device or FIFO cannot keep the holder's record (reading a FIFO's would block)."""
    if not check_kind(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, writable = _open_plain(path)
    try:
        kind = file_kind(os.fstat(fd))
    except OSError:
        kind = None
    if kind:  # swapped in between the lstat and the open
        os.close(fd)
        raise bad_path(path, f"is {kind}")
    return fd, writable


def _open_plain(path: Path) -> tuple[int, bool]:
    """_open's descriptor: the existing file, read-write else read-only, or a new one."""
    flags = OPEN_FLAGS
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


def read_record(fd: int) -> dict | None:
    """The record in an open lock file, alive or not; None when there is none it can parse."""
    try:
        record = json.loads(os.pread(fd, MAX_RECORD_BYTES, 0).decode())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def read_holder(path: Path | None = None) -> dict | None:
    """The holder's record, when it is readable and its process alive; else None (and for anything
    but a plain file, which is not opened when seen first: a FIFO would block)."""
    path = lock_path() if path is None else Path(path)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)
    except OSError:
        return None
    try:
        record = read_record(fd) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        record = None
    finally:
        os.close(fd)
    return record if record is not None and _alive(record) else None


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
        self.mode = check_mode(mode)  # LockSettingError, a ValueError, names a bad one and its source
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
        except OSError as e:  # a setting to fix, not a busy host: never waited on
            raise bad_path(self.path, f"cannot be created or opened ({e.strerror})") from None
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
            what = foreign(fd) if writable else None  # read-only: it is locked, and never written
            if what:
                raise bad_path(self.path, f"{what}; it was not overwritten",
                               "a lock file a run made (empty, or holding a holder's record)")
        except BaseException:
            os.close(fd)  # not release(): that would cut the file
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


def _key(path: Path) -> str:
    """A lock file's key in _HELD: its directory resolved, not itself (a symlink there is refused
    when it is opened; resolving it would follow it, or raise for a loop)."""
    try:
        return str(path.parent.resolve() / path.name)
    except (OSError, RuntimeError):  # a loop among its directories: acquire names the error
        return os.path.abspath(path)


@contextlib.contextmanager
def holding(lock: HostLock):
    """Hold `lock` while the block runs (acquired here unless it already is), then release it."""
    key = _key(lock.path)
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
    outer = _HELD.get(_key(lock.path))
    if outer is not None:
        yield outer
        return
    with holding(lock):
        yield lock


if __name__ == "__main__":
    # `python -m distbench.launch.hostlock` is the status command, which lives in hostlock_status (it
    # imports this module, so this one names it only as the module to run, not as an import).
    import runpy

    runpy.run_module("distbench.launch.hostlock_status", run_name="__main__")
