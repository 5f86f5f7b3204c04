"""The gate's budget: its readings run in a child process (distbench.gate.check) that must be done
by the budget; past it the child and everything it started are killed (no orphan survives the gate)
and the gate fails, naming the step it was in.

Killing a whole tree needs care here: the comm job's ranks run in sessions of their own
(distbench.launch.torchrun), so killing the child's process group does not reach them. So this
process becomes a child subreaper (Linux prctl PR_SET_CHILD_SUBREAPER): any process of the tree whose
parent dies is re-parented here, not to init, and stays findable. The tree is found from /proc
(parent links), stopped (SIGSTOP, so it cannot start more), killed (SIGKILL), and the search repeats
until nothing of it is left; then the zombies re-parented here are reaped. SIGTERM or SIGINT to the
gate (slurmd ending a prolog at PrologEpilogTimeout) ends the tree the same way. Torch-free.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.1


_SUBREAPER = []  # set once this process is a subreaper: then its own orphans-by-adoption are the tree's


def become_subreaper() -> bool:
    try:
        ok = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    if ok and not _SUBREAPER:
        _SUBREAPER.append(True)
    return ok


def _parents() -> dict[int, int]:
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses; split after the last ')'
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(d.name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every live process under `root` (not root itself), from /proc's parent links."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            found.append(c)
            todo.append(c)
    return found


def _signal(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def reap() -> None:
    """Collect the exit status of any child (re-parented ones too), without waiting."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree(proc: subprocess.Popen) -> int:
    """Stop and kill `proc` and every process under it (also those re-parented to this subreaper);
    returns how many processes were killed."""
    killed: set[int] = set()
    me = os.getpid()
    for _ in range(50):
        tree = ([proc.pid] if proc.poll() is None else []) + descendants(proc.pid) + (
            descendants(me) if _SUBREAPER else [])
        tree = [p for p in dict.fromkeys(tree) if p != me]
        if not tree:
            break
        _signal(tree, signal.SIGSTOP)  # nothing of the tree starts anything more
        _signal(tree, signal.SIGKILL)
        killed.update(tree)
        time.sleep(POLL_S)
        reap()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    reap()
    return len(killed)


class Budget:
    """Runs `cmd` until it exits or `limit_s` has passed; SIGTERM/SIGINT to this process end it too."""

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.signalled: int | None = None

    def run(self, cmd: list[str], env: dict, log_path: Path) -> tuple[str, int]:
        """('done' | 'over budget' | 'interrupted by SIGTERM', processes killed)."""
        become_subreaper()
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        t0 = time.monotonic()
        try:
            with open(log_path, "w") as log:
                proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
                while proc.poll() is None and self.signalled is None and time.monotonic() - t0 < self.limit_s:
                    time.sleep(POLL_S)
                if proc.poll() is not None and self.signalled is None:
                    # whatever it left behind (it should leave nothing) goes too
                    return "done", kill_tree(proc)
                why = (f"interrupted by {signal.Signals(self.signalled).name}" if self.signalled is not None
                       else "over budget")
                return why, kill_tree(proc)
        finally:
            for s, h in previous.items():
                signal.signal(s, h)

    def _on_signal(self, signum, frame):  # noqa: ARG002 - signal handler signature
        self.signalled = signum


def python() -> str:
    return sys.executable
