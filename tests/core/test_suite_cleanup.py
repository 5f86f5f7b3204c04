"""Every process a test starts dies with the test run, however the run ends (issue 46; tests/reaper.py,
started by tests/conftest.py). An inner pytest with this suite's conftest runs a test that starts a
child in a session of its own (so no signal to pytest's process group reaches it, as a Snakemake's
jobs or a SLURM step would not be reached) and then either waits or returns: pytest killed with
SIGKILL, and pytest ending normally, each leaves no such child alive. A control run with the reaper
off shows the child really outlives pytest there: a test of the reaper that could not fail would
show nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

INNER = '''
import os, subprocess, sys, time

def test_leaves_a_child(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    pidfile = os.environ["INNER_PIDFILE"]
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(child.pid))
    os.replace(pidfile + ".tmp", pidfile)
    if os.environ["INNER_MODE"] == "wait":
        time.sleep(600)
'''


def _alive(pid: int) -> bool:
    """Running (a zombie has ended: only its parent's wait is missing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _inner(tmp_path: Path, mode: str, *, reaper: bool, xdist: bool = False):
    (tmp_path / "test_inner.py").write_text(INNER)
    pidfile = tmp_path / f"child-{mode}-{reaper}-{xdist}.pid"
    env = {**os.environ, "PYTHONPATH": str(REPO), "INNER_PIDFILE": str(pidfile), "INNER_MODE": mode,
           "DISTBENCH_TEST_REAPER": "1" if reaper else "0"}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider",
           *(["-n", "1"] if xdist else ["-p", "no:xdist"]), "test_inner.py"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 90
    while not pidfile.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the inner test did not start its child:\n{proc.communicate()[0][-3000:]}")
        time.sleep(0.05)
    return proc, int(pidfile.read_text())


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("xdist", [False, True], ids=["plain", "xdist"])
def test_a_child_in_its_own_session_dies_when_pytest_is_killed(tmp_path, xdist):
    proc, child = _inner(tmp_path, "wait", reaper=True, xdist=xdist)
    try:
        assert _alive(child)
        proc.send_signal(signal.SIGKILL)  # no hook of pytest's runs: only the reaper is left to act
        proc.communicate(timeout=30)
        assert _gone_within(child, 10), "the child outlived the killed pytest"
    finally:
        proc.kill()
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_child_a_test_leaves_behind_dies_when_the_session_ends(tmp_path):
    proc, child = _inner(tmp_path, "return", reaper=True)
    out, _ = proc.communicate(timeout=90)
    try:
        assert proc.returncode == 0, out[-3000:]
        assert not _alive(child), "the child outlived the finished session"
        assert "tests/reaper.py: ended 1 process(es) the tests left running" in out and "time.sleep(600)" in out
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_without_the_reaper_the_child_outlives_killed_pytest(tmp_path):
    """The control: the same run with DISTBENCH_TEST_REAPER=0 leaves the child alive."""
    proc, child = _inner(tmp_path, "wait", reaper=False)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        time.sleep(2)
        assert _alive(child)
    finally:
        proc.kill()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
