"""The lock a benchmark job holds while it measures: its host's (distbench.launch.hostlock),
or, for a job launched over ssh on several nodes, every node's. `held` is what the rule scripts call.

Every node of a job launched over ssh is held before it starts (one benchmark measurement
at a time per host, on a cluster too): distbench.launch.hostlock's lock of each node, taken by a small
holder process on that node (`python -m distbench.launch.joblock --hold`, started over ssh the way the
launcher starts an agent), in one global order (the host names the machines give themselves, sorted)
so that two runs launched from different hosts never wait for each other in a circle. A holder keeps
its node's lock until its stdin ends: when the job ends, or when its launcher dies (ssh then closes it).

Torch-free: the benchmark rules' scripts import it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from distbench.core.io import atomic_write_json
from distbench.launch.hostlock import POLL_S, HostBusy, HostLock, _boot_id, _clean, _say, holding
from distbench.launch.processes import popen_for_life

# ----------------------------------------------------------------- every node of an ssh job
CONNECT_S = 60.0  # how long a node's holder may take to answer over ssh (log in, start Python)
RELEASE_WAIT_S = 10.0  # how long a holder gets to exit after its stdin closes, before its ssh is killed
HOLD_FORWARD = ("PYTHON", "DISTBENCH_")  # the environment a holder gets over ssh (as the agents do)


def lock_order(nodes: list[dict]) -> list[dict]:
    """The locks of a job's nodes, each once, in the order every launcher takes them: sorted by the
    host name each machine gives itself (then its boot id and lock file), never by how cluster.hosts
    or the launcher spell it. Nodes that are one lock (same host, boot and lock file) are held once,
    as the first of them: list the launching host first, so a node that is this host is held here."""
    first: dict[tuple, dict] = {}
    for node in nodes:
        first.setdefault((str(node.get("host")), str(node.get("boot_id") or ""), str(node.get("path"))), node)
    return [first[key] for key in sorted(first)]


def hold_command(host: str, job: str, results_dir, mode: str, env: dict | None = None,
                 cwd: str | None = None, python: str | None = None) -> list[str]:
    """The argument list that starts a node's holder over ssh: as the ssh launcher starts an agent
    (distbench.launch.cluster.agent_commands: the cluster.hosts entry as ssh takes it, user@ included,
    the working directory and the environment the job passes on, every value shell-quoted), but
    without a terminal (-T): the holder's stdin is its line to the launcher, whose end releases it."""
    env = os.environ if env is None else env
    keep = [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith(HOLD_FORWARD)]
    holder = [python or sys.executable, "-m", "distbench.launch.joblock", "--hold", job, str(results_dir), mode]
    remote = f"cd {shlex.quote(cwd or os.getcwd())} && " + shlex.join(["env", *keep, *holder])
    return ["ssh", "-T", "-o", "BatchMode=yes", host, remote]


class _Holder:
    """The launcher's side of one node's holder over ssh: its lines on stdout read into a queue, its
    messages (a wait, naming the holder) passed on to this process's stderr."""

    def __init__(self, host: str, command: list[str]):
        self.host, self.name = host, host.rpartition("@")[2]  # user@node1 is node1 (cluster.host_address)
        self.said: list[str] = []
        self.lines: queue.Queue = queue.Queue()
        # it must outlive the thread that takes the lock (a waiter thread, say): popen_for_life
        self.proc = popen_for_life(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, bufsize=1, start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._relay, daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _relay(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in self.proc.stderr:
                line = _clean(line.rstrip("\n"), 1000)
                self.said = [*self.said[-4:], line]
                if line.startswith("distbench: "):
                    _say(f"distbench: node {_clean(self.name, 80)}: {line[len('distbench: '):]}")

    def expect(self, word: str, timeout_s: float | None):
        """The payload of the holder's next `word` line; HostBusy when it refuses, ends or says nothing."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=POLL_S * 5)
            except queue.Empty:
                if deadline is not None and time.monotonic() > deadline:
                    raise HostBusy(f"node {self.name}: its host lock holder gave no answer over ssh "
                                   f"within {timeout_s:.0f} s") from None
                continue
            if line is None:
                time.sleep(POLL_S)  # its last words on stderr
                raise HostBusy(f"node {self.name}: its host lock cannot be held over ssh (exit "
                               f"{self.proc.poll()}): {' / '.join(self.said) or 'no message'}")
            head, _, rest = line.partition(" ")
            if head in (word, "distbench-busy"):
                try:
                    payload = json.loads(rest)
                except ValueError:
                    continue
                if head == "distbench-busy":
                    raise HostBusy(f"node {self.name}: {_clean(payload, 1000)}")
                return payload

    def send(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write(text)
            self.proc.stdin.flush()

    def close(self, deadline: float | None = None) -> None:
        """Its stdin closed: the holder on the node releases its lock and exits, and so does ssh."""
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()
        if deadline is None:
            return
        try:
            self.proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # ssh's end closes the holder's stdin on the node too
            self.proc.kill()
            self.proc.wait()


class NodesLock:
    """One hold of every node of a job launched over ssh, and of the launching host, by one job: the
    launching host's lock here, each other node's by its holder over ssh, in lock_order. What a
    HostLock offers the rule scripts (acquire, release, waited_s, waited_for, provenance)."""

    def __init__(self, job: str, results_dir, mode: str | None, hosts, env: dict | None = None,
                 path: Path | None = None):
        self.local = HostLock(job, results_dir, mode, path)
        self.job, self.mode, self.path = job, self.local.mode, self.local.path
        self.hosts, self.env = list(hosts), env
        self.holders: list[_Holder] = []
        self.order: list[dict] = []
        self.waited_s = 0.0
        self.waited_for: list[str] = []

    @property
    def fd(self):
        return self.local.fd

    def acquire(self) -> "NodesLock":
        try:
            self._acquire()
        except BaseException:
            self.release()
            raise
        return self

    def _acquire(self) -> None:
        self.holders = [_Holder(h, hold_command(h, self.job, self.local.results_dir, self.mode, self.env))
                        for h in self.hosts]  # all at once: logging in is the slow part
        here = {"host": socket.gethostname(), "boot_id": _boot_id(), "path": str(self.path.absolute()),
                "node": "the launching host"}
        nodes = [here] + [{**self._identity(h), "node": h.name, "holder": i} for i, h in enumerate(self.holders)]
        self.order = lock_order(nodes)
        held = {node.get("holder") for node in self.order}
        for i, holder in enumerate(self.holders):
            if i not in held:  # one machine's lock already held through another of its names
                holder.close(time.monotonic() + RELEASE_WAIT_S)
        t0 = time.monotonic()
        for node in self.order:
            if "holder" not in node:
                self.local.acquire()
                node["waited_for"] = list(self.local.waited_for)
                self.waited_for += self.local.waited_for
                continue
            holder = self.holders[node["holder"]]
            holder.send("lock\n")
            prov = holder.expect("distbench-held", None if self.mode == "wait" else CONNECT_S)
            node["waited_for"] = [_clean(w) for w in prov.get("waited_for") or []] if isinstance(prov, dict) else []
            self.waited_for += [f"{w} (node {holder.name})" for w in node["waited_for"]]
        self.waited_s = time.monotonic() - t0 if self.waited_for else 0.0

    @staticmethod
    def _identity(holder: _Holder) -> dict:
        said = holder.expect("distbench-node", CONNECT_S)
        if not isinstance(said, dict):
            raise HostBusy(f"node {holder.name}: its host lock holder answered {_clean(said, 200)!r} over ssh")
        return {k: said.get(k) for k in ("host", "boot_id", "path")}

    def release(self) -> None:
        for holder in self.holders:
            holder.close()  # all at once, then each waited for
        deadline = time.monotonic() + RELEASE_WAIT_S
        for holder in self.holders:
            holder.close(deadline)
        self.holders = []
        self.local.release()

    def provenance(self, scope: str) -> dict:
        nodes = [{"node": n["node"], "host": n.get("host"), "path": n.get("path"),
                  "held_by": "ssh" if "holder" in n else "this process", "waited_for": n.get("waited_for", [])}
                 for n in self.order]
        return {**self.local.provenance(scope), "waited_s": round(self.waited_s, 2), "waited_for": self.waited_for,
                "nodes": nodes}


def ssh_nodes(launch: dict | None, env: dict | None = None) -> list[str]:
    """The cluster.hosts entries of a job launched over ssh on several nodes (its agents' hosts);
    [] for any other job."""
    from distbench.launch.cluster import resolve_launcher

    nodes = int((launch or {}).get("nodes") or 1)
    if nodes <= 1 or resolve_launcher(launch.get("launcher", "auto"), env) != "ssh":
        return []
    return list(launch.get("hosts") or [])[:nodes]


def hold_main(job: str, results_dir: str, mode: str) -> int:
    """A node's holder (`--hold`, started over ssh by NodesLock): says which lock it is, takes it when
    a `lock` line comes, says `distbench-held` (or `distbench-busy`, naming the holder, under mode
    fail), and keeps it until its stdin ends; then it exits and the kernel drops the flock."""
    lock = HostLock(job, results_dir, mode)
    me = {"host": socket.gethostname(), "boot_id": _boot_id(), "path": str(lock.path.absolute())}
    print("distbench-node " + json.dumps(me), flush=True)
    if sys.stdin.readline().strip() != "lock":
        return 0

    def until_eof():  # even while it waits for the lock: a launcher gone never gets it
        while sys.stdin.readline():
            pass
        if lock.fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(lock.fd, 0)
        os._exit(0)

    threading.Thread(target=until_eof, daemon=True).start()
    try:
        lock.acquire()
    except HostBusy as e:
        print("distbench-busy " + json.dumps(e.why), flush=True)
        return 3
    print("distbench-held " + json.dumps(lock.provenance("this node")), flush=True)
    while True:
        time.sleep(3600)


# ------------------------------------------------------------------------ the rule scripts' side
def results_dir_of_log(log_path) -> Path:
    """results/<label>/ from a rule's log (every rule logs under results("logs/...")): the two
    parts before its 'logs/'."""
    parts = Path(log_path).parts
    if len(parts) > 2 and parts[0] == "results":
        return Path.cwd() / parts[0] / parts[1]
    i = len(parts) - 1 - parts[::-1].index("logs") if "logs" in parts else len(parts) - 1
    return Path(*parts[:i]) if i else Path.cwd()


def job_of_log(log_path) -> str:
    """'comm/gloo/float32/ws2/default': the job as its log under results/<label>/logs/ names it."""
    parts = Path(log_path).parts
    i = parts.index("logs", 2 if parts[:1] == ("results",) else 0) if "logs" in parts else len(parts) - 1
    return str(Path(*parts[i + 1:]).with_suffix("")) if i + 1 < len(parts) else str(log_path)


def scope_of(launch: dict | None, env: dict | None = None) -> str:
    """Which hosts the lock kept to one measurement, for the job's provenance (and the report)."""
    env = os.environ if env is None else env
    nodes = int((launch or {}).get("nodes") or 1)
    if ssh_nodes(launch, env):
        return (f"every node of the job ({nodes} hosts over ssh) and the launching host, each locked in one order "
                "(sorted host names), so runs launched from other hosts wait for it too")
    if env.get("SLURM_JOB_ID"):
        return (f"this node, inside SLURM job {env['SLURM_JOB_ID']}: under the cluster executor (profiles/slurm) "
                "every benchmark job's allocation is exclusive (--exclusive), so SLURM keeps other jobs off its nodes")
    if nodes <= 1:
        return "this host: one benchmark measurement at a time across every run on it"
    launcher = (launch or {}).get("launcher", "auto")
    if launcher in ("local", "auto"):
        return f"this host, where all {nodes} 'nodes' of the job run (launcher local)"
    return f"the launching host only: the job's other {nodes - 1} node(s) over {launcher} are not locked"


def held(sm, what: str, run):
    """For a benchmark rule's script (`sm`: Snakemake's object): `run`, called with this host held
    (config host_lock: wait for it, or fail), as distbench.launch.job_rule.run_job_in_rule wants
    it. The lock is taken before `run` starts the job's time limit; a wait is said on stderr, in
    the launcher's log, at the end of the job's log and in its placement file's provenance."""
    def locked():
        args = (job_of_log(sm.log[0]), results_dir_of_log(sm.log[0]), sm.config.get("host_lock", "wait"))
        hosts = ssh_nodes(sm.params.get("launch"))  # over ssh: every node of the job too
        lock = NodesLock(*args, hosts) if hosts else HostLock(*args)
        try:
            lock.acquire()
        except HostBusy as e:
            print(f"{what}: {e.why}", flush=True)  # the launcher's log
            sys.exit(f"distbench error: {what}: {e.why}")  # stderr: Snakemake's own output shows it
        except KeyboardInterrupt:
            sys.exit(f"distbench: {what}: interrupted while waiting for the host; nothing ran")
        with holding(lock):
            outcome = run()
            _note(lock, sm.log[0], sm.output.get("placement"), scope_of(sm.params.get("launch")))
            return outcome
    return locked


def _note(lock: HostLock, log_path, placement, scope: str) -> None:
    """The lock in the job's placement file (its provenance) and, after a wait, in its log."""
    if lock.waited_for:
        with contextlib.suppress(OSError), open(log_path, "a") as log:
            log.write(f"# distbench: waited {lock.waited_s:.1f} s for the host before this job started, held by "
                      f"{'; then '.join(lock.waited_for)} (not in its measured time or its time limit)\n")
    if not placement or not Path(placement).is_file():
        return
    try:
        data = json.loads(Path(placement).read_text())
    except (OSError, ValueError):
        return
    if isinstance(data, dict):
        data.setdefault("provenance", {})["host_lock"] = lock.provenance(scope)
        atomic_write_json(placement, data)


def main(argv: list[str] | None = None) -> int:
    """`python -m distbench.launch.joblock --hold JOB RESULTS MODE`: a node's holder (hold_main)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--hold"] and len(argv) == 4:
        return hold_main(*argv[1:])
    print("usage: python -m distbench.launch.joblock --hold JOB RESULTS MODE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
