"""Topology parser on real and public `nvidia-smi topo -m` output.

Fixture sources (details in docs/fixtures.md):
  h200x2.txt            our 2x H200 host (/work/shared/fixtures/h200x2/nvidia-smi-topo-m.txt)
  h100x8_nv18_nics.txt  https://github.com/NVIDIA/nccl/issues/1453 (NIC6-8 rows completed by symmetry)
  rtx4090x8_pcie.txt    https://github.com/NVIDIA/go-gpuallocator/issues/17
  a100x4_nv4_nics.txt   https://github.com/NVIDIA/nccl-tests/issues/331 (NIC Legend lines 2-3 completed)
  v100x8_hcm.txt        https://github.com/NVIDIA/nccl-tests/issues/29 (last CPU affinity completed)
  h200x2-lent-2026-11-26.txt  written by our probe_topology rule on the lent 2x H200 machine

Pasted and broken copies (issue 13), each made from one of the fixtures above by the edit named:
  paste-h200x2-bare-ansi.txt          h200x2.txt with the ESC bytes removed (bare "[4m" / "[0m" left)
  paste-a100x4-glued-header.txt       a100x4: header without separators, bare "[4m"/"[0m" around it
  paste-v100x8-glued-mlx5-header.txt  v100x8: header without separators, legacy mlx5_N columns, no NIC rows
  paste-h100x8-nics-ran-together.txt  h100x8: the nine NIC column names ran together; no NIC Legend (as posted)
  paste-h200x4-double-spaced-crlf.txt /work/shared/fixtures/h200x4: CRLF, blank line after every line,
                                      ANSI codes in `cat -v` caret notation (^[[4m)
  robust-a100x4-misaligned-row.txt    a100x4: GPU2's row lost a cell, so its X sits in GPU1's column
  robust-a100x4-header-lost-nic3.txt  a100x4: NIC3 missing from the header while its row remains
  robust-a100x4-nic-legend-mismatch.txt  a100x4: NIC Legend misses NIC3 and names a NIC4
  robust-glued-bond-nics.txt          2 GPUs, glued header with bonded NIC names (mlx5_bond_0) and no NIC rows
  robust-rtx4090x8-short-row.txt      rtx4090x8: GPU6's line cut after its GPU7 cell
"""

from pathlib import Path

import pytest

from distbench.probes.topology import (
    TopologyParseError,
    parse_topology,
    path_between,
    probe_topology,
)

FIX = Path(__file__).parents[1] / "fixtures" / "topo"


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


# --- Pasted output (issue 13) ---------------------------------------------------------------------


def _same_matrix(a, b):
    keys = ("gpus", "matrix", "links", "nic_links", "cpu_affinity", "numa_affinity", "gpu_numa_id", "nics")
    return {k: a[k] for k in keys} == {k: b[k] for k in keys}


def test_ansi_codes_without_their_esc_byte():
    pasted = load("paste-h200x2-bare-ansi.txt")
    assert "[4m" in (FIX / "paste-h200x2-bare-ansi.txt").read_text()
    assert pasted["gpus"] == ["GPU0", "GPU1"]  # not "[4mGPU0"
    assert pasted["gpu_numa_id"] == {"GPU0": None, "GPU1": None}  # not "N/A[0m"
    assert _same_matrix(pasted, load("h200x2.txt"))  # same as the intact ESC codes
    assert pasted["warnings"] == [] and load("h200x2.txt")["warnings"] == []


def test_header_without_separators_recovered_from_row_labels():
    t = load("paste-a100x4-glued-header.txt")
    assert _same_matrix(t, load("a100x4_nv4_nics.txt"))
    assert [n["device"] for n in t["nics"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert t["numa_affinity"]["GPU3"] == "0-1" and t["cpu_affinity"]["GPU3"] == "0"
    assert len(t["warnings"]) == 1 and "line 1: column names ran together" in t["warnings"][0]


def test_glued_legacy_nic_header_without_nic_rows_warns_it_guessed():
    t = load("paste-v100x8-glued-mlx5-header.txt")
    assert _same_matrix(t, load("v100x8_hcm.txt"))
    assert [n["name"] for n in t["nics"]] == ["mlx5_0", "mlx5_1"]
    assert "mlx5_0, mlx5_1 by name pattern only" in t["warnings"][0]


def test_nic_columns_ran_together_and_no_nic_legend():
    t = load("paste-h100x8-nics-ran-together.txt")
    assert _same_matrix(t, load("h100x8_nv18_nics.txt"))
    # No "NIC Legend:" section: every NIC stays, under its column name, and the parse says so.
    assert t["nics"] == [{"name": f"NIC{i}", "device": None} for i in range(9)]
    assert any("ran together in 'NIC0NIC1" in w for w in t["warnings"])
    assert any(w.startswith("no NIC Legend section: NIC0, NIC1") and "NIC8" in w for w in t["warnings"])


def test_double_spaced_crlf_paste_with_caret_ansi():
    t = load("paste-h200x4-double-spaced-crlf.txt")
    assert t["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert len(t["links"]) == 6 and {l["raw"] for l in t["links"]} == {"NV18"}
    assert t["cpu_affinity"]["GPU3"] == "0-63" and t["gpu_numa_id"]["GPU3"] is None
    assert t["legend"]["PIX"] == "Connection traversing at most a single PCIe bridge"


def test_misaligned_row_fails_naming_the_line():
    with pytest.raises(TopologyParseError, match=r"^line 4: row GPU2 has 'NV4' in its own column") as exc:
        load("robust-a100x4-misaligned-row.txt")
    assert exc.value.line_no == 4 and exc.value.line.startswith("GPU2")
    assert "'GPU2    NV4      X" in str(exc.value)  # the text of the line, as pasted


def test_nic_row_missing_from_header_is_not_dropped():
    with pytest.raises(ValueError, match=r"^line 9: row 'NIC3' is not a column of the header .*'NIC3 +SYS"):
        load("robust-a100x4-header-lost-nic3.txt")


def test_unsplittable_glued_header_fails_naming_the_line():
    with pytest.raises(TopologyParseError, match=r"^line 1: could not split 'GPU0GPU1mlx5_bond_0mlx5_bond_1'"):
        load("robust-glued-bond-nics.txt")


def test_nic_legend_mismatch_is_reported():
    t = load("robust-a100x4-nic-legend-mismatch.txt")
    assert t["nics"][3] == {"name": "NIC3", "device": None}
    assert any("does not name NIC3" in w for w in t["warnings"])
    assert any("NIC4 (mlx5_4)" in w and "no column" in w for w in t["warnings"])


def test_short_row_warns_which_nics_lost_their_value():
    t = load("robust-rtx4090x8-short-row.txt")
    assert t["matrix"]["GPU6"]["NIC0"] is None and t["cpu_affinity"]["GPU6"] is None
    assert t["warnings"][0].startswith("line 8: row GPU6 has 8 cells for 10 columns; no value for NIC0, NIC1")
    assert t["nearest_nic"]["GPU6"] == {"nics": [], "devices": [], "type": None, "gpudirect_rdma": False}


def test_warnings_reach_the_cli_json():
    import json
    import subprocess
    import sys

    def cli(name):
        return subprocess.run([sys.executable, "-m", "distbench.probes", "topology", FIX / name], capture_output=True,
                              text=True, timeout=60, cwd=Path(__file__).resolve().parents[2], check=False)

    p = cli("paste-h100x8-nics-ran-together.txt")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["warnings"]) == 2 and out["nearest_nic"]["GPU0"]["nics"] == ["NIC8"]
    bad = cli("robust-a100x4-misaligned-row.txt")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "line 4:" in bad.stderr


# --- Nearest NIC per GPU --------------------------------------------------------------------------


def test_nearest_nic_pix_per_gpu_on_h100x8():
    t = load("h100x8_nv18_nics.txt")
    # NIC0 is SYS to every GPU; each GPU has one PIX NIC (GPU0-NIC8 ... GPU3-NIC5, GPU4-NIC4 ... GPU7-NIC1).
    expected = {f"GPU{g}": f"NIC{n}" for g, n in zip(range(8), (8, 7, 6, 5, 4, 3, 2, 1))}
    assert {g: v["nics"] for g, v in t["nearest_nic"].items()} == {g: [n] for g, n in expected.items()}
    assert all(v["type"] == "PIX" and v["gpudirect_rdma"] for v in t["nearest_nic"].values())


def test_nearest_nic_keeps_ties_and_names_devices():
    t = load("v100x8_hcm.txt")
    assert t["nearest_nic"]["GPU2"] == {"nics": ["mlx5_0", "mlx5_1"], "devices": ["mlx5_0", "mlx5_1"],
                                        "type": "PIX", "gpudirect_rdma": True}
    assert t["nearest_nic"]["GPU0"]["type"] == "NODE" and t["nearest_nic"]["GPU0"]["gpudirect_rdma"] is False
    assert t["nearest_nic"]["GPU5"]["type"] == "SYS"
    a100 = load("a100x4_nv4_nics.txt")["nearest_nic"]
    assert a100["GPU3"] == {"nics": ["NIC3"], "devices": ["mlx5_3"], "type": "PXB", "gpudirect_rdma": True}


def test_nearest_nic_phb_is_not_gpudirect():
    t = load("rtx4090x8_pcie.txt")
    assert t["nearest_nic"]["GPU6"] == {"nics": ["NIC0", "NIC1"], "devices": [None, None], "type": "PHB",
                                        "gpudirect_rdma": False}
    assert t["nearest_nic"]["GPU0"]["type"] == "SYS"


def test_no_nics_no_nearest_nic():
    assert load("h200x2.txt")["nearest_nic"] == {}


def test_the_raw_text_kept_for_the_report_has_no_ansi_codes(monkeypatch, tmp_path):
    """nvidia-smi underlines the header: the one-GPU report's 'raw:' block printed '[4mGPU0 ... [0m'."""
    import subprocess

    from distbench.probes import topology

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    out = {"topo": "\x1b[4m\tGPU0\tCPU Affinity\tNUMA Affinity\x1b[0m\nGPU0\t X \t0-15\t0\n",
           "-L": "GPU 0: NVIDIA H200 (UUID: GPU-1)\n"}
    monkeypatch.setattr(topology, "_run", lambda args: subprocess.CompletedProcess(args, 0, out[args[1]], ""))
    r = topology.probe_topology()
    assert r["available"] and r["gpus"] == ["GPU0"]
    assert "\x1b" not in r["raw"] and "[4m" not in r["raw"] and r["raw"].startswith("\tGPU0\tCPU Affinity")
    assert "GPU 0: NVIDIA H200" in r["raw"]
