import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distbench.core.run_label import default_label
from tests import reaper

REPO = Path(__file__).resolve().parents[1]
# Where a workflow run in a test writes (results/<run label>/): the label its Snakemake resolves,
# with no run_label in the config (distbench.core.run_label.resolve_label).
RUN = "results/" + (os.environ.get("DISTBENCH_RUN_LABEL") or default_label())


# The modules that start a SLURM test cluster of their own (tools/slurm-test-cluster.sh: one
# slurmctld, its ports and /etc/slurm/slurm.conf on this machine), by their path under tests/.
SLURM_CLUSTER_MODULES = ("launch/test_slurm.py", "health/test_gate_slurm.py")


# Each module's wall time in one `pytest -n 2` run (tests/durations.json: seconds, the modules of 5 s
# or more; measured 2026-11-28 with a per-test timer on the 2-core machine): only the order the modules
# are handed to the workers comes from it, so a stale or missing figure costs balance, never a test.
DURATIONS = REPO / "tests/durations.json"


def _module_key(path) -> str:
    """A test module's name in tests/durations.json and SLURM_CLUSTER_MODULES: its path under tests/
    ("comm/test_comm_harness.py")."""
    p = Path(path).resolve()
    try:
        return p.relative_to(REPO / "tests").as_posix()
    except ValueError:
        return p.name


def pytest_configure(config):
    """In the controller: the reaper (tests/reaper.py) first, then the package compiled to bytecode."""
    if hasattr(config, "workerinput"):
        return
    _start_reaper(config)
    _compile_package()


def _start_reaper(config):
    """Every process the session starts carries DISTBENCH_TEST_RUN=<this run's id> (set here, before
    pytest-xdist starts its workers: they and everything they start inherit it), and a reaper in a
    session of its own ends them all when this process ends, however it ends (SIGKILL included), or
    when the session finishes (pytest_unconfigure). Issue 46: a Snakemake started by a test outlived
    pytest by 23 minutes after a time limit killed it. DISTBENCH_TEST_REAPER=0 turns it off."""
    if os.environ.get(reaper.OFF_ENV) == "0":
        return
    import uuid

    run_id = uuid.uuid4().hex
    proc, write_end = reaper.start(run_id, dict(os.environ))
    outer = os.environ.get(reaper.ENV)
    os.environ[reaper.ENV] = f"{outer}:{run_id}" if outer else run_id
    config._distbench_reaper = (proc, write_end)


def pytest_unconfigure(config):
    """The session's end: the reaper ends what the tests left running and says what that was."""
    started = getattr(config, "_distbench_reaper", None)
    if started is None:
        return
    del config._distbench_reaper
    left = reaper.stop(*started)
    if left:
        sys.stderr.write(f"tests/reaper.py: ended {len(left)} process(es) the tests left running:\n"
                         + "".join(f"  {line}\n" for line in left))


def _compile_package():
    """Compile the package to bytecode once, before any test starts a process. The suite starts about
    850 Python processes (Snakemake, its scripts, torchrun's ranks), each importing the package;
    where PYTHONDONTWRITEBYTECODE is set (this machine and CI set it) and the checkout is fresh, each
    of them would compile the modules it imports from source again (0.1-0.4 CPU-s a process). compileall
    writes the cache whatever that variable says; Python checks each file against its source's time
    and size, so an edit is never hidden behind a stale cache. Once, in the controller (not in each
    pytest-xdist worker)."""
    import compileall

    compileall.compile_dir(REPO / "distbench", quiet=1)


def _duration_key(module: str, item) -> str:
    """The key of an item's part of its module in tests/durations.json: the module's tests marked heavy
    (README's second test command) are timed apart from the rest, "comm/test_comm_harness.py[heavy]"
    beside "comm/test_comm_harness.py", so either command orders its modules by what it runs of them."""
    return f"{module}[heavy]" if item.get_closest_marker("heavy") else module


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The longest modules first, the quick ones after (by tests/durations.json, the parts of each
    module this run selected; a part it lacks counts 10 s per test marked e2e, slow or heavy). Under
    `pytest -n 2 --dist loadfile` a worker takes whole modules in collection order, so the quick ones
    fill in at the end instead of one worker running a long module (the soak test: 2 minutes) alone
    while the other idles. The two SLURM test cluster modules take turns (one_slurm_cluster_at_a_time):
    the second is placed half way down, so the workers do not start them together and one wait for
    the other. Within a module the order is kept; every worker computes the same order from the same
    collection. Last of the hooks: after `-m` has deselected what this run leaves out."""
    import json

    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(_module_key(item.path), []).append(item)
    known = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}

    def cost(m: str) -> float:
        parts: dict[str, int] = {}
        for i in modules[m]:
            slow = any(i.get_closest_marker(k) for k in ("e2e", "slow", "heavy"))
            parts[_duration_key(m, i)] = parts.get(_duration_key(m, i), 0) + 10 * slow
        return sum(known.get(k, guess) for k, guess in parts.items())

    costs = {m: cost(m) for m in modules}
    order = sorted(modules, key=lambda m: -costs[m])  # stable: equal costs keep their collection order
    slurm = [m for m in order if m in SLURM_CLUSTER_MODULES]
    for k, m in enumerate(slurm[1:], 1):
        order.remove(m)
        order.insert(k * len(order) // (2 * len(slurm)), m)
    items[:] = [i for m in order for i in modules[m]]


@pytest.fixture(autouse=True, scope="module")
def one_slurm_cluster_at_a_time(request, tmp_path_factory):
    """Under `pytest -n N` (pytest-xdist; `--dist loadfile` in pyproject.toml keeps each module on one
    worker) the modules that start a SLURM test cluster take turns: each holds a lock shared by the
    session's workers (their base temp directory's parent) from before its cluster starts until
    after it stops. Without -n the lock is always free."""
    if _module_key(request.path) not in SLURM_CLUSTER_MODULES:
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


# One tiny run of the whole workflow (every family, Gloo, world sizes 1 and 2), made once per test
# session and shared by the tests that only read a finished run (or change a copy of it): each used
# to run its own. tests/workflow/test_e2e.py checks this run in full, then changes its copy (the cache).
SHARED_TINY = {
    "backends": ["nccl", "gloo"],
    "world_sizes": [1, 2],
    "comm": {"ops": ["all_reduce", "all_gather", "send_recv", "barrier"], "sizes": ["8", "64KiB", "1MB"],
             "pairs": True, "pairs_sizes": ["8", "64KiB"], "pairs_trials": 2, "pairs_iters": 2,
             "gloo": {"max_bytes": "1MiB", "warmup": 1, "iters": 3, "trials": 2}},
    "training": {"warmup_steps": 1, "steps": 3, "allreduce_trials": 2,
                 "cpu": {"hidden_dim": 32, "num_layers": 1, "batch_size": 8},
                 "models": ["mlp", "lora"], "lm": {"strategies": ["fsdp"], "cpu": {"seq_len": 16, "batch_size": 2}}},
    "memory": {"models": ["mlp"], "world_sizes": [2], "cpu": {"mlp_batch_sizes": [4, 8]}},
}
# A quick answer from before the full run, as report/quick.md.j2 writes it: the full run marks it superseded.
SHARED_QUICK = (
    "# distbench quick answer\n\nA quick answer from 3 of 8 planned benchmark jobs (and the probes), generated "
    "then.\nFor the full report (every job, figures, findings), run `snakemake --cores 1`: it reuses these jobs' "
    "results.\n\n## Verdict\n\nJudged from: comm gloo float32 default at 2 ranks.\n"
    "Left for the full run: 5 training jobs.\n")


class SharedRun:
    """The shared run's directory (read it, never change it: copy it with `copy_to`), and what its
    `snakemake --cores 1 --configfile tiny.yaml` returned and printed."""

    def __init__(self, path: Path):
        self.path = path
        self.returncode = int((path / ".run.rc").read_text())
        self.stderr = (path / ".run.stderr").read_text()
        self.stdout = (path / ".run.stdout").read_text()

    def copy_to(self, d: Path) -> Path:
        """A copy to change: files keep their times, so Snakemake finds the copy's outputs up to date."""
        shutil.copytree(self.path, d, symlinks=True)
        return d


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory) -> SharedRun:
    """Made by the first test that asks, in the directory all the session's workers share (under
    `pytest -n`, their base temp directory's parent): the others wait for it, then read it."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    d = shared / "shared-run"
    with open(shared / "shared-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (d / ".run.rc").exists():
                import yaml

                shutil.rmtree(d, ignore_errors=True)
                copy_workflow(d)
                (d / "tiny.yaml").write_text(yaml.safe_dump(SHARED_TINY))
                (d / "report").mkdir()
                (d / "report/quick.md").write_text(SHARED_QUICK)
                r = snakemake(d, "--configfile", "tiny.yaml")
                (d / ".run.stderr").write_text(r.stderr)
                (d / ".run.stdout").write_text(r.stdout)
                (d / ".run.rc").write_text(str(r.returncode))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return SharedRun(d)


def snakemake(cwd, *args, timeout=600, env=None):
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env} if env else None)
