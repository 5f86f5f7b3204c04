"""The health check's sampling window (distbench.health.readings): with `load_s` > 0 a separate Python
process (`sys.executable`, so torch is never imported by the reading) runs a bf16 matmul loop on every
GPU it sees while this process samples, every SAMPLE_S, the throttle reasons, SM and memory clocks,
PCIe generation, temperature and power; without torch (or with load_s 0) the GPUs are sampled idle
for IDLE_SAMPLE_S. Torch-free."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from distbench.launch.hostlock import HostBusy, hold
from distbench.probes.nvml import _call

SAMPLE_S = 0.1
IDLE_SAMPLE_S = 1.0
LOAD_START_TIMEOUT_S = 120  # importing torch and initialising CUDA on every GPU
# nvml.h enums (stable across NVML versions)
CLOCK_SM, CLOCK_MEM = 1, 2
TEMP_GPU = 0

_LOAD = """
import json, sys, time
import torch
n = torch.cuda.device_count()
if n == 0:
    sys.exit(3)
N = 8192
xs = [torch.randn(N, N, device=f"cuda:{i}", dtype=torch.bfloat16) for i in range(n)]
for x in xs:
    torch.mm(x, x)  # warm-up: cuBLAS picks its kernel once, outside the timed loop
for i in range(n):
    torch.cuda.synchronize(i)
print("ready", flush=True)
ms, mms = [0.0] * n, [0] * n
end = time.time() + float(sys.argv[1])
while time.time() < end:
    marks = []
    for i, x in enumerate(xs):
        with torch.cuda.device(i):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(8):
                torch.mm(x, x)
            stop.record()
        marks.append((start, stop))
    for i, (start, stop) in enumerate(marks):
        stop.synchronize()
        ms[i] += start.elapsed_time(stop)
        mms[i] += 8
uuids = [str(getattr(torch.cuda.get_device_properties(i), "uuid", "")) for i in range(n)]
print("matmul " + json.dumps({u: 2 * N ** 3 * c / (t * 1e-3) / 1e12 for u, c, t in zip(uuids, mms, ms) if t > 0}),
      flush=True)
"""


def _throttle_mask(nv, h):
    return _call(nv.first("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"), h)


def _start_load(load_s: float):
    """The load process, once it says it is ready (None and why not, when it cannot run)."""
    if load_s <= 0:
        return None, "idle: no load ran (load_s 0)"
    try:
        proc = subprocess.Popen([sys.executable, "-c", _LOAD, str(load_s)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    except OSError as exc:
        return None, f"idle: the load did not start ({exc})"
    deadline = time.monotonic() + LOAD_START_TIMEOUT_S
    line = ""
    while time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        if line.strip() == "ready":
            return proc, f"under a {load_s:g} s bf16 matmul load"
    proc.kill()
    err = (proc.communicate()[1] or "").strip().splitlines()
    return None, f"idle: the load did not run ({err[-1] if err else 'no CUDA device for torch'})"


def sample(nv, handles: dict, load_s: float, before=None) -> tuple[dict, str, object]:
    """Per GPU, over the sampling window: the throttle reasons seen (OR of the masks), the highest SM
    and memory clocks and PCIe generation, the highest temperature and power (mW). A load runs with
    this node's host lock held (distbench.launch.hostlock): never beside a benchmark job, whose
    figures it would disturb, nor beside another load, which would disturb its clock readings.
    `before()`, when given, runs first, under the same lock and before the load touches a GPU (the
    list of compute processes: with the lock held, no benchmark job of ours is on the GPUs); its
    result is returned third."""
    if load_s <= 0:
        first = before() if before else None
        return (*_sample(nv, handles, load_s), first)
    try:
        with hold(f"health load ({load_s:g} s)"):
            first = before() if before else None
            return (*_sample(nv, handles, load_s), first)
    except HostBusy as e:  # host_lock=fail: the rule ends, saying why (a node's reading names it)
        raise SystemExit(f"distbench error: health load: {e.why}") from None


def _sample(nv, handles: dict, load_s: float) -> tuple[dict, str]:
    proc, note = _start_load(load_s)
    seen = {i: {"mask": None, "sm": None, "mem": None, "gen": None, "temp": None, "power": None,
                "matmul_tflops": None} for i in handles}
    end = time.monotonic() + (load_s if proc else IDLE_SAMPLE_S)
    while True:
        for i, h in handles.items():
            s = seen[i]
            mask = _throttle_mask(nv, h)
            if mask is not None:
                s["mask"] = (s["mask"] or 0) | int(mask)
            for key, value in (("sm", _call(nv.nvmlDeviceGetClockInfo, h, CLOCK_SM)),
                               ("mem", _call(nv.nvmlDeviceGetClockInfo, h, CLOCK_MEM)),
                               ("gen", _call(nv.nvmlDeviceGetCurrPcieLinkGeneration, h)),
                               ("temp", _call(nv.nvmlDeviceGetTemperature, h, TEMP_GPU)),
                               ("power", _call(nv.nvmlDeviceGetPowerUsage, h))):
                if value is not None:
                    s[key] = max(s[key], value) if s[key] is not None else value
        if time.monotonic() >= end or (proc and proc.poll() is not None):
            break
        time.sleep(SAMPLE_S)
    if proc:
        try:
            out = proc.communicate(timeout=30)[0] or ""
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0] or ""
        _matmul_figures(nv, handles, out, seen)
    return seen, note


def _matmul_figures(nv, handles: dict, out: str, seen: dict) -> None:
    """Each GPU's bf16 matmul throughput over the load (TFLOP/s, timed on the GPU with CUDA events,
    after one warm-up matmul), matched to its NVML index by UUID: CUDA numbers the GPUs it is shown
    (CUDA_VISIBLE_DEVICES), NVML every GPU of the node."""
    line = next((l for l in out.splitlines() if l.startswith("matmul ")), None)
    if line is None:
        return
    try:
        figures = {str(u).lower().removeprefix("gpu-"): float(v) for u, v in json.loads(line[7:]).items()}
    except (ValueError, AttributeError):
        return
    for i, h in handles.items():
        raw = _call(nv.nvmlDeviceGetUUID, h) or ""
        uuid = raw.decode() if isinstance(raw, bytes) else str(raw)
        seen[i]["matmul_tflops"] = figures.get(uuid.lower().removeprefix("gpu-"))
