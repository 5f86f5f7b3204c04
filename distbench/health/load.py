"""The health check's sampling window (distbench.health.readings): with `load_s` > 0 a separate Python
process (`sys.executable`, so torch is never imported by the reading) runs a bf16 matmul loop on every
GPU it sees while this process samples, every SAMPLE_S, the throttle reasons, SM and memory clocks,
PCIe generation, temperature and power; without torch (or with load_s 0) the GPUs are sampled idle
for IDLE_SAMPLE_S. Torch-free."""

from __future__ import annotations

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
import sys, time
import torch
n = torch.cuda.device_count()
if n == 0:
    sys.exit(3)
xs = [torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.bfloat16) for i in range(n)]
print("ready", flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for x in xs:
        for _ in range(8):
            torch.mm(x, x)
    for i in range(n):
        torch.cuda.synchronize(i)
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


def sample(nv, handles: dict, load_s: float) -> tuple[dict, str]:
    """Per GPU, over the sampling window: the throttle reasons seen (OR of the masks), the highest SM
    and memory clocks and PCIe generation, the highest temperature and power (mW). A load runs with
    this node's host lock held (distbench.launch.hostlock): never beside a benchmark job, whose
    figures it would disturb, nor beside another load, which would disturb its clock readings."""
    if load_s <= 0:
        return _sample(nv, handles, load_s)
    try:
        with hold(f"health load ({load_s:g} s)"):
            return _sample(nv, handles, load_s)
    except HostBusy as e:  # host_lock=fail: the rule ends, saying why (a node's reading names it)
        raise SystemExit(f"distbench error: health load: {e.why}") from None


def _sample(nv, handles: dict, load_s: float) -> tuple[dict, str]:
    proc, note = _start_load(load_s)
    seen = {i: {"mask": None, "sm": None, "mem": None, "gen": None, "temp": None, "power": None} for i in handles}
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
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return seen, note
