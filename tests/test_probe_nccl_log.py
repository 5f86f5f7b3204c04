"""NCCL INFO log parser.

Fixtures (details and URLs in docs/fixtures.md):
  h200x2-rank1.log       real log from our 2x H200 host (NCCL 2.28.9)
  ib-2node-rank0.log     crafted from NCCL src/transport/net.cc, src/init.cc, net_ib.cc format strings,
                         line shapes as in https://github.com/NVIDIA/nccl/issues/1412 and /issues/1814
  shm-p2p-disabled.log   crafted from src/transport/shm.cc format strings, as in https://github.com/NVIDIA/nccl/issues/1817
  tuning-2.2x.log        crafted from src/enqueue.cc "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
  tuning-2.18.log        crafted from the 2.18 "%ld Bytes -> Algo %d proto %d time %f" format
"""

from pathlib import Path

import pytest

from distbench.probes.nccl_log import (algo_by_size, describe_algo_ranges, merge_parsed, parse_nccl_log,
                                       parse_nccl_log_files)

FIX = Path(__file__).parent / "fixtures" / "nccl"


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
    from distbench.probes.nccl_log import algo_by_size, describe_algo_ranges, parse_nccl_log_files

    files = [FIX / "h200x2-lent-2026-11-26-rank0-tuning.log", FIX / "h200x2-lent-2026-11-26-rank1.log"]
    parsed = parse_nccl_log_files(files)
    assert parsed["nccl_version"] == "2.28.9" and parsed["nranks"] == 2
    assert parsed["channels"]["nvls"] == 0 and set(parsed["transport_counts"]) == {"P2P/CUMEM"}
    rows = {(r["op"], r["size_bytes"]): (r["algo"], r["proto"]) for r in algo_by_size(parsed)}
    assert rows[("AllReduce", 8)] == ("Ring", "LL") and rows[("AllReduce", 2**30)] == ("Ring", "Simple")
    assert "AllReduce" in describe_algo_ranges(algo_by_size(parsed))
