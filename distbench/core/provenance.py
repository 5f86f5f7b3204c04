"""Which code made a result: the workflow checkout's git commit (the env probe records it once per
run; the launcher records it per benchmark job, for the report's cache state)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

NOT_A_CHECKOUT = "not a git checkout"
# Variables that point git at another repository than the one enclosing the directory asked about.
_GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


def _run(cmd: list[str], timeout: float = 20, env: dict | None = None) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


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

# The environment variables recorded with every run (probes' env.json, the report's environment table).
JOB_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL", "NVSHMEM_", "TORCH_SYMM")
