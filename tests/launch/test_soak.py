"""Soak: many small jobs in a row through the real launcher leave no process, listening port,
temporary file, open file or thread behind (counted before and after). Marked slow; CI runs it."""

import os
import tempfile
import time
from pathlib import Path

import pytest

from distbench.comm.job import run_comm_job
from distbench.comm.plan import CommJob
from distbench.comm.contract import read_comm_csv

# `pytest -m heavy` (README: the second test command): 20 real jobs in a row.
pytestmark = pytest.mark.heavy

# 20 jobs: anything one job leaves behind (a process, a port, a file, a descriptor or a thread of the
# launcher's own process) is counted 20 times over, far past any noise. It was 50, at 3.7 CPU-s a job
# (the ranks' `import torch`); the suite's time is a newcomer's wait (README).
N_JOBS = 20


def _children() -> set[int]:
    """Every process whose ancestry leads to this test process."""
    me, kids = os.getpid(), set()
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    for pid in parents:
        p, seen = pid, 0
        while p in parents and p > 1 and seen < 64:
            p, seen = parents[p], seen + 1
            if p == me:
                kids.add(pid)
                break
    return kids


def _listening_ports() -> set[str]:
    """Every listening TCP port of this machine, less those of another pytest-xdist worker's
    processes (under `pytest -n`, the tests running beside this one): ours and everyone else's."""
    ports, inodes = set(), {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A":  # LISTEN
                    ports.add(f[1].rsplit(":", 1)[1])
                    inodes.setdefault(f[9], set()).add(f[1].rsplit(":", 1)[1])
        except OSError:
            pass
    me = os.environ.get("PYTEST_XDIST_WORKER")
    if me is None:
        return ports
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = dict(v.split(b"=", 1) for v in (d / "environ").read_bytes().split(b"\0") if b"=" in v)
            worker = env.get(b"PYTEST_XDIST_WORKER")
            if worker is None or worker.decode() == me:
                continue
            for fd in (d / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    ports -= inodes[link[8:-1]]
        except OSError:
            continue
    return ports


def _temp_entries() -> set[str]:
    return set(os.listdir(tempfile.gettempdir()))


def _own_fds_and_threads() -> tuple[int, int]:
    """This process's open file descriptors and threads: the launcher runs in it, so a log, pipe or
    socket it forgets to close, or a watchdog thread it never joins, adds one per job."""
    return len(os.listdir("/proc/self/fd")), len(os.listdir("/proc/self/task"))


@pytest.mark.slow
def test_twenty_jobs_in_a_row_leak_nothing(tmp_path, monkeypatch):
    # the jobs' temporary directory is this test's own (TMPDIR, which they inherit, and tempfile's
    # here), so another test running beside it under `pytest -n` cannot add to what is counted
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(own_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    params = {"ops": ["all_reduce"], "sizes": [8, 1024], "warmup": 0, "iters": 2, "trials": 1, "timing": ["host"],
              "inplace": [False], "graph_launches": 1, "rank_agg": "max", "rotate_bytes": 0, "op_timeout_s": 60,
              "job_timeout_s": 120, "job_env": {}}
    ports0, temps0 = _listening_ports(), _temp_entries()
    assert temps0 == set()
    t0 = time.monotonic()
    for i in range(N_JOBS):
        job = CommJob("gloo", "float32", 2, "default", {})
        out = tmp_path / f"job{i}" / "comm.csv"
        assert run_comm_job(job, params, out, out.with_name("placement.json"), out.with_name("log")) == "ok"
        assert (read_comm_csv(out)["status"] == "ok").all()
        if i == 0:  # counted after the first job: what it sets up once (imports, a handler) is no leak
            fds0, threads0 = _own_fds_and_threads()
    wall_s = time.monotonic() - t0
    time.sleep(1)
    assert not _children(), "processes left behind"
    assert _listening_ports() <= ports0, _listening_ports() - ports0
    assert _temp_entries() <= temps0, _temp_entries() - temps0
    fds, threads = _own_fds_and_threads()
    # a little slack for what pytest or a logging handler opens now and then; a leak adds one a job (19)
    assert fds <= fds0 + 2 and threads <= threads0 + 2, (fds0, fds, threads0, threads)
    assert not list(tmp_path.rglob("*.partial")) and not list(tmp_path.rglob(".*.tmp"))
    print(f"{N_JOBS} jobs in {wall_s:.1f} s ({wall_s / N_JOBS:.2f} s per job)")
