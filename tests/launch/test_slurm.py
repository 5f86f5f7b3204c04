"""The SLURM profile against a real controller: tools/slurm-test-cluster.sh starts munged,
slurmctld and two slurmd (nodes node1 and node2, both on this machine); the pipeline runs with
`--profile profiles/slurm` on a tiny Gloo config whose 4-rank jobs span both nodes (one torchrun
agent per node, started by srun); its results have the structure of a local run's, and squeue saw
every job. Only the daemons the test started are stopped.

CI installs slurm-wlm and munge and sets DISTBENCH_REQUIRE_SLURM=1: there a cluster that cannot
start is a failure, not a skip."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import RUN, REPO, snakemake

REQUIRED = bool(os.environ.get("DISTBENCH_REQUIRE_SLURM"))
HAVE = all(shutil.which(b) for b in ("slurmctld", "slurmd", "munged", "sbatch")) and os.geteuid() == 0
# `pytest -m heavy` (README: the second test command): a real SLURM controller and two slurmd (tools/slurm-
# test-cluster.sh): 4 minutes.
pytestmark = [pytest.mark.heavy, pytest.mark.e2e, pytest.mark.skipif(not HAVE and not REQUIRED, reason=(
    "needs slurm-wlm and munge, as root (tools/slurm-test-cluster.sh install); CI sets DISTBENCH_REQUIRE_SLURM=1"))]

TINY = {
    "backends": ["gloo"],
    "world_sizes": [2, 4],
    # 2 ranks per node: the 4-rank jobs span node1 and node2
    "cluster": {"nodes": 2, "ranks_per_node": 2, "runtime_margin_min": 2, "mem_mb": 4000},
    "comm": {"ops": ["all_reduce"], "sizes": ["8", "64KiB"], "job_timeout_s": 180,
             "gloo": {"max_bytes": "1MiB", "warmup": 1, "iters": 3, "trials": 2}},
    "training": {"models": ["mlp"], "warmup_steps": 1, "steps": 3, "allreduce_trials": 2, "job_timeout_s": 180,
                 "cpu": {"hidden_dim": 32, "num_layers": 1, "batch_size": 8}},
    "memory": {"enabled": False},
}


SYSTEM_CONF = "/etc/slurm/slurm.conf"


def _plant_a_killed_clusters_link(state: Path) -> Path | None:
    """What a test cluster leaves when its run is killed before `stop`: /etc/slurm/slurm.conf linked to
    its config, its state saying it made the link, and a slurmctld pid file whose process is gone.
    Only where no config is there (a SLURM of the machine's own is never touched)."""
    if os.path.lexists(SYSTEM_CONF):
        return None
    (state / "slurm.conf").write_text("# a killed test cluster's config\n")
    (state / "linked-system-conf").write_text(SYSTEM_CONF + "\n")
    gone = subprocess.Popen(["true"])
    gone.wait()
    (state / "slurmctld.pid").write_text(f"{gone.pid}\n")
    os.makedirs(os.path.dirname(SYSTEM_CONF), exist_ok=True)
    os.symlink(state / "slurm.conf", SYSTEM_CONF)
    return state / "slurm.conf"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    assert HAVE, "DISTBENCH_REQUIRE_SLURM is set but slurm-wlm/munge are missing or this is not root"
    state = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "SLURM_TEST_STATE": str(state), "SLURM_TEST_NODES": "2"}
    script = str(REPO / "tools/slurm-test-cluster.sh")
    stale = _plant_a_killed_clusters_link(tmp_path_factory.mktemp("killed"))
    started = subprocess.run(["bash", script, "start"], env=env, capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        if stale:  # a test cluster killed before its `stop` does not block the next one (it blocked CI once)
            assert f"removing a stale link {SYSTEM_CONF} -> {stale}" in started.stderr, started.stderr
        yield {**os.environ, "SLURM_CONF": str(state / "slurm.conf")}
    finally:
        stopped = subprocess.run(["bash", script, "stop"], env=env, capture_output=True, text=True, timeout=60)
        for name in ("slurmctld", "slurmd-node1", "slurmd-node2"):
            assert not (state / f"{name}.pid").exists(), stopped.stderr
        # the link /etc/slurm/slurm.conf -> the test's config (for commands that lose SLURM_CONF) is gone
        assert not (state / "linked-system-conf").exists(), stopped.stderr


def _run(cwd, *args, env, timeout=900):
    cmd = [sys.executable, "-m", "snakemake", *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _structure(root: Path) -> set[str]:
    """Result and report files, as paths: what a run produced, whatever ran it."""
    return {str(p.relative_to(root)) for sub in ("results", "report") for p in (root / sub).rglob("*")
            if p.is_file() and "logs" not in p.parts and "nccl_logs" not in p.parts}


def test_the_pipeline_runs_on_slurm_across_two_nodes_like_a_local_run(cluster, tmp_path, workflow_dir):
    (workflow_dir / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    run = _run(workflow_dir, "--profile", "profiles/slurm", "--configfile", "tiny.yaml", env=cluster)
    assert run.returncode == 0, run.stderr[-4000:]

    # every benchmark job went through SLURM; the 4-rank ones on both nodes
    queue = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T|%D|%N|%k"], env=cluster,
                           capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    jobs = [line.split("|") for line in queue]
    for rule, n in (("comm_job", 2), ("training_job", 3), ("probe_env", 1)):
        seen = [j for j in jobs if f"rule_{rule}" in j[4]]
        assert len(seen) == n, (rule, queue)
        assert all(j[1] == "COMPLETED" for j in seen), queue
    two_nodes = [j for j in jobs if j[2] == "2" and "rule_health" not in j[4]]
    assert len(two_nodes) == 2 and all(j[3] == "node[1-2]" for j in two_nodes), queue
    # the health check asks for every node it reads
    health_jobs = [j for j in jobs if "rule_health_before" in j[4] or "rule_health_after" in j[4]]
    assert len(health_jobs) == 2 and all(j[1:4] == ["COMPLETED", "2", "node[1-2]"] for j in health_jobs), queue
    assert not [j for j in jobs if "aggregate" in j[4] or "report" in j[4]]  # local rules stay local

    comm = pd.read_csv(workflow_dir / f"{RUN}/tables/comm.csv")
    assert (comm["status"] == "ok").all() and comm["correct"].all()
    assert dict(comm.groupby("world_size")["nodes"].max()) == {2: 1, 4: 2}
    training = pd.read_csv(workflow_dir / f"{RUN}/tables/training.csv")
    assert (training["status"] == "ok").all()
    assert dict(training.groupby("world_size")["nodes"].max()) == {1: 1, 2: 1, 4: 2}
    log = next((workflow_dir / f"{RUN}/logs/comm/gloo/float32/ws4").glob("*.log")).read_text()
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1" in log and "--rdzv-backend=c10d" in log

    # the health check read both nodes, one srun task each, named as SLURM names them
    from distbench.health.table import read_health_csv

    health = read_health_csv(workflow_dir / f"{RUN}/health/health_before.csv")
    assert {"node1", "node2"} <= set(health["host"]), set(health["host"])
    assert "node_read" not in set(health["item"])  # both answered
    assert set(health.query("item == 'driver_version_across_nodes'")["host"]) == {"node1,node2"}

    # the same config locally: the same files (every agent on this host over loopback)
    local = tmp_path / "local"
    shutil.copytree(workflow_dir, local, ignore=shutil.ignore_patterns(".snakemake", "results", "report"))
    here = snakemake(local, "--configfile", "tiny.yaml")
    assert here.returncode == 0, here.stderr[-3000:]
    assert _structure(local) == _structure(workflow_dir)


NODES_TINY = {
    "backends": ["gloo"],
    "world_sizes": [2],
    "cluster": {"nodes": 2, "ranks_per_node": 1, "runtime_margin_min": 2, "mem_mb": 4000},
    "training": {"enabled": False},
    "memory": {"enabled": False},
    "nodes": {"enabled": True, "sizes": ["8", "64KiB"], "warmup": 1, "iters": 5, "job_timeout_s": 180},
}


def test_node_pair_rounds_run_as_slurm_jobs_on_both_nodes(cluster, workflow_dir):
    (workflow_dir / "nodes.yaml").write_text(yaml.safe_dump(NODES_TINY))
    run = _run(workflow_dir, "nodes", "--profile", "profiles/slurm", "--configfile", "nodes.yaml", env=cluster)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "distbench: node rounds: 2 nodes (cluster.nodes)" in run.stderr

    # 2 nodes: one round, one SLURM job over node1 and node2 (one torchrun agent each, started by srun)
    queue = subprocess.run(["squeue", "--states=all", "--noheader", "--format=%i|%T|%D|%N|%k"], env=cluster,
                           capture_output=True, text=True, timeout=30, check=True).stdout.splitlines()
    rounds = [line.split("|") for line in queue if "rule_nodes_round" in line]
    assert len(rounds) == 1 and rounds[0][1:4] == ["COMPLETED", "2", "node[1-2]"], queue
    assert not [line for line in queue if "aggregate_nodes" in line or "plot_nodes" in line]  # local rules
    log = next((workflow_dir / f"{RUN}/logs/nodes/gloo/n2/all_pairs").glob("round0.log")).read_text()
    assert "srun --nodes=2 --ntasks=2 --ntasks-per-node=1" in log

    # the nodes are named as SLURM names them (both slurmd run on this machine: one host name)
    raw = pd.read_csv(workflow_dir / f"{RUN}/tables/nodes.csv")
    assert (raw["status"] == "ok").all() and set(raw["node"]) == {"node1", "node2"}
    assert set(zip(raw["node_a"], raw["node_b"])) == {("node1", "node2")}
    scores = pd.read_csv(workflow_dir / f"{RUN}/tables/nodes_scores.csv")
    assert sorted(scores["node"]) == ["node1", "node2"]
