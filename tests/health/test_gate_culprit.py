"""The gate names the bad GPU (issue 48): by index, bus id and UUID, first in its line, from the
compute processes on it and its matmul against its peers'; `--gpus N` means the collective spans N
GPUs; a node with no baseline and no reference row is judged against its link (under half of what it
can carry fails). NVML is faked (tests/fake_nvml.py); the readings process is replaced by the
readings it would write (FakeBudget), so the gate's own judging and line are what run."""

from dataclasses import asdict, replace

import pytest

from distbench.gate import cli, culprit, rules
from distbench.gate.rules import FAIL, PASS, WARN, Point
from distbench.health.readings import read_health
from tests.fake_nvml import fake_pynvml, healthy_state
from tests.health.test_gate_inputs import H100, NVLINK4, FakeBudget, comm_rows, write_run

GiB = 1 << 30
H200 = "NVIDIA H200"


def health(monkeypatch, count=4, procs=None, tflops=None, expected=None):
    """Health rows as the readings process records them: NVML faked; `tflops` the load's figures."""
    import sys

    state = healthy_state(count)
    state["procs"] = procs or {}
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    rows = read_health(expected, 0.0, host="n1")
    if tflops:  # what the matmul load would have measured, judged as readings does it
        from distbench.health.outliers import matmul_vs_peers
        from distbench.health.readings import matmul_row

        ratios = matmul_vs_peers({str(i): v for i, v in enumerate(tflops)})
        rows = [matmul_row("n1", r.gpu, ratios[r.gpu], "") if r.item == "matmul_vs_peers" else r for r in rows]
        rows = [replace(r, uuid=f"GPU-{r.gpu}", pci_bus_id=f"00000000:{0x19 + int(r.gpu):02x}:00.0")
                if r.item == "matmul_vs_peers" else r for r in rows]
    return [asdict(r) for r in rows]


def readings(tmp_path, rows, busbw=354.0, gpus=4, gpu_name=H200, visible=None, lat=6.9):
    cur = write_run(tmp_path / "now", comm_rows(busbw=busbw, ws=gpus, lat=lat), gpu_name=gpu_name)
    return {"health": rows, "comm_csv": str(cur / "gate_comm.csv"), "comm_status": "ok", "backend": "nccl",
            "gpu_name": gpu_name, "peak": NVLINK4, "nvls": False, "gpus": gpus, "cuda_visible": visible,
            "gpus_source": f"detected {gpus}"}


def gate(tmp_path, monkeypatch, capsys, r, *argv):
    FakeBudget.READINGS = r
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    code = cli.main(["--node", "n1", "--out", str(tmp_path / "out"), *argv])
    return code, capsys.readouterr().out.strip()


def test_a_matmul_neighbour_is_named_first_with_the_collectives_miss(tmp_path, monkeypatch, capsys):
    rows = health(monkeypatch, procs={2: [(5151, "python3", 2 << 30)]}, tflops=[700, 705, 330, 698])
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, rows, busbw=163.0), "--gpus", "4")
    assert code == 1
    assert line.startswith("distbench gate: FAIL n1: GPU 2 (0000:1b:00.0, GPU-2): all_reduce 1 GiB"), line
    assert "under half of the 344-355 GB/s we measured for 4x H200" in line
    assert "pid 5151 python3 (2,048 MiB)" in line and "its bf16 matmul 47% of its peers' median" in line
    assert "GPU 0" not in line and "GPU 1" not in line and "GPU 3" not in line


def test_an_idle_process_holding_memory_fails_even_when_the_collective_is_healthy(tmp_path, monkeypatch, capsys):
    rows = health(monkeypatch, procs={1: [(4242, "python3", 60 << 30)]})
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, rows, busbw=354.0), "--gpus", "4")
    assert code == 1 and "FAIL n1: GPU 1 (0000:1a:00.0, GPU-1): a process that is not this check's" in line
    assert "pid 4242 python3 (61,440 MiB)" in line


def test_a_healthy_node_names_no_gpu(tmp_path, monkeypatch, capsys):
    rows = health(monkeypatch, tflops=[700, 705, 690, 698])
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, rows, busbw=354.0), "--gpus", "4")
    assert code == 0 and line.startswith("distbench gate: PASS n1:") and "GPU " not in line.split(":", 2)[2][:8]


def test_a_collective_miss_with_no_gpu_standing_out_says_so(tmp_path, monkeypatch, capsys):
    rows = health(monkeypatch, tflops=[700, 705, 690, 698])
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, rows, busbw=150.0), "--gpus", "4")
    assert code == 1 and "no single GPU stands out" in line and "GPU 2 (" not in line


def test_a_gpu_whose_processes_could_not_be_listed_never_takes_the_collectives_miss(tmp_path, monkeypatch, capsys):
    """Not being able to look is no evidence: a miss with only an unlisted GPU says no GPU stands out,
    and names the unlisted one as not checked, not as the culprit."""
    rows = health(monkeypatch, tflops=[700, 705, 690, 698])
    for r in rows:
        if r["gpu"] == "2" and r["item"] == "compute_processes":
            r.update(state="degraded", reason="processes not checked: NVML refused this GPU's list: Not Supported")
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, rows, busbw=150.0), "--gpus", "4")
    assert code == 1, line
    assert "no single GPU stands out (processes not checked on GPU 2" in line, line
    assert not line.startswith("distbench gate: FAIL n1: GPU 2"), line


def test_a_gpu_hidden_from_cuda_fails_gpus_n_naming_it(tmp_path, monkeypatch, capsys):
    rows = health(monkeypatch, count=4)
    r = readings(tmp_path, rows, busbw=347.0, gpus=3, visible="0,1,3")
    code, line = gate(tmp_path, monkeypatch, capsys, r, "--gpus", "4")
    assert code == 1
    assert ("the collective could span 3 of the 4 GPUs --gpus asks for (CUDA_VISIBLE_DEVICES='0,1,3'): "
            "not usable by CUDA: GPU 2 (0000:1b:00.0, GPU-2)") in line


@pytest.mark.parametrize("visible, hidden", [("0,1,3", ["2"]), ("GPU-3,GPU-0", ["1", "2"]), ("", ["0", "1", "2", "3"]),
                                             ("1,-1,2", ["0", "2", "3"]), (None, [])])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(monkeypatch, visible, hidden):
    from distbench.health.readings import HealthRow

    rows = [HealthRow("n1", str(i), "pcie_link", "", "", "ok", "", uuid=f"GPU-{i}", pci_bus_id=f"b{i}") for i in range(4)]
    assert culprit.hidden_gpus(rows, visible) == hidden


def _point(bw):
    return Point("nccl", 4, "all_reduce", GiB, "events", "", (bw, bw, bw), (1.0, 1.0, 1.0))


@pytest.mark.parametrize("bw, state", [(220.0, PASS), (140.0, WARN), (110.0, FAIL)])
def test_with_no_reference_row_under_half_of_what_the_link_carries_fails(bw, state):
    """4x A100 has no row: its NVLink3 x12 (300 GB/s) carries ~240; under half of that (120) fails."""
    [*_, ref] = rules.busbw_check(_point(bw), "NVIDIA A100-SXM4-80GB", {"peak_gbps": 300.0, "link": "NVLink3 x12"},
                                  False)
    assert ref.check == "reference" and ref.state == state, ref.reason
    assert "no reference figure for 4x A100" in ref.reason


@pytest.mark.parametrize("bw, state", [(340.0, PASS), (290.0, WARN), (160.0, FAIL)])
def test_a_4x_h100_is_judged_against_its_measured_row(bw, state):
    """4x H100: the 335-346 GB/s our comm family measured at 512 MiB (a floor at 1 GiB); 0.9 x 335 passes."""
    [*_, ref] = rules.busbw_check(_point(bw), H100, NVLINK4, False)
    assert ref.state == state and "we measured for 4x H100" in ref.reason


@pytest.mark.parametrize("bw, state", [(350.0, PASS), (300.0, WARN), (163.0, FAIL)])
def test_a_4x_h200_is_judged_against_its_measured_row(bw, state):
    [*_, ref] = rules.busbw_check(_point(bw), H200, NVLINK4, False)
    assert ref.state == state and "we measured for 4x H200" in ref.reason


def test_where_cuda_cannot_be_read_the_span_is_said_not_guessed():
    """NVML answers but neither /proc/driver/nvidia nor nvidia-smi exists (a fake-NVML host): the
    collective spanned no GPU and which GPUs CUDA is shown is unknown: a warning, not a FAIL naming
    GPUs it cannot know were hidden."""
    from distbench.health.readings import HealthRow

    rows = [HealthRow("n1", str(i), "pcie_link", "", "", "ok", "", uuid=f"GPU-{i}", pci_bus_id=f"b{i}") for i in range(2)]
    [c] = culprit.span_check(rows, 2, 0, "gloo", None, "detected 0 via no NVIDIA driver on this host")
    assert c.state == WARN and "cannot be read here" in c.reason
    [c] = culprit.span_check(rows, 2, 0, "gloo", "", "detected 0 (CUDA_VISIBLE_DEVICES='')")
    assert c.state == FAIL and "GPU 0 (b0, GPU-0), GPU 1 (b1, GPU-1)" in c.reason
