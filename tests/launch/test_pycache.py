"""The run's bytecode cache (distbench.launch.pycache): set only where the environment keeps no bytecode
for torch, never over the user's own choice, and it works: a child process with the run's environment
writes its bytecode to the cache (not beside the source) and the next one reads it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distbench.launch.pycache import NO_WRITE_ENV, PREFIX_ENV, keeps_own_bytecode, pycache_env

PKG = "distbench_pycache_probe_pkg"


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package on sys.path with no bytecode beside its source; its directory made read-only on demand."""
    root = tmp_path / "site"
    (root / PKG).mkdir(parents=True)
    (root / PKG / "__init__.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(root))
    yield root / PKG
    os.chmod(root / PKG, 0o755)


def read_only(path: Path) -> None:
    os.chmod(path, 0o555)
    if os.access(path, os.W_OK):  # root ignores the mode: this host cannot make a read-only directory
        pytest.skip("running as root: a read-only directory is still writable")


def test_a_writable_environment_or_one_with_bytecode_is_left_alone(package, tmp_path):
    home = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert keeps_own_bytecode(home, PKG)  # writable: Python writes its own bytecode at the first import
    assert pycache_env(home, PKG) == ({}, ())
    plain = {k: v for k, v in os.environ.items() if k not in (NO_WRITE_ENV, PREFIX_ENV)}
    subprocess.run([sys.executable, "-c", f"import {PKG}"], check=True, env={**plain, "PYTHONPATH": str(package.parent)})
    assert list((package / "__pycache__").glob("__init__.*.pyc"))
    # its bytecode is there now: kept, even with writing off
    assert pycache_env({**home, NO_WRITE_ENV: "1"}, PKG) == ({}, ())


def test_no_bytecode_and_writing_off_gets_the_runs_cache_unless_the_user_chose(package, tmp_path):
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache), NO_WRITE_ENV: "1"}
    # writing off (a container image's PYTHONDONTWRITEBYTECODE): the cache, and writing on for the run
    assert pycache_env(env, PKG) == ({PREFIX_ENV: str(cache / "distbench" / "pycache")}, (NO_WRITE_ENV,))
    # the user's own choices win: a prefix of their own, or the opt-out
    assert pycache_env({**env, PREFIX_ENV: "/elsewhere"}, PKG) == ({}, ())
    assert pycache_env({**env, "DISTBENCH_PYCACHE": "0"}, PKG) == ({}, ())
    # a cache that cannot be made: nothing set
    (tmp_path / "file").write_text("x")
    assert pycache_env({**env, "XDG_CACHE_HOME": str(tmp_path / "file")}, PKG) == ({}, ())


def test_a_read_only_package_without_bytecode_gets_the_runs_cache(package, tmp_path):
    cache = tmp_path / "cache"
    read_only(package)
    assert pycache_env({"XDG_CACHE_HOME": str(cache)}, PKG) == ({PREFIX_ENV: str(cache / "distbench" / "pycache")}, ())


def test_the_cache_is_filled_by_the_first_process_and_nothing_is_written_beside_the_source(package, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(package.parent), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           NO_WRITE_ENV: "1"}
    env.pop(PREFIX_ENV, None)
    extra, drop = pycache_env(env, PKG)
    child = {k: v for k, v in {**env, **extra}.items() if k not in drop}
    subprocess.run([sys.executable, "-c", f"import {PKG}"], check=True, env=child)
    cached = list((tmp_path / "cache" / "distbench" / "pycache").rglob(f"{PKG}/__init__.*.pyc"))
    assert len(cached) == 1
    assert not (package / "__pycache__").exists()
    # Python checks each cached file against its source's mtime and size: a changed source is compiled
    # again, never read stale
    (package / "__init__.py").write_text("VALUE = 4300\n")
    out = subprocess.run([sys.executable, "-c", f"import {PKG}; print({PKG}.VALUE)"], check=True, env=child,
                         capture_output=True, text=True).stdout
    assert out.strip() == "4300"


def test_the_run_and_the_gate_set_it_for_every_process_they_start():
    """Wiring: the Snakefile (every rule script, launcher and rank inherits its environment) and the gate
    (its check and benchmark job) call use_pycache before they start anything."""
    from tests.conftest import REPO

    common = (REPO / "rules/common.smk").read_text()
    assert "PYCACHE = use_pycache()" in common and common.index("PYCACHE = use_pycache()") < common.index("PLAN = ")
    cli = (REPO / "distbench/gate/cli.py").read_text()
    run = cli[cli.index("def _run("):]
    assert "use_pycache()" in run and run.index("use_pycache()") < run.index("Budget(limit).run(cmd, dict(os.environ)")
