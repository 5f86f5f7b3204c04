"""NVLink and PCIe link state per GPU through NVML (nvidia-ml-py, imported as `pynvml`).

`nvidia-smi topo -m` says NV18 even when some links are down; NVML reports which links are
active and their version, which is what the link peak has to be computed from. Every NVML call
is guarded: GPUs without NVLink, MIG slices, VMs and old drivers raise NVMLError for some calls,
and a CPU host has no NVML at all. None of that may crash a benchmark run.
"""

from __future__ import annotations

# NVML's nvmlDeviceGetNvLinkVersion returns an enum, not the marketing generation:
# NVML_NVLINK_VERSION_1_0=1, 2_0=2, 2_2=3, 3_0=4, 3_1=5, 4_0=6, 5_0=7 (nvml.h).
NVML_VERSION_TO_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5}


def _call(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - NVMLError subclasses vary by driver; any failure means "unknown"
        return default


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def nvlink_state() -> dict:
    """{"available": True, "gpus": [{index, name, uuid, pci_bus_id, nvlink_active, nvlink_total,
    nvlink_version, nvlink_generation, pcie_gen, pcie_width, pcie_gen_max, pcie_width_max}], "driver"}
    or {"available": False, "reason": ...} without pynvml / NVML / GPUs."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return {"available": False, "reason": "pynvml not importable (pip install nvidia-ml-py)"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound / DriverNotLoaded on CPU hosts
        return {"available": False, "reason": f"NVML init failed: {exc}"}
    try:
        count = _call(pynvml.nvmlDeviceGetCount, default=0) or 0
        if count == 0:
            return {"available": False, "reason": "NVML sees no GPUs"}
        max_links = getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)
        gpus = []
        for i in range(count):
            h = _call(pynvml.nvmlDeviceGetHandleByIndex, i)
            if h is None:
                continue
            pci = _call(pynvml.nvmlDeviceGetPciInfo, h)
            active, total, versions = 0, 0, set()
            for link in range(max_links):
                state = _call(pynvml.nvmlDeviceGetNvLinkState, h, link)
                if state is None:
                    continue  # link absent on this GPU (NVML raises NotSupported / InvalidArgument)
                total += 1
                if state:
                    active += 1
                    v = _call(pynvml.nvmlDeviceGetNvLinkVersion, h, link)
                    if v is not None:
                        versions.add(int(v))
            version = max(versions) if versions else None
            gpus.append({
                "index": i,
                "name": _text(_call(pynvml.nvmlDeviceGetName, h)),
                "uuid": _text(_call(pynvml.nvmlDeviceGetUUID, h)),
                "pci_bus_id": _text(getattr(pci, "busId", None)) if pci is not None else None,
                "nvlink_active": active,
                "nvlink_total": total,
                "nvlink_version": version,
                "nvlink_generation": NVML_VERSION_TO_GENERATION.get(version) if version else None,
                "pcie_gen": _call(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "pcie_width": _call(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                "pcie_gen_max": _call(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "pcie_width_max": _call(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
            })
        return {"available": True, "driver": _text(_call(pynvml.nvmlSystemGetDriverVersion)), "gpus": gpus}
    finally:
        _call(pynvml.nvmlShutdown)
