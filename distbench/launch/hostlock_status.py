"""`python -m distbench.launch.hostlock`: whether this host's lock
(distbench.launch.hostlock) is held and by whom; or, given results directories, any two benchmark
measurements of a run that overlapped on one host (distbench.core.intervals; exit 1 when any did).

The status query reads the lock without creating or changing anything: a missing lock file, or
directory, is a free host, said so. The lock itself is tried before any record is believed: a
shared flock, without waiting, on a descriptor opened read-only and without O_CREAT (a flock needs
no write access), let go at once. A holder's exclusive flock refuses it, and only then is the
record read, to name the holder. A free lock whose file still holds a record (a run killed before
it cleared it, a record from another host on a shared mount) reads free, the record named stale;
it is read under the shared flock, so no holder can be writing one meanwhile. Shared, so two
queries never see each other as the holder; a run that tries the lock in that instant finds it
taken with no live record and tries again (HostLock.acquire waits RECORD_WAIT_S for one).

A lock file that is not a plain file (a directory, symlink, FIFO, device or socket: looked at with
lstat, never opened, as a FIFO's open would block) or that this user cannot open, a bad
DISTBENCH_HOST_LOCK_MODE, and results directories that are not directories are setting or usage
errors: exit 2, naming the path or variable, its value and what is allowed. Torch-free.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import os
import sys
from pathlib import Path

from distbench.core.intervals import intervals, overlaps
from distbench.launch.hostlock import (DEFAULT_PATH, LOCK_ENV, MODE_ENV, MODES, OPEN_FLAGS, LockSettingError, _alive,
                                       _clean, bad_path, check_kind, check_mode, describe, file_kind, lock_path,
                                       read_record)

PROG = "python -m distbench.launch.hostlock"
BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)  # a flock someone else holds


def status(path: Path | None = None) -> str:
    """One line: the lock file, free or held by whom. LockSettingError for a lock file that is not
    a plain file, or that cannot be opened or locked."""
    path = lock_path() if path is None else Path(path)
    if not check_kind(path):
        return f"{path}: free (no lock file yet: the first benchmark job creates it)"
    try:
        fd = os.open(path, os.O_RDONLY | OPEN_FLAGS)  # no O_CREAT: a status query creates nothing
    except FileNotFoundError:
        return f"{path}: free (no lock file: removed while it was read)"
    except OSError as e:
        raise bad_path(path, f"cannot be opened for reading ({e.strerror})") from None
    try:
        kind = file_kind(os.fstat(fd))
        if kind:  # swapped in between the lstat and the open
            raise bad_path(path, f"is {kind}")
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in BUSY:
                raise bad_path(path, f"cannot be locked ({e.strerror})") from None
            record = read_record(fd)  # held: now the record may name the holder, if it is still true
            return f"{path}: held by {describe(record if record is not None and _alive(record) else None)}"
        record = read_record(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if record is None:
        return f"{path}: free"
    return f"{path}: free (the record left in it is stale: {describe(record)} no longer holds it)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Without arguments: whether this host's benchmark lock is held, and by which run (read "
                    "without creating or changing anything). With results directories: any two benchmark "
                    "measurements of a run that overlapped on one host.",
        epilog=f"The lock file is ${LOCK_ENV}, else {DEFAULT_PATH}; ${MODE_ENV} is one of {', '.join(MODES)} "
               "(wait when unset). Exit status: 0 the state was read (free or held) or no measurements "
               "overlapped; 1 some overlapped; 2 a usage error, a bad setting, or a lock file that is not a "
               "plain file.")
    parser.add_argument("results_dirs", nargs="*", metavar="RESULTS_DIR",
                        help="a run's results directory (results/<label>) to check for overlapping measurements")
    return parser


def _not_results_dir(d: str) -> str | None:
    """Why `d` cannot be a results directory to read, or None."""
    try:
        st = os.stat(d)
    except OSError as e:
        return e.strerror.lower() if e.strerror else str(e)
    kind = file_kind(st)
    if kind == "a directory":
        return None if os.access(d, os.R_OK | os.X_OK) else "a directory this user cannot read"
    return f"not a directory: it is {kind or 'a plain file'}"


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        dirs = parser.parse_args(sys.argv[1:] if argv is None else argv).results_dirs
    except SystemExit as e:  # --help (0), or a usage error argparse has said (2)
        return e.code if isinstance(e.code, int) else 2
    bad = [(d, why) for d in dirs if (why := _not_results_dir(d))]
    if bad:
        parser.print_usage(sys.stderr)
        for d, why in bad:
            print(f"{PROG}: error: RESULTS_DIR {_clean(repr(d))}: {why}; give results directories "
                  "(results/<label>), or none to ask who holds the host", file=sys.stderr)
        return 2
    if not dirs:
        try:
            check_mode()  # the mode this host's runs would use: a bad one is said here, not at a job
            print(status())
        except LockSettingError as e:
            print(f"{PROG}: error: {e.why}", file=sys.stderr)
            return 2
        return 0
    found, clean = [], []
    for d in dirs:
        lines = overlaps(d)
        found += lines
        if not lines:
            n = len(intervals(d))
            clean.append(f"{d}: no overlapping benchmark measurements ({n} read)" if n else
                         f"{d}: no benchmark measurements in it (no placement.json with start and end times)")
    print("\n".join(found + clean))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
