"""The health check on every node of a run (distbench.health.node) and the benchmark jobs
measured on an affected GPU (distbench.health.jobs): each node is read once by a process of
its own through the launcher, a node that does not answer is a row naming it, the per-node GPU count
holds per node, versions are compared across nodes; a degraded GPU names the jobs whose ranks ran on
it (by UUID, else host and PCI bus id) and not the others, and says so where it cannot tell."""

import json
import sys

import pytest

from distbench.core.section import ReportInputs
from distbench.health import load as health_load, node as health_node, readings as health
from distbench.health.node import NODE_READ, node_commands, read_nodes, read_run
from distbench.health.readings import DEGRADED, FAILING, NODE, NOT_AVAILABLE, OK
from distbench.health.section import HEALTH_SECTION, health_findings, health_headlines
from distbench.health.table import differences, read_health_csv, write_diff, write_health
from distbench.launch.cluster import agent_environment
from tests.conftest import REPO
from tests.fake_nvml import fake_pynvml, healthy_state

# Each node's process imports this as `pynvml`: a fake NVML whose readings DISTBENCH_FAKE_NVML
# (JSON, per node index) overrides.
FAKE_MODULE = """
import json, os, sys
from tests.fake_nvml import fake_pynvml, healthy_state
_over = json.loads(os.environ.get("DISTBENCH_FAKE_NVML", "{}")).get(os.environ.get("DISTBENCH_NODE_INDEX", "0"), {})
_state = healthy_state(_over.pop("count", 2))
_state.update(_over)
sys.modules[__name__] = fake_pynvml(_state)
"""


def test_each_node_is_read_by_its_own_process_and_one_that_hangs_is_named(tmp_path, monkeypatch):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_MODULE)
    monkeypatch.setenv("PYTHONPATH", f"{fake}:{REPO}")
    # node1 has one GPU of the plan's two and another driver; node2's reading never ends
    monkeypatch.setenv("DISTBENCH_FAKE_NVML", json.dumps({"1": {"count": 1, "driver": "550.9"}}))
    monkeypatch.setenv(health_node.TEST_HANG_ENV, "2")
    # 20 s: three readings starting at once (Python, pandas, an idle sample each) on a busy 2-core host
    rows = read_nodes(3, "local", [], 2, 0.0, tmp_path, timeout_s=20)

    assert {r.host for r in rows if r.gpu != NODE} == {"node0", "node1", "node2"}
    by = {(r.host, r.gpu, r.item): r for r in rows}
    # nodes 0 and 1 were read (through the fake NVML: versions, identity), each against `gpus`
    assert by[("node0", NODE, "driver_version")].value == "570.1"
    assert by[("node0", NODE, "gpu_count")].state == OK
    assert by[("node1", NODE, "gpu_count")].state == FAILING and by[("node1", NODE, "gpu_count")].value == "1"
    assert by[("node0", "1", "pcie_link")].uuid == "GPU-1" and by[("node0", "1", "pcie_link")].pci_bus_id == "00000000:1a:00.0"
    # node2 did not answer within the limit: a failing row naming it, its items not available
    unread = by[("node2", NODE, NODE_READ)]
    assert unread.state == FAILING and "node2 did not answer within 20 s" in unread.reason
    assert by[("node2", NODE, "driver_version")].state == NOT_AVAILABLE
    # the comparison across the nodes that answered
    across = by[("node0,node1,node2", NODE, "driver_version_across_nodes")]
    assert across.state == DEGRADED and across.value == "550.9 / 570.1"
    assert by[("node0,node1,node2", NODE, "cuda_driver_version_across_nodes")].state == OK
    assert not list(tmp_path.glob("nodes-*"))  # its scratch directory is gone


def test_one_node_or_the_local_launcher_reads_in_this_process(monkeypatch):
    def no_process(*a, **k):
        raise AssertionError("no extra process for one node")
    monkeypatch.setattr(health_node, "read_nodes", no_process)
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(healthy_state()))
    monkeypatch.setenv("DISTBENCH_NODE_NAME", "here")
    for nodes, launcher in ((1, "srun"), (1, "auto"), (4, "local")):
        rows = read_run(nodes, launcher, [], 2, 0.0, "unused", env={})
        assert {r.host for r in rows} == {"here"} and not [r for r in rows if r.item == NODE_READ]


def test_the_launchers_start_one_reading_per_node_from_argument_lists():
    env = {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0", "PATH": "/bin",
           "DISTBENCH_X": "a b"}
    [(cmd, cmd_env)] = node_commands("py", ["--gpus", "2"], 2, "srun", [], ["node1", "node2"], env, "/w")
    assert cmd[:6] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--export=ALL", "--overlap"]
    assert "--kill-on-bad-exit=1" not in cmd  # one failing node must not end the others' readings
    assert cmd_env == agent_environment([cmd], env) and "SLURM_NTASKS" not in cmd_env
    ssh = node_commands("py", ["--out-dir", "/r/x y"], 2, "ssh", ["h1", "h2", "h3"], ["h1", "h2"], env, "/w d")
    assert [c[3] for c, _ in ssh] == ["h1", "h2"]
    assert ssh[1][0][4] == ("cd '/w d' && env 'DISTBENCH_X=a b' DISTBENCH_NODE_INDEX=1 py -m "
                            "distbench.health.node --out-dir '/r/x y'")
    # with the reading's limit, the remote side ends by itself too (a killed ssh client may not end it)
    bounded = node_commands("py", [], 1, "ssh", ["h1"], ["h1"], env, "/w", limit_s=62.5)
    assert bounded[0][0][4].startswith("cd /w && timeout -k 5 62 env ")
    local = node_commands("py", [], 2, "local", [], ["node0", "node1"], env, "/w")
    assert [(e["DISTBENCH_NODE_INDEX"], e["DISTBENCH_NODE_NAME"]) for _, e in local] == [("0", "node0"), ("1", "node1")]


def test_the_health_check_reads_as_many_nodes_as_the_widest_job():
    from distbench.pipeline.config import check_config
    from distbench.pipeline.plan import health_launch, health_resources, make_plan, probe_resources

    one = check_config({"backends": ["gloo"], "world_sizes": [2, 4]})
    plan = make_plan(one, detected=(0, "none"))
    assert health_launch(one, plan)["nodes"] == 1
    assert health_resources(one, plan) == probe_resources(one, plan)
    two = check_config({"backends": ["gloo"], "world_sizes": [2, 4], "cluster": {"nodes": 2, "ranks_per_node": 2}})
    plan = make_plan(two, detected=(0, "none"))
    assert health_launch(two, plan)["nodes"] == 2 and health_resources(two, plan)["nodes"] == 2


# ------------------------------------------------------------------------------ jobs on a GPU
def _placement(root, job, ranks):
    path = root / "results" / "lab" / job / "placement.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ranks": ranks, "error": None}))
    return path


def _rank(rank, host, uuid=None, pci=None, device="cuda:0"):
    return {"rank": rank, "hostname": host, "uuid": uuid, "pci_bus_id": pci, "device": device}


@pytest.fixture
def degraded_gpu1(monkeypatch, tmp_path):
    """n1's GPU 1 (UUID GPU-1, PCI 0000:1a:00.0) downtrained to x8; GPU 0 healthy."""
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    monkeypatch.setattr(health, "_kernel_xid_row", lambda host: health.HealthRow(
        host, NODE, "xid_kernel_log", "", "0", NOT_AVAILABLE, "dmesg unreadable here"))
    state = healthy_state()
    state["width"][1] = 8
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    rows = health.read_health(load_s=0, host="n1")
    d = tmp_path / "health"
    write_health(d / "health_before.csv", rows)
    write_health(d / "health_after.csv", rows)
    write_diff(d / "health_diff.csv", differences(rows, rows))
    assert read_health_csv(d / "health_before.csv").query("gpu == '1'")["uuid"].eq("GPU-1").all()
    return d


def test_a_degraded_gpu_names_the_jobs_measured_on_it_and_not_the_others(tmp_path, degraded_gpu1):
    placements = [
        # torch writes the UUID without NVML's "GPU-" prefix
        _placement(tmp_path, "comm/nccl/float32/ws2/default", [_rank(0, "n1", "0"), _rank(1, "n1", "1")]),
        _placement(tmp_path, "training/nccl/mlp/ws1/default", [_rank(0, "n1", "0")]),
        # no UUID: host and PCI bus id
        _placement(tmp_path, "memory/nccl/mlp/ws1/default", [_rank(0, "n1", None, "0000:1a:00.0")]),
        # a GPU rank whose placement names no GPU: cannot be told
        _placement(tmp_path, "comm/gloo/float32/ws2/default", [_rank(0, "n1"), _rank(1, "n1")]),
        # Gloo on CPU tensors: on no GPU, so neither on it nor unknown
        _placement(tmp_path, "comm/gloo/float32/ws4/default", [_rank(r, "n1", device="cpu") for r in range(4)]),
    ]
    inputs = ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=placements, config={"health": {}})
    [head] = health_headlines(inputs)
    assert head.headline == "GPU 1 (n1): degraded"
    q = head.reason  # the jobs are named in the GPU's own Verdict row; the others carry only its mark
    assert "comm nccl/float32/ws2/default (rank 1)" in q and "memory nccl/mlp/ws1/default (rank 0)" in q
    assert "training" not in q  # its rank ran on the healthy GPU 0
    assert "whether 1 job(s) ran on it is unknown (its ranks name no GPU (no UUID or PCI bus id in its placement file))" in q
    assert "ws4" not in q
    [finding] = health_findings(inputs)  # only the mark: the jobs are named once, in the Verdict row
    assert finding.startswith("†health") and "nccl/float32" not in finding
    jobs = HEALTH_SECTION.build(inputs)["jobs"]["rows"]
    assert [(r[2], r[3], r[4]) for r in jobs] == [
        ("comm", "nccl/float32/ws2/default", "1"), ("memory", "nccl/mlp/ws1/default", "0"),
        ("comm", "gloo/float32/ws2/default",
         "unknown: its ranks name no GPU (no UUID or PCI bus id in its placement file)")]


def test_a_degraded_gpu_no_job_ran_on_or_without_placements_says_so(tmp_path, degraded_gpu1):
    only_gpu0 = [_placement(tmp_path, "training/nccl/mlp/ws1/default", [_rank(0, "n1", "GPU-0")])]
    [head] = health_headlines(ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=only_gpu0))
    assert head.reason.endswith("; no benchmark job ran on it")
    [head] = health_headlines(ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=[]))
    assert head.reason.endswith("; which jobs ran on it is unknown (no job placement files)")


def test_the_mark_of_a_degraded_gpu_goes_to_the_headlines_of_the_families_measured_on_it(tmp_path, degraded_gpu1):
    from distbench.core.section import Headline
    from distbench.report.verdict import ordered

    on_gpu1 = [_placement(tmp_path, "comm/nccl/float32/ws2/default", [_rank(0, "n1", "0"), _rank(1, "n1", "1")]),
               _placement(tmp_path, "training/nccl/mlp/ws1/default", [_rank(0, "n1", "0")])]
    [head] = health_headlines(ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=on_gpu1))
    assert head.qualifies_areas == ("communication",)
    others = [Headline("communication", "NCCL all_reduce", "healthy", "at 95%"),
              Headline("training", "DDP 2 ranks", "healthy", "92% efficient")]
    marks = {d["area"]: [m["text"] for m in d["marks"]] for d in ordered([*others, head])}
    assert marks["communication"] == ["†health"]
    assert marks["training"] == []  # its job ran on the healthy GPU 0
    # a CPU job beside them changes nothing; where a job's placement cannot say, every headline carries the note
    cpu = [*on_gpu1, _placement(tmp_path, "comm/gloo/float32/ws2/default", [_rank(0, "n1", device="cpu")])]
    [head] = health_headlines(ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=cpu))
    assert head.qualifies_areas == ("communication",)
    unknown = [*on_gpu1, _placement(tmp_path, "memory/nccl/mlp/ws1/ddp", [_rank(0, "n1")])]
    [head] = health_headlines(ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=unknown))
    assert head.qualifies_areas is None
    assert all(d["marks"] for d in ordered([*others, head]) if d["area"] != "hardware health")
    # no job on it: no other headline carries it
    [head] = health_headlines(ReportInputs({"health_diff": degraded_gpu1 / "health_diff.csv"}, placements=on_gpu1[1:]))
    assert [d["marks"] for d in ordered([*others, head])][1:] == [[], []]


def test_a_node_item_is_matched_by_the_node_name_the_placement_file_records(tmp_path, monkeypatch):
    # SLURM's node names (the health check's host column under SLURM) are not always the host names
    # (two test nodes on one machine, or a fully qualified host name): placement records both
    from distbench.core.run_label import node_name
    from distbench.health.jobs import jobs_on, read_jobs

    monkeypatch.delenv("DISTBENCH_NODE_NAME", raising=False)
    monkeypatch.setenv("SLURMD_NODENAME", "node2")
    assert node_name() == "node2"
    rank = {"rank": 0, "hostname": "box.example.org", "node": "node2", "uuid": None, "pci_bus_id": None,
            "device": "cuda:0"}
    jobs = read_jobs([_placement(tmp_path, "training/nccl/mlp/ws1/plain", [rank])])
    found = jobs_on(("node2", NODE), ("", ""), jobs, {"node1", "node2"})
    assert [job.name for job, _ in found.on] == ["training nccl/mlp/ws1/plain"] and not found.unknown
    found = jobs_on(("node1", NODE), ("", ""), jobs, {"node1", "node2"})
    assert not found.on and not found.unknown


def test_nodes_that_answer_from_one_machine_are_failing_except_the_local_launchers():
    machines = {"gpu-a": ["gpu-a"], "gpu-b": ["gpu-b", "gpu-b.cluster"]}
    (row,) = health_node.same_machine_rows(machines, "srun")
    assert (row.host, row.gpu, row.item, row.state) == ("gpu-b", NODE, health_node.SAME_MACHINE, FAILING)
    assert row.value == "gpu-b = gpu-b.cluster" and "share its GPUs" in row.reason
    assert health_node.same_machine_rows(machines, "local") == []  # local "nodes" share this host by design
    assert health_node.same_machine_rows({"gpu-a": ["gpu-a"], "gpu-b": ["gpu-b"]}, "ssh") == []
