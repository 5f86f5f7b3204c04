"""Jobs beyond one host: how many nodes a job spans, how its torchrun agents start, and what it
asks a SLURM cluster for. Family-agnostic: the plan, the launcher and the rules use it.

A job of W ranks runs on one node when W fits `ranks_per_node` (the GPUs per node under NCCL);
otherwise on the fewest nodes n <= cluster.nodes with W divisible by n and W / n fitting a node,
one torchrun agent per node, joined by a c10d rendezvous on the first node (torchrun's
multi-node recipe: --nnodes, --rdzv-backend=c10d, --rdzv-endpoint, --rdzv-id).
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Layout:
    """Where one job's ranks run: `nodes` agents of `ranks_per_node` ranks each."""

    nodes: int
    ranks_per_node: int

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node


def node_limit(backend: str, gpus: int, cluster: dict) -> int | None:
    """Ranks one node takes (None: no limit): cluster.ranks_per_node, else the GPUs under NCCL."""
    if cluster["ranks_per_node"] != "auto":
        limit = int(cluster["ranks_per_node"])
        return min(limit, gpus) if backend == "nccl" else limit
    return gpus if backend == "nccl" else None


def job_layout(world_size: int, backend: str, gpus: int, cluster: dict) -> tuple[Layout | None, str | None]:
    """The job's layout, or None and why it cannot be placed on this cluster."""
    limit = node_limit(backend, gpus, cluster)
    if limit is None or world_size <= limit:
        return Layout(1, world_size), None
    for nodes in range(2, cluster["nodes"] + 1):
        if world_size % nodes == 0 and world_size // nodes <= limit:
            return Layout(nodes, world_size // nodes), None
    per = f"{limit} GPU(s)" if backend == "nccl" and cluster["ranks_per_node"] == "auto" else f"{limit} rank(s)"
    return None, (f"{world_size} ranks do not split evenly over at most {cluster['nodes']} node(s) of {per} "
                  "(cluster.nodes, cluster.ranks_per_node, gpus)")


@dataclass(frozen=True)
class Launch:
    """How a job starts its agents; what reaches the launcher through the rule's params."""

    nodes: int = 1
    ranks_per_node: int = 1
    launcher: str = "auto"
    hosts: tuple[str, ...] = field(default=())
    rdzv_port: int = 29400

    @classmethod
    def from_params(cls, params: dict | None, world_size: int) -> "Launch":
        if not params:
            return cls(1, world_size)
        return cls(params["nodes"], params["ranks_per_node"], params["launcher"], tuple(params["hosts"]),
                   params["rdzv_port"])


def launch_params(layout: Layout, cluster: dict) -> dict:
    return {"nodes": layout.nodes, "ranks_per_node": layout.ranks_per_node, "launcher": cluster["launcher"],
            "hosts": list(cluster["hosts"]), "rdzv_port": cluster["rdzv_port"]}


def resolve_launcher(launcher: str, env: dict | None = None) -> str:
    """auto: srun inside a SLURM allocation, else every agent on this host."""
    env = os.environ if env is None else env
    if launcher != "auto":
        return launcher
    return "srun" if env.get("SLURM_JOB_ID") else "local"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slurm_first_node_addr(env: dict | None = None) -> str:
    """The address of the allocation's first node (the rendezvous host): its NodeAddr as
    `scontrol show node` reports it (a hostname or an IP), so it works wherever SLURM's own
    daemons reach the node."""
    env = os.environ if env is None else env
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise RuntimeError("launcher srun: SLURM_JOB_NODELIST is not set (not inside a SLURM allocation)")
    first = subprocess.run(["scontrol", "show", "hostnames", nodelist], check=True, capture_output=True,
                           text=True, timeout=30).stdout.split()[0]
    shown = subprocess.run(["scontrol", "show", "node", first, "-o"], check=True, capture_output=True,
                           text=True, timeout=30).stdout
    for item in shown.split():
        if item.startswith("NodeAddr="):
            return item.split("=", 1)[1]
    return first


def host_address(host: str) -> str:
    """A cluster.hosts entry as an address: `user@node1` logs in as user through ssh, and the
    rendezvous (torchrun's --rdzv-endpoint, which takes no user) is on node1."""
    return host.rpartition("@")[2]


def rendezvous(launch: Launch, launcher: str) -> tuple[str, int]:
    """(host, port) of the c10d rendezvous: on the first node, a free port when it is this host."""
    if launcher == "local":
        return "127.0.0.1", free_port()
    if launcher == "srun":
        # The batch script, and so this launcher, runs on the allocation's first node.
        return slurm_first_node_addr(), free_port()
    return host_address(launch.hosts[0]), launch.rdzv_port


def agent_commands(python: str, module: str, args: list[str], launch: Launch, run_id: str, env: dict,
                   cwd: str, limit_s: float | None = None) -> list[list[str]]:
    """The argument lists (never shell strings) that start one job's torchrun agents: one for a
    one-node job; for several nodes, one per node (local, ssh) or one srun that starts them all.
    limit_s: on ssh, how long the remote agent may run at most (see below)."""
    run = [python, "-m", "torch.distributed.run"]
    tail = ["-m", module, *args]
    if launch.nodes == 1:
        return [[*run, "--standalone", "--nnodes=1", f"--nproc_per_node={launch.ranks_per_node}", *tail]]
    launcher = resolve_launcher(launch.launcher, env)
    host, port = rendezvous(launch, launcher)
    agent = [*run, f"--nnodes={launch.nodes}", f"--nproc_per_node={launch.ranks_per_node}",
             "--rdzv-backend=c10d", f"--rdzv-endpoint={host}:{port}", f"--rdzv-id={run_id}", *tail]
    if launcher == "local":
        return [agent] * launch.nodes
    if launcher == "srun":
        # One task (agent) per node; --kill-on-bad-exit ends the step when one agent fails,
        # --export=ALL carries the job's environment (NCCL settings) to every node, and --overlap
        # lets the step share the allocation with the step this launcher itself runs in (the
        # Snakemake SLURM plugin starts each job under `srun -n1`).
        return [["srun", f"--nodes={launch.nodes}", f"--ntasks={launch.nodes}", "--ntasks-per-node=1",
                 "--kill-on-bad-exit=1", "--export=ALL", "--overlap", *agent]]
    # ssh passes one string to the remote shell: every argument quoted, the environment the job
    # needs (what differs from this host's) set through env(1), the working directory first.
    job_vars = [f"{k}={v}" for k, v in sorted(env.items()) if k.startswith(("NCCL_", "TORCH_", "NVSHMEM_", "OMP_", "PYTHON", "DISTBENCH_"))]
    # -tt: the agent runs on a pseudo-terminal, so when the launcher ends the local ssh client (the
    # job's limit, an interrupt, a rank failed elsewhere) sshd hangs the terminal up and the agent
    # and its ranks get SIGHUP; without a terminal they outlived the job (tests/launch/test_ssh.py, a real
    # sshd). timeout(1), in the foreground so it gets that SIGHUP too: the bound where the connection
    # itself is lost and no hang-up comes.
    bound = ["timeout", "--foreground", "-k", "10", str(max(1, int(limit_s)))] if limit_s else []
    remote = f"cd {shlex.quote(cwd)} && " + shlex.join([*bound, "env", *job_vars, *agent])
    return [["ssh", "-tt", "-o", "BatchMode=yes", h, remote] for h in launch.hosts[: launch.nodes]]


# What srun needs to find its allocation; the rest of SLURM_* describes the step this launcher runs
# in (one node, one task: the plugin's `srun -n1`), and srun would take it as the allocation.
_SLURM_KEEP = {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CONF", "SLURM_CLUSTER_NAME"}


def agent_environment(commands: list[list[str]], env: dict) -> dict:
    """The environment the agents' commands run in: the job's own, less the SLURM step variables
    when srun starts the agents (the jobstep plugin does the same for its own srun)."""
    if commands[0][0] != "srun":
        return env
    return {k: v for k, v in env.items() if not k.startswith(("SLURM_", "SRUN_", "SBATCH_")) or k in _SLURM_KEEP}


def slurm_resources(layout: Layout, backend: str, timeout_s: int, cluster: dict) -> dict:
    """What one benchmark job asks SLURM for (snakemake-executor-plugin-slurm's resource names):
    its nodes, exclusively (two benchmark jobs must never share a node and disturb each other),
    one task per node (the torchrun agent), GPUs per node under NCCL, the job's own time limit plus
    a margin; partition and account from the config."""
    # Partition and account go here rather than as slurm_partition/slurm_account, which the
    # plugin would otherwise try to guess (sacctmgr) when they are empty. Memory is the plugin's
    # own resource (it refuses --mem here): cluster.mem_mb per node, 0 = the partition's default.
    extra = ["--exclusive", "--ntasks-per-node=1"]
    extra += [f"--partition={cluster['partition']}"] if cluster["partition"] else []
    extra += [f"--account={cluster['account']}"] if cluster["account"] else []
    res = {"nodes": layout.nodes, "cpus_per_task": layout.ranks_per_node,
           "runtime": -(-timeout_s // 60) + cluster["runtime_margin_min"], "mem_mb": cluster["mem_mb"],
           "slurm_extra": " ".join(extra)}
    if backend == "nccl":
        # gres is per node; tasks_per_gpu=0 stops the plugin from forcing --ntasks-per-gpu, which
        # would split the GPUs between tasks (plugin issues #316, #459)
        res.update(gres=f"gpu:{layout.ranks_per_node}", tasks_per_gpu=0)
    else:
        res.update(tasks=layout.nodes)
    return res
