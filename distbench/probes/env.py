"""Environment probe: what software and hardware produced the numbers."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path


def _run(cmd: list[str], timeout: float = 20) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def git_commit(cwd=None) -> str | None:
    rev = _run(["git", "-C", str(cwd or Path.cwd()), "rev-parse", "HEAD"])
    if rev and _run(["git", "-C", str(cwd or Path.cwd()), "status", "--porcelain", "--untracked-files=no"]):
        rev += "-dirty"
    return rev


def gpu_identity(props) -> dict:
    """Name, UUID and PCI bus id from torch.cuda.get_device_properties (placement and env share it)."""
    pci = None
    if hasattr(props, "pci_bus_id"):
        pci = f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
    return {"name": props.name, "uuid": str(getattr(props, "uuid", "")) or None, "pci_bus_id": pci}


def collect_env(workdir=None) -> dict:
    import torch
    import torch.distributed as dist

    env = {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "nccl_version": None,
        "nccl_available": dist.is_nccl_available(),
        "gloo_available": dist.is_gloo_available(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu_count": 0,
        "gpus": [],
        "driver": None,
        "git_commit": git_commit(workdir),
        "job_env": {k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "TORCH_NCCL", "NVSHMEM_", "TORCH_SYMM"))},
    }
    if torch.cuda.is_available():
        try:
            env["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001 - a CUDA build without NCCL
            pass
        env["gpu_count"] = torch.cuda.device_count()
        for i in range(env["gpu_count"]):
            p = torch.cuda.get_device_properties(i)
            env["gpus"].append({
                "index": i, **gpu_identity(p),
                "memory_total_mib": p.total_memory // 2**20,
                "capability": f"{p.major}.{p.minor}",
                "multiprocessors": p.multi_processor_count,
            })
        env["driver"] = (_run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]) or "").split("\n")[0] or None
    return env
