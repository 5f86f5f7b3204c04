"""A hardware health reading per GPU and per node, from NVML (nvidia-ml-py, imported as `pynvml`)
and the kernel log, taken before the benchmarks and again after them (rules/probe.smk).

Per GPU: the PCIe link (generation and width now against the maximum; a narrower link than the
GPU's maximum is downtrained), the clock-throttle reasons and the SM/memory clocks reached while the
GPU is sampled (HW slowdown, thermal slowdown, power brake: degraded), ECC errors (volatile and
aggregate, corrected and uncorrected), retired pages / remapped rows and pending remaps, NVLink
(active links against the links the GPU has; CRC, replay and recovery error counters summed over
its links), temperature and power against their limits, and critical XID events NVML delivers to an
event set during the sampling window. Per node: GPUs seen against the `gpus` the plan uses, driver
and CUDA driver versions, and the count of `NVRM: Xid` lines in the kernel log (dmesg; its
after-before difference counts the XIDs of the run, which a short NVML event wait cannot see).

The load: with `load_s` > 0, a separate Python process (`sys.executable`, so torch is never imported
here) runs a bf16 matmul loop on every GPU it sees for `load_s` seconds while this process samples
throttle reasons, clocks and PCIe generation (distbench.health.load); without torch (or with load_s 0) the
GPUs are sampled idle for one second, and the clock rows say so. Idle GPUs drop their PCIe
generation to save power, so a generation below the maximum is only called degraded when seen
under load; a narrower width is degraded either way.

Every NVML call is guarded (as in distbench.probes.nvml): an item NVML cannot give on this GPU,
driver or host is "not available here" with the reason, never a crash. The one exception is
`compute_processes`: a GPU whose processes no source can list (NVML, nvidia-smi, /proc: see
distbench.health.processes) is degraded, "processes not checked", so that a gate never passes a
check that did not run. Torch-free.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from distbench.core.run_label import node_name  # the name the jobs' placement files carry too
from distbench.health.load import CLOCK_MEM, CLOCK_SM, sample
from distbench.health.outliers import MATMUL_DEGRADED_UNDER, matmul_state, matmul_vs_peers
from distbench.health.processes import compute_processes, describe
from distbench.probes.nvml import _call, _text

OK, DEGRADED, FAILING, NOT_AVAILABLE = "ok", "degraded", "failing", "not available here"
STATES = (OK, DEGRADED, FAILING, NOT_AVAILABLE)
NODE = "node"  # the gpu column of a per-node item
ALL_GPUS = "all"  # the gpu column of a per-GPU item when no GPU could be read at all

GPU_ITEMS = (
    "pcie_link", "clock_throttle", "sm_clock_mhz", "mem_clock_mhz",
    "ecc_volatile_corrected", "ecc_volatile_uncorrected", "ecc_aggregate_corrected", "ecc_aggregate_uncorrected",
    "retired_pages", "retired_pages_pending", "remapped_rows", "remap_pending",
    "nvlink_active", "nvlink_crc_errors", "nvlink_replay_errors", "nvlink_recovery_errors",
    "temperature_c", "power_w", "power_limit_w", "xid_events", "throttle_power_ms", "throttle_thermal_ms",
    "compute_processes", "matmul_vs_peers",
)
NODE_ITEMS = ("gpu_count", "driver_version", "cuda_driver_version", "xid_kernel_log")


# nvml.h's clock event (throttle) reason bits; the names are those of NVML_CLOCKS_EVENT_REASON_*.
THROTTLE_BITS = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
}
# Slowdowns that mean the GPU is not running at the clocks its benchmark figures assume. A power cap
# under a full matmul load is the GPU working at its power limit, as designed: noted, not degraded.
DEGRADING_THROTTLES = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")

# nvml.h enums (stable across NVML versions)
ECC_CORRECTED, ECC_UNCORRECTED = 0, 1
ECC_VOLATILE, ECC_AGGREGATE = 0, 1
TEMP_THRESHOLD_SHUTDOWN, TEMP_THRESHOLD_SLOWDOWN = 0, 1
PAGE_CAUSE_SBE, PAGE_CAUSE_DBE = 0, 1
NVLINK_REPLAY, NVLINK_RECOVERY, NVLINK_CRC_FLIT, NVLINK_CRC_DATA = 0, 1, 2, 3
XID_CRITICAL_EVENT = 0x8  # nvmlEventTypeXidCriticalError
# nvmlPerfPolicyType_t: NVML's cumulative time each policy held the clocks down (nvmlViolationTime_t,
# ns since the driver loaded): the after-before difference is the throttled time of the whole run,
# which no sampling window sees.
PERF_POLICY_POWER, PERF_POLICY_THERMAL = 0, 1
# DCGM's limits on a GPU's memory totals (NVIDIA/DCGM common/DcgmGPUHardwareLimits.h, applied by
# modules/health/DcgmHealthWatch.cpp): DCGM_LIMIT_MAX_RETIRED_PAGES 63 retired pages (SBE + DBE) fail
# (MonitorMemSbeDbeRetiredPages, DCGM_FR_RETIRED_PAGES_LIMIT); DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE 512
# rows remapped for uncorrectable errors warn ("this number ... indicates GPU is in a bad state").
MAX_RETIRED_PAGES = 63
MAX_ROW_REMAP_UNCORRECTABLE = 512



@dataclass(frozen=True)
class HealthRow:
    """One item of one GPU (or of the node) at one reading."""
    host: str
    gpu: str  # NVML index, NODE for a per-node item, ALL_GPUS when no GPU could be read
    item: str
    value: str
    expected: str  # the limit or expected value it is held against ("" when none)
    state: str  # one of STATES
    reason: str
    # the GPU's identity, to find the benchmark jobs whose ranks ran on it (their placement files
    # carry the same two): NVML's UUID and PCI bus id ("" for a per-node item or when NVML gives none)
    uuid: str = ""
    pci_bus_id: str = ""
    # when this node's counters were read (ISO 8601, UTC; "" when not read): a counter judged as a rate
    # (NVLink CRC errors, distbench.health.rules) moves per second of the time between two readings
    read_at: str = ""


def _na_rows(host: str, reason: str, expected_gpus: int | None) -> list[HealthRow]:
    rows = [HealthRow(host, NODE, item, "", str(expected_gpus) if item == "gpu_count" and expected_gpus else "",
                      NOT_AVAILABLE, reason) for item in NODE_ITEMS]
    return rows + [HealthRow(host, ALL_GPUS, item, "", "", NOT_AVAILABLE, reason) for item in GPU_ITEMS]


def read_health(expected_gpus: int | None = None, load_s: float = 0.0, host: str | None = None) -> list[HealthRow]:
    """Every item of every GPU and of this node (see the module docstring); never raises."""
    host = host or node_name()
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return _na_rows(host, "pynvml not importable (pip install nvidia-ml-py)", expected_gpus)
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - NVMLError_LibraryNotFound / DriverNotLoaded on CPU hosts
        return _na_rows(host, f"NVML init failed: {exc}", expected_gpus)
    try:
        return _read(_Guarded(pynvml), host, expected_gpus, load_s)
    finally:
        _call(pynvml.nvmlShutdown)


class _Guarded:
    """pynvml, where a function this nvidia-ml-py lacks (an older one lacks newer calls) is a call that
    raises, so that _call turns it into "not available here" like any NVMLError."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        value = getattr(self._module, name, None)
        if value is not None:
            return value
        if not name.startswith("nvml"):
            raise AttributeError(name)

        def missing(*_args):
            raise AttributeError(f"pynvml has no {name}")
        return missing

    def first(self, *names):
        """The first of these functions pynvml has (newer names first)."""
        return next((getattr(self._module, n) for n in names if hasattr(self._module, n)), getattr(self, names[-1]))


def reading_time() -> str:
    """Now, as a reading's read_at (ISO 8601 UTC, ms); the tests' clock seam."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _read(nv, host: str, expected_gpus: int | None, load_s: float) -> list[HealthRow]:
    count = _call(nv.nvmlDeviceGetCount, default=0) or 0
    handles = {i: h for i in range(count) if (h := _call(nv.nvmlDeviceGetHandleByIndex, i)) is not None}
    rows = _node_rows(nv, host, len(handles), expected_gpus)
    if not handles:
        return rows + [HealthRow(host, ALL_GPUS, item, "", "", NOT_AVAILABLE, "NVML sees no GPUs")
                       for item in GPU_ITEMS]
    events = _xid_event_set(nv, handles)
    samples, load_note, procs = sample(nv, handles, load_s, before=lambda: compute_processes(nv, handles))
    matmul = matmul_vs_peers({str(i): samples[i].get("matmul_tflops") for i in handles})
    xids = _drain_xids(nv, events, handles)
    # the counters are read from here on (the load's seconds come before): the reading's time
    read_at = reading_time()
    for i, h in handles.items():
        g = str(i)
        rows += _pcie_rows(nv, h, host, g, samples[i], load_note)
        rows += _clock_rows(nv, h, host, g, samples[i], load_note)
        rows += _ecc_rows(nv, h, host, g)
        rows += _page_rows(nv, h, host, g)
        rows += _nvlink_rows(nv, h, host, g)
        rows += _thermal_power_rows(nv, h, host, g, samples[i])
        rows.append(_xid_row(host, g, events, xids.get(i, [])))
        rows += _violation_rows(nv, h, host, g)
        rows += [process_row(host, g, procs), matmul_row(host, g, matmul[g], load_note)]
        ident = _identity(nv, h)
        rows = [replace(r, uuid=ident[0], pci_bus_id=ident[1]) if r.gpu == g else r for r in rows]
    return [replace(r, read_at=read_at) for r in rows]


def _identity(nv, h) -> tuple[str, str]:
    """(UUID, PCI bus id) of one GPU, "" for what NVML does not give."""
    pci = _call(nv.nvmlDeviceGetPciInfo, h)
    bus = _text(getattr(pci, "busId", None) or getattr(pci, "busIdLegacy", None)) if pci is not None else None
    return _text(_call(nv.nvmlDeviceGetUUID, h)) or "", (bus or "").lower()


# ------------------------------------------------------------------------------------------ per node
def _node_rows(nv, host: str, seen: int, expected_gpus: int | None) -> list[HealthRow]:
    rows = []
    if expected_gpus:
        missing = expected_gpus - seen
        rows.append(HealthRow(host, NODE, "gpu_count", str(seen), str(expected_gpus),
                              FAILING if missing > 0 else OK,
                              f"{missing} GPU(s) of the plan's {expected_gpus} missing" if missing > 0
                              else "every GPU the plan uses is seen"))
    else:
        rows.append(HealthRow(host, NODE, "gpu_count", str(seen), "", OK, "no GPU count configured or detected"))
    driver = _text(_call(nv.nvmlSystemGetDriverVersion))
    rows.append(HealthRow(host, NODE, "driver_version", driver or "", "", OK if driver else NOT_AVAILABLE,
                          "" if driver else "NVML gave no driver version"))
    cuda = _call(nv.first("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"))
    cuda_text = f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if isinstance(cuda, int) else ""
    rows.append(HealthRow(host, NODE, "cuda_driver_version", cuda_text, "", OK if cuda_text else NOT_AVAILABLE,
                          "" if cuda_text else "NVML gave no CUDA driver version"))
    rows.append(_kernel_xid_row(host))
    return rows


_XID_LINE = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")


def kernel_xids(text: str) -> list[str]:
    """'PCI:0000:19:00 79' for each `NVRM: Xid` line of a kernel log."""
    return [f"{m.group(1)} {m.group(2)}" for m in _XID_LINE.finditer(text)]


def _kernel_xid_row(host: str) -> HealthRow:
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        return HealthRow(host, NODE, "xid_kernel_log", "", "0", NOT_AVAILABLE, f"dmesg failed: {exc}")
    if out.returncode != 0:
        return HealthRow(host, NODE, "xid_kernel_log", "", "0", NOT_AVAILABLE,
                         f"dmesg unreadable here: {(out.stderr or '').strip()[:120]}")
    xids = kernel_xids(out.stdout)
    return HealthRow(host, NODE, "xid_kernel_log", str(len(xids)), "0", OK,
                     ("in the kernel log since boot (the run's own: the after-before difference): "
                      + ", ".join(xids[-5:])) if xids else "no XID in the kernel log")


# ------------------------------------------------------------------------------------- the items
def _pcie_rows(nv, h, host, g, sample, load_note) -> list[HealthRow]:
    gen, width = sample["gen"], _call(nv.nvmlDeviceGetCurrPcieLinkWidth, h)
    gen_max, width_max = _call(nv.nvmlDeviceGetMaxPcieLinkGeneration, h), _call(nv.nvmlDeviceGetMaxPcieLinkWidth, h)
    if None in (gen, width, gen_max, width_max):
        return [HealthRow(host, g, "pcie_link", "", "", NOT_AVAILABLE, "NVML gives no PCIe link state here")]
    value, expected = f"gen{gen} x{width}", f"gen{gen_max} x{width_max}"
    if width < width_max:
        return [HealthRow(host, g, "pcie_link", value, expected, DEGRADED,
                          f"link downtrained: x{width} of x{width_max} lanes")]
    if gen < gen_max and not load_note.startswith("idle"):
        return [HealthRow(host, g, "pcie_link", value, expected, DEGRADED,
                          f"link at gen{gen} of gen{gen_max} {load_note}")]
    why = f"gen{gen} while idle (GPUs lower it to save power)" if gen < gen_max else "at its maximum"
    return [HealthRow(host, g, "pcie_link", value, expected, OK, why)]


def throttle_names(mask: int) -> list[str]:
    return [name for bit, name in THROTTLE_BITS.items() if mask & bit]


def _clock_rows(nv, h, host, g, sample, load_note) -> list[HealthRow]:
    rows = []
    if sample["mask"] is None:
        rows.append(HealthRow(host, g, "clock_throttle", "", "", NOT_AVAILABLE, "NVML gives no throttle reasons here"))
    else:
        names = throttle_names(sample["mask"])
        bad = [n for n in names if n in DEGRADING_THROTTLES]
        rows.append(HealthRow(host, g, "clock_throttle", "+".join(names) or "none", "none",
                              DEGRADED if bad else OK,
                              (f"clocks slowed by {', '.join(bad)} " if bad else "no slowdown ") + load_note))
    for item, clock in (("sm_clock_mhz", CLOCK_SM), ("mem_clock_mhz", CLOCK_MEM)):
        reached, top = sample["sm" if clock == CLOCK_SM else "mem"], _call(nv.nvmlDeviceGetMaxClockInfo, h, clock)
        if reached is None:
            rows.append(HealthRow(host, g, item, "", "", NOT_AVAILABLE, "NVML gives no clock here"))
        else:
            rows.append(HealthRow(host, g, item, str(reached), "" if top is None else str(top), OK,
                                  f"highest reached {load_note}"))
    return rows


def _ecc_rows(nv, h, host, g) -> list[HealthRow]:
    mode = _call(nv.nvmlDeviceGetEccMode, h)
    current = mode[0] if isinstance(mode, (tuple, list)) else mode
    rows = []
    for counter_name, counter in (("volatile", ECC_VOLATILE), ("aggregate", ECC_AGGREGATE)):
        for kind_name, kind in (("corrected", ECC_CORRECTED), ("uncorrected", ECC_UNCORRECTED)):
            item = f"ecc_{counter_name}_{kind_name}"
            n = _call(nv.nvmlDeviceGetTotalEccErrors, h, kind, counter) if current else None
            if n is None:
                why = "ECC is off on this GPU" if mode is not None and not current else "NVML gives no ECC counts here"
                rows.append(HealthRow(host, g, item, "", "0", NOT_AVAILABLE, why))
                continue
            n = int(n)
            if kind == ECC_UNCORRECTED and n:
                # volatile: since the driver loaded, so this boot's memory is suspect; aggregate: the GPU's lifetime
                state = FAILING if counter == ECC_VOLATILE else DEGRADED
                why = f"{n} uncorrectable memory error(s) " + ("since the driver loaded" if counter == ECC_VOLATILE
                                                               else "over the GPU's life")
            else:
                state, why = OK, (f"{n} corrected by ECC" if n else "none")
            rows.append(HealthRow(host, g, item, str(n), "0", state, why))
    return rows


def _page_rows(nv, h, host, g) -> list[HealthRow]:
    """Row remapping (Ampere and later) or page retirement (earlier GPUs): whichever NVML gives."""
    rows = []
    remap = _call(nv.nvmlDeviceGetRemappedRows, h)
    if remap is not None:
        corr, unc, pending, failed = (int(x) for x in list(remap)[:4])
        bad = unc >= MAX_ROW_REMAP_UNCORRECTABLE
        rows.append(HealthRow(host, g, "remapped_rows", str(corr + unc), "", DEGRADED if bad else OK,
                              f"{corr} for corrected and {unc} for uncorrected errors"
                              + (f": {unc} uncorrectable, at or over DCGM's {MAX_ROW_REMAP_UNCORRECTABLE} "
                                 "(DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE)" if bad else "")))
        state, why = OK, "none pending"
        if failed:
            state, why = FAILING, "a row remap failed: the GPU needs service"
        elif pending:
            state, why = DEGRADED, "a remap is pending: reset the GPU to apply it"
        rows.append(HealthRow(host, g, "remap_pending", "yes" if pending or failed else "no", "no", state, why))
    else:
        rows += [HealthRow(host, g, item, "", "", NOT_AVAILABLE, "NVML gives no row remapping here")
                 for item in ("remapped_rows", "remap_pending")]
    sbe, dbe = (_call(nv.nvmlDeviceGetRetiredPages, h, cause) for cause in (PAGE_CAUSE_SBE, PAGE_CAUSE_DBE))
    if sbe is None and dbe is None:
        rows.append(HealthRow(host, g, "retired_pages", "", "", NOT_AVAILABLE,
                              "NVML gives no retired pages here (GPUs with row remapping retire none)"))
    else:
        n_sbe, n_dbe = len(sbe or ()), len(dbe or ())
        full = n_sbe + n_dbe >= MAX_RETIRED_PAGES
        rows.append(HealthRow(host, g, "retired_pages", str(n_sbe + n_dbe), f"under {MAX_RETIRED_PAGES}",
                              FAILING if full else OK,
                              f"{n_sbe} for repeated corrected and {n_dbe} for uncorrected errors"
                              + (f": at or over DCGM's {MAX_RETIRED_PAGES} (DCGM_LIMIT_MAX_RETIRED_PAGES)"
                                 if full else "")))
    pending = _call(nv.nvmlDeviceGetRetiredPagesPendingStatus, h)
    if pending is None:
        rows.append(HealthRow(host, g, "retired_pages_pending", "", "no", NOT_AVAILABLE,
                              "NVML gives no page retirement status here"))
    else:
        rows.append(HealthRow(host, g, "retired_pages_pending", "yes" if pending else "no", "no",
                              DEGRADED if pending else OK,
                              "a page retirement is pending: reset the GPU to apply it" if pending else "none pending"))
    return rows


def _nvlink_rows(nv, h, host, g) -> list[HealthRow]:
    max_links = getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)
    links = {link: s for link in range(max_links) if (s := _call(nv.nvmlDeviceGetNvLinkState, h, link)) is not None}
    counter_items = ("nvlink_crc_errors", "nvlink_replay_errors", "nvlink_recovery_errors")
    if not links:
        return [HealthRow(host, g, item, "", "", NOT_AVAILABLE, "no NVLink on this GPU (or NVML gives no link state)")
                for item in ("nvlink_active", *counter_items)]
    down = [link for link, s in links.items() if not s]
    rows = [HealthRow(host, g, "nvlink_active", f"{len(links) - len(down)}/{len(links)}", f"{len(links)}/{len(links)}",
                      DEGRADED if down else OK,
                      f"link(s) {', '.join(map(str, down))} inactive" if down else "every link active")]
    counters = {"nvlink_crc_errors": (NVLINK_CRC_FLIT, NVLINK_CRC_DATA), "nvlink_replay_errors": (NVLINK_REPLAY,),
                "nvlink_recovery_errors": (NVLINK_RECOVERY,)}
    for item, kinds in counters.items():
        per_link = {}
        for link in links:
            counts = [_call(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, k) for k in kinds]
            if any(c is not None for c in counts):
                per_link[link] = sum(int(c) for c in counts if c is not None)
        if not per_link:
            rows.append(HealthRow(host, g, item, "", "", NOT_AVAILABLE, "NVML gives no NVLink error counters here"))
            continue
        moved = {k: v for k, v in per_link.items() if v}
        rows.append(HealthRow(host, g, item, str(sum(per_link.values())), "", OK,
                              ("since the driver loaded, by link: " + ", ".join(f"{k}: {v}" for k, v in moved.items()))
                              if moved else f"none on {len(per_link)} link(s)"))
    return rows


def _violation_rows(nv, h, host, g) -> list[HealthRow]:
    """The time the power and the thermal policy held this GPU's clocks down since the driver loaded
    (ms); what counts is how much it grows during the run (distbench.health.rules.RULES)."""
    rows = []
    for item, policy in (("throttle_power_ms", PERF_POLICY_POWER), ("throttle_thermal_ms", PERF_POLICY_THERMAL)):
        v = _call(nv.nvmlDeviceGetViolationStatus, h, policy)
        ns = getattr(v, "violationTime", None)
        if ns is None:
            rows.append(HealthRow(host, g, item, "", "", NOT_AVAILABLE, "NVML gives no violation time here"))
        else:
            rows.append(HealthRow(host, g, item, str(int(ns) // 1_000_000), "", OK,
                                  "since the driver loaded (the run's own: the after-before difference)"))
    return rows


def _thermal_power_rows(nv, h, host, g, sample) -> list[HealthRow]:
    rows = []
    temp = sample["temp"]
    slow = _call(nv.nvmlDeviceGetTemperatureThreshold, h, TEMP_THRESHOLD_SLOWDOWN)
    shut = _call(nv.nvmlDeviceGetTemperatureThreshold, h, TEMP_THRESHOLD_SHUTDOWN)
    if temp is None:
        rows.append(HealthRow(host, g, "temperature_c", "", "", NOT_AVAILABLE, "NVML gives no temperature here"))
    else:
        state, why = OK, "highest while sampled"
        if shut is not None and temp >= shut:
            state, why = FAILING, f"at the shutdown threshold ({shut} C)"
        elif slow is not None and temp >= slow:
            state, why = DEGRADED, f"at the slowdown threshold ({slow} C): clocks are cut"
        rows.append(HealthRow(host, g, "temperature_c", str(temp), "" if slow is None else str(slow), state, why))
    power, limit = sample["power"], _call(nv.nvmlDeviceGetEnforcedPowerLimit, h)
    if power is None:
        rows.append(HealthRow(host, g, "power_w", "", "", NOT_AVAILABLE, "NVML gives no power reading here"))
    else:
        rows.append(HealthRow(host, g, "power_w", f"{power / 1000:.0f}", "" if limit is None else f"{limit / 1000:.0f}",
                              OK, "highest while sampled, against the enforced limit"))
    default = _call(nv.nvmlDeviceGetPowerManagementDefaultLimit, h)
    if limit is None or default is None:
        rows.append(HealthRow(host, g, "power_limit_w", "", "", NOT_AVAILABLE, "NVML gives no power limits here"))
    else:
        capped = limit < default
        rows.append(HealthRow(host, g, "power_limit_w", f"{limit / 1000:.0f}", f"{default / 1000:.0f}",
                              DEGRADED if capped else OK,
                              "power capped below the GPU's default limit" if capped else "the default limit"))
    return rows


# The reason's opening words where no source could list a GPU's processes (the gate's culprit reads them)
PROCESSES_NOT_CHECKED = "processes not checked"


def process_row(host: str, g: str, procs: dict | None) -> HealthRow:
    """The compute processes on GPU g before this check touched it (distbench.health.processes: a
    Listing per GPU, from NVML or, where NVML refuses this GPU's list, a second source): any is a
    stranger's (a job's leftover, a neighbour) and fails the GPU; the next job would share it. A GPU
    no source could list is degraded, "processes not checked" (the gate WARNs): only a check that
    ran can pass. The reason says which source listed the GPU."""
    listing = (procs or {}).get(g)
    if listing is None or not listing.checked:
        why = listing.note if listing is not None else "NVML cannot list processes here"
        return HealthRow(host, g, "compute_processes", "", "0", DEGRADED, f"{PROCESSES_NOT_CHECKED}: {why}")
    source = f"as {listing.source} lists them" + (f" ({listing.note})" if listing.note else "")
    if not listing.processes:
        return HealthRow(host, g, "compute_processes", "0", "0", OK, f"no compute process on the GPU, {source}")
    return HealthRow(host, g, "compute_processes", str(len(listing.processes)), "0", FAILING,
                     f"a process that is not this check's is on the GPU: {describe(listing.processes)}, {source}")


def matmul_row(host: str, g: str, figure: tuple, load_note: str) -> HealthRow:
    """GPU g's bf16 matmul throughput under the load against its peers' median (distbench.health.outliers)."""
    tflops, ratio = figure
    expected = f">= {MATMUL_DEGRADED_UNDER:g} of the peers' median"
    if ratio is None:
        why = (load_note if not tflops else "no other GPU measured: nothing to compare with")
        return HealthRow(host, g, "matmul_vs_peers", f"{tflops:.0f}" if tflops else "", expected, NOT_AVAILABLE, why)
    return HealthRow(host, g, "matmul_vs_peers", f"{ratio:.3f}", expected, matmul_state(ratio),
                     f"bf16 matmul {tflops:.0f} TFLOP/s, {ratio:.0%} of its peers' median "
                     f"({tflops / ratio:.0f} TFLOP/s)")


def _xid_event_set(nv, handles: dict):
    """An NVML event set with every GPU registered for critical XIDs; None where NVML has none."""
    es = _call(nv.nvmlEventSetCreate)
    if es is None:
        return None
    registered = [i for i, h in handles.items() if _registered(nv, h, es)]
    if not registered:
        _call(nv.nvmlEventSetFree, es)
        return None
    return es


def _registered(nv, h, es) -> bool:
    try:
        nv.nvmlDeviceRegisterEvents(h, XID_CRITICAL_EVENT, es)
        return True
    except Exception:  # noqa: BLE001 - NotSupported on many GPUs and in VMs
        return False


def _drain_xids(nv, es, handles: dict) -> dict:
    """{gpu index: [xid, ...]} delivered to the set during the sampling window (non-blocking reads)."""
    if es is None:
        return {}
    index_of = {id(h): i for i, h in handles.items()}
    uuid_of = {_text(_call(nv.nvmlDeviceGetUUID, h)): i for i, h in handles.items()}
    wait = nv.first("nvmlEventSetWait_v2", "nvmlEventSetWait")
    out: dict = {}
    for _ in range(1000):  # a storm of XIDs must not hold the check forever
        data = _call(wait, es, 0)  # NVML raises Timeout when nothing is waiting
        if data is None:
            break
        dev = getattr(data, "device", None)
        i = index_of.get(id(dev), uuid_of.get(_text(_call(nv.nvmlDeviceGetUUID, dev)) if dev is not None else None))
        out.setdefault(i, []).append(int(getattr(data, "eventData", 0)))
    _call(nv.nvmlEventSetFree, es)
    return out


def _xid_row(host, g, es, xids) -> HealthRow:
    if es is None:
        return HealthRow(host, g, "xid_events", "", "0", NOT_AVAILABLE, "NVML offers no XID event set here")
    return HealthRow(host, g, "xid_events", str(len(xids)), "0", DEGRADED if xids else OK,
                     f"XID {', '.join(map(str, xids))} while sampled" if xids else "none while sampled")
