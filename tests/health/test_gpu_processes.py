"""A process on a GPU before the check (issue 48): listed with pid, name and memory, and it fails the
GPU; a GPU whose matmul falls behind its peers' is named. NVML is faked (tests/fake_nvml.py: no GPU
here); the matmul figures are the load process's own output line, parsed as the load writes it."""

import json
import sys

import pytest

from distbench.health import load as health_load
from distbench.health.outliers import matmul_state, matmul_vs_peers
from distbench.health import processes
from distbench.health.readings import DEGRADED, FAILING, OK, read_health
from tests.fake_nvml import fake_pynvml, healthy_state


def _read(monkeypatch, state, **kw):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    monkeypatch.setattr("distbench.health.readings.kernel_xids", lambda text: [])
    return read_health(load_s=0, **kw)


def no_second_source(monkeypatch, tmp_path):
    """Neither nvidia-smi (an empty PATH) nor a /proc (a path that does not exist) can list a GPU."""
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setattr(processes, "PROC", str(tmp_path / "no-proc"))


def _row(rows, gpu, item):
    [r] = [r for r in rows if r.gpu == gpu and r.item == item]
    return r


def test_an_idle_process_holding_memory_fails_its_gpu_and_is_named(monkeypatch):
    state = healthy_state(count=2)
    state["procs"] = {1: [(4242, "python3", 60 * 1024 ** 3)]}
    rows = _read(monkeypatch, state, expected_gpus=2)
    bad = _row(rows, "1", "compute_processes")
    assert bad.state == FAILING and bad.value == "1"
    assert "pid 4242 python3 (61,440 MiB)" in bad.reason
    assert bad.uuid == "GPU-1" and bad.pci_bus_id == "00000000:1a:00.0"  # the GPU is named by its identity too
    assert _row(rows, "0", "compute_processes").state == OK  # the other GPU is not blamed


def test_a_process_with_no_memory_figure_still_fails(monkeypatch):
    state = healthy_state(count=1)
    state["procs"] = {0: [(77, "trainer", (1 << 64) - 1)]}  # NVML_VALUE_NOT_AVAILABLE
    bad = _row(_read(monkeypatch, state), "0", "compute_processes")
    assert bad.state == FAILING and "pid 77 trainer (memory not given)" in bad.reason


def test_an_nvml_that_cannot_list_processes_is_not_a_pass(monkeypatch, tmp_path):
    """An nvidia-ml-py with no process call at all: no GPU is listed by NVML; with no nvidia-smi and
    no /proc to read, the GPU is "processes not checked" (degraded: the gate WARNs), never ok."""
    state = healthy_state(count=1)
    nv = fake_pynvml(state)
    del nv.nvmlDeviceGetComputeRunningProcesses
    no_second_source(monkeypatch, tmp_path)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    r = _row(read_health(load_s=0), "0", "compute_processes")
    assert r.state == DEGRADED and r.reason.startswith("processes not checked: NVML refused this GPU's list")


def test_the_load_line_is_matched_to_nvml_indices_by_uuid():
    nv = fake_pynvml(healthy_state(count=3))
    handles = {i: nv.nvmlDeviceGetHandleByIndex(i) for i in range(3)}
    seen = {i: {"matmul_tflops": None} for i in handles}
    # CUDA was shown GPUs 0 and 2 only (CUDA_VISIBLE_DEVICES=0,2): torch's uuids carry no "GPU-" prefix
    out = "ready\nmatmul " + json.dumps({"0": 700.0, "2": 350.0}) + "\n"
    health_load._matmul_figures(nv, handles, out, seen)
    assert [seen[i]["matmul_tflops"] for i in range(3)] == [700.0, None, 350.0]


@pytest.mark.parametrize("figures, gpu, state", [
    ({"0": 700, "1": 690, "2": 705, "3": 300}, "3", FAILING),  # a matmul neighbour: under half
    ({"0": 700, "1": 690, "2": 705, "3": 600}, "3", "degraded"),  # 14% under its peers
    ({"0": 700, "1": 690, "2": 705, "3": 680}, "3", OK),  # 3%: a healthy spread
    ({"0": 700, "1": 300}, "1", FAILING),  # two GPUs: the other one is the yardstick, not the mean of both
])
def test_a_gpu_behind_its_peers_is_named(figures, gpu, state):
    ratios = matmul_vs_peers(figures)
    assert matmul_state(ratios[gpu][1]) == state
    others = [g for g in figures if g != gpu]
    assert all(matmul_state(ratios[g][1]) == OK for g in others) or len(figures) == 2


def test_one_gpu_has_no_peers():
    assert matmul_vs_peers({"0": 700.0}) == {"0": (700.0, None)} and matmul_state(None) == ""
