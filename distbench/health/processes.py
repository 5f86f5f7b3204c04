"""The compute processes NVML reports on each GPU, read before a check touches the GPUs.

A process left behind by the last job is the most common reason for a prolog check: it holds memory
the next job needs (an idle 60 GiB allocation gives the next job an out-of-memory error) or competes
for the SMs (a matmul neighbour halves a collective's bandwidth). NVML lists every process with a
CUDA context on a GPU (nvmlDeviceGetComputeRunningProcesses, with its pid and the memory it holds),
and an idle node has none: a reading taken before the health check or the gate starts any CUDA work
of its own sees only strangers, so any process listed there fails the node.

Caveats said where they are read: inside a container NVML gives the host's pids, which this process
may not be able to name (the name is then "" and the pid is still the one nvidia-smi shows on the
host); an MPS control daemon (nvidia-cuda-mps-server) is listed like any process: a node that runs
MPS on purpose should not be gated this way. Torch-free.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from distbench.probes.nvml import _call, _text

MIB = 1 << 20


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on one GPU."""
    gpu: str  # NVML index
    pid: int
    name: str  # NVML's process name, or /proc's command, "" when neither can be read
    used_memory_mib: float | None  # None where NVML does not give it (MIG, some drivers)


def _process_name(nv, pid: int) -> str:
    name = _text(_call(nv.nvmlSystemGetProcessName, pid))
    if name:
        return str(name)
    try:  # NVML cannot always name it (no permission): /proc can, when the pid is in our namespace
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def _own_pids() -> set[int]:
    """This process and its ancestors: the gate's supervisor and the reading's own process."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def compute_processes(nv, handles: dict) -> dict[str, list[GpuProcess]] | None:
    """{gpu index: [GpuProcess]} of every GPU in `handles` ({index: NVML handle}); None where NVML
    cannot list processes at all (the item is then "not available here"). `nv` is pynvml, guarded."""
    listed: dict[str, list[GpuProcess]] = {}
    fn = nv.first("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                  "nvmlDeviceGetComputeRunningProcesses")
    ours = _own_pids()
    for i, h in handles.items():
        procs = _call(fn, h)
        if procs is None:
            return None
        rows = []
        for p in procs:
            pid = int(getattr(p, "pid", 0) or 0)
            if pid in ours:
                continue
            mem = getattr(p, "usedGpuMemory", None)
            # NVML_VALUE_NOT_AVAILABLE is (unsigned long long)-1: no figure, not 16 EiB
            used = None if mem is None or mem >= (1 << 63) else round(mem / MIB, 1)
            rows.append(GpuProcess(str(i), pid, _process_name(nv, pid), used))
        listed[str(i)] = rows
    return listed


def describe(procs: list[GpuProcess]) -> str:
    """'pid 4242 python (61,440 MiB), pid 77 ? (memory not given)'."""
    def one(p: GpuProcess) -> str:
        mem = f"{p.used_memory_mib:,.0f} MiB" if p.used_memory_mib is not None else "memory not given"
        return f"pid {p.pid} {p.name or '?'} ({mem})"
    return ", ".join(one(p) for p in procs)
