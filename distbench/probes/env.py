"""Environment probe: what software and hardware produced the numbers."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from distbench.placement import gpu_identity


def _run(cmd: list[str], timeout: float = 20, env: dict | None = None) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
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


NOT_A_CHECKOUT = "not a git checkout"
# Job environment variables the env probe records (shown in the report as variables, never as versions).
JOB_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "NVSHMEM_", "TORCH_SYMM")
# Variables that point git at another repository than the one enclosing the directory asked about.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


def git_commit(cwd=None) -> str | None:
    """HEAD of the workflow directory's own checkout (with "-dirty" when tracked files changed).

    Only a directory that IS a repository's top level counts: a copy of the workflow without .git that
    sits somewhere inside another repository records "not a git checkout", not that repository's
    commit. None when that cannot be told: git missing, git refusing a checkout it finds there (e.g.
    one owned by another user), or a checkout without a commit yet.
    """
    d = Path(cwd or Path.cwd()).resolve()
    if not shutil.which("git"):
        return None
    env = {k: v for k, v in os.environ.items() if k not in _GIT_REDIRECTS}

    def git(*args):
        return _run(["git", "-C", str(d), *args], env=env)

    top = git("rev-parse", "--show-toplevel")
    if not top:
        return None if (d / ".git").exists() else NOT_A_CHECKOUT
    if Path(top).resolve() != d:
        return NOT_A_CHECKOUT
    rev = git("rev-parse", "--verify", "--quiet", "HEAD")
    if rev and git("status", "--porcelain", "--untracked-files=no"):
        rev += "-dirty"
    return rev or None


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
    return env
