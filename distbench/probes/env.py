"""Environment probe: what software and hardware produced the numbers."""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path

from distbench.launch.placement import gpu_identity
from distbench.core.provenance import JOB_ENV_PREFIXES, NOT_A_CHECKOUT, _run, git_commit  # noqa: F401 - recorded in env.json


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


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
        "nccl_version": None,  # the NCCL torch loaded (torch.cuda.nccl.version()); None without CUDA
        "nccl_available": dist.is_nccl_available(),
        "gloo_available": dist.is_gloo_available(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpu_count": 0,
        "gpus": [],
        "driver": None,
        "git_commit": git_commit(workdir),
        # Environment variables, not versions: NVIDIA images set NCCL_VERSION to the NCCL they ship, which
        # need not be the NCCL torch loads (that one is nccl_version above).
        "job_env": {k: v for k, v in os.environ.items() if k.startswith(JOB_ENV_PREFIXES)},
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
    env["compile"] = compile_support()
    return env


def compile_support() -> dict:
    """Whether torch.compile can run here (training.lm.compile): dynamo's own check and the Triton its
    GPU kernels need. On a GPU host it imports torch._dynamo, which also puts its bytecode in the run's
    cache where the environment keeps none (distbench.launch.pycache) before the first training job's
    DDP imports it (this probe runs beside the benchmark jobs there). On a CPU host, where this probe
    runs before the jobs and the import would add ~2 s to the run, dynamo is not asked (None)."""
    import torch
    from importlib import metadata

    supported = None
    if torch.cuda.is_available():
        try:
            import torch._dynamo

            supported = bool(torch._dynamo.is_dynamo_supported())
        except Exception:  # noqa: BLE001 - a torch without dynamo, or one that refuses this Python
            supported = False
    try:
        triton = metadata.version("triton")
    except metadata.PackageNotFoundError:
        triton = None
    return {"dynamo_supported": supported, "triton": triton}
