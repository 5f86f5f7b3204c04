"""Which Snakemake invocation a process belongs to, and which code it runs: what a shared launch's
manifest and staged results are tied to (distbench.launch.batch), so that nothing one invocation
wrote is used by another.

Torch-free: the Snakefile imports it.
"""

from __future__ import annotations

import hashlib
import os
import time
from functools import lru_cache
from pathlib import Path

# Set by the main Snakemake process as it parses the Snakefile (begin_invocation); a local job's
# script inherits it.
INVOCATION_ENV = "DISTBENCH_INVOCATION"


def process_start(pid: int) -> str | None:
    """When a process started (clock ticks since boot, /proc/<pid>/stat field 22), or None: with the pid it
    names one process, also after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    return fields[19] if len(fields) > 19 else None


def _own_id() -> str:
    return f"{os.getpid()}-{process_start(os.getpid()) or time.time_ns()}"


def begin_invocation() -> str:
    """The main Snakemake process, as it parses the Snakefile (a dry run and `--no-hooks` included): this
    invocation's id, its pid and start time, in the environment its local jobs inherit."""
    mine = os.environ.get(INVOCATION_ENV, "")
    if mine.split("-")[0] != str(os.getpid()):  # one id however often this process parses the Snakefile
        os.environ[INVOCATION_ENV] = mine = _own_id()
    return mine


@lru_cache(maxsize=1)
def _process_own_id() -> str:
    return _own_id()


def current_invocation() -> str:
    """The invocation this process belongs to: its Snakemake's id (begin_invocation), else the process's
    own (a rule script run without one, a test): shared with nothing another process wrote."""
    return os.environ.get(INVOCATION_ENV) or _process_own_id()


def invocation_alive(invocation: str) -> bool:
    """Whether the invocation so named still runs (its pid is the same process: same start time)."""
    pid, _, start = invocation.partition("-")
    if not pid.isdigit():
        return False
    started = process_start(int(pid))
    if started is not None:
        return started == start
    if Path("/proc/self/stat").exists():  # /proc answers, not for this pid: that process ended
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


@lru_cache(maxsize=1)
def code_version() -> dict:
    """The code that measures, as a staged result records it and an adopting job compares it: the
    workflow checkout's commit (distbench.core.provenance.git_commit: "not a git checkout" for a copy),
    the installed package's version, and a digest of the package's sources, which tells an edit that
    no commit names (a non-git install, a working tree edited mid-run)."""
    from importlib import metadata

    from distbench.core.provenance import git_commit

    try:
        version = metadata.version("distbench")
    except metadata.PackageNotFoundError:
        version = None
    root = Path(__file__).resolve().parents[1]  # the distbench package
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts and path.is_file():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return {"commit": git_commit(), "package": version, "sources": h.hexdigest()[:20]}
