import subprocess
from types import SimpleNamespace

import pytest

from distbench.probes.env import collect_env, git_commit, gpu_identity

NOT_A_CHECKOUT = "not a git checkout"  # what env.json records; spelled out: it is a contract


def test_env_probe_on_this_host():
    env = collect_env()
    assert env["torch"] and env["python"] and env["cpu_count"] >= 1 and env["gloo_available"]
    assert env["gpu_count"] == len(env["gpus"])


def test_gpu_identity_formats_the_pci_bus_id_like_nvidia_smi():
    props = SimpleNamespace(name="NVIDIA H200", uuid="28aa25ea-2fc5", pci_domain_id=0, pci_bus_id=6, pci_device_id=0)
    assert gpu_identity(props) == {"name": "NVIDIA H200", "uuid": "28aa25ea-2fc5", "pci_bus_id": "0000:06:00.0"}


# ---------------------------------------------------------------- git commit of the workflow directory
def _git(cwd, *args):
    cmd = ["git", "-c", "user.name=distbench", "-c", "user.email=distbench@example.invalid",
           "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args]
    return subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _repo_with_commit(path):
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    (path / "Snakefile").write_text("rule all:\n    input: []\n")
    _git(path, "add", "Snakefile")
    _git(path, "commit", "-q", "-m", "init")
    return _git(path, "rev-parse", "HEAD")


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """tmp_path with git discovery stopped at it, whatever encloses it on this host."""
    for var in ("GIT_DIR", "GIT_WORK_TREE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.resolve()))
    return tmp_path


def test_git_commit_of_a_workflow_dir_that_is_the_top_level(isolated):
    wf = isolated / "wf"
    head = _repo_with_commit(wf)
    assert git_commit(wf) == head
    (wf / "Snakefile").write_text("# edited\n")
    assert git_commit(wf) == f"{head}-dirty"


def test_git_commit_of_a_plain_copy_nested_in_another_repo(isolated):
    outer = isolated / "outer"
    _repo_with_commit(outer)
    copy = outer / "deep" / "workflow-copy"  # a copy of the workflow without .git, inside that repo
    copy.mkdir(parents=True)
    (copy / "Snakefile").write_text("rule all:\n    input: []\n")
    assert git_commit(copy) == NOT_A_CHECKOUT
    assert collect_env(copy)["git_commit"] == NOT_A_CHECKOUT  # what the env probe records


def test_git_commit_without_any_repo(isolated):
    plain = isolated / "plain"
    plain.mkdir()
    assert git_commit(plain) == NOT_A_CHECKOUT


def test_git_commit_of_a_subdirectory_of_a_checkout(isolated):
    wf = isolated / "wf"
    _repo_with_commit(wf)
    (wf / "rules").mkdir()
    assert git_commit(wf / "rules") == NOT_A_CHECKOUT


def test_compile_support_asks_dynamo_on_a_gpu_host_only(monkeypatch):
    """env.json's `compile`: on a GPU host dynamo's own check (importing torch._dynamo there also fills the
    run's bytecode cache before the first training job's DDP imports it, distbench.launch.pycache); on a
    CPU host not asked (None: the import would add ~2 s before the jobs). The GPU is faked: CUDA's
    availability is all the branch reads."""
    import sys

    import torch

    from distbench.probes.env import compile_support

    cpu = compile_support()
    assert cpu["dynamo_supported"] is None and "triton" in cpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    gpu = compile_support()
    assert gpu["dynamo_supported"] is True and "torch._dynamo" in sys.modules
