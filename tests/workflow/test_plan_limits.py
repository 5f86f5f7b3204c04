"""The plan held to the machines that run it (issue 37): the local launcher is this host, simulated
nodes are ranks here, buffers against memory, and what can be known before the first job. (The
schema's own bounds from the same issue: tests/workflow/test_schema_bounds.py.)

Planning runs under an address-space limit here, and the workflow run whose buffers would not fit
under one of its own (RLIMIT_AS), so a regression fails instead of taking the machine down.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time

import pytest
import yaml

from distbench.pipeline.config import check_config
from distbench.pipeline.host_fit import _cgroup_limit, host_fit, host_memory, other_host_reason
from distbench.pipeline.plan import detect_gpus, make_plan
from tests.conftest import RUN, snakemake

NO_GPU = (0, "detected 0 via no NVIDIA driver on this host")
GiB = 2**30
HOST_24G = (24 * GiB, "MemTotal, 24 GiB")


@pytest.fixture(autouse=True)
def _bounded_memory():
    """Planning under a memory limit: a regression fails here instead of taking the machine down."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 8 * GiB
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(autouse=True)
def _outside_slurm(monkeypatch):
    """cluster.launcher auto is srun inside a SLURM allocation: these tests are about the local one."""
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)


def _fit(cfg: dict, cores: int = 2, detected=NO_GPU, memory=HOST_24G, gpu_mem=None):
    cfg = check_config(cfg)
    return host_fit(cfg, make_plan(cfg, detected), cores, detected, memory=memory, gpu_mem=gpu_mem)


# --- 1. the local launcher is this host, whatever cluster.nodes says ---

def test_a_multi_node_job_on_the_local_launcher_counts_all_its_ranks_here():
    # the 18 processes on 2 cores: 2 agents of 8 Gloo ranks, all here
    fit = _fit({"backends": ["gloo"], "world_sizes": [16], "cluster": {"nodes": 2, "ranks_per_node": 8}})
    assert "Gloo world sizes [16]: more ranks than the 8" in fit.problems[0] and "up to 8" in fit.problems[0]
    assert other_host_reason(check_config({"cluster": {"nodes": 2}}), cluster_executor=False) is None
    # ssh starts the agents on the hosts: not held to this one (its one-node jobs still are)
    ssh = {"backends": ["gloo"], "world_sizes": [2, 16], "cluster": {"nodes": 2, "ranks_per_node": 8, "launcher": "ssh",
                                                                    "hosts": ["a", "b"]}}
    assert _fit(ssh).problems == []
    # node rounds over cluster.nodes 4,096: refused from the nodes' layout, without their schedule
    start = time.monotonic()
    fit = _fit({"backends": ["gloo"], "nodes": {"enabled": True}, "cluster": {"nodes": 4096}})
    assert "node rounds: 4096 nodes x 1 rank(s), all on this host, are 4096 Gloo ranks" in fit.problems[0]
    assert time.monotonic() - start < 5
    # NCCL over local agents: each numbers its GPUs from 0, so two ranks would share one
    nccl = _fit({"gpus": 2, "backends": ["nccl"], "world_sizes": [4], "cluster": {"nodes": 2}}, detected=(2, "detected 2"))
    assert any("ranks would share GPUs 0-1" in p for p in nccl.problems)


def test_a_dry_run_names_the_ranks_of_a_local_multi_node_job(workflow_dir):
    dry = snakemake(workflow_dir, "-n", "--config", "backends=[gloo]", "world_sizes=[1024]", "cluster={nodes: 2}",
                    env={"SLURM_JOB_ID": ""})
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "this plan cannot run on this host" in dry.stderr and "Gloo world sizes [1024]" in dry.stderr


# --- 2. simulated nodes count as ranks (and processes) here ---

def test_simulated_nodes_are_ranks_and_processes_of_this_host():
    fit = _fit({"backends": ["gloo"], "nodes": {"enabled": True, "simulate": 64}}, cores=2)
    assert any("node rounds: 64 nodes x 1 rank(s), all on this host, are 64 Gloo ranks" in p and "up to 8" in p
               for p in fit.problems)
    # 16 cores run 64 ranks, but 64 agents and 64 ranks do not fit 24 GiB: the 25-30 GB
    fit = _fit({"backends": ["gloo"], "nodes": {"enabled": True, "simulate": 64}}, cores=16)
    (memory,) = fit.problems
    assert "node rounds (gloo, 64 nodes x 1 rank(s) on this host): about 38 GiB" in memory
    assert "What fits: up to 32 nodes here (nodes.simulate" in memory
    assert _fit({"backends": ["gloo"], "nodes": {"enabled": True, "simulate": 4}}, cores=2).problems == []


# --- 3. buffers against this host's memory (or the GPU's) ---

def test_buffers_that_do_not_fit_memory_are_refused_saying_what_fits():
    cgroup = (2 * GiB, "the cgroup's memory limit, 2 GiB")
    big = {"backends": ["gloo"], "world_sizes": [2], "comm": {"sizes": [8, "768MiB"], "gloo": {"max_bytes": "1GiB"}}}
    (line,) = _fit(big, memory=cgroup).problems
    assert line.startswith("Gloo comm job at world size 2: about 21.7 GiB of this host's memory")
    assert "all_to_all at 768 MiB" in line and "above 80% of the cgroup's memory limit, 2 GiB" in line
    fits = re.search(r"What fits: sizes up to about ([0-9.]+) MiB", line)
    assert fits
    ok = {**big, "comm": {**big["comm"], "sizes": [8, f"{int(float(fits.group(1)))}MiB"]}}
    assert _fit(ok, memory=cgroup).problems == []  # what it says fits, fits
    assert _fit({"backends": ["gloo"]}, memory=(8 * GiB, "8 GiB")).problems == []  # the default run on a laptop
    # a node round at 1 TB: refused before it allocates
    (nodes,) = _fit({"backends": ["gloo"], "nodes": {"enabled": True, "simulate": 2, "sizes": [8, "1TB"]}}).problems
    assert "node rounds (gloo, 2 nodes" in nodes and "(nodes.sizes)" in nodes
    # NCCL: the buffers are on the GPU, held to its memory when known
    nccl = {"gpus": 2, "backends": ["nccl"], "world_sizes": [2], "comm": {"ops": ["all_reduce"], "sizes": [8, "64GiB"]}}
    (gpu,) = _fit(nccl, detected=(2, "detected 2"), gpu_mem=(80 * GiB, "80 GiB")).problems
    assert "NCCL comm job at world size 2: about" in gpu and "per GPU" in gpu and "What fits: sizes up to" in gpu
    assert _fit(nccl, detected=(2, "detected 2"), gpu_mem=None).problems == []  # unknown: not held to it


def test_the_memory_limit_is_the_least_of_the_cgroups(tmp_path):
    (tmp_path / "cgroup").write_text("0::/a/b\n")
    (tmp_path / "fs/a/b").mkdir(parents=True)
    (tmp_path / "fs/a/memory.max").write_text(f"{2 * GiB}\n")
    (tmp_path / "fs/a/b/memory.max").write_text("max\n")
    assert _cgroup_limit(tmp_path / "cgroup", tmp_path / "fs") == 2 * GiB
    (tmp_path / "v1").write_text("5:memory:/j\n")
    (tmp_path / "fs/memory/j").mkdir(parents=True)
    (tmp_path / "fs/memory/j/memory.limit_in_bytes").write_text(f"{GiB}\n")
    (tmp_path / "fs/memory/memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's no limit
    assert _cgroup_limit(tmp_path / "v1", tmp_path / "fs") == GiB


def _under_rlimit():
    # the workflow's processes may map 16 GiB each: a rank's buffers past the check fail to allocate
    resource.setrlimit(resource.RLIMIT_AS, (16 * GiB, 16 * GiB))


def test_a_run_whose_buffers_exceed_this_host_stops_before_its_first_job(workflow_dir):
    total = host_memory()
    if total is None:
        pytest.skip("this host's memory cannot be read")
    size = 1 << max(total[0] - 1, 1).bit_length()  # a power of two at least this host's memory
    cfg = {"backends": ["gloo"], "world_sizes": [2], "health": {"enabled": False},
           "comm": {"ops": ["all_reduce"], "sizes": [8, size], "gloo": {"max_bytes": size, "warmup": 0, "iters": 1,
                                                                          "trials": 1}},
           "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False}}
    (workflow_dir / "big.yaml").write_text(yaml.safe_dump(cfg))
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "big.yaml"], cwd=workflow_dir,
                       capture_output=True, text=True, timeout=300, preexec_fn=_under_rlimit,
                       env={**os.environ, "SLURM_JOB_ID": ""})
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "Gloo comm job at world size 2: about" in out and "What fits: sizes up to" in out, out[-3000:]
    assert not (workflow_dir / "results").exists()  # no job started


# --- 4. what can be known before the first job ---

@pytest.mark.heavy
@pytest.mark.e2e
def test_nccl_alone_on_a_cpu_host_reports_nccl_skipped_as_the_default_does(workflow_dir):
    if detect_gpus()[0]:
        pytest.skip("this host has GPUs")
    r = snakemake(workflow_dir, "--config", "backends=[nccl]", "health={enabled: false}", timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    report = (workflow_dir / "report/report.md").read_text()
    assert "- backend nccl: skipped — no GPU on this host" in report
    # the prediction says nothing was measured, not that Gloo was
    assert "This run measured no collective" in report and "over Gloo only" not in report
    assert (workflow_dir / RUN / "tables/comm_summary.csv").read_text().startswith("backend,")  # columns, no row
