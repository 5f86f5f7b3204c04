"""Issue 37, inputs that passed the checks (round 2): the plan held to the machines that run it
(the local launcher is this host, simulated nodes are ranks here, buffers against memory), an upper
bound on every number, patterns that match the whole value, DISTBENCH_WORKLOAD_MODULES as a loader
variable, what can be known before the first job, and command-line numbers typed by the schema.

Planning runs under an address-space limit here, and the workflow run whose buffers would not fit
under one of its own (RLIMIT_AS), so a regression fails instead of taking the machine down.
"""

from __future__ import annotations

import math
import os
import re
import resource
import subprocess
import sys
import time

import pytest
import yaml

from distbench.comm.traffic import TrafficError, parse_traffic, read_matrix, split_counts, weights
from distbench.launch.cluster import Launch, agent_commands
from distbench.pipeline.config import LOADER_VARS, PATTERN_END, ConfigError, check_config, load_schema
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


def _error(config: dict) -> str:
    with pytest.raises(ConfigError) as e:
        check_config(config)
    return str(e.value)


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


# --- 4. every number has an upper bound the code below honours ---

def _numbers(node, path=""):
    if isinstance(node, dict):
        kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if {"integer", "number"} & set(kinds):
            yield path, node
        for k, v in node.items():
            yield from _numbers(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numbers(v, f"{path}[{i}]")


def test_every_number_of_the_schema_has_an_upper_bound_and_nan_is_refused():
    unbounded = [path for path, node in _numbers(load_schema()) if "maximum" not in node]
    assert unbounded == []
    for cfg, key in [({"cost": {"gpu_hour_usd": float("nan")}}, "cost.gpu_hour_usd"),
                     ({"health": {"load_s": float("nan")}}, "health.load_s"),
                     ({"comm": {"sizes": {"min_bytes": 8, "max_bytes": 64, "step_factor": float("inf")}}},
                      "comm.sizes.step_factor")]:
        assert f"config key {key}: " in _error(cfg)


def test_timeouts_zipf_exponents_and_matrix_weights_stay_within_what_torch_and_floats_hold(tmp_path):
    for key in ("op_timeout_s", "job_timeout_s"):
        assert f"config key comm.{key}: 10000000000 is not valid (an integer >= 10 and <= 2147483)" in _error(
            {"comm": {key: 10**10}})
        assert f"config key nodes.{key}" in _error({"nodes": {key: 10**18}})
    assert check_config({"comm": {"op_timeout_s": 2147483}})["comm"]["op_timeout_s"] == 2147483
    assert "the zipf exponent must be at most 100" in _error({"comm": {"traffic": ["zipf:1000"]}})
    (row, *_) = weights(parse_traffic("zipf:100"), 1024)  # the bound at the largest world size: finite, > 0
    assert math.isfinite(math.fsum(row)) and min(row) > 0
    assert sum(map(sum, split_counts(parse_traffic("zipf:100"), 4, 1000))) == 4 * 1000
    huge = tmp_path / "huge.csv"
    huge.write_text("1e308,1e308\n1e308,1e308\n")
    with pytest.raises(TrafficError, match="weights must be >= 0 and at most 1e"):
        read_matrix(huge)
    assert "config key comm.traffic" in _error({"comm": {"traffic": [f"file:{huge}"]}})
    assert "at most 1 PiB" in _error({"comm": {"sizes": ["9" * 400]}})  # was an OverflowError


# --- 5. patterns match the whole value ---

@pytest.mark.parametrize("config,key", [
    ({"comm": {"nccl_env": [{"NCCL_ALGO": "Ring\n"}]}}, "comm.nccl_env[0].NCCL_ALGO"),
    ({"cluster": {"hosts": ["node1\n"]}}, "cluster.hosts[0]"),
    ({"job_env": {"NCCL_DEBUG\n": "INFO"}}, "job_env: name"),
    ({"job_env": {"NCCL_SOCKET_IFNAME": "eth0\n"}}, "job_env.NCCL_SOCKET_IFNAME"),
    ({"comm": {"nccl_env": [{"NCCL_MAX_NCHANNELS": "8\n"}]}}, "comm.nccl_env[0].NCCL_MAX_NCHANNELS"),
    ({"comm": {"traffic": ["file:m.csv\n"]}}, "comm.traffic[0]"),
    ({"cluster": {"partition": "gpu\n"}}, "cluster.partition"),
    ({"report": {"baseline": "results/old\n"}}, "report.baseline"),
], ids=["nccl_algo", "host", "job_env_name", "job_env_value", "count", "traffic", "partition", "baseline"])
def test_a_trailing_newline_is_refused_in_every_name(config, key):
    assert f"config key {key}" in _error(config)


def test_every_pattern_of_the_schema_ends_where_the_value_ends():
    def patterns(node):
        if isinstance(node, dict):
            if "pattern" in node:
                yield node["pattern"]
            for v in node.values():
                yield from patterns(v)
        elif isinstance(node, list):
            for v in node:
                yield from patterns(v)
    found = list(patterns(load_schema()))
    assert len(found) >= 10 and all(p.startswith("^") and p.endswith(PATTERN_END) for p in found), found
    assert all(re.search(p, "x\n") is None for p in found)


# --- 6. every variable that makes a rank load code is a loader variable ---

def test_the_workload_modules_variable_needs_the_loader_opt_in():
    from distbench.workloads.registry import EXTENSIONS_ENV

    assert EXTENSIONS_ENV in LOADER_VARS
    message = _error({"job_env": {EXTENSIONS_ENV: "pwnmod"}})
    assert f"config key job_env.{EXTENSIONS_ENV}: " in message and "job_env_allow_loader_vars: true" in message
    assert "job_env.NCCL_ENV_PLUGIN" in _error({"job_env": {"NCCL_ENV_PLUGIN": "libx.so"}})
    assert "job_env.PYTHONWARNINGS" in _error({"job_env": {"PYTHONWARNINGS": "ignore::pwnmod.W"}})
    ok = check_config({"job_env": {EXTENSIONS_ENV: "mymod"}, "job_env_allow_loader_vars": True})
    assert ok["job_env"][EXTENSIONS_ENV] == "mymod"


# --- 7. what can be known before the first job ---

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


def test_prediction_gpu_counts_that_do_not_fill_nodes_are_refused_at_check():
    message = _error({"predict": {"gpu_counts": [8, 12]}})
    assert "config key predict.gpu_counts[1]: 12 GPUs do not fill whole nodes of 8 (preset nvlink4-ib400)" in message
    assert "e.g. 8 or 16" in message
    assert check_config({"predict": {"gpu_counts": [2, 6, 16]}})["predict"]["gpu_counts"] == [2, 6, 16]


def test_user_at_host_logs_in_as_the_user_and_meets_at_the_host():
    check_config({"cluster": {"hosts": ["alice@node1", "node2"]}})
    for bad in ("-oProxyCommand=x@node1", "a@b@c", "alice@"):
        assert "config key cluster.hosts[0]" in _error({"cluster": {"hosts": [bad]}})
    cmds = agent_commands("py", "distbench.comm", [], Launch(2, 1, "ssh", ("alice@node1", "bob@node2")), "id", {}, "/w")
    assert [c[4] for c in cmds] == ["alice@node1", "bob@node2"]  # ssh's destination keeps the user
    assert all("--rdzv-endpoint=node1:29400" in c[5] and "@node1:" not in c[5] for c in cmds)


# --- 8. command-line values are typed by the schema ---

def test_command_line_numbers_become_numbers(workflow_dir):
    from snakemake.cli import parse_config

    raw = parse_config(["cost={gpu_hour_usd: 3}", "health={load_s: 600, after_load_s: 0.5}",
                        "comm={sizes: {min_bytes: 8, max_bytes: 1MiB, step_factor: 1.5}, rotate_bytes: 0}"])
    assert raw["cost"]["gpu_hour_usd"] == "3"  # what Snakemake hands over
    cfg = check_config(raw)
    assert cfg["cost"]["gpu_hour_usd"] == 3 and cfg["health"]["load_s"] == 600 and cfg["health"]["after_load_s"] == 0.5
    assert cfg["comm"]["sizes"]["step_factor"] == 1.5 and cfg["comm"]["rotate_bytes"] == 0
    for bad in ("nan", "inf", "0x10", "1_000", "3 USD"):
        assert "config key cost.gpu_hour_usd" in _error(parse_config([f"cost={{gpu_hour_usd: {bad}}}"]))
    dry = snakemake(workflow_dir, "-n", "--config", "cost={gpu_hour_usd: 3}", "health={load_s: 1.5}")
    assert dry.returncode == 0, dry.stderr[-2000:]
