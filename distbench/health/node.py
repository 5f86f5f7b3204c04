"""The health check on every node of a multi-node run: one reading per node, started through the
cluster launcher the benchmark jobs use (distbench.launch.cluster: srun inside a SLURM allocation,
ssh to cluster.hosts, or local processes), merged into one table with the comparison across nodes.

Run on each node (what the launcher starts; torch-free):
    python -m distbench.health.node --gpus 8 --load-s 5 --out-dir DIR
reads this node (distbench.health.readings.read_health, named by health.node_name) and writes
DIR/node<k>.csv atomically, k its node index: DISTBENCH_NODE_INDEX (set per process by the local and
ssh launchers), else SLURM_NODEID (srun's task on the k-th node of the step).

One node (the default) is read in the rule's own process: no extra process. So is a run
whose launcher is local: its "nodes" are all this host, and reading it twice at once would only
double the load on its GPUs. A node that has not written its reading when the time limit is up (or
whose process failed) gets rows that say so, naming it: a node that cannot be read is a finding of
its own, and the run goes on.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distbench.launch.cluster import agent_environment, host_address, resolve_launcher
from distbench.launch.processes import wait_all
from distbench.health.readings import FAILING, NODE, HealthRow, _na_rows, read_health
from distbench.health.load import LOAD_START_TIMEOUT_S
from distbench.health.table import (across_nodes, check_after, check_before, read_health_csv, rows_of,
                                          write_health)

NODE_READ = "node_read"  # the item of a node whose reading did not come back
SAME_MACHINE = "same_machine"  # the item of nodes that answered from one machine
MARGIN_S = 60  # starting Python and the launcher, dmesg, NVML's own calls on every GPU
# Test-only (never set in a real run): the node of this index sleeps instead of reading.
TEST_HANG_ENV = "DISTBENCH_TEST_HEALTH_HANG"


def limit_s(load_s: float) -> float:
    """How long every node's reading may take: the load (and its start) plus a margin."""
    return MARGIN_S + load_s + (LOAD_START_TIMEOUT_S if load_s > 0 else 0)


def node_index(env: dict | None = None) -> int:
    env = os.environ if env is None else env
    return int(env.get("DISTBENCH_NODE_INDEX") or env.get("SLURM_NODEID") or 0)


def _slurm_names(env: dict) -> list[str]:
    """The allocation's node names, in SLURM's order (that of SLURM_NODEID)."""
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        return []
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.split() if out.returncode == 0 else []


def node_names(nodes: int, launcher: str, hosts, env: dict) -> list[str]:
    """What each node is called in the rows of a node that did not answer (one that answers names
    itself): local "nodes" share this host, so they are node0, node1, ... (as the nodes family
    numbers them); ssh nodes are cluster.hosts; srun nodes are the allocation's."""
    if launcher == "local":
        names = []
    elif launcher == "ssh":
        names = [host_address(h) for h in hosts]  # user@node1 is node1
    else:
        names = _slurm_names(env)
    return [names[k] if k < len(names) else f"node{k}" for k in range(nodes)]


def node_commands(python: str, args: list[str], nodes: int, launcher: str, hosts, names: list[str], env: dict,
                  cwd: str, limit_s: float | None = None) -> list[tuple[list[str], dict]]:
    """(argument list, environment) of each process that reads the nodes: one per node (local, ssh)
    or one srun that starts one task per node. Argument lists only: no config value reaches a shell
    except through shlex quoting on ssh's remote side. limit_s: on ssh, the remote reading runs
    under timeout(1) too, since killing the local ssh client at the limit need not end it there."""
    entry = [python, "-m", "distbench.health.node", *args]
    if launcher == "local":
        return [(entry, {**env, "DISTBENCH_NODE_INDEX": str(k), "DISTBENCH_NODE_NAME": names[k]})
                for k in range(nodes)]
    if launcher == "srun":
        # As the benchmark agents' srun (distbench.launch.cluster.agent_commands) but without
        # --kill-on-bad-exit: a node whose reading fails must not end the other nodes' readings.
        cmd = ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1", "--export=ALL", "--overlap",
               *entry]
        return [(cmd, agent_environment([cmd], env))]
    if launcher != "ssh":
        raise ValueError(f"unknown launcher {launcher!r}")
    keep = [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith(("PYTHON", "DISTBENCH_"))]
    bound = ["timeout", "-k", "5", str(max(1, int(limit_s)))] if limit_s else []
    return [(["ssh", "-o", "BatchMode=yes", host,
              f"cd {shlex.quote(cwd)} && " + shlex.join([*bound, "env", *keep, f"DISTBENCH_NODE_INDEX={k}", *entry])], env)
            for k, host in enumerate(list(hosts)[:nodes])]


def same_machine_rows(machines: dict[str, list[str]], launcher: str) -> list[HealthRow]:
    """A failing row for each machine that answered for more than one node (ssh, srun): cluster.hosts
    naming one host twice (under two names), so the run's "nodes" share one machine's GPUs and no
    figure across them is what the plan says. The local launcher's nodes share this host by design."""
    if launcher == "local":
        return []
    return [HealthRow(machine, NODE, SAME_MACHINE, " = ".join(nodes), "one node per machine", FAILING,
                      f"nodes {' and '.join(nodes)} answered from one machine ({machine}): their ranks share "
                      "its GPUs, so no figure over those nodes is a multi-node one")
            for machine, nodes in machines.items() if len(nodes) > 1]


def _tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def unread_rows(name: str, why: str, expected_gpus: int | None) -> list[HealthRow]:
    """A node whose reading did not come back: failing (no benchmark figure from it can be vouched
    for), every item not available, each saying why."""
    return [HealthRow(name, NODE, NODE_READ, "no", "yes", FAILING, why), *_na_rows(name, why, expected_gpus)]


def read_nodes(nodes: int, launcher: str, hosts, expected_gpus: int | None, load_s: float, work_dir,
               timeout_s: float | None = None, env: dict | None = None) -> list[HealthRow]:
    """Every node's reading (launcher already resolved: local, srun or ssh), the rows of any node that
    did not answer within timeout_s, and the comparison across nodes."""
    env = dict(os.environ if env is None else env)
    timeout_s = limit_s(load_s) if timeout_s is None else timeout_s
    work = Path(tempfile.mkdtemp(prefix="nodes-", dir=work_dir))
    try:
        names = node_names(nodes, launcher, hosts, env)
        args = ["--gpus", str(expected_gpus or 0), "--load-s", str(load_s), "--out-dir", str(work)]
        cmds = node_commands(sys.executable, args, nodes, launcher, hosts, names, env, os.getcwd(), limit_s=timeout_s)
        procs = []
        for k, (cmd, cmd_env) in enumerate(cmds):
            with open(work / f"launch{k}.log", "w") as log:
                procs.append(subprocess.Popen(cmd, env=cmd_env, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
        late = wait_all(procs, timeout_s)
        rows: list[HealthRow] = []
        machines: dict[str, list[str]] = {}  # the name a node answered with -> the nodes that did
        for k in range(nodes):
            path = work / f"node{k}.csv"
            if path.exists():
                mine = rows_of(read_health_csv(path))
                rows += mine
                if mine:
                    machines.setdefault(mine[0].host, []).append(names[k])
                continue
            k_proc = 0 if len(procs) == 1 else k  # srun: one process for every node
            log = work / f"launch{k_proc}.log"
            if procs[k_proc] in late:
                why = f"did not answer within {timeout_s:g} s (its reading was killed)"
            else:
                why = f"its reading ended (exit code {procs[k_proc].returncode}) without writing one"
            tail = _tail(log)
            rows += unread_rows(names[k], f"{names[k]} {why} through {launcher}" + (f": {tail}" if tail else ""),
                                expected_gpus)
        return rows + same_machine_rows(machines, launcher) + across_nodes(rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def read_run(nodes: int, launcher: str, hosts, expected_gpus: int | None, load_s: float, work_dir,
             env: dict | None = None) -> list[HealthRow]:
    """The health check's reading of the run's nodes (what the rules call)."""
    resolved = resolve_launcher(launcher, os.environ if env is None else env)
    if nodes <= 1 or resolved == "local":
        return read_health(expected_gpus, load_s)
    return read_nodes(nodes, resolved, hosts, expected_gpus, load_s, work_dir, env=env)


def check_run(phase: str, nodes: dict, expected_gpus: int | None, load_s: float, out_csv, before_csv=None,
              diff_csv=None) -> list[str]:
    """The health rules' work: read every node of the run (nodes: the plan's health_launch) and write
    health_before.csv, or health_after.csv and its differences from before; the lines for the log."""
    out = Path(out_csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = read_run(nodes["nodes"], nodes["launcher"], nodes["hosts"], expected_gpus, load_s, out.parent)
    lines = [f"{r.host} {r.gpu} {r.item}: {r.state} ({r.value}) {r.reason}" for r in rows]
    if phase == "before":
        check_before(out, rows)
        return lines
    diff = check_after(before_csv, out, diff_csv, rows)
    return lines + [f"{r.host} {r.gpu} {r.item}: {r.state} ({r.delta}) {r.reason}" for r in diff]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Read this node's hardware health (distbench.health.readings).")
    p.add_argument("--gpus", type=int, default=0, help="GPUs the plan uses per node (0: not configured)")
    p.add_argument("--load-s", type=float, default=0.0)
    p.add_argument("--out-dir", required=True)
    a = p.parse_args(argv)
    k = node_index()
    if os.environ.get(TEST_HANG_ENV) == str(k):
        time.sleep(3600)
    write_health(Path(a.out_dir) / f"node{k}.csv", read_health(a.gpus or None, a.load_s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
