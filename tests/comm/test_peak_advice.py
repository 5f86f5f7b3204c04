"""Link peak, published expectations, and each advice rule firing (and not firing) on crafted summaries."""

from pathlib import Path

import math

import pandas as pd
import pytest

from tests.conftest import REPO

from distbench.comm.analysis.advice import advise, percent_of_peak
from distbench.core.references import EXPECTED, expected_for, link_peak
from distbench.probes.nccl_log import parse_nccl_log
from distbench.probes.topology import parse_topology

FIX = Path(__file__).parents[1] / "fixtures"
GiB, MiB, KiB = 1 << 30, 1 << 20, 1 << 10


def topo(name):
    return parse_topology((FIX / "topo" / name).read_text())


def nccl(name):
    return parse_nccl_log((FIX / "nccl" / name).read_text())


def row(**kw):
    base = dict(backend="nccl", world_size=2, op="all_reduce", dtype="float32", nccl_env="default", timing="events",
                inplace=False, size_bytes=GiB, n_trials=5, time_us_median=100.0, time_us_p5=99.0, time_us_p95=101.0,
                time_us_min=98.0, time_us_cv=0.01, algbw_gbps_median=165.0, busbw_gbps_median=330.0,
                busbw_gbps_max=335.0, correct=True, status="ok")
    base.update(kw)
    return base


def frame(*rows):
    return pd.DataFrame(list(rows))


def texts(items, severity=None):
    return [i["text"] for i in items if severity is None or i["severity"] == severity]


H200_ENV = {"gpus": [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}]}
PEAK_450 = {"peak_gbps": 450.0, "link": "NVLink4 x18", "basis": "", "kind": "nvlink"}


# ---- peak ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fixture,name,gbps,link", [
    ("h200x2.txt", None, 450.0, "NVLink4 x18"),                          # name read from the -L lines
    ("h100x8_nv18_nics.txt", "NVIDIA H100 80GB HBM3", 450.0, "NVLink4 x18"),
    ("a100x4_nv4_nics.txt", "NVIDIA A100-SXM4-40GB", 300.0, "NVLink3 x12"),  # 3 peers x NV4
    ("v100x8_hcm.txt", "Tesla V100-SXM2-32GB", 150.0, "NVLink2 x6"),      # NV2+NV2+NV1+NV1
    ("rtx4090x8_pcie.txt", "NVIDIA GeForce RTX 4090", 31.5, "PCIe Gen4 x16"),
])
def test_link_peak_from_topology(fixture, name, gbps, link):
    p = link_peak(topo(fixture), None, None, name)
    assert p["peak_gbps"] == pytest.approx(gbps) and p["link"] == link and p["basis"]


def test_link_peak_from_name_nvml_and_network():
    assert link_peak(None, None, None, "NVIDIA H100 80GB HBM3")["peak_gbps"] == 450.0
    assert link_peak(None, None, None, "Tesla V100-SXM2-16GB")["peak_gbps"] == 150.0
    assert link_peak(None, None, None, "NVIDIA H100 PCIe")["link"] == "PCIe Gen5 x16"
    nvml = {"available": True, "gpus": [{"name": "NVIDIA H100", "nvlink_active": 16, "nvlink_generation": 4},
                                        {"name": "NVIDIA H100", "nvlink_active": 18, "nvlink_generation": 4}]}
    assert link_peak(None, nvml, None, None)["link"] == "NVLink4 x16"  # a GPU with 2 links down bounds it
    net = link_peak(topo("h100x8_nv18_nics.txt"), None, nccl("ib-2node-rank0.log"), "NVIDIA H100")
    assert net["kind"] == "network" and net["peak_gbps"] == 50.0
    assert link_peak()["peak_gbps"] is None


def test_expected_table_and_lookup():
    for e in EXPECTED:
        assert set(e) >= {"gpu", "gpus", "op", "min_bytes", "expected_busbw_gbps_low", "expected_busbw_gbps_high", "source"}
        # a published figure cites a public address; a figure of ours names where it is kept
        if e["kind"] == "published":
            assert e["source"].startswith("https://")
        else:
            assert e["kind"] == "ours" and "benchmarks/results/" in e["source"]
            assert (REPO / e["source"].split("; ")[-1]).is_dir(), e["source"]
    assert expected_for("NVIDIA H200", 2, "all_reduce", GiB)["expected_busbw_gbps_low"] == 320.0
    assert expected_for("NVIDIA H100 80GB HBM3", 8, "allreduce", 2 * GiB)["nvls"] is False  # conservative row
    assert expected_for("NVIDIA H100 80GB HBM3", 8, "all_reduce", 2 * GiB, nvls=True)["expected_busbw_gbps_high"] == 480.0
    assert expected_for("NVIDIA H200", 2, "all_reduce", 256 * MiB) is None   # below min_bytes
    assert expected_for("NVIDIA H100 PCIe", 8, "all_reduce", 2 * GiB) is None
    assert expected_for(None, 8, "all_reduce", 2 * GiB) is None


# ---- advice rules -------------------------------------------------------------------------

def test_healthy_run_gives_no_warnings():
    s = frame(row(size_bytes=MiB, busbw_gbps_median=100.0), row())
    items = advise(s, env=H200_ENV, topology=topo("h200x2.txt"), nccl=nccl("h200x2-rank1.log"), peak=PEAK_450,
                   placement=[{"rank": 0, "uuid": "GPU-a", "hostname": "vm"}, {"rank": 1, "uuid": "GPU-b", "hostname": "vm"}])
    assert [i["severity"] for i in items] == ["info"]  # only the NVLS/CollNet state note
    assert "0 NVLS channels and 24 CollNet channels" in items[0]["text"]


def test_below_link_peak():
    fired = advise(frame(row(busbw_gbps_median=120.0)), topology=topo("h200x2.txt"), peak=PEAK_450)
    assert any("27% of the 450 GB/s NVLink4 x18 peak" in t and "nvidia-smi topo -m" in t and "NV18" in t
               for t in texts(fired, "warn"))
    assert not advise(frame(row(busbw_gbps_median=300.0)), peak=PEAK_450)
    assert not advise(frame(row(busbw_gbps_median=120.0)), peak=None)


def test_net_between_ranks_on_one_host():
    socket_one_host = parse_nccl_log("h:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n"
                                     "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0\n")
    fired = texts(advise(frame(row()), nccl=socket_one_host), "warn")
    assert any("NET/Socket (1 connections)" in t and "P2P" in t for t in fired)
    assert not texts(advise(frame(row()), nccl=nccl("ib-2node-rank0.log")), "warn")     # 2 nodes: NET is right
    assert not texts(advise(frame(row()), nccl=nccl("h200x2-rank1.log")), "warn")       # P2P only


def test_two_ranks_on_one_gpu():
    shared = [{"rank": 0, "local_rank": 0, "uuid": "GPU-a", "hostname": "vm", "device_index": 0},
              {"rank": 1, "local_rank": 1, "uuid": "GPU-a", "hostname": "vm", "device_index": 0}]
    errors = texts(advise(frame(row()), placement=shared), "error")
    assert len(errors) == 1 and "torchrun --nproc_per_node=1" in errors[0] and "CUDA_VISIBLE_DEVICES" in errors[0]
    fine = [dict(shared[0]), dict(shared[1], uuid="GPU-b", device_index=1)]
    assert not texts(advise(frame(row()), placement=fine), "error")


def test_p2p_or_shm_disabled():
    fired = texts(advise(frame(row()), nccl=nccl("shm-p2p-disabled.log")), "warn")
    assert any("NCCL_P2P_DISABLE=1 (the NCCL log)" in t for t in fired)
    fired = texts(advise(frame(row(nccl_env="NCCL_SHM_DISABLE=1"))), "warn")
    assert any("NCCL_SHM_DISABLE=1" in t for t in fired)
    assert not texts(advise(frame(row()), env={"environ": {"NCCL_P2P_DISABLE": "0"}}), "warn")


def test_nvls_state_info():
    info = texts(advise(frame(row()), nccl=nccl("tuning-2.2x.log")), "info")
    assert any("NCCL_NVLS_ENABLE=0" in t and "off" in t for t in info)
    info = texts(advise(frame(row()), nccl=nccl("ib-2node-rank0.log")), "info")
    assert any("16 NVLS channels" in t and "is on" in t for t in info)
    assert not texts(advise(frame(row())), "info")


def test_wrong_results():
    errors = texts(advise(frame(row(), row(size_bytes=MiB, status="wrong", correct=False))), "error")
    assert errors and "1 measurements returned wrong results: all_reduce 1 MiB" in errors[0]
    assert not texts(advise(frame(row())), "error")


def test_noisy_large_sizes():
    fired = texts(advise(frame(row(time_us_cv=0.25, time_us_p5=80.0, time_us_p95=140.0))), "warn")
    assert any("coefficient of variation of 25%" in t for t in fired)
    # noise only at a small size (not the largest) is not flagged
    s = frame(row(size_bytes=4 * KiB, time_us_cv=0.5), row())
    assert not texts(advise(s), "warn")


def test_host_timing_overhead_at_small_sizes():
    s = frame(row(size_bytes=KiB, timing="events", time_us_median=10.0),
              row(size_bytes=KiB, timing="host", time_us_median=45.0))
    info = texts(advise(s), "info")
    assert any("45.0 µs by the host clock but 10.0 µs on the GPU" in t for t in info)
    s = frame(row(size_bytes=KiB, timing="events", time_us_median=10.0),
              row(size_bytes=KiB, timing="host", time_us_median=12.0))
    assert not texts(advise(s), "info")


def test_far_below_published_expectation():
    warn = texts(advise(frame(row(busbw_gbps_median=200.0)), env=H200_ENV), "warn")
    # 2x H200: no public figure; ours is named as ours, never "published"
    assert any("far below the 320-340 GB/s we measured for 2x H200 (nccl-tests all_reduce_perf by this project" in t
               and "our measurement, not a publication" in t for t in warn), warn
    assert not any("published" in t for t in warn)
    assert not texts(advise(frame(row(busbw_gbps_median=300.0)), env=H200_ENV), "warn")
    # a size below the figure's min_bytes has no published figure to hold against
    assert not texts(advise(frame(row(size_bytes=64 * MiB, busbw_gbps_median=50.0)), env=H200_ENV), "warn")


def test_advise_handles_empty_summary_and_orders_by_severity():
    assert advise(pd.DataFrame()) == []
    items = advise(frame(row(busbw_gbps_median=100.0), row(size_bytes=MiB, status="wrong")), peak=PEAK_450)
    assert [i["severity"] for i in items] == ["error", "warn"]
    assert all(set(i) == {"severity", "text", "evidence"} for i in items)


def test_percent_of_peak():
    s = frame(row(busbw_gbps_median=225.0), row(op="barrier", busbw_gbps_median=float("nan")))
    out = percent_of_peak(s, 450.0)
    assert out["pct_of_link_peak"].iloc[0] == pytest.approx(50.0)
    assert math.isnan(out["pct_of_link_peak"].iloc[1])
    assert "pct_of_link_peak" not in s
    assert percent_of_peak(s, None)["pct_of_link_peak"].isna().all()


def test_graph_mixing_measured_side_by_side_or_suggested():
    graph = dict(timing="graph", size_bytes=8, busbw_gbps_median=float("nan"))
    both = frame(row(**graph, time_us_median=10.7), row(**graph, time_us_median=5.0, nccl_env="NCCL_GRAPH_MIXING_SUPPORT=0"))
    info = texts(advise(both), "info")
    assert any("10.7 µs per op with NCCL's graph mixing on" in t and "5.00 µs with NCCL_GRAPH_MIXING_SUPPORT=0" in t
               and "5.70 µs difference" in t for t in info)
    only_default = texts(advise(frame(row(**graph, time_us_median=10.7))), "info")
    assert any("add {NCCL_GRAPH_MIXING_SUPPORT: 0} to comm.nccl_env" in t for t in only_default)
    # no graph timing, or only large sizes: nothing to say
    assert not [t for t in texts(advise(frame(row()))) if "graph mixing" in t]
    assert not [t for t in texts(advise(frame(row(timing="graph", size_bytes=GiB)))) if "graph mixing" in t]
