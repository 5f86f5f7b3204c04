"""A bytecode cache for every process of a run when the Python environment cannot keep its own.

Python compiles a module's source to bytecode at import and writes it to the `__pycache__` beside the
source; where that directory is read-only (a container image, a shared module or conda install, a
site-packages owned by another user) and holds no bytecode, it compiles every module again in every
process. On the lent 2x H200 image (torch 2.11, a read-only venv) that was 6.5 s of each training rank's
12 s: `import torch` 3.5 s and `import torch._dynamo` (which DDP's constructor imports) 3.8 s, mostly
`builtins.compile` (benchmarks/investigations/quick-time-2026-11-29). Each benchmark job, probe and rule
script is a new process, so a run paid it once per process.

Where torch's own bytecode is not kept beside its source (its `__pycache__` is read-only, or writing is
off: PYTHONDONTWRITEBYTECODE, which container images often set to keep the image small, as the lent
image does), the run points PYTHONPYCACHEPREFIX (Python 3.8+) at a cache of its own
($XDG_CACHE_HOME/distbench/pycache, else ~/.cache/distbench/pycache) and lets its processes write there
(PYTHONDONTWRITEBYTECODE dropped for them: nothing is ever written beside the installed sources): the
first process fills the cache, the others read it. Python checks each cached file against its source's
mtime and size, as it does in `__pycache__`. Nothing changes where the environment keeps its own
bytecode (the prefix would only make a first run compile it all again), where the user set
PYTHONPYCACHEPREFIX, or with DISTBENCH_PYCACHE=0. Torch-free: it looks torch up without importing it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"
NO_WRITE_ENV = "PYTHONDONTWRITEBYTECODE"
OPT_OUT_ENV = "DISTBENCH_PYCACHE"  # 0: leave Python's bytecode settings as they are


def cache_dir(env) -> Path:
    """The run's bytecode cache: $XDG_CACHE_HOME/distbench/pycache, else ~/.cache/distbench/pycache."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "distbench" / "pycache"


def keeps_own_bytecode(env, module: str = "torch") -> bool:
    """Whether Python keeps `module`'s bytecode beside its source: the cached file is there, or writing
    is on (PYTHONDONTWRITEBYTECODE empty or unset in `env`) and its `__pycache__` (or, not yet made, the
    package directory) is writable. True where the module is not found or has no source."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec else None
    if not origin or not origin.endswith(".py"):
        return True
    cached = Path(importlib.util.cache_from_source(origin))
    if cached.exists():
        return True
    if env.get(NO_WRITE_ENV):
        return False
    writable = cached.parent if cached.parent.exists() else cached.parent.parent
    return os.access(writable, os.W_OK)


def pycache_env(env=None, module: str = "torch") -> tuple[dict, tuple[str, ...]]:
    """(variables to set, variables to drop) for the run's processes: PYTHONPYCACHEPREFIX at the run's
    cache, and PYTHONDONTWRITEBYTECODE dropped, where `module` (torch) has no bytecode beside its source
    and gets none; nothing where it does, where the user set PYTHONPYCACHEPREFIX or DISTBENCH_PYCACHE=0,
    or where the cache cannot be made."""
    env = os.environ if env is None else env
    if PREFIX_ENV in env or env.get(OPT_OUT_ENV) == "0" or keeps_own_bytecode(env, module):
        return {}, ()
    path = cache_dir(env)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}, ()
    if not os.access(path, os.W_OK):
        return {}, ()
    return {PREFIX_ENV: str(path)}, ((NO_WRITE_ENV,) if NO_WRITE_ENV in env else ())


def use_pycache(module: str = "torch") -> dict:
    """Apply pycache_env to this process's environment, which every process it starts inherits (rule
    scripts, launchers, ranks; this process's own imports are not affected); returns what it set."""
    extra, drop = pycache_env(os.environ, module)
    for name in drop:
        os.environ.pop(name, None)
    os.environ.update(extra)
    return extra
