"""Interrupts, injected into the real workflow: Ctrl-C (SIGINT to Snakemake's process group), a
killed Snakemake (SIGKILL), a signal to the job's own processes. Nothing of the job may survive,
and nothing half-done may be kept as complete; the next run reruns exactly the unfinished job."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import RUN

# `pytest -m heavy` (README: the second test command): a real workflow run per signal.
pytestmark = pytest.mark.heavy

# A Gloo comm job that runs for a long time (so the interrupt lands mid-job) after a quick first point.
LONG = {
    "backends": ["gloo"], "world_sizes": [2],
    "comm": {"ops": ["all_reduce"], "sizes": ["8", "64MiB"],
             "gloo": {"max_bytes": "64MiB", "warmup": 1, "iters": 400, "trials": 3}},
    "training": {"enabled": False},
    "memory": {"enabled": False},
    "predict": {"enabled": False},
}


def _job_processes(marker: str) -> list[int]:
    """PIDs running in the test's own directory or naming it on their command line (this test excluded)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(d / "cwd")
        except OSError:
            continue
        if (marker in cmd or cwd.startswith(marker)) and "-m pytest" not in cmd:
            pids.append(int(d.name))
    return pids


def _torchrun_pids(marker: str) -> list[int]:
    return [p for p in _job_processes(marker) if "torch.distributed.run" in _cmdline(p) or "distbench.comm" in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _wait_for(cond, timeout_s: float, step_s: float = 0.2) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step_s)
    return cond()


def _start(workflow_dir) -> subprocess.Popen:
    (workflow_dir / "long.yaml").write_text(yaml.safe_dump(LONG))
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "long.yaml"],
                            cwd=workflow_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own process group, like a terminal's foreground job


def _wait_until_measuring(workflow_dir, snake) -> None:
    marker = str(workflow_dir)
    # the 8 B point is done (the partial CSV has rows) and the long one is running
    partial = workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default/comm.csv.partial"
    ok = _wait_for(lambda: partial.exists() and partial.read_text().count("\n") > 1, 180)
    assert ok and _torchrun_pids(marker), f"the job never started measuring: {snake.poll()}"


def _no_job_processes_left(workflow_dir, within_s: float) -> list[int]:
    marker = str(workflow_dir)
    _wait_for(lambda: not _job_processes(marker), within_s)
    return _job_processes(marker)


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["ctrl_c", "sigterm_group", "sigkill_snakemake"])
def test_an_interrupted_run_leaves_no_process_and_no_complete_looking_output(workflow_dir, how):
    snake = _start(workflow_dir)
    try:
        _wait_until_measuring(workflow_dir, snake)
        t0 = time.monotonic()
        if how == "ctrl_c":
            os.killpg(snake.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        elif how == "sigterm_group":
            os.killpg(snake.pid, signal.SIGTERM)  # a batch system cancelling the job's processes
        else:
            os.kill(snake.pid, signal.SIGKILL)  # Snakemake itself dies; its job must notice
        snake.wait(timeout=60)
        left = _no_job_processes_left(workflow_dir, within_s=30)
        assert not left, [(p, _cmdline(p)) for p in left]
        gone_after = time.monotonic() - t0
        assert gone_after < 30, gone_after
    finally:
        if snake.poll() is None:
            os.killpg(snake.pid, signal.SIGKILL)
        for p in _job_processes(str(workflow_dir)):
            os.kill(p, signal.SIGKILL)
    job_dir = workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default"
    assert not (job_dir / "comm.csv").exists()  # never marked complete
    assert not (job_dir / "comm.csv.partial").exists() or how == "sigkill_snakemake"
    launcher_log = (workflow_dir / f"{RUN}/logs/comm/gloo/float32/ws2/default.log").read_text()
    assert "interrupted" in launcher_log

    # the next run (no flags: the profile reruns incomplete jobs) starts the job again; make it quick.
    # A killed Snakemake cannot release its lock: the README says to run --unlock first then.
    quick = {**LONG, "comm": {**LONG["comm"], "sizes": ["8"]}}
    (workflow_dir / "long.yaml").write_text(yaml.safe_dump(quick))
    if how == "sigkill_snakemake":
        unlock = subprocess.run([sys.executable, "-m", "snakemake", "--unlock", "--cores", "1", "--configfile", "long.yaml"],
                                cwd=workflow_dir, capture_output=True, text=True, timeout=120)
        assert unlock.returncode == 0, unlock.stderr[-2000:]
    # (asked for the job's table alone: the probes, figures and report after it add nothing here)
    again = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1",
                            str(job_dir.relative_to(workflow_dir) / "comm.csv"), "--configfile", "long.yaml"],
                           cwd=workflow_dir, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (job_dir / "comm.csv").exists()
    assert re.findall(r"^(?:local)?rule (\w+):", again.stdout + again.stderr, flags=re.M).count("comm_job") == 1


def test_a_signal_to_the_job_itself_is_an_interrupt_not_a_result(tmp_path):
    """SIGTERM to the ranks' process group from outside: the launcher must not record the job as
    finished (it raises JobInterrupted; the workflow script exits non-zero), and leaves no CSV."""
    code = f"""
import sys
from distbench.comm.plan import CommJob
from distbench.comm.job import run_comm_job
from distbench.launch.torchrun import JobInterrupted
params = dict(ops=["all_reduce"], sizes=[8, 64 * 2**20], warmup=1, iters=400, trials=3, timing=["host"],
              inplace=[False], graph_launches=1, rank_agg="max", rotate_bytes=0, op_timeout_s=60,
              job_timeout_s=600, job_env={{}})
try:
    print(run_comm_job(CommJob("gloo", "float32", 2, "default", {{}}), params, r"{tmp_path}/c.csv",
                       r"{tmp_path}/p.json", r"{tmp_path}/log"))
except JobInterrupted as e:
    print("INTERRUPTED", e.why)
    sys.exit(e.exit_code)
"""
    launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
    marker = str(tmp_path)
    partial = tmp_path / "c.csv.partial"
    assert _wait_for(lambda: partial.exists() and partial.read_text().count("\n") > 1, 180)
    # one-node jobs start their ranks directly (no torchrun agent): the signal goes to rank 0's
    # process group, as a scheduler's or a user's kill would; under torchrun, to the agent's group
    ranks = [p for p in _job_processes(marker) if "distbench.comm" in _cmdline(p) and "-c" not in _cmdline(p).split()[:2]]
    torchrun = [p for p in _job_processes(marker) if "torch.distributed.run" in _cmdline(p)]
    assert ranks or torchrun
    os.killpg(os.getpgid((torchrun or ranks)[0]), signal.SIGTERM)
    out, _ = launcher.communicate(timeout=90)
    assert launcher.returncode != 0 and "INTERRUPTED" in out, out[-2000:]
    assert not (tmp_path / "c.csv").exists() and not partial.exists()
    assert not _no_job_processes_left(tmp_path, within_s=20)
