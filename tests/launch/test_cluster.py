"""Jobs beyond one host (distbench.launch.cluster): layouts, the agents' argument lists, SLURM
resources, and a real two-agent torchrun job on loopback through the launcher."""

import json
import shlex

import pytest

from distbench.launch.cluster import Launch, Layout, agent_commands, job_layout, slurm_resources
from distbench.pipeline.config import ConfigError, check_config


def _cluster(**kw):
    return {**check_config({})["cluster"], **kw}


def test_a_job_spans_the_fewest_nodes_that_split_it_evenly():
    c = _cluster(nodes=4)
    assert job_layout(8, "nccl", 8, c) == (Layout(1, 8), None)
    assert job_layout(16, "nccl", 8, c) == (Layout(2, 8), None)
    assert job_layout(12, "nccl", 8, c) == (Layout(2, 6), None)
    assert job_layout(24, "nccl", 8, c) == (Layout(3, 8), None)
    layout, why = job_layout(9, "nccl", 8, c)  # not even over 2 nodes: 3 nodes of 3
    assert layout == Layout(3, 3)
    layout, why = job_layout(7, "nccl", 4, c)  # prime and above a node: nowhere
    assert layout is None and "7 ranks" in why and "cluster.nodes" in why
    # Gloo: one node unless ranks_per_node says otherwise
    assert job_layout(6, "gloo", 0, c) == (Layout(1, 6), None)
    assert job_layout(4, "gloo", 0, _cluster(nodes=2, ranks_per_node=2)) == (Layout(2, 2), None)


def test_the_plan_places_world_sizes_over_nodes_and_names_what_does_not_fit():
    from distbench.pipeline.plan import job_launch, make_plan

    cfg = check_config({"backends": ["nccl"], "world_sizes": [4, 8, 16, 12, 20], "gpus": 8,
                        "cluster": {"nodes": 2}, "training": {"enabled": False}, "memory": {"enabled": False}})
    plan = make_plan(cfg)
    assert plan["world_sizes"]["nccl"] == [4, 8, 16, 12]
    (skip,) = [s for s in plan["skipped"] if "world sizes" in s["what"]]
    assert "[20]" in skip["what"] and "2 node(s)" in skip["why"]
    assert job_launch(cfg, plan, "nccl", 16) == {"nodes": 2, "ranks_per_node": 8, "launcher": "auto", "hosts": [],
                                                 "rdzv_port": 29400}
    # one node: the old rule, said the old way
    plan1 = make_plan(check_config({"backends": ["nccl"], "world_sizes": [4, 16], "gpus": 8}))
    assert any("above gpus=8" in s["why"] for s in plan1["skipped"])


def test_agent_commands_are_argument_lists_for_every_launcher(monkeypatch):
    args = ["--ops", "all_reduce", "--nccl-env-label", "a b;rm -rf /"]
    one = agent_commands("py", "distbench.comm", args, Launch(1, 4), "id", {}, "/w")
    assert one == [["py", "-m", "torch.distributed.run", "--standalone", "--nnodes=1", "--nproc_per_node=4",
                    "-m", "distbench.comm", *args]]
    local = agent_commands("py", "distbench.comm", args, Launch(2, 2, "local"), "id7", {}, "/w")
    assert len(local) == 2 and local[0] == local[1]
    assert "--nnodes=2" in local[0] and "--nproc_per_node=2" in local[0] and "--rdzv-id=id7" in local[0]
    assert any(a.startswith("--rdzv-endpoint=127.0.0.1:") for a in local[0])

    monkeypatch.setattr("distbench.launch.cluster.slurm_first_node_addr", lambda env=None: "10.0.0.5")
    (srun,) = agent_commands("py", "distbench.comm", args, Launch(4, 8, "auto"), "id", {"SLURM_JOB_ID": "1"}, "/w")
    assert srun[:7] == ["srun", "--nodes=4", "--ntasks=4", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
                        "--export=ALL", "--overlap"]
    assert any(a.startswith("--rdzv-endpoint=10.0.0.5:") for a in srun)

    ssh = agent_commands("py", "distbench.comm", args, Launch(2, 8, "ssh", ("h1", "h2", "h3"), 29555), "id",
                         {"NCCL_ALGO": "Ring", "HOME": "/root"}, "/w d")
    # -tt: a terminal, so the remote agent gets SIGHUP when the local client ends (tests/launch/test_ssh.py)
    assert [c[:4] for c in ssh] == [["ssh", "-tt", "-o", "BatchMode=yes"]] * 2 and [c[4] for c in ssh] == ["h1", "h2"]
    remote = ssh[0][5]
    # the remote shell sees every argument quoted: the hostile label stays one word
    words = shlex.split(remote.split(" && ", 1)[1])
    assert words[0] == "env" and "NCCL_ALGO=Ring" in words and "HOME=/root" not in words
    assert args[-1] in words and "--rdzv-endpoint=h1:29555" in words
    assert remote.startswith("cd '/w d' && ")
    # with a limit, the remote agent also ends by itself (where no hang-up reaches it)
    bounded = agent_commands("py", "distbench.comm", args, Launch(2, 8, "ssh", ("h1", "h2"), 29555), "id", {},
                             "/w", limit_s=660.5)
    assert shlex.split(bounded[1][5].split(" && ", 1)[1])[:6] == ["timeout", "--foreground", "-k", "10", "660", "env"]


def test_slurm_resources_ask_for_whole_nodes_and_gpus_per_node():
    c = _cluster(partition="gpu", account="proj1", runtime_margin_min=5)
    res = slurm_resources(Layout(2, 8), "nccl", 600, c)
    assert res["nodes"] == 2 and res["gres"] == "gpu:8" and res["tasks_per_gpu"] == 0 and res["runtime"] == 15
    assert res["slurm_extra"].split() == ["--exclusive", "--ntasks-per-node=1", "--partition=gpu", "--account=proj1"]
    assert res["mem_mb"] == 0  # the partition's default unless cluster.mem_mb says
    cpu = slurm_resources(Layout(1, 2), "gloo", 61, _cluster())
    assert cpu["tasks"] == 1 and "gres" not in cpu and cpu["runtime"] == 2 + 10 and "--partition" not in cpu["slurm_extra"]


def test_config_rejects_ssh_without_a_host_per_node():
    with pytest.raises(ConfigError, match=r"cluster.hosts: launcher ssh needs one host per node, got 1 host\(s\) for cluster.nodes 2"):
        check_config({"cluster": {"nodes": 2, "launcher": "ssh", "hosts": ["a"]}})
    with pytest.raises(ConfigError, match=r"cluster.launcher: 'pdsh' is not valid \(allowed: auto, local, srun, ssh\)"):
        check_config({"cluster": {"launcher": "pdsh"}})


@pytest.mark.heavy
def test_two_agents_on_loopback_form_one_comm_job(tmp_path):
    """The multi-node code path for real: two torchrun agents (--nnodes=2, c10d rendezvous on
    127.0.0.1) started by the launcher form one world of 4 Gloo ranks."""
    from distbench.comm.job import run_comm_job
    from distbench.comm.plan import CommJob, job_params
    from distbench.comm.contract import read_comm_csv

    cfg = check_config({"backends": ["gloo"]})
    params = {**job_params(cfg, "gloo"), "ops": ["all_reduce"], "sizes": [1024], "trials": 2, "iters": 2,
              "warmup": 1, "job_timeout_s": 180,
              "launch": {"nodes": 2, "ranks_per_node": 2, "launcher": "local", "hosts": [], "rdzv_port": 29400}}
    job = CommJob("gloo", "float32", 4, "default", {})
    status = run_comm_job(job, params, tmp_path / "comm.csv", tmp_path / "placement.json", tmp_path / "job.log")
    assert status == "ok", (tmp_path / "job.log").read_text()[-2000:]
    df = read_comm_csv(tmp_path / "comm.csv")
    assert set(df["status"]) == {"ok"} and set(df["nodes"]) == {2} and set(df["world_size"]) == {4}
    assert df["correct"].all()
    log = (tmp_path / "job.log").read_text()
    assert log.count("--nnodes=2") == 2 and "--rdzv-backend=c10d" in log
    ranks = json.loads((tmp_path / "placement.json").read_text())["ranks"]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3]


def test_every_cluster_job_rule_declares_the_resources_the_plan_gives():
    """The rules' resources and distbench.pipeline.plan's SLURM_RESOURCES are one list: a key the plan adds
    but a rule does not declare would never reach the SLURM plugin."""
    import re

    from distbench.pipeline.plan import SLURM_RESOURCES, job_resources, make_plan, probe_resources
    from tests.conftest import REPO

    cfg = check_config({"backends": ["gloo"], "world_sizes": [2]})
    plan = make_plan(cfg)
    assert set(job_resources(cfg, plan, "comm", plan["jobs"]["comm"][0])) == set(SLURM_RESOURCES)
    assert set(probe_resources(cfg, plan)) == set(SLURM_RESOURCES)
    from distbench.nodes.plan import nodes_plan, round_resources

    nodes_cfg = check_config({"backends": ["gloo"], "cluster": {"nodes": 2}, "nodes": {"enabled": True}})
    assert set(round_resources(nodes_cfg, nodes_plan(nodes_cfg, 0))) == set(SLURM_RESOURCES)
    rules = {}
    for smk in (REPO / "rules").glob("*.smk"):
        for name, body in re.findall(r"^rule (\w+):\n((?:    .*\n|\n)*)", smk.read_text(), re.M):
            block = re.search(r"    resources:\n((?:        .*\n)*)", body)
            if block:
                rules[name] = [k for k in re.findall(r"^        (\w+)=", block.group(1), re.M)]
    assert set(rules) == {"probe_env", "probe_topology", "probe_nccl", "health_before", "health_after"}
    for name, keys in rules.items():
        assert keys == list(SLURM_RESOURCES), name
    # every family's job rule, and each step that measures, are built in one loop (rules/families.smk)
    # whose resources are SLURM_RESOURCES themselves
    loop = (REPO / "rules/families.smk").read_text()
    assert loop.count("for key in SLURM_RESOURCES") == 1  # the job rule's
    assert "step_resources(_s)" in loop
    assert "for key in SLURM_RESOURCES" in (REPO / "rules/family_inputs.smk").read_text()  # step_resources


def test_an_agent_that_fails_ends_the_other_agents_at_once(tmp_path, monkeypatch):
    """Node 2's agent dies before the rendezvous: node 1's agent would wait for it until the
    rendezvous timeout; the launcher ends it right away and records the failure."""
    import sys
    import time

    from distbench.launch import torchrun as launch
    from distbench.comm.job import run_comm_job
    from distbench.comm.plan import CommJob, job_params
    from distbench.comm.contract import read_comm_csv

    real = launch.agent_commands

    def commands(*a, **kw):
        first, _ = real(*a, **kw)
        return [first, [sys.executable, "-c", "import sys; sys.exit(5)"]]

    monkeypatch.setattr(launch, "agent_commands", commands)
    cfg = check_config({"backends": ["gloo"]})
    params = {**job_params(cfg, "gloo"), "ops": ["all_reduce"], "sizes": [1024], "job_timeout_s": 120,
              "launch": {"nodes": 2, "ranks_per_node": 1, "launcher": "local", "hosts": [], "rdzv_port": 29400}}
    t0 = time.monotonic()
    status = run_comm_job(CommJob("gloo", "float32", 2, "default", {}), params, tmp_path / "comm.csv",
                          tmp_path / "placement.json", tmp_path / "job.log")
    assert time.monotonic() - t0 < 60  # far below the 120 s job limit and the rendezvous timeout
    assert status.startswith("torchrun exited with code 5")
    df = read_comm_csv(tmp_path / "comm.csv")
    assert (df["status"] == "failed").all() and set(df["nodes"]) == {2}


def test_the_nccl_probe_stays_on_one_node():
    from distbench.pipeline.plan import make_plan, nccl_probe_params

    cfg = check_config({"backends": ["nccl"], "world_sizes": [2, 4, 8], "gpus": 4, "cluster": {"nodes": 2}})
    plan = make_plan(cfg)
    assert plan["world_sizes"]["nccl"] == [2, 4, 8]  # 8 ranks: 2 nodes x 4
    assert nccl_probe_params(cfg, plan)["world_size"] == 4
