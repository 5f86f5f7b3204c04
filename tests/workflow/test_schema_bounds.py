"""The config schema's bounds (issue 37): an upper bound on every number, patterns that match the
whole value, DISTBENCH_WORKLOAD_MODULES as a loader variable, prediction GPU counts and ssh hosts
checked before the first job, and command-line numbers typed by the schema. (The plan held to this
host, from the same issue: tests/workflow/test_plan_limits.py.)
"""

from __future__ import annotations

import math
import re
import resource

import pytest

from distbench.comm.traffic import TrafficError, parse_traffic, read_matrix, split_counts, weights
from distbench.launch.cluster import Launch, agent_commands
from distbench.pipeline.config import LOADER_VARS, PATTERN_END, ConfigError, check_config, load_schema
from tests.conftest import snakemake

GiB = 2**30


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


def _error(config: dict) -> str:
    with pytest.raises(ConfigError) as e:
        check_config(config)
    return str(e.value)


# --- 1. every number has an upper bound the code below honours ---

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
    assert "config key op_timeout_s: 10000000000 is not valid (an integer >= 10 and <= 2147483)" in _error(
        {"op_timeout_s": 10**10})
    assert "config key comm.job_timeout_s: 10000000000 is not valid (an integer >= 10 and <= 2147483)" in _error(
        {"comm": {"job_timeout_s": 10**10}})
    for key in ("op_timeout_s", "job_timeout_s"):
        assert f"config key nodes.{key}" in _error({"nodes": {key: 10**18}})
    assert check_config({"op_timeout_s": 2147483})["op_timeout_s"] == 2147483
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


# --- 2. patterns match the whole value ---

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


# --- 3. every variable that makes a rank load code is a loader variable ---

def test_the_workload_modules_variable_needs_the_loader_opt_in():
    from distbench.workloads.registry import EXTENSIONS_ENV

    assert EXTENSIONS_ENV in LOADER_VARS
    message = _error({"job_env": {EXTENSIONS_ENV: "pwnmod"}})
    assert f"config key job_env.{EXTENSIONS_ENV}: " in message and "job_env_allow_loader_vars: true" in message
    assert "job_env.NCCL_ENV_PLUGIN" in _error({"job_env": {"NCCL_ENV_PLUGIN": "libx.so"}})
    assert "job_env.PYTHONWARNINGS" in _error({"job_env": {"PYTHONWARNINGS": "ignore::pwnmod.W"}})
    ok = check_config({"job_env": {EXTENSIONS_ENV: "mymod"}, "job_env_allow_loader_vars": True})
    assert ok["job_env"][EXTENSIONS_ENV] == "mymod"



# --- 4. what can be checked before the first job ---

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


# --- 5. command-line values are typed by the schema ---

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
