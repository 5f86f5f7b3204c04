"""Soak: many small jobs in a row through the real launcher leave no process, listening port or
temporary file behind (counted before and after). Marked slow; CI runs it."""

import os
import tempfile
import time
from pathlib import Path

import pytest

from distbench.comm.job import run_comm_job
from distbench.comm.plan import CommJob
from distbench.comm.contract import read_comm_csv

N_JOBS = 50


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
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in Path(table).read_text().splitlines()[1:]:
                f = line.split()
                if f[3] == "0A":  # LISTEN
                    ports.add(f[1].rsplit(":", 1)[1])
        except OSError:
            pass
    return ports


def _temp_entries() -> set[str]:
    return set(os.listdir(tempfile.gettempdir()))


@pytest.mark.slow
def test_fifty_jobs_in_a_row_leak_nothing(tmp_path):
    params = {"ops": ["all_reduce"], "sizes": [8, 1024], "warmup": 0, "iters": 2, "trials": 1, "timing": ["host"],
              "inplace": [False], "graph_launches": 1, "rank_agg": "max", "rotate_bytes": 0, "op_timeout_s": 60,
              "job_timeout_s": 120, "job_env": {}}
    ports0, temps0 = _listening_ports(), _temp_entries()
    t0 = time.monotonic()
    for i in range(N_JOBS):
        job = CommJob("gloo", "float32", 2, "default", {})
        out = tmp_path / f"job{i}" / "comm.csv"
        assert run_comm_job(job, params, out, out.with_name("placement.json"), out.with_name("log")) == "ok"
        assert (read_comm_csv(out)["status"] == "ok").all()
    wall_s = time.monotonic() - t0
    time.sleep(1)
    assert not _children(), "processes left behind"
    assert _listening_ports() <= ports0, _listening_ports() - ports0
    assert _temp_entries() <= temps0 | {p.name for p in Path(tempfile.gettempdir()).glob("pytest-of-*")}, \
        _temp_entries() - temps0
    assert not list(tmp_path.rglob("*.partial")) and not list(tmp_path.rglob(".*.tmp"))
    print(f"{N_JOBS} jobs in {wall_s:.1f} s ({wall_s / N_JOBS:.2f} s per job)")
