"""Only a check that ran can pass (issue 55, part 2): the compute processes are listed GPU by GPU.

NVML is mocked (tests/fake_nvml.py): there is no GPU and no NVIDIA driver here, so NVML cannot exist
on this host, and a GPU whose nvmlDeviceGetComputeRunningProcesses raises NotSupported (as MIG
devices and some drivers do) is made by the fake (`procs_refused`). The second sources are faked
too: an `nvidia-smi` script on PATH that prints what the real one prints for
`--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits`, and a /proc tree
(symlinks for ns/pid, self and fd, files for status, stat and comm) passed as the procfs root.

- a refused list on GPU 1 never passes a 60 GiB stranger on GPU 0: the gate FAILs naming GPU 0 and
  its pid (before: every GPU "not available here", PASS);
- GPU 1 is then listed by nvidia-smi, or by the holders of /dev/nvidia1 in /proc, and says which;
- with no source GPU 1 alone WARNs "processes not checked";
- the gate's own processes are known by their PID namespace: a stranger whose host pid collides with
  one of the gate's container pids fails; the gate's own host pid does not.
"""

import os
import stat
import sys
from dataclasses import asdict

import pytest

from distbench.gate.rules import FAIL, WARN
from distbench.health import load as health_load, processes
from distbench.health.readings import DEGRADED, FAILING, OK, read_health
from tests.fake_nvml import fake_pynvml, healthy_state
from tests.health.test_gate_culprit import gate, readings

GiB = 1 << 30
INIT = processes.INIT_PID_NS  # the host's PID namespace
CONTAINER = "pid:[4026532777]"  # a container's


def fake_proc(root, me, procs, self_link=True):
    """A /proc tree under `root`: `procs` {pid: (ns, nspid, ppid, comm, [open device files])};
    `self` links to `me`, as the kernel resolves it in this /proc's namespace."""
    for pid, (ns, nspid, ppid, comm, fds) in procs.items():
        d = root / str(pid)
        (d / "ns").mkdir(parents=True)
        (d / "fd").mkdir()
        os.symlink(ns, d / "ns" / "pid")
        (d / "status").write_text(f"Name:\t{comm}\nNSpid:\t" + "\t".join(map(str, nspid)) + "\n")
        (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1\n")
        (d / "comm").write_text(comm + "\n")
        for n, dev in enumerate(fds, 3):
            os.symlink(dev, d / "fd" / str(n))
    if self_link:
        os.symlink(str(me), root / "self")
    return root


def host_proc(tmp_path, holders=None):
    """The host's /proc, the gate in the host's namespace (pid 100, its supervisor 50), and
    `holders` {pid: (comm, [devices])} beside it. The gate's own reading holds /dev/nvidia0 and
    /dev/nvidia1 (NVML opened them), and so does nvidia-persistenced: neither is a stranger."""
    procs = {1: (INIT, [1], 0, "systemd", []), 50: (INIT, [50], 1, "python3", []),
             100: (INIT, [100], 50, "python3", ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]),
             200: (INIT, [200], 1, "nvidia-persistenced", ["/dev/nvidia0", "/dev/nvidia1"])}
    for pid, (comm, devs) in (holders or {}).items():
        procs[pid] = (INIT, [pid], 1, comm, devs)
    return fake_proc(tmp_path / "proc", 100, procs)


def nvidia_smi(tmp_path, monkeypatch, out="", rc=0):
    """An nvidia-smi on PATH (alone) printing `out`; it records the arguments it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/smi-args\nprintf '%s' '{out}'\nexit {rc}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))
    return tmp_path / "smi-args"


def no_nvidia_smi(tmp_path, monkeypatch):
    (tmp_path / "empty-bin").mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


def reading(monkeypatch, proc, procs=None, refused=None, count=2):
    state = healthy_state(count)
    state["procs"] = procs or {}
    state["procs_refused"] = {1: "Not Supported"} if refused is None else refused
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    monkeypatch.setattr("distbench.health.readings.kernel_xids", lambda text: [])
    monkeypatch.setattr(processes, "PROC", str(proc))
    return read_health(count, 0.0, host="n1")


def row(rows, gpu):
    [r] = [r for r in rows if r.gpu == gpu and r.item == "compute_processes"]
    return r


# ------------------------------------------------------------------------------------------ the repro
def test_a_refused_list_on_one_gpu_never_passes_a_stranger_on_another(tmp_path, monkeypatch, capsys):
    no_nvidia_smi(tmp_path, monkeypatch)
    rows = reading(monkeypatch, tmp_path / "no-proc", procs={0: [(4242, "python3", 60 * GiB)]})
    bad, unread = row(rows, "0"), row(rows, "1")
    assert bad.state == FAILING and "pid 4242 python3 (61,440 MiB), as NVML lists them" in bad.reason
    assert unread.state == DEGRADED and unread.reason.startswith(
        "processes not checked: NVML refused this GPU's list: Not Supported; nvidia-smi: not on PATH; /proc: ")
    # the gate: FAIL, GPU 0 named first with its pid (its verdict is not softened by GPU 1's WARN)
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, [asdict(r) for r in rows], gpus=2),
                      "--gpus", "2")
    assert code == 1, line
    assert f"{FAIL} n1: GPU 0 (0000:19:00.0, GPU-0): a process that is not this check's is on the GPU: " \
           "pid 4242 python3 (61,440 MiB)" in line
    assert "GPU 1 (0000:1a:00.0, GPU-1): processes not checked" in line


# ----------------------------------------------------------------------------------- second sources
def test_a_refused_gpu_is_listed_by_nvidia_smi_and_the_line_says_so(tmp_path, monkeypatch):
    args = nvidia_smi(tmp_path, monkeypatch, out="GPU-0, 4242, 61440\nGPU-1, 5151, 2048\n")
    rows = reading(monkeypatch, host_proc(tmp_path), procs={0: [(4242, "python3", 60 * GiB)], 1: [(5151, "ray", 0)]})
    r = row(rows, "1")
    assert r.state == FAILING and r.value == "1"
    assert "pid 5151 ray (2,048 MiB), as nvidia-smi --query-compute-apps lists them " \
           "(NVML refused this GPU's list: Not Supported)" in r.reason
    assert args.read_text().split() == ["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]
    assert row(rows, "0").state == FAILING and "as NVML lists them" in row(rows, "0").reason  # NVML's own, once


def test_nvidia_smi_listing_nothing_on_the_refused_gpu_passes_it_and_says_by_which_source(tmp_path, monkeypatch):
    nvidia_smi(tmp_path, monkeypatch, out="GPU-0, 4242, 61440\n")
    r = row(reading(monkeypatch, host_proc(tmp_path), procs={0: [(4242, "python3", 60 * GiB)]}), "1")
    assert r.state == OK and "no compute process on the GPU, as nvidia-smi --query-compute-apps lists them" in r.reason


def test_without_nvidia_smi_the_holders_of_the_device_file_list_it(tmp_path, monkeypatch):
    no_nvidia_smi(tmp_path, monkeypatch)
    proc = host_proc(tmp_path, holders={300: ("python3", ["/dev/nvidiactl", "/dev/nvidia1"]),
                                        301: ("bash", ["/dev/nvidia0"])})
    rows = reading(monkeypatch, proc)
    r = row(rows, "1")
    assert r.state == FAILING
    assert "pid 300 python3 (memory not given), as /proc (the holders of /dev/nvidia1) lists them" in r.reason
    assert "nvidia-smi: not on PATH" in r.reason
    # the gate's own reading (pid 100) and nvidia-persistenced hold it too: not strangers
    assert "pid 100" not in r.reason and "pid 200" not in r.reason
    assert row(rows, "0").state == OK  # GPU 0 is NVML's (301 on /dev/nvidia0 is not asked about)


def test_no_holder_of_the_device_file_passes_it_and_says_by_which_source(tmp_path, monkeypatch):
    no_nvidia_smi(tmp_path, monkeypatch)
    r = row(reading(monkeypatch, host_proc(tmp_path, holders={301: ("bash", ["/dev/nvidia0"])})), "1")
    assert r.state == OK and "no compute process on the GPU, as /proc (the holders of /dev/nvidia1) lists them" in r.reason


# ---------------------------------------------------------------------------------------- no source
@pytest.mark.parametrize("proc, why", [
    ("none", "/proc: "),  # no procfs to read
    # a container's own /proc: it sees no process outside it, so finding none there is no pass
    ("container", "this /proc shows the gate's PID namespace only (a container)"),
])
def test_with_no_source_only_that_gpu_warns_processes_not_checked(tmp_path, monkeypatch, capsys, proc, why):
    no_nvidia_smi(tmp_path, monkeypatch)
    root = tmp_path / "no-proc" if proc == "none" else fake_proc(
        tmp_path / "proc", 7, {1: (CONTAINER, [1], 0, "bash", []), 7: (CONTAINER, [7], 1, "python3", ["/dev/nvidia1"])})
    rows = reading(monkeypatch, root)
    r = row(rows, "1")
    assert r.state == DEGRADED and r.value == "" and r.reason.startswith("processes not checked: ")
    assert why in r.reason
    assert row(rows, "0").state == OK  # the other GPU is still judged, and passes
    code, line = gate(tmp_path, monkeypatch, capsys, readings(tmp_path, [asdict(x) for x in rows], gpus=2),
                      "--gpus", "2")
    assert code == 0 and f"{WARN} n1: GPU 1 (0000:1a:00.0, GPU-1): processes not checked" in line, line
    assert "GPU 0 (" not in line


def test_a_stranger_found_in_a_partial_listing_still_fails(tmp_path, monkeypatch):
    no_nvidia_smi(tmp_path, monkeypatch)
    proc = fake_proc(tmp_path / "proc", 7, {1: (CONTAINER, [1], 0, "bash", []),
                                            7: (CONTAINER, [7], 1, "python3", ["/dev/nvidia1"]),
                                            9: (CONTAINER, [9], 1, "leftover", ["/dev/nvidia1"])})
    r = row(reading(monkeypatch, proc), "1")
    assert r.state == FAILING and "pid 9 leftover (memory not given)" in r.reason
    assert "pids as the container numbers them" in r.reason and "partial: " in r.reason
    assert "pid 7 " not in r.reason  # the gate itself


# ------------------------------------------------------------------------------------ pid namespaces
def test_a_stranger_whose_host_pid_collides_with_the_gates_container_pid_fails(tmp_path, monkeypatch):
    """The gate in a container with its own /proc: its pids are the container's, NVML's the host's.
    NVML lists a stranger whose host pid is the gate's own pid number (this test's pid): it fails,
    and is not named from the container's /proc (that number is another process there)."""
    me = os.getpid()
    proc = fake_proc(tmp_path / "proc", me, {1: (CONTAINER, [1], 0, "tini", []),
                                             me: (CONTAINER, [me], 1, "gate-itself", [])})
    rows = reading(monkeypatch, proc, procs={0: [(me, "", 40 * GiB)], 1: [(1, "", 1 * GiB)]}, refused={})
    for g, pid in (("0", me), ("1", 1)):
        r = row(rows, g)
        assert r.state == FAILING and f"pid {pid} ? (" in r.reason, r.reason
    assert "gate-itself" not in row(rows, "0").reason and "tini" not in row(rows, "1").reason


def test_the_gates_own_host_pid_is_known_through_nspid_and_a_colliding_stranger_is_not(tmp_path, monkeypatch):
    """The host's /proc seen from the gate's container (its /proc/1 is the host's init): the gate is
    host pid 5012, container pid 7 (NSpid "5012 7"), under the container's init (5000, container pid
    1) under the runtime's shim (4000, the host's namespace). NVML lists 5012 (the gate: skipped), 5000
    (its container's init: skipped), 4000 (not in the gate's namespace: a stranger) and 7 (a stranger
    whose host pid is the gate's container pid: a stranger)."""
    proc = fake_proc(tmp_path / "proc", 5012, {
        1: (INIT, [1], 0, "systemd", []), 4000: (INIT, [4000], 1, "containerd-shim", []),
        5000: (CONTAINER, [5000, 1], 4000, "tini", []), 5012: (CONTAINER, [5012, 7], 5000, "python3", []),
        7: (INIT, [7], 1, "stranger", [])})
    rows = reading(monkeypatch, proc, refused={}, procs={
        0: [(5012, "python3", 1 * GiB), (7, "stranger", 60 * GiB)], 1: [(5000, "tini", GiB), (4000, "shim", GiB)]})
    r0, r1 = row(rows, "0"), row(rows, "1")
    assert r0.state == FAILING and r0.value == "1" and "pid 7 stranger (61,440 MiB)" in r0.reason
    assert "5012" not in r0.reason
    assert r1.state == FAILING and r1.value == "1" and "pid 4000 shim" in r1.reason and "5000" not in r1.reason


def test_the_gate_in_the_hosts_namespace_skips_itself_and_its_supervisor_only(tmp_path, monkeypatch):
    proc = host_proc(tmp_path)
    me = processes.gate_processes(str(proc))
    assert me.host_view and me.pids == {100, 50}  # systemd (pid 1) is nobody's gate
    rows = reading(monkeypatch, proc, refused={}, procs={0: [(100, "python3", GiB), (50, "python3", GiB)],
                                                          1: [(1, "systemd", GiB)]})
    assert row(rows, "0").state == OK and row(rows, "1").state == FAILING
