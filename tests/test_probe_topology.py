"""Topology parser on real and public `nvidia-smi topo -m` output.

Fixture sources (details in docs/fixtures.md):
  h200x2.txt            our 2x H200 host (/work/shared/fixtures/h200x2/nvidia-smi-topo-m.txt)
  h100x8_nv18_nics.txt  https://github.com/NVIDIA/nccl/issues/1453 (NIC6-8 rows completed by symmetry)
  rtx4090x8_pcie.txt    https://github.com/NVIDIA/go-gpuallocator/issues/17
  a100x4_nv4_nics.txt   https://github.com/NVIDIA/nccl-tests/issues/331 (NIC Legend lines 2-3 completed)
  v100x8_hcm.txt        https://github.com/NVIDIA/nccl-tests/issues/29 (last CPU affinity completed)
  h200x2-lent-2026-11-26.txt  written by our probe_topology rule on the lent 2x H200 machine
"""

from pathlib import Path

import pytest

from distbench.probes.topology import parse_topology, path_between, probe_topology

FIX = Path(__file__).parent / "fixtures" / "topo"


def load(name):
    return parse_topology((FIX / name).read_text())


def test_h200x2_real_fixture():
    t = load("h200x2.txt")
    assert t["gpus"] == ["GPU0", "GPU1"]
    assert t["matrix"]["GPU0"]["GPU1"] == "NV18"
    assert t["links"] == [{"a": "GPU0", "b": "GPU1", "type": "NV", "nvlinks": 18, "raw": "NV18"}]
    assert t["cpu_affinity"] == {"GPU0": "0-31", "GPU1": "0-31"}
    assert t["numa_affinity"] == {"GPU0": "0", "GPU1": "0"}
    assert t["gpu_numa_id"] == {"GPU0": None, "GPU1": None}  # "N/A"
    assert t["gpu_names"] == {"GPU0": "NVIDIA H200", "GPU1": "NVIDIA H200"}
    assert t["gpu_uuids"]["GPU1"] == "GPU-08c4694b-f2d1-16cb-34e1-e5f53dc9c459"
    assert t["legend"]["NV#"] == "Connection traversing a bonded set of # NVLinks"
    assert t["nics"] == []


def test_h100x8_nvswitch_with_nics_and_two_numa_nodes():
    t = load("h100x8_nv18_nics.txt")
    assert len(t["gpus"]) == 8
    assert len(t["links"]) == 28  # one per unordered GPU pair
    assert {(l["type"], l["nvlinks"]) for l in t["links"]} == {("NV", 18)}
    assert [n["name"] for n in t["nics"]] == [f"NIC{i}" for i in range(9)]
    assert t["cpu_affinity"]["GPU0"] == "0-79" and t["cpu_affinity"]["GPU7"] == "80-159"
    assert t["numa_affinity"]["GPU3"] == "0" and t["numa_affinity"]["GPU4"] == "1"
    assert t["matrix"]["GPU0"]["NIC8"] == "PIX" and t["matrix"]["NIC1"]["GPU7"] == "PIX"
    assert {"gpu": "GPU7", "nic": "NIC1", "type": "PIX"} in t["nic_links"]


def test_pcie_only_box():
    t = load("rtx4090x8_pcie.txt")
    assert {l["type"] for l in t["links"]} == {"SYS"}
    assert all(l["nvlinks"] == 0 for l in t["links"])
    assert t["matrix"]["GPU6"]["NIC0"] == "PHB"
    assert t["numa_affinity"]["GPU5"] == "1"
    assert t["cpu_affinity"]["GPU4"] == "56-111,168-223"


def test_nic_legend_and_mesh():
    t = load("a100x4_nv4_nics.txt")
    assert path_between(t, "GPU3", "GPU1")["raw"] == "NV4"
    assert t["nics"][0] == {"name": "NIC0", "device": "mlx5_0"}
    assert t["nics"][3] == {"name": "NIC3", "device": "mlx5_3"}
    assert t["numa_affinity"]["GPU0"] == "0-1"
    assert t["matrix"]["GPU0"]["NIC0"] == "PXB"
    assert len(t["legend"]) == 7


def test_legacy_nic_columns_and_mixed_nvlink():
    t = load("v100x8_hcm.txt")
    assert [n["name"] for n in t["nics"]] == ["mlx5_0", "mlx5_1"]
    assert path_between(t, "GPU0", "GPU1")["nvlinks"] == 2
    assert path_between(t, "GPU0", "GPU3")["nvlinks"] == 1
    assert path_between(t, "GPU0", "GPU5")["type"] == "SYS"
    assert t["cpu_affinity"]["GPU7"] == "24-47,72-95"
    assert t["numa_affinity"]["GPU0"] is None  # no such column in this old format


def test_soc_is_sys_and_ansi_stripped():
    text = "\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tSOC\t0-7\nGPU1\tSOC\t X \t8-15\n"
    t = parse_topology(text)
    assert t["links"][0]["type"] == "SYS"
    assert t["cpu_affinity"]["GPU1"] == "8-15"


@pytest.mark.parametrize("text", ["", "hello world\n", "GPU 0: NVIDIA H200 (UUID: GPU-1)\n", "\tGPU0\tGPU1\nfoo\n"])
def test_unrelated_text_raises(text):
    with pytest.raises(ValueError, match="not nvidia-smi topo -m output"):
        parse_topology(text)


def test_probe_topology_on_cpu_host(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    r = probe_topology()
    assert r["available"] is False and "nvidia-smi" in r["reason"]


def test_lent_h200x2_fixture_from_our_probe():
    t = load("h200x2-lent-2026-11-26.txt")
    assert t["gpus"] == ["GPU0", "GPU1"] and t["matrix"]["GPU1"]["GPU0"] == "NV18"
    assert t["cpu_affinity"] == {"GPU0": "0-31", "GPU1": "0-31"} and t["gpu_numa_id"]["GPU0"] is None
