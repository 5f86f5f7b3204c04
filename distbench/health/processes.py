"""The compute processes on each GPU, read before a check touches the GPUs, GPU by GPU.

A process left behind by the last job is the most common reason for a prolog check: it holds memory
the next job needs (an idle 60 GiB allocation gives the next job an out-of-memory error) or competes
for the SMs (a matmul neighbour halves a collective's bandwidth). An idle node has none: a reading
taken before the health check or the gate starts any CUDA work of its own sees only strangers, so
any process listed there fails its GPU.

Only a check that ran can pass. Each GPU is listed on its own, from the first source that
can list it:
1. NVML (nvmlDeviceGetComputeRunningProcesses: pid and memory held), for every GPU that answers;
2. for a GPU whose list NVML refuses (NotSupported on MIG devices and under some drivers):
   `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits`, its
   rows matched to the GPU by UUID;
3. where nvidia-smi cannot run or answer: the processes holding the GPU's device file
   (/dev/nvidia<minor>) open, from /proc/*/fd, as NHC-style node checks do (no memory figure). The
   driver's own daemons that hold every device open without a CUDA context (NOT_COMPUTE) are left
   out. This listing is whole only when the gate reads the initial PID namespace's /proc (a
   container's /proc shows its own processes only) and every process's fd directory (root): a
   stranger it finds fails the GPU all the same; finding none in a partial listing is not a pass.
A GPU no source can list is "not checked" (readings.process_row: degraded, the gate WARNs), and the
other GPUs are still judged. The listing says which source it used for each GPU.

The gate's own processes (this process and its ancestors: the gate's supervisor, the reading's own
process) are never strangers; see gate_processes for how they are known across a container's PID
namespace. Caveats: an MPS control daemon (nvidia-cuda-mps-server) is listed like any process: a
node that runs MPS on purpose should not be gated this way; nvidia-smi reads through NVML too, so
it helps where NVML's Python binding or a per-device call fails, and a monitoring agent outside
NOT_COMPUTE that holds a device open is a holder on the /proc source (named in the reason).
Torch-free.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from distbench.probes.nvml import _call, _text

MIB = 1 << 20
PROC = "/proc"  # the procfs read (the tests pass a fake tree)
NVIDIA_SMI = "nvidia-smi"
SMI_ARGS = ("--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits")
SMI_TIMEOUT_S = 15.0
# PROC_PID_INIT_INO (include/linux/proc_ns.h, fixed since Linux 3.8): the inode of the initial PID
# namespace, the one whose pids NVML and nvidia-smi report (the host's)
INIT_PID_NS = "pid:[4026531836]"
# driver daemons and tools that hold /dev/nvidia<N> open with no CUDA context (NVML never lists them)
NOT_COMPUTE = frozenset({"nvidia-persistenced", "nv-hostengine", "nv-fabricmanager", "nvidia-smi", "dcgm-exporter"})
SOURCE_NVML = "NVML"
SOURCE_SMI = "nvidia-smi --query-compute-apps"


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on one GPU."""
    gpu: str  # NVML index
    pid: int
    name: str  # NVML's process name, or /proc's command, "" when neither can be read
    used_memory_mib: float | None  # None where the source does not give it (MIG, some drivers, /proc)


@dataclass(frozen=True)
class Listing:
    """One GPU's processes, from the first source that could list them."""
    processes: tuple[GpuProcess, ...] | None  # None: no source could list them (not checked)
    source: str  # which source listed them ("" when none could)
    note: str = ""  # why the sources before it could not, or why none could

    @property
    def checked(self) -> bool:
        return self.processes is not None


@dataclass(frozen=True)
class GateSelf:
    """The gate's own processes, numbered as the /proc read numbers them."""
    pids: frozenset[int]
    host_view: bool  # that /proc numbers pids as NVML does (the initial PID namespace's view)
    why: str = ""  # when not host_view: why NVML's pids cannot be matched with ours


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _nspid(proc: str, pid: int) -> list[int]:
    """NSpid of /proc/<pid>/status: the pid in each PID namespace it belongs to, outermost (the one
    this /proc was mounted in) first; [] where the kernel (before 4.1) or /proc does not give it."""
    for line in (_read(f"{proc}/{pid}/status") or "").splitlines():
        if line.startswith("NSpid:"):
            try:
                return [int(x) for x in line.split()[1:]]
            except ValueError:
                return []
    return []


def _ppid(proc: str, pid: int) -> int | None:
    text = _read(f"{proc}/{pid}/stat")
    try:
        return int(text.rsplit(")", 1)[1].split()[1]) if text else None
    except (ValueError, IndexError):
        return None


def gate_processes(proc: str | None = None) -> GateSelf:
    """This process and its ancestors within its own PID namespace, as `proc` numbers them, and
    whether those numbers are NVML's.

    NVML (and nvidia-smi) report pids in the initial PID namespace, the host's. A gate in a
    container has pids of its own namespace, and the same number on the host is another process:
    comparing numbers alone would let a stranger whose host pid collides with one of the gate's
    container pids pass as the gate's. So:
    - the gate's own namespace is read from /proc/self/ns/pid (`/proc/self` is resolved by the
      kernel in the /proc's own namespace, never by os.getpid(), which is numbered in ours);
    - the numbers `proc` gives are NVML's only when that /proc is the initial namespace's view: the
      gate runs in the initial namespace (its ns/pid is INIT_PID_NS), or /proc/1 is the initial
      namespace's init (a host /proc seen from a container; readable as root). Then the leftmost
      NSpid entry of each of the gate's processes is its host pid, and `/proc/self` already names it;
    - ancestors are walked through /proc/<pid>/stat's ppid (numbered in the /proc's namespace) for as
      long as they share the gate's namespace: the same ns/pid link where it can be read, else the
      same NSpid depth (an ancestor's namespace is the gate's or an ancestor of it, so the same depth
      is the same namespace). The container runtime above the gate's namespace is not the gate's;
    - otherwise (a container's own /proc) NVML's pids cannot be matched with the gate's: none of
      them is taken for the gate's (host_view False), and /proc's names are not used for them.
    The pids returned are always right for this /proc's own listing (the /dev/nvidia holders)."""
    proc = proc or PROC
    try:
        me = int(os.readlink(f"{proc}/self"))
    except (OSError, ValueError):
        return GateSelf(frozenset({os.getpid()}) if proc == "/proc" else frozenset(), False,
                        f"{proc}/self cannot be read")
    my_ns = _readlink(f"{proc}/self/ns/pid")
    depth = len(_nspid(proc, me))
    host_view = my_ns == INIT_PID_NS or _readlink(f"{proc}/1/ns/pid") == INIT_PID_NS

    def same_ns(pid: int) -> bool:
        ns = _readlink(f"{proc}/{pid}/ns/pid")
        if ns and my_ns:
            return ns == my_ns
        d = len(_nspid(proc, pid))
        if d and depth:
            return d == depth
        return my_ns == INIT_PID_NS  # an ancestor of a process of the initial namespace is in it

    pids, pid = {me}, _ppid(proc, me)
    while pid and pid not in pids and same_ns(pid):
        if pid == 1 and my_ns == INIT_PID_NS:
            break  # the host's init (systemd) is nobody's gate
        pids.add(pid)
        pid = _ppid(proc, pid)
    why = "" if host_view else (f"the gate runs in PID namespace {my_ns or '?'} and its /proc is not the "
                                "host's: NVML's host pids cannot be matched with the gate's, so none is "
                                "taken for the gate's")
    return GateSelf(frozenset(pids), host_view, why)


def _process_name(nv, pid: int, proc: str, host_view: bool) -> str:
    name = _text(_call(nv.nvmlSystemGetProcessName, pid))
    if name:
        return str(name)
    if not host_view:  # a host pid: this /proc's process of that number is another one
        return ""
    comm = _read(f"{proc}/{pid}/comm")  # NVML cannot always name it (no permission): /proc can
    return comm.strip() if comm else ""


def _refusal(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__


def _mib(mem) -> float | None:
    # NVML_VALUE_NOT_AVAILABLE is (unsigned long long)-1: no figure, not 16 EiB
    return None if mem is None or mem >= (1 << 63) else round(mem / MIB, 1)


def compute_processes(nv, handles: dict, proc: str | None = None) -> dict[str, Listing]:
    """{gpu index: Listing} of every GPU in `handles` ({index: NVML handle}), each from the first
    source that can list it (the module docstring). `nv` is pynvml, guarded; `proc` the procfs."""
    proc = proc or PROC
    me = gate_processes(proc)
    ours = me.pids if me.host_view else frozenset()  # in NVML's numbering (gate_processes)
    fn = nv.first("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                  "nvmlDeviceGetComputeRunningProcesses")
    out: dict[str, Listing] = {}
    refused: dict = {}
    for i, h in handles.items():
        try:
            procs = fn(h)
            if procs is None:
                raise ValueError("no list")
        except Exception as exc:  # noqa: BLE001 - NVMLError_NotSupported (MIG, some drivers), NoPermission
            refused[i] = _refusal(exc)
            continue
        rows = [GpuProcess(str(i), pid, _process_name(nv, pid, proc, me.host_view), _mib(getattr(p, "usedGpuMemory", None)))
                for p in procs if (pid := int(getattr(p, "pid", 0) or 0)) not in ours]
        out[str(i)] = Listing(tuple(rows), SOURCE_NVML)
    if refused:
        smi = _Lazy(_nvidia_smi)
        holders = _Lazy(lambda: _device_holders(proc))
        for i, why in refused.items():
            out[str(i)] = _second_source(nv, str(i), handles[i], f"NVML refused this GPU's list: {why}",
                                         smi, holders, me, ours, proc)
    return {g: out[g] for g in sorted(out, key=int)}


class _Lazy:
    """A source read once, and only when a GPU needs it."""

    def __init__(self, fn):
        self._fn, self._done, self._value = fn, False, None

    def __call__(self):
        if not self._done:
            self._value, self._done = self._fn(), True
        return self._value


def _second_source(nv, g: str, h, note: str, smi, holders, me: GateSelf, ours, proc: str) -> Listing:
    notes = [note]
    by_uuid, smi_why = smi()
    uuid = _text(_call(nv.nvmlDeviceGetUUID, h))
    if by_uuid is not None and uuid:
        rows = [GpuProcess(g, pid, _process_name(nv, pid, proc, me.host_view), mem)
                for pid, mem in by_uuid.get(str(uuid).lower(), []) if pid not in ours]
        return Listing(tuple(rows), SOURCE_SMI, notes[0])
    notes.append(smi_why if by_uuid is None else "nvidia-smi: NVML gives no UUID to match its rows with")
    minor = _call(nv.nvmlDeviceGetMinorNumber, h)
    if minor is None:
        notes.append("/proc: NVML gives no minor number to name the GPU's /dev/nvidia<N>")
        return Listing(None, "", "; ".join(notes))
    dev = f"/dev/nvidia{int(minor)}"
    held, partial = holders()
    if held is None:
        notes.append(f"/proc: {partial}")
        return Listing(None, "", "; ".join(notes))
    if not me.host_view:
        partial = ([partial] if partial else []) + [
            "this /proc shows the gate's PID namespace only (a container): a process outside it is not seen"]
        partial = "; ".join(partial)
    rows = []
    for pid in sorted(held.get(dev, set()) - me.pids):
        name = (_read(f"{proc}/{pid}/comm") or "").strip()
        if name not in NOT_COMPUTE:
            rows.append(GpuProcess(g, pid, name, None))
    source = f"/proc (the holders of {dev}" + (")" if me.host_view else ", pids as the container numbers them)")
    if rows:  # a stranger found is a stranger, even where the listing is partial
        return Listing(tuple(rows), source, "; ".join(notes + ([f"partial: {partial}"] if partial else [])))
    if partial:
        notes.append(f"/proc: none holds {dev} among the processes it can see, but {partial}")
        return Listing(None, "", "; ".join(notes))
    return Listing((), source, "; ".join(notes))


def _nvidia_smi() -> tuple[dict | None, str]:
    """({gpu uuid, lower case: [(pid, MiB or None)]}, "") from nvidia-smi, or (None, why not)."""
    exe = shutil.which(NVIDIA_SMI)
    if not exe:
        return None, "nvidia-smi: not on PATH"
    try:
        r = subprocess.run([exe, *SMI_ARGS], capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"nvidia-smi: did not run ({exc})"
    if r.returncode != 0:
        said = (r.stderr or r.stdout or "").strip().splitlines()
        return None, f"nvidia-smi: exited {r.returncode}" + (f" ({said[-1]})" if said else "")
    by_uuid: dict = {}
    for line in r.stdout.splitlines():
        if not line.strip() or line.strip().lower().startswith("no running"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or not parts[1].isdigit():  # "[Not Supported]", an error text: no listing
            return None, f"nvidia-smi: could not list them ({line.strip()[:80]!r})"
        try:
            mem = float(parts[2])
        except ValueError:
            mem = None  # "[N/A]", "[Not Supported]"
        by_uuid.setdefault(parts[0].lower(), []).append((int(parts[1]), mem))
    return by_uuid, ""


def _device_holders(proc: str) -> tuple[dict | None, str]:
    """({"/dev/nvidiaN": {pid}}, what makes it partial) from /proc/*/fd, or (None, why not)."""
    try:
        entries = os.listdir(proc)
    except OSError as exc:
        return None, f"{proc} cannot be read ({exc.strerror or exc})"
    held: dict = {}
    denied = 0
    for name in entries:
        if not name.isdigit():
            continue
        fd_dir = f"{proc}/{name}/fd"
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            denied += 1
            continue
        except OSError:
            continue  # the process ended meanwhile
        for fd in fds:
            target = _readlink(f"{fd_dir}/{fd}")
            if target and target.startswith("/dev/nvidia"):
                held.setdefault(target, set()).add(int(name))
    return held, (f"the open files of {denied} process(es) cannot be read (the gate is not root)" if denied else "")


def describe(procs) -> str:
    """'pid 4242 python (61,440 MiB), pid 77 ? (memory not given)'."""
    def one(p: GpuProcess) -> str:
        mem = f"{p.used_memory_mib:,.0f} MiB" if p.used_memory_mib is not None else "memory not given"
        return f"pid {p.pid} {p.name or '?'} ({mem})"
    return ", ".join(one(p) for p in procs)
