import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distbench.core.run_label import default_label

REPO = Path(__file__).resolve().parents[1]
# Where a workflow run in a test writes (results/<run label>/): the label its Snakemake resolves,
# with no run_label in the config (distbench.core.run_label.resolve_label).
RUN = "results/" + (os.environ.get("DISTBENCH_RUN_LABEL") or default_label())


# The modules that start a SLURM test cluster of their own (tools/slurm-test-cluster.sh: one
# slurmctld, its ports and /etc/slurm/slurm.conf on this machine).
SLURM_CLUSTER_MODULES = ("test_slurm.py", "test_gate_slurm.py")


@pytest.fixture(autouse=True, scope="module")
def one_slurm_cluster_at_a_time(request, tmp_path_factory):
    """Under `pytest -n N` (pytest-xdist; `--dist loadfile` in pyproject.toml keeps each module on one
    worker) the modules that start a SLURM test cluster take turns: each holds a lock shared by the
    session's workers (their base temp directory's parent) from before its cluster starts until
    after it stops. Without -n the lock is always free."""
    if request.path.name not in SLURM_CLUSTER_MODULES:
        yield
        return
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    with open(shared / "slurm-cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(autouse=True, scope="session")
def own_host_lock(tmp_path_factory):
    """The session's own host lock (distbench.launch.hostlock, DISTBENCH_HOST_LOCK): the suite's jobs
    neither wait for a benchmark run on this machine nor for another test session."""
    patch = pytest.MonkeyPatch()
    patch.setenv("DISTBENCH_HOST_LOCK", str(tmp_path_factory.mktemp("host_lock") / "host.lock"))
    yield
    patch.undo()


def torchrun(args, nproc=2, timeout=180, env=None):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "distbench.comm", *args]
    e = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def copy_workflow(d: Path) -> Path:
    """A copy of the workflow (not the package: that is installed) in directory d (made if missing)."""
    d.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(REPO / name, d / name)
    for name in ("rules", "workflow", "envs", "profiles"):
        shutil.copytree(REPO / name, d / name)
    return d


@pytest.fixture
def workflow_dir(tmp_path):
    """A copy of the workflow in a fresh directory."""
    return copy_workflow(tmp_path)


def snakemake(cwd, *args, timeout=600, env=None):
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
