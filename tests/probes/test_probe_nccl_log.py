"""NCCL INFO log parser.

Fixtures (details and URLs in docs/fixtures.md):
  h200x2-rank1.log       real log from our 2x H200 host (NCCL 2.28.9)
  ib-2node-rank0.log     crafted from NCCL src/transport/net.cc, src/init.cc, net_ib.cc format strings,
                         line shapes as in https://github.com/NVIDIA/nccl/issues/1412 and /issues/1814
  shm-p2p-disabled.log   crafted from src/transport/shm.cc format strings, as in https://github.com/NVIDIA/nccl/issues/1817
  tuning-2.2x.log        crafted from src/enqueue.cc "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
  tuning-2.18.log        crafted from the 2.18 "%ld Bytes -> Algo %d proto %d time %f" format

Issue 13 ("probes that survive what users paste"), crafted from NCCL's INFO() format strings:
  robust-nvls-collnet-ib-2.23-rank0.log  rank 0 of 16 (2 nodes), NCCL 2.23 with the SHARP plugin (NET/IBext_v8):
      "NVLS comm %p headRank %d nHeads %d ..." and "Connected NVLS Tree" (transport/nvls.cc, init.cc),
      "CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s" and "rank %d Connected CollNet" (transport/coll_net.cc),
      NET connections with and without /GDRDMA, a PXN proxy "(1)" and /Shared (transport/net.cc),
      "GPU Direct RDMA Enabled|Disabled for GPU %lx / HCA %d ..." (graph/paths.cc),
      "Bootstrap timings total %f (...)" and "Init timings - %s: rank %d nranks %d total %.2f (...)" (2.23+),
      "Setting affinity for GPU %d to %s" (graph/topo.cc)
  paste-interleaved-2x2-2.21.log  4 processes on 2 hosts interleaved behind `srun -l` prefixes ("N: "), a world
      communicator and an ncclCommSplit of ranks 0 and 2 (init.cc "%s comm %p ... parent %p color %d key %d
      commId 0x%llx - Init START"), comm pointers repeated across hosts, rank 0's tuning-model table of NCCL
      2.18-2.22 (graph/tuning.cc: two blocks of three algorithms) with another process's line inside it
  paste-init-hang-4gpu-2.23.log   4 processes on one host behind torchrun "[rankN]:" prefixes; the world
      communicator completes with Init/Bootstrap timings, a second one is started by ranks 0-2 only and never
      completes (rank 3 logged a WARN instead), followed by a PyTorch watchdog line
"""

from pathlib import Path

import pytest

from distbench.probes.nccl_algo import algo_by_size, describe_algo_ranges
from distbench.probes.nccl_comms import merge_parsed
from distbench.probes.nccl_log import parse_nccl_log, parse_nccl_log_files

FIX = Path(__file__).parents[1] / "fixtures" / "nccl"


def load(name):
    return parse_nccl_log((FIX / name).read_text(), source=name)


def test_real_h200_rank1():
    r = load("h200x2-rank1.log")
    assert r["nccl_version"] == "2.28.9" and r["nccl_version_full"] == "2.28.9+cuda13.0"
    assert r["cuda_driver_version"] == 13000
    assert r["nranks"] == 2 and r["nnodes"] == 1
    assert r["ranks"] == [{"rank": 1, "host": "vm", "cudaDev": 1, "nvmlDev": 1, "busId": "70",
                           "nNodes": 1, "localRanks": 2, "localRank": 1}]
    assert r["channels"] == {"coll": 24, "collnet": 24, "nvls": 0, "p2p": 32, "p2p_per_peer": 32}
    assert r["transport_counts"] == {"P2P/CUMEM": 56}
    assert {(t["src"], t["dst"], t["transport"]) for t in r["transports"]} == {(1, 0, "P2P/CUMEM")}
    assert r["net_plugin"] == "Socket"
    assert r["nvls"]["channels"] == 0 and r["collnet"]["channels"] == 24
    assert len(r["trees"]) == 1 and r["trees"][0].startswith("[0] -1/-1/-1->1->0")
    assert r["tuning"] == []


def test_ib_multinode():
    r = load("ib-2node-rank0.log")
    assert r["nnodes"] == 2 and r["nranks"] == 16
    assert r["net_plugin"] == "IB"
    assert r["transport_counts"] == {"NET/IB": 5, "P2P/CUMEM/read": 4}
    assert r["net_speeds_mbps"] == {"mlx5_0": 400000, "mlx5_1": 400000}
    assert r["env"]["NCCL_IB_HCA"] == "mlx5_0,mlx5_1"
    assert r["nvls"] == {"channels": 16, "enabled_env": None, "multicast_supported": True}
    assert r["rings"][0][:3] == [0, 7, 6]
    directions = {t["direction"] for t in r["transports"] if t["transport"] == "NET/IB"}
    assert directions == {"send", "receive"}


def test_shm_and_env():
    r = load("shm-p2p-disabled.log")
    assert r["transport_counts"] == {"SHM": 2}
    assert r["env"] == {"NCCL_P2P_DISABLE": "1"}  # trailing period of the 2.18 format dropped
    assert r["nnodes"] is None  # older logs don't print nNodes; one host seen
    assert r["hosts"] == ["box"]


def test_tuning_new_format_and_ranges():
    r = load("tuning-2.2x.log")
    assert r["env"] == {"NCCL_ALGO": "Ring", "NCCL_NVLS_ENABLE": "0"}
    assert r["nvls"]["enabled_env"] == "0"
    assert r["colls"][0] == {"op": "AllReduce", "opcount": 0, "count": 262144, "datatype": 7,
                             "size_bytes": 1048576, "nranks": 2}
    rows = [x for x in algo_by_size(r) if x["op"] == "AllReduce"]
    assert rows == [
        {"op": "AllReduce", "size_bytes": 1 << 20, "algo": "Ring", "proto": "LL"},
        {"op": "AllReduce", "size_bytes": 2 << 20, "algo": "Ring", "proto": "Simple"},
        {"op": "AllReduce", "size_bytes": 4 << 20, "algo": "Ring", "proto": "Simple"},
    ]
    assert describe_algo_ranges(rows) == "1 MiB: Ring/LL, 2 MiB+: Ring/Simple"
    assert r["tuning"][0]["channels"] == [0, 7]


def test_tuning_218_numeric_format_takes_op_from_coll_line():
    r = load("tuning-2.18.log")
    rows = algo_by_size(r)
    assert {"op": "AllReduce", "size_bytes": 8192, "algo": "Tree", "proto": "LL"} in rows
    assert {"op": "AllReduce", "size_bytes": 67108864, "algo": "Ring", "proto": "Simple"} in rows
    assert {"op": "AllGather", "size_bytes": 37756928, "algo": "Ring", "proto": "Simple"} in rows
    assert r["tuning"][1]["time_us"] == 312.5
    assert r["channels"]["collnet"] is None and r["channels"]["nvls"] == 0


def test_describe_ranges_middle_runs():
    rows = [{"op": "AllReduce", "size_bytes": s, "algo": a, "proto": p}
            for s, a, p in [(8, "Tree", "LL"), (1024, "Tree", "LL"), (65536, "Ring", "LL128"), (1 << 30, "NVLS", "Simple")]]
    assert describe_algo_ranges(rows) == "8 B–1 KiB: Tree/LL, 64 KiB: Ring/LL128, 1 GiB+: NVLS/Simple"


def test_merge_one_file_per_rank(tmp_path):
    rank1 = (FIX / "h200x2-rank1.log").read_text()
    rank0 = rank1.replace("1[1] -> 0[0]", "0[0] -> 1[1]").replace("rank 1 ", "rank 0 ").replace("[1] NCCL", "[0] NCCL")
    (tmp_path / "r0.log").write_text(rank0)
    (tmp_path / "r1.log").write_text(rank1)
    m = parse_nccl_log_files([tmp_path / "r0.log", tmp_path / "r1.log"])
    assert [r["rank"] for r in m["ranks"]] == [0, 1]
    assert m["nranks"] == 2 and m["nnodes"] == 1 and m["nccl_version"] == "2.28.9"
    assert m["transport_counts"] == {"P2P/CUMEM": 112}
    assert {(t["src"], t["dst"]) for t in m["transports"]} == {(0, 1), (1, 0)}
    assert len(m["sources"]) == 2


def test_merge_flags_version_mismatch():
    a = load("h200x2-rank1.log")
    b = load("tuning-2.2x.log")
    m = merge_parsed([a, b])
    assert any("different NCCL versions" in w for w in m["warnings"])


def test_prefixed_lines_and_warn():
    r = parse_nccl_log("[1] h1:10:11 [1] NCCL INFO NCCL version 2.20.3+cuda12.3\n"
                       "h1:10:11 [1] NCCL WARN NET/IB : Got completion with error\n")
    assert r["nccl_version"] == "2.20.3" and r["hosts"] == ["h1"]
    assert r["warnings"] == ["NET/IB : Got completion with error"]


@pytest.mark.parametrize("text", ["", "plain text\nno nccl here\n", "NCCL WARN only\n"])
def test_no_info_lines_raise(text):
    with pytest.raises(ValueError, match="no 'NCCL INFO' lines"):
        parse_nccl_log(text)


def test_lent_h200x2_probe_logs_from_our_own_pipeline():
    # Written by `probe_nccl` (distbench.probes.nccl_probe) on the lent 2x H200 machine, 2026-11-26:
    # rank 0 logged the TUNING lines, rank 1 only INIT/GRAPH.
    from distbench.probes.nccl_algo import algo_by_size, describe_algo_ranges
    from distbench.probes.nccl_log import parse_nccl_log_files

    files = [FIX / "h200x2-lent-2026-11-26-rank0-tuning.log", FIX / "h200x2-lent-2026-11-26-rank1.log"]
    parsed = parse_nccl_log_files(files)
    assert parsed["nccl_version"] == "2.28.9" and parsed["nranks"] == 2
    assert parsed["channels"]["nvls"] == 0 and set(parsed["transport_counts"]) == {"P2P/CUMEM"}
    rows = {(r["op"], r["size_bytes"]): (r["algo"], r["proto"]) for r in algo_by_size(parsed)}
    assert rows[("AllReduce", 8)] == ("Ring", "LL") and rows[("AllReduce", 2**30)] == ("Ring", "Simple")
    assert "AllReduce" in describe_algo_ranges(algo_by_size(parsed))


# --- Pasted and newer logs (issue 13) ---------------------------------------------------------------


def _rank(parsed, comm_id, rank):
    comm = next(c for c in parsed["communicators"] if c["comm_id"] == comm_id)
    return next(r for r in comm["ranks"] if r["rank"] == rank)


def test_nvls_and_collnet_are_transports():
    r = load("robust-nvls-collnet-ib-2.23-rank0.log")
    assert r["transport_families"] == ["CollNet", "NET/IB", "NVLS", "P2P/CUMEM/read"]
    assert r["transport_counts"] == {"NET/IB": 5, "P2P/CUMEM/read": 2, "CollNet": 4}
    assert r["nvls_detail"]["connected"] is True
    assert r["nvls_detail"]["multicast"] == [{"host": "node-a", "pid": 5101, "dev": 0, "available": True}]
    assert r["collnet_detail"]["connected"] is True
    conns = r["collnet_detail"]["connections"]
    assert len(conns) == 4 and {(c["channel"], c["direction"]) for c in conns} == {
        (0, "send"), (0, "receive"), (1, "send"), (1, "receive")}
    assert all(c["plugin"] == "SHARP" and c["nic"] == 0 and c["gdrdma"] for c in conns)
    rank0 = _rank(r, "0x7d4e0a2b91c35f60", 0)
    assert rank0["nvls_head"] == {"head_rank": 0, "n_heads": 8, "buff_size": 1048576, "mem_size": 2097152,
                                  "per_rank_size": 100663296, "total_size": 805306368}
    assert rank0["nvls_connected"] is True and rank0["collnet_connected"] is True
    # the existing keys keep their meaning
    assert r["nvls"] == {"channels": 16, "enabled_env": None, "multicast_supported": True}
    assert r["collnet"] == {"channels": 4, "enabled_env": "1"}


def test_no_nvls_or_collnet_when_not_connected():
    r = load("h200x2-rank1.log")  # 24 collnet channels counted, but nothing connected over CollNet/NVLS
    assert r["transport_families"] == ["P2P/CUMEM"]
    assert r["nvls_detail"]["connected"] is False and r["collnet_detail"] == {"connected": False, "connections": []}


def test_gdrdma_flag_and_nic_index_per_connection_and_summarised():
    r = load("robust-nvls-collnet-ib-2.23-rank0.log")
    conns = r["net_connections"]
    assert len(conns) == 5
    no_gdr = [c for c in conns if not c["gdrdma"]]
    assert [(c["src"], c["dst"], c["direction"], c["nic"], c["nic_name"]) for c in no_gdr] == [
        (0, 8, "send", 1, "mlx5_3:1/IB")]
    pxn = next(c for c in conns if c["proxy_rank"] is not None)
    assert pxn["proxy_rank"] == 1 and pxn["nic"] == 0 and pxn["gdrdma"] and pxn["shared"] and pxn["channel"] == 2
    assert all(c["net"] == "IBext_v8" and c["comm_id"] == "0x7d4e0a2b91c35f60" for c in conns)
    g = r["gdrdma"]
    assert (g["net_connections"], g["gdrdma_connections"], g["all_gdrdma"]) == (5, 4, False)
    assert g["nics"] == [
        {"net": "IBext_v8", "nic": 0, "name": "mlx5_0:1/IB", "connections": 4, "gdrdma": 4},
        {"net": "IBext_v8", "nic": 1, "name": "mlx5_3:1/IB", "connections": 1, "gdrdma": 0}]
    assert [(c["hca"], c["enabled"]) for c in g["checks"]] == [("0", True), ("1", False)]
    assert g["checks"][1]["detail"] == "(distance 7 > 5)"


def test_gdrdma_on_the_older_ib_fixture():
    r = load("ib-2node-rank0.log")
    assert r["gdrdma"]["all_gdrdma"] is True and r["gdrdma"]["net_connections"] == 5
    assert r["gdrdma"]["nics"] == [{"net": "IB", "nic": 0, "name": "mlx5_0:1/IB", "connections": 5, "gdrdma": 5}]
    assert [c["proxy_rank"] for c in r["net_connections"]] == [None, None, None, None, 1]


def test_no_net_no_gdrdma_verdict():
    assert load("shm-p2p-disabled.log")["gdrdma"]["all_gdrdma"] is None


def test_interleaved_processes_grouped_by_comm_id():
    r = load("paste-interleaved-2x2-2.21.log")
    # the world communicator: every rank, although rank 0 and rank 2 share the pointer 0x55aa00
    assert r["nranks"] == 4 and r["nnodes"] == 2 and r["hosts"] == ["gpu-a", "gpu-b"]
    assert [(x["rank"], x["host"], x["cudaDev"], x["nvmlDev"], x["busId"]) for x in r["ranks"]] == [
        (0, "gpu-a", 0, 0, "18000"), (1, "gpu-a", 1, 1, "3b000"), (2, "gpu-b", 0, 0, "18000"),
        (3, "gpu-b", 1, 1, "3b000")]
    assert [(c["comm_id"], c["nranks"], c["ranks_seen"]) for c in r["communicators"]] == [
        ("0xa1b2c3d4e5f60718", 4, 4), ("0x0f1e2d3c4b5a6978", 2, 2)]
    split = r["communicators"][1]
    assert [(x["rank"], x["host"], x["pid"], x["comm"]) for x in split["ranks"]] == [
        (0, "gpu-a", 3101, "0x55c100"), (1, "gpu-b", 4201, "0x55c100")]
    assert all(c["all_init_complete"] is True and c["missing_ranks"] == [] for c in r["communicators"])
    assert r["findings"] == [] and r["warnings"] == []
    # NET connections know their communicator: the split's two lines come last
    assert [c["comm_id"] for c in r["net_connections"]][-2:] == ["0x0f1e2d3c4b5a6978"] * 2
    assert r["gdrdma"]["nics"][0]["name"] == "mlx5_0:1/RoCE"


def test_tuning_table_of_nccl_2_18_to_2_22():
    r = load("paste-interleaved-2x2-2.21.log")
    assert len(r["tuning_tables"]) == 1
    table = r["tuning_tables"][0]
    assert (table["host"], table["pid"], table["comm_id"], table["rank"]) == ("gpu-a", 3101, "0xa1b2c3d4e5f60718", 0)
    assert len(table["entries"]) == 5 * 6 * 3  # 5 collectives x 6 algorithms x 3 protocols
    by_key = {(e["op"], e["algo"], e["proto"]): e for e in table["entries"]}
    assert by_key[("AllReduce", "Ring", "Simple")] == {"op": "AllReduce", "algo": "Ring", "proto": "Simple",
                                                       "latency_us": 72.0, "bw_gbps": 16.0, "max_threads": 512}
    assert by_key[("AllReduce", "Tree", "LL128")]["bw_gbps"] == 17.6
    assert by_key[("AllGather", "NVLSTree", "Simple")]["max_threads"] == 640


def test_tuning_table_of_nccl_2_28_real():
    r = parse_nccl_log_files([FIX / "h200x2-lent-2026-11-26-rank0-tuning.log",
                              FIX / "h200x2-lent-2026-11-26-rank1.log"])
    (table,) = r["tuning_tables"]
    assert table["rank"] == 0 and table["comm_id"] == "0x205bdb7f29f113e"
    assert len(table["entries"]) == 5 * 7 * 3  # 7 algorithms since PAT (2.23); its block repeats protocol names
    by_key = {(e["op"], e["algo"], e["proto"]): e for e in table["entries"]}
    ring_simple = by_key[("AllReduce", "Ring", "Simple")]
    assert (ring_simple["bw_gbps"], ring_simple["latency_us"]) == (360.0, 15.2)
    assert by_key[("AllReduce", "CollNetChain", "Simple")]["latency_us"] == 35.6
    assert by_key[("AllGather", "PAT", "LL")]["max_threads"] == 0
    assert len(r["tuning"]) > 0  # the per-size TUNING lines are still read


def test_nccl_path_matrix_real():
    r = load("h200x2-rank1.log")
    assert r["nccl_paths"] == {}  # this run logged without GRAPH
    r = load("h200x2-lent-2026-11-26-rank1.log")
    paths = r["nccl_paths"]["vm"]
    assert paths["GPU/0-60"]["GPU/0-70"] == {"hops": 2, "bw_gbps": 370.8, "type": "NVL"}
    assert paths["NET/0-0"]["GPU/0-70"]["type"] == "PHB"


def test_rank_that_never_completes_init_is_a_finding():
    r = load("paste-init-hang-4gpu-2.23.log")
    world, second = r["communicators"]
    assert world["all_init_complete"] is True and world["init_complete_ranks"] == [0, 1, 2, 3]
    assert second["comm_id"] == "0x5566778899aabbcc" and second["all_init_complete"] is False
    assert second["init_incomplete_ranks"] == [0, 1, 2] and second["missing_ranks"] == [3]
    (finding,) = r["findings"]
    assert finding.startswith("communicator 0x5566778899aabbcc: ranks 0, 1, 2 of 4 logged Init START but never "
                              "Init COMPLETE")
    assert "rank 1: host dgx, pid 7001, cudaDev 1, busId 2a000" in finding and "absent from the log: rank 3" in finding
    # warnings (shown in the report) = NCCL's WARN lines, then the findings
    assert r["warn_lines"] == ["Cuda failure 'an illegal memory access was encountered'"]
    assert r["warnings"] == r["warn_lines"] + r["findings"]
    # the job's world is still the complete 4-rank communicator
    assert [x["rank"] for x in r["ranks"]] == [0, 1, 2, 3] and r["ranks"][3]["busId"] == "5d000"


def test_init_state_survives_one_file_per_rank(tmp_path):
    text = (FIX / "paste-init-hang-4gpu-2.23.log").read_text()
    files = []
    for rank in range(4):
        f = tmp_path / f"rank{rank}.log"
        f.write_text("".join(l for l in text.splitlines(True) if l.startswith(f"[rank{rank}]:")))
        files.append(f)
    alone = parse_nccl_log_files(files[:1])  # rank 0's own file: its own hang, nothing about the others
    assert len(alone["findings"]) == 1 and "absent from the log" not in alone["findings"][0]
    merged = parse_nccl_log_files(files)
    combined = load("paste-init-hang-4gpu-2.23.log")
    assert merged["findings"] == combined["findings"]
    assert [c["init_incomplete_ranks"] for c in merged["communicators"]] == [[], [0, 1, 2]]
    assert _rank(merged, "0x3c4d5e6f708192a3", 3)["init"] == "complete"


def test_init_and_bootstrap_timings():
    r = load("paste-init-hang-4gpu-2.23.log")
    rank2 = _rank(r, "0x3c4d5e6f708192a3", 2)
    assert rank2["init_timings"] == {"total_s": 0.75, "kernels_s": 0.23, "alloc_s": 0.03, "bootstrap_s": 0.03,
                                     "allgathers_s": 0.01, "topo_s": 0.39, "graphs_s": 0.02, "connections_s": 0.03,
                                     "rest_s": 0.01}
    assert rank2["bootstrap_timings"]["total_s"] == 0.031 and rank2["bootstrap_timings"]["recv_s"] == 0.03
    assert _rank(r, "0x5566778899aabbcc", 2)["init_timings"] is None  # the hung init never printed them
    rank0 = _rank(load("robust-nvls-collnet-ib-2.23-rank0.log"), "0x7d4e0a2b91c35f60", 0)
    assert rank0["init_timings"]["connections_s"] == 0.97 and rank0["bootstrap_timings"]["total_s"] == 0.004102
    real = _rank(load("h200x2-rank1.log"), "0x768af3073221a794", 1)
    assert real["init_timings"]["total_s"] == 0.41 and real["bootstrap_timings"] is None
    assert _rank(load("paste-interleaved-2x2-2.21.log"), "0xa1b2c3d4e5f60718", 0)["init_timings"] is None  # 2.21


def test_cpu_affinity_per_rank():
    r = load("paste-init-hang-4gpu-2.23.log")
    masks = {x["rank"]: x["cpu_affinity"] for x in r["communicators"][0]["ranks"]}
    assert masks == {0: "ffffffff,00000000,ffffffff", 1: "ffffffff,00000000,ffffffff",
                     2: "ffffffff,00000000,ffffffff,00000000", 3: "ffffffff,00000000,ffffffff,00000000"}
    inter = load("paste-interleaved-2x2-2.21.log")  # cudaDev 1 on two hosts: affinity follows the process
    assert _rank(inter, "0xa1b2c3d4e5f60718", 3)["cpu_affinity"] == "ffffff,ff000000,00000000"
    assert _rank(inter, "0xa1b2c3d4e5f60718", 1)["cpu_affinity"] == "ffffff,ffffffff"
    # NCCL 2.28 on a VM: empty GPU affinity, so the process keeps its own mask
    real = _rank(load("h200x2-rank1.log"), "0x768af3073221a794", 1)
    assert real["cpu_affinity"] is None and real["process_cpu_affinity"] == "0-31"


def test_new_keys_in_cli_json():
    import json
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    p = subprocess.run([sys.executable, "-m", "distbench.probes", "nccl-log", FIX / "paste-init-hang-4gpu-2.23.log"],
                       capture_output=True, text=True, timeout=60, cwd=root, check=False)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["communicators"]) == 2 and len(out["findings"]) == 1
    assert out["findings"][0] in out["warnings"]


def test_the_probe_starts_one_process_per_rank_with_torchruns_environment_and_kills_them_at_its_limit(tmp_path):
    # the probe's launch without torchrun's agent (distbench.probes.nccl_probe._run_ranks), on CPU:
    # each rank sees RANK/WORLD_SIZE/MASTER_PORT as under torchrun; at the limit no rank survives
    import os
    import time

    from distbench.probes.nccl_probe import _run_ranks

    # one write per rank: both share the log, and print() under PYTHONUNBUFFERED=1 (set on CI's
    # machine) writes word by word, so two ranks printing at once interleave their words
    show = ["-c", "import os, sys; e = os.environ; "
            "os.write(1, f\"rank {e['RANK']} of {e['WORLD_SIZE']} port {e['MASTER_PORT']}\\n\".encode()); "
            "sys.exit(int(e['RANK']) * 3)"]
    log = tmp_path / "ranks.log"
    assert _run_ranks(2, show, dict(os.environ), log, timeout_s=60) == [0, 3]
    lines = sorted(log.read_text().split("\n"))[1:]
    assert [ln.split()[:4] for ln in lines] == [["rank", "0", "of", "2"], ["rank", "1", "of", "2"]]
    assert lines[0].split()[-1] == lines[1].split()[-1]  # one rendezvous port
    pid_file = tmp_path / "pids"
    hang = ["-c", f"import os, time; open({str(pid_file)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(600)"]
    start = time.monotonic()
    assert _run_ranks(2, hang, dict(os.environ), log, timeout_s=3) is None
    assert time.monotonic() - start < 30
    for pid in map(int, pid_file.read_text().split()):
        try:
            os.kill(pid, 0)
            alive = open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        assert not alive, f"rank process {pid} outlived the probe's limit"


def test_the_probe_ranks_read_their_ops_and_sizes_as_json(tmp_path, monkeypatch):
    """The NCCL probe's ranks take the ops and sizes from a JSON file the probe writes (issue 46: nothing
    joined into a string and parsed again); the ranks themselves need NCCL, so they are stood in for."""
    import json

    from distbench.probes import nccl_probe

    seen = {}
    monkeypatch.setattr(nccl_probe, "_run_ranks", lambda ws, args, env, log, t: seen.setdefault("args", args) and [0, 0])
    nccl_probe.run_probe(2, ["all_reduce", "all_gather"], [8, 1 << 30], {}, tmp_path / "nccl.json", tmp_path / "logs")
    args = seen["args"]
    assert "--sizes" not in args and args[args.index("--params") + 1] == str(tmp_path / "logs/probe_params.json")
    assert json.loads((tmp_path / "logs/probe_params.json").read_text()) == {"ops": ["all_reduce", "all_gather"],
                                                                          "sizes": [8, 1 << 30]}
    monkeypatch.setattr(nccl_probe, "worker", lambda ops, sizes: seen.update(worker=(ops, sizes)) or 0)
    assert nccl_probe.main(["--worker", *args[args.index("--params"):]]) == 0
    assert seen["worker"] == (["all_reduce", "all_gather"], [8, 1 << 30])
