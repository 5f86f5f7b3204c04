"""The test session's reaper: every process a test starts dies with the test run, however the run ends
(issue 46: a Snakemake started by a test outlived pytest by 23 minutes after a time limit killed it).

tests/conftest.py starts it from the controller (pytest itself, not a pytest-xdist worker) with
`start(run_id)`: the controller puts DISTBENCH_TEST_RUN=<run id> in its environment, so that the
workers and every process they start carry it in /proc/<pid>/environ (a process cannot take it out of
that record: it is what the process was started with), whatever session or process group it moves to.
This script runs in a session of its own (a signal to pytest's process group, Ctrl-C or a time limit's
SIGTERM, does not reach it) and waits on the read end of a pipe whose only write end the controller
holds. When the pipe reaches end of file, the controller has ended (its exit, a crash, SIGKILL) or has
finished its session (`stop`): the script then ends every process that carries the run id (SIGTERM,
then SIGKILL to those left after a grace period; again until none is left), prints one line per
process it had to end, and exits.

Nested runs (a test that runs pytest) keep every run id: DISTBENCH_TEST_RUN=<outer>:<inner>.
DISTBENCH_TEST_REAPER=0 turns it off (tests/core/test_suite_cleanup.py's control run).
Standard library only: it starts with `python -I` in a few tens of milliseconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

ENV = "DISTBENCH_TEST_RUN"
OFF_ENV = "DISTBENCH_TEST_REAPER"


def carriers(run_id: str) -> dict[int, str]:
    """The live processes whose environment carries run_id (pid -> command line), this one excluded.
    A zombie's environment reads empty: it has ended already."""
    me, key, want = os.getpid(), (ENV + "=").encode(), run_id.encode()
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(key):
                if want in entry[len(key):].split(b":"):
                    try:
                        with open(f"/proc/{name}/cmdline", "rb") as f:
                            found[int(name)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
                    except OSError:
                        pass
                break
    return found


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def reap(run_id: str, grace_s: float = 3.0, limit_s: float = 60.0) -> dict[int, str]:
    """End every process that carries run_id: SIGTERM, SIGKILL to what is left after grace_s, and again
    (a process may have started another meanwhile) until none is left or limit_s has passed. Returns
    the processes it ended (pid -> command line)."""
    ended: dict[int, str] = {}
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        left = carriers(run_id)
        if not left:
            break
        ended.update(left)
        _signal(left, signal.SIGTERM)
        until = time.monotonic() + grace_s
        while time.monotonic() < until and carriers(run_id):
            time.sleep(0.05)
        _signal(carriers(run_id), signal.SIGKILL)
        time.sleep(0.05)
    return ended


def start(run_id: str, env: dict) -> tuple[subprocess.Popen, int]:
    """Start the reaper for run_id (env: its own environment, which must not carry run_id). Returns it
    and the pipe's write end: close that (or end this process) and it reaps."""
    read_end, write_end = os.pipe()  # not inheritable (PEP 446): no child of pytest holds the write end
    try:
        proc = subprocess.Popen([sys.executable, "-I", os.path.abspath(__file__), run_id], stdin=read_end,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True, text=True)
    finally:
        os.close(read_end)
    return proc, write_end


def stop(proc: subprocess.Popen, write_end: int, timeout: float = 90.0) -> list[str]:
    """The session's normal end: close the pipe, wait for the reaper and return the lines it printed
    (one per process it had to end: they outlived their tests)."""
    os.close(write_end)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return [line for line in out.splitlines() if line.strip()]


def main() -> None:
    run_id = sys.argv[1]
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    ended = reap(run_id)
    try:
        for pid, cmd in sorted(ended.items()):
            print(f"{pid} {cmd}", flush=True)
    except (BrokenPipeError, OSError):  # the controller has gone: nobody to tell
        pass


if __name__ == "__main__":
    main()
