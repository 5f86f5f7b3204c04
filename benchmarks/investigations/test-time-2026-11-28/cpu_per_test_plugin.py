"""Per-test wall and CPU for one `pytest -n 2` run (not part of the suite): `-p cpu_per_test_plugin`
with this folder on PYTHONPATH. Each test appends: node id, wall-s, the worker's own CPU-s, and the
CPU-s of the children it waited for (RUSAGE_CHILDREN: Snakemake, torchrun and their ranks, counted
when reaped; processes a SLURM or ssh daemon starts are not this worker's children)."""
import os
import resource
import time

import pytest


def _cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    s0, c0 = _cpu()
    t0 = time.monotonic()
    yield
    s1, c1 = _cpu()
    t1 = time.monotonic()
    w = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.environ.get("DISTBENCH_CPU_LOG_DIR", "/tmp") + f"/cpu_{w}.tsv", "a") as f:
        f.write(f"{item.nodeid}\t{t1 - t0:.2f}\t{s1 - s0:.2f}\t{c1 - c0:.2f}\n")
