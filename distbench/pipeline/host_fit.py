"""Whether the plan can run on this host, checked before any job starts (rules/common.smk).

Which jobs run here: every one-node job (torchrun --standalone), and every agent of a multi-node job
or a node-pair round started by the local launcher (cluster.launcher local, or auto outside a SLURM
allocation: every agent on this host over loopback, whatever cluster.nodes says), simulated nodes
included (a family that places its own jobs says which of its agents run here: its manifest's
host_placement). The agents srun or ssh start run on other machines and are not held to this one.

Limits, for the jobs that run here:
- NCCL: every NCCL job needs a GPU per rank. With `gpus` declared (not auto), the GPUs this host
  has are detected too; declaring more than it has would plan NCCL jobs that fail at their first
  line ("backend nccl needs CUDA"). The local launcher's agents of one job all number their GPUs
  from 0 (LOCAL_RANK), so a multi-node NCCL job on it puts two ranks on one GPU, which NCCL refuses.
- Gloo: ranks run on CPU cores. Oversubscription rule: up to GLOO_RANKS_PER_CORE ranks per core
  (and never fewer than GLOO_MIN_RANKS ranks in all) run, named in the plan as a smoke test, since
  ranks then time-share the cores (distbench.core.section.oversubscribed marks their rows so);
  beyond that a job is refused: 1,024 ranks on 2 cores would only queue for the cores (and hold a
  Python + torch process each in memory). The default config's Gloo jobs (6 ranks) run on 2 cores.
  The ranks of a family that places its own jobs are all its agents' on this host (nodes x ranks
  per node).
- Memory: each job's processes (below) and buffers (its family's manifest's host_needs, or
  host_placement) within MEMORY_SHARE of this host's memory (the least of MemTotal and the cgroup's
  limit), and an NCCL job's buffers within that share of the smallest GPU's memory when nvidia-smi
  can say. Capacity, not what is free now: a run waiting for the host lock
  (distbench.launch.hostlock) must not be refused for the memory of the run it waits for. A family
  without the hook (a model's weights and activations, which a family may itself measure) counts
  its processes only.

A plan meant for other machines is not held to this host: cluster.other_host: true, or a cluster
executor (snakemake --profile profiles/slurm). A dry run shows the plan with the problem named
(planning for another machine is a use case); a real run stops before its first job (the
Snakefile's onstart hook, where the executor is known).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from distbench.core.manifest import HostNeed
from distbench.core.units import human_bytes
from distbench.launch.cluster import job_layout, resolve_launcher
from distbench.pipeline.families import manifests
from distbench.pipeline.hooks import resolve
from distbench.pipeline.plan import detect_gpus

GLOO_RANKS_PER_CORE = 4
GLOO_MIN_RANKS = 8

MiB = 2**20
# Memory, measured as peaks: on CPU (torch 2.13, 2 Gloo ranks, RSS through RUSAGE_CHILDREN) and on 2
# H200s (torch 2.11, NCCL, nvidia-smi's used memory every 50 ms). A rank after importing
# torch and joining its process group holds 228 MiB, a torchrun agent 221 MiB: PROCESS_BYTES each.
PROCESS_BYTES = 240 * MiB
# An NCCL rank's host memory beside that: the CUDA context and libraries it maps (1.0-1.1 GiB in all).
CUDA_PROCESS_BYTES = 1024 * MiB
# On each GPU beside the buffers: the CUDA context, NCCL's own buffers and the caching allocator's
# slack (1,461 MiB at 2 ranks; NCCL's buffers grow with its peers and channels).
GPU_RESERVE_BYTES = 2048 * MiB
# The share of this host's (or a GPU's) memory one job may plan to use: the estimate above is of
# measured peaks; the OS, Snakemake and the page cache need the rest.
MEMORY_SHARE = 0.8


def gloo_rank_limit(cores: int) -> int:
    """The most Gloo ranks one job may put on a host of `cores` cores."""
    return max(GLOO_MIN_RANKS, GLOO_RANKS_PER_CORE * max(cores, 1))


@dataclass(frozen=True)
class HostFit:
    cores: int
    problems: list[str] = field(default_factory=list)  # what cannot run here, and what fits
    oversubscribed: list[str] = field(default_factory=list)  # allowed, named in the plan and report

    def message(self) -> str:
        return ("distbench: this plan cannot run on this host:\n  - " + "\n  - ".join(self.problems)
                + "\nIf the plan is meant for other machines, set cluster.other_host: true (or start multi-node "
                  "jobs on them: cluster.launcher ssh or srun, or a cluster executor: --profile profiles/slurm).")


# --- this host's memory --------------------------------------------------------------------------

CGROUP_MEMORY = "memory"  # the cgroup controller (its files memory.max, ...): not a family name


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2's "max": no limit


def _cgroup_limit(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = Path("/sys/fs/cgroup")) -> int | None:
    """The memory limit of this process's cgroup, the least over it and its ancestors; None without
    one. It reads v2 memory.max, v1 memory.limit_in_bytes (cgroup files: not a family name)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: one unified hierarchy
            base, name = root, f"{CGROUP_MEMORY}.max"
        elif CGROUP_MEMORY in controllers.split(","):
            base, name = root / CGROUP_MEMORY, f"{CGROUP_MEMORY}.limit_in_bytes"
        else:
            continue
        here = base / path.lstrip("/")
        for d in (here, *here.parents):
            limits.append(_read_int(d / name))
            if d == base:
                break
    limits = [n for n in limits if n is not None and n < 2**60]  # v1 writes ~2^63 for no limit
    return min(limits) if limits else None


def host_memory() -> tuple[int, str] | None:
    """(bytes, where from): the least of MemTotal and this process's cgroup limit; None when
    neither can be read (then no memory check)."""
    total = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        total = None
    limit = _cgroup_limit()
    if limit is not None and (total is None or limit < total):
        return limit, f"the cgroup's memory limit, {human_bytes(limit)}"
    return (total, f"MemTotal, {human_bytes(total)}") if total else None


def gpu_memory() -> tuple[int, str] | None:
    """(bytes, where from): the smallest GPU's memory as nvidia-smi reports it; None when unknown."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        query = "--query-gpu=memory.total"  # nvidia-smi's field: not a family name
        out = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    mib = [int(v) for v in out.stdout.split() if v.strip().isdigit()]
    if out.returncode != 0 or not mib:
        return None
    return min(mib) * MiB, f"the smallest GPU's {human_bytes(min(mib) * MiB)} (nvidia-smi)"


# --- what a job needs ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Need:
    """One job's processes here and its buffers per rank (its family's HostNeed)."""
    family: str
    backend: str
    world_size: int
    ranks: int  # ranks on this host
    agents: int  # torchrun agents on this host
    buffers: float = 0.0  # per rank, above its process (on the GPU under NCCL)
    at: str = ""  # the size and op of the largest buffers, in words
    # buffers per rank were the job's largest size this one (None: no buffers estimated), for what fits
    at_size: Callable[[int], float] | None = field(default=None, compare=False)
    largest: int = 0  # the job's largest size
    keys: str = ""  # the config keys of its sizes, named by "What fits" (host memory)
    gpu_keys: str = ""  # the same, against a GPU's memory
    what: str = ""  # how the messages name its jobs ("": its backend, family and world size)
    # the config keys that set how many agents run here, for a family that places its own jobs ("":
    # placed by world size)
    spread: str = ""

    @classmethod
    def of(cls, family: str, backend: str, world_size: int, ranks: int, agents: int, need: HostNeed) -> Need:
        return cls(family, backend, world_size, ranks, agents, need.buffers, need.at, need.at_size, need.largest,
                   need.keys, need.gpu_keys, need.what, need.spread)

    @property
    def process_bytes(self) -> int:
        return PROCESS_BYTES + (CUDA_PROCESS_BYTES if self.backend == "nccl" else 0)

    def host_bytes_at(self, buffers: float) -> float:
        on_host = 0.0 if self.backend == "nccl" else buffers
        return self.agents * PROCESS_BYTES + self.ranks * (self.process_bytes + on_host)

    @property
    def host_bytes(self) -> float:
        return self.host_bytes_at(self.buffers)

    @property
    def gpu_bytes(self) -> float:
        return self.buffers + GPU_RESERVE_BYTES if self.backend == "nccl" else 0.0

    def largest_fitting(self, fits: Callable[[float], bool]) -> int:
        """The largest size (bytes, below the job's largest) whose buffers `fits` accepts; 0: none."""
        if self.at_size is None or not fits(self.at_size(1)):
            return 0
        lo, hi = 1, max(self.largest, 1)
        while hi - lo > max(1, lo // 100):  # within 1%: what a message says
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(self.at_size(mid)) else (lo, mid)
        return lo


def _placement(config: dict, backend: str, world_size: int, gpus: int, launcher: str):
    """(ranks here, agents here, the local launcher's multi-node layout or None); ranks 0: elsewhere."""
    layout, _ = job_layout(world_size, backend, gpus, config["cluster"])
    if layout is None or layout.nodes == 1:
        return world_size, 1, None
    if launcher == "local":
        return world_size, layout.nodes, layout
    return 0, 0, None  # srun or ssh agents: other machines


def needs(config: dict, plan: dict, launcher: str | None = None) -> tuple[list[Need], list[str]]:
    """What each job puts on this host, and problems of placement (NCCL ranks that would share a GPU
    under the local launcher): every family with jobs in the plan, placed by world size with its
    buffers as its manifest's host_needs says, or as its host_placement says where it places its own."""
    launcher = launcher or resolve_launcher(config["cluster"]["launcher"])
    out, problems, shared = [], [], set()
    own = [m for m in manifests() if m.plan and m.host_placement]
    for m in manifests():
        if not m.plan or m.host_placement:
            continue
        for j in plan["jobs"].get(m.name) or []:
            ranks, agents, layout = _placement(config, j.backend, j.world_size, plan["gpus"], launcher)
            if not ranks:
                continue
            if layout is not None and j.backend == "nccl":
                shared.add((j.world_size, layout.nodes, layout.ranks_per_node))
            need = resolve(m.host_needs)(config, plan, j) if m.host_needs else HostNeed()
            out.append(Need.of(m.name, j.backend, j.world_size, ranks, agents, need))
    for ws, nodes, per in sorted(shared):
        problems.append(f"NCCL world size {ws} as {nodes} agents of {per} rank(s) through the local launcher: every "
                        f"agent runs on this host and numbers its GPUs from 0, so ranks would share GPUs 0-{per - 1} "
                        "(NCCL refuses that). What fits: world sizes up to the GPUs of one node, or cluster.launcher "
                        "ssh or srun for other hosts")
    for m in own:
        found, said = resolve(m.host_placement)(config, plan, launcher)
        problems += said
        out += [Need.of(m.name, n.backend, n.world_size, n.ranks, n.agents, n) for n in found]
    return out, problems


# --- the check -----------------------------------------------------------------------------------

def _what(n: Need) -> str:
    if n.spread:  # a family placing its own jobs: its agents are nodes
        return f"{n.what} ({n.backend}, {n.agents} nodes x {n.ranks // max(n.agents, 1)} rank(s) on this host)"
    return n.what or f"{n.backend.upper() if n.backend == 'nccl' else 'Gloo'} {n.family} job at world size {n.world_size}"


def _largest_each(found: list[Need], key) -> list[Need]:
    """One Need per family, backend and world size (the several models of one family at one world size
    are one line), the largest by `key`, largest first."""
    best = {}
    for n in found:
        k = (n.family, n.backend, n.world_size)
        if k not in best or key(n) > key(best[k]):
            best[k] = n
    return sorted(best.values(), key=lambda n: -key(n))


def _memory_problems(found: list[Need], host: tuple[int, str] | None, gpu: tuple[int, str] | None) -> list[str]:
    problems = []
    if host is not None:
        budget = MEMORY_SHARE * host[0]
        over = _largest_each([n for n in found if n.host_bytes > budget], lambda n: n.host_bytes)
        for n in over[:3]:  # the largest few: one line each
            on_host = n.buffers and n.backend != "nccl"
            bufs = f" + {human_bytes(n.buffers)} of buffers ({n.at})" if on_host else ""
            line = (f"{_what(n)}: about {human_bytes(n.host_bytes)} of this host's memory ({n.ranks} rank(s) x "
                    f"({human_bytes(n.process_bytes)} of process{bufs}) + {n.agents} agent(s) x "
                    f"{human_bytes(PROCESS_BYTES)}), above {MEMORY_SHARE:.0%} of {host[1]}")
            size = n.largest_fitting(lambda b: n.host_bytes_at(b) <= budget) if on_host else 0
            per_node = PROCESS_BYTES + n.ranks // max(n.agents, 1) * (n.process_bytes + (n.buffers if on_host else 0))
            if n.spread and budget >= 2 * per_node:  # fewer nodes (each an agent and its ranks)
                line += (f". What fits: up to {int(budget // per_node)} nodes here ({n.spread})"
                         + (f", or sizes up to about {human_bytes(size)}" if size else ""))
            elif size:
                line += f". What fits: sizes up to about {human_bytes(size)} at this world size ({n.keys})"
            else:
                most = int((budget - n.agents * PROCESS_BYTES) / n.process_bytes)
                line += f". What fits: at most about {max(most, 0)} ranks per job here, before any buffer"
            problems.append(line)
        if len(over) > 3:
            problems.append(f"... and {len(over) - 3} more job(s) above it")
    if gpu is not None:
        budget = MEMORY_SHARE * gpu[0]
        over = _largest_each([n for n in found if n.backend == "nccl" and n.gpu_bytes > budget], lambda n: n.gpu_bytes)
        for n in over[:3]:
            line = (f"{_what(n)}: about {human_bytes(n.gpu_bytes)} per GPU ({n.at}, with {human_bytes(GPU_RESERVE_BYTES)} "
                    f"for CUDA and NCCL), above {MEMORY_SHARE:.0%} of {gpu[1]}")
            size = n.largest_fitting(lambda b: b + GPU_RESERVE_BYTES <= budget)
            if size:
                line += f". What fits: sizes up to about {human_bytes(size)} ({n.gpu_keys})"
            problems.append(line)
        if len(over) > 3:
            problems.append(f"... and {len(over) - 3} more NCCL job(s) above it")
    return problems


_UNSET = object()


def host_fit(config: dict, plan: dict, cores: int | None = None, detected: tuple[int, str] | None = None,
             memory=_UNSET, gpu_mem=_UNSET, launcher: str | None = None) -> HostFit:
    """The plan against this host's cores, GPUs and memory (`detected`, as distbench.pipeline.plan.detect_gpus
    gives it, looked up only when gpus is declared and NCCL jobs are planned; `memory` and `gpu_mem`
    as host_memory and gpu_memory give them, None: unknown; `launcher`: cluster.launcher resolved)."""
    cores = cores or os.cpu_count() or 1
    found, problems = needs(config, plan, launcher)
    crowded = []
    nccl = sorted({n.world_size for n in found if n.backend == "nccl"})
    if nccl and config["gpus"] != "auto":
        have, how = detected if detected is not None else detect_gpus()
        if int(config["gpus"]) > have:
            fits = "gpus=auto (Gloo only)" if have == 0 else f"gpus={have} or gpus=auto"
            problems.insert(0, f"gpus={config['gpus']} is declared but this host has {have} GPU(s) ({how}): "
                               f"NCCL jobs at world sizes {nccl} would fail here. What fits: {fits}")
    per_host = {}
    for n in found:
        if n.backend == "gloo":
            per_host.setdefault(n.ranks, []).append(n)
    limit = gloo_rank_limit(cores)
    over = sorted({n.world_size for r, ns in per_host.items() if r > limit for n in ns if not n.spread})
    if over:
        problems.append(f"Gloo world sizes {over}: more ranks than the {limit} this host's {cores} core(s) run "
                        f"({GLOO_RANKS_PER_CORE} per core, at least {GLOO_MIN_RANKS}; a multi-node job's ranks all "
                        f"count where the local launcher starts every agent here). What fits: world sizes up to {limit}")
    for n in (n for ns in per_host.values() for n in ns if n.spread and n.ranks > limit):
        problems.append(f"{n.what}: {n.agents} nodes x {n.ranks // n.agents} rank(s), all on this host, are {n.ranks} "
                        f"Gloo ranks, more than the {limit} its {cores} core(s) run. What fits: up to "
                        f"{limit // max(n.ranks // n.agents, 1)} nodes here ({n.spread})")
    for ranks in sorted(r for r in per_host if cores < r <= limit):
        sizes = sorted({n.world_size for n in per_host[ranks] if not n.spread})
        if sizes:
            crowded.append(f"Gloo {ranks} ranks on {cores} core(s) (world size {sizes}): oversubscribed, "
                           f"allowed up to {limit} ranks here; a smoke test, scaling not judged")
    memory = host_memory() if memory is _UNSET else memory
    if gpu_mem is _UNSET:
        gpu_mem = gpu_memory() if any(n.backend == "nccl" for n in found) else None
    # a job refused for its ranks already is not named again for their memory
    problems += _memory_problems([n for n in found if not (n.backend == "gloo" and n.ranks > limit)], memory, gpu_mem)
    return HostFit(cores, problems, crowded)


def other_host_reason(config: dict, cluster_executor: bool) -> str | None:
    """Why the plan is not held to this host (None: it is). cluster.nodes alone is none: the local
    launcher starts every agent here, and one-node jobs run here under every launcher."""
    if config["cluster"].get("other_host"):
        return "cluster.other_host is true"
    if cluster_executor:
        return "a cluster executor runs the jobs"
    return None
