"""A fake pynvml module for the health check's tests (tests/health/test_health.py, test_health_nodes.py):
it answers from a dict of readings, so degraded values can be made on a CPU host. Imported by a
per-node reading's own process too (as `pynvml`, from a directory the test puts on PYTHONPATH), so
it imports nothing heavy."""

import types


class FakeNVMLError(Exception):
    pass


def healthy_state(count=2):
    return {
        "count": count, "width": {}, "width_max": 16, "gen": 5, "gen_max": 5, "throttle": {},
        "links": {}, "nvlink_errors": {}, "remap": {}, "ecc": {}, "temp": 45, "slowdown": 87, "shutdown": 92,
        "power_mw": 300_000, "limit_mw": 700_000, "default_mw": 700_000, "xids": [], "driver": "570.1",
        "cuda": 12080, "violation_ns": {},
        "procs": {},  # {gpu index: [(pid, name, used bytes)]}: compute processes NVML lists on it
        "procs_refused": {},  # {gpu index: NVML's error}: GPUs whose process list NVML refuses (MIG, some drivers)
    }


def fake_pynvml(state: dict) -> types.ModuleType:
    """A pynvml module answering from `state` (per-GPU overrides keyed by index); calls it does not
    know are absent, like an older nvidia-ml-py's."""
    nv = types.ModuleType("pynvml")
    nv.NVMLError = FakeNVMLError
    nv.NVML_NVLINK_MAX_LINKS = 18

    class Handle:
        def __init__(self, i):
            self.i = i

    handles = [Handle(i) for i in range(state["count"])]
    nv.nvmlInit = lambda: None
    nv.nvmlShutdown = lambda: None
    nv.nvmlDeviceGetCount = lambda: state["count"]
    nv.nvmlDeviceGetHandleByIndex = lambda i: handles[i]
    nv.nvmlDeviceGetUUID = lambda h: f"GPU-{h.i}"
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=f"00000000:{0x19 + h.i:02x}:00.0".encode())
    nv.nvmlSystemGetDriverVersion = lambda: state["driver"]
    nv.nvmlSystemGetCudaDriverVersion = lambda: state["cuda"]
    nv.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: state["gen"]
    nv.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: state["gen_max"]
    nv.nvmlDeviceGetCurrPcieLinkWidth = lambda h: state["width"].get(h.i, state["width_max"])
    nv.nvmlDeviceGetMaxPcieLinkWidth = lambda h: state["width_max"]
    nv.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: state["throttle"].get(h.i, 0)
    nv.nvmlDeviceGetClockInfo = lambda h, clock: 1980 if clock == 1 else 2619
    nv.nvmlDeviceGetMaxClockInfo = lambda h, clock: 1980 if clock == 1 else 2619
    nv.nvmlDeviceGetEccMode = lambda h: (1, 1)
    nv.nvmlDeviceGetTotalEccErrors = lambda h, kind, counter: state["ecc"].get((h.i, kind, counter), 0)
    nv.nvmlDeviceGetRemappedRows = lambda h: state["remap"].get(h.i, (0, 0, 0, 0))

    def retired(h, cause):
        raise FakeNVMLError("Not Supported")  # GPUs with row remapping retire no pages
    nv.nvmlDeviceGetRetiredPages = retired
    nv.nvmlDeviceGetRetiredPagesPendingStatus = retired

    def link_state(h, link):
        states = state["links"].get(h.i, [1] * 18)
        if link >= len(states):
            raise FakeNVMLError("Invalid Argument")
        return states[link]
    nv.nvmlDeviceGetNvLinkState = link_state
    nv.nvmlDeviceGetNvLinkErrorCounter = lambda h, link, counter: state["nvlink_errors"].get((h.i, link, counter), 0)
    nv.nvmlDeviceGetTemperature = lambda h, sensor: state["temp"]
    nv.nvmlDeviceGetTemperatureThreshold = lambda h, t: state["shutdown"] if t == 0 else state["slowdown"]
    nv.nvmlDeviceGetPowerUsage = lambda h: state["power_mw"]
    nv.nvmlDeviceGetEnforcedPowerLimit = lambda h: state["limit_mw"]
    nv.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: state["default_mw"]
    nv.nvmlDeviceGetViolationStatus = lambda h, policy: types.SimpleNamespace(
        referenceTime=0, violationTime=state["violation_ns"].get((h.i, policy), 0))

    def running(h):
        if h.i in state.get("procs_refused", {}):
            raise FakeNVMLError(state["procs_refused"][h.i])
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, _name, used in state.get("procs", {}).get(h.i, [])]
    nv.nvmlDeviceGetComputeRunningProcesses = running
    nv.nvmlDeviceGetMinorNumber = lambda h: h.i  # /dev/nvidia<i>
    names = {pid: name for procs in state.get("procs", {}).values() for pid, name, _used in procs}
    nv.nvmlSystemGetProcessName = lambda pid: names[pid].encode()
    nv.nvmlEventSetCreate = lambda: "set"
    nv.nvmlDeviceRegisterEvents = lambda h, kinds, es: None
    nv.nvmlEventSetFree = lambda es: None
    pending = list(state["xids"])

    def wait(es, timeout_ms):
        if not pending:
            raise FakeNVMLError("Timeout")
        gpu, xid = pending.pop(0)
        return types.SimpleNamespace(device=handles[gpu], eventData=xid)
    nv.nvmlEventSetWait_v2 = wait
    return nv
