"""How the health check judges a counter that moved between its reading before the benchmarks and its
reading after them (distbench.health.table.differences): DCGM's rule wherever DCGM has one,
cited by file and constant, and marked "ours" where it has none.

The sources are NVIDIA's DCGM (github.com/NVIDIA/DCGM, read at 4.6.0): its hardware limits header
`common/DcgmGPUHardwareLimits.h` (`dcgm_gpu_hardware_limits.h` in older releases) and the health
watches that apply them, `modules/health/DcgmHealthWatch.cpp`. DCGM judges some counters as a RATE
over the watched window (NVLink CRC errors: per second) and the others as a COUNT (any move at all).
Here the window is the wall time between the two readings, from their `read_at` times.

DCGM's results are pass, warn and fail; this check's states are ok, degraded (the figures measured on
the GPU may show the hardware) and failing (the GPU's results may be wrong: it needs service). Each
rule says which state a move past its limit takes and why. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from distbench.health.readings import DEGRADED, FAILING, NOT_AVAILABLE, OK

RATE, COUNT = "rate", "count"
WITHIN = "moved, within limits"  # what a move under its limit is called, in the state's reason


@dataclass(frozen=True)
class CounterRule:
    kind: str  # RATE: the move per second between the readings; COUNT: the move itself
    limit: float  # RATE: the rate (per s) at which a move alarms; COUNT: the smallest move that alarms
    state: str  # the state of a move at or past the limit
    source: str  # where the limit comes from, as the report's "why" shows it
    noted: str = ""  # for a rule whose alarm state is ok: what the move means


# DcgmGPUHardwareLimits.h: `#define DCGM_LIMIT_MAX_NVLINK_CRC_ERROR 100.0` ("RM has informed us that CRC
# errors only matter at rates of 100+ per second"; DCGM_LIMIT_MAX_LWLINK_CRC_ERROR in older headers).
# DcgmHealthWatch::MonitorNVLink divides the CRC FLIT and CRC DATA moves by the window's seconds and
# fails at perSec >= that limit (DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD); a smaller move it only reports
# (DCGM_FR_NVLINK_ERROR_THRESHOLD, a warning): here it is listed, ok, as "moved, within limits". The
# CRC count here is FLIT + DATA summed over the links (readings._nvlink_rows), which reaches the limit no
# later than either alone. Past it the GPU is degraded, like every NVLink fault here: a flit that
# failed its CRC is sent again, so the link's figures slow down, not its data.
NVLINK_CRC_ERRORS_PER_S = 100.0
# DcgmGPUHardwareLimits.h: `#define DCGM_LIMIT_MAX_NVLINK_ERROR 1`: MonitorNVLink alarms at a move of 1
# or more; replay and recovery errors "are failures, not warnings" (DCGM_FR_NVLINK_ERROR_CRITICAL).
NVLINK_ERRORS = 1
# DcgmHealthWatch::MonitorMemVolatileDbes: "Fail for any volatile DBEs" (DCGM_FR_VOLATILE_DBE_DETECTED).
UNCORRECTED_ECC_ERRORS = 1

_DCGM_NVLINK = "DCGM_LIMIT_MAX_NVLINK_ERROR: any replay or recovery error fails DCGM's NVLink watch"

RULES = {
    "nvlink_crc_errors": CounterRule(RATE, NVLINK_CRC_ERRORS_PER_S, DEGRADED,
                                     "DCGM's limit: 100/s, DCGM_LIMIT_MAX_NVLINK_CRC_ERROR"),
    "nvlink_replay_errors": CounterRule(COUNT, NVLINK_ERRORS, DEGRADED, _DCGM_NVLINK),
    "nvlink_recovery_errors": CounterRule(COUNT, NVLINK_ERRORS, DEGRADED, _DCGM_NVLINK),
    "ecc_volatile_uncorrected": CounterRule(COUNT, UNCORRECTED_ECC_ERRORS, FAILING,
                                            "DCGM's memory watch fails any volatile double-bit error"),
    # DCGM watches the volatile count only; the aggregate one counts the same errors, kept across
    # driver loads, so its move during the run is the same fault.
    "ecc_aggregate_uncorrected": CounterRule(COUNT, UNCORRECTED_ECC_ERRORS, FAILING,
                                             "DCGM's memory watch fails any volatile double-bit error"),
    # Ours: DCGM's health watches judge no corrected (single-bit) count, and its header's
    # DCGM_LIMIT_MAX_SBE_RATE 10 is a "dummy value until a real one is determined" (JIRA DCGM-445), not a
    # limit to cite. So the rule stays as it was: a corrected memory error during the run degrades.
    "ecc_volatile_corrected": CounterRule(COUNT, 1, DEGRADED, "ours: DCGM has no limit for corrected errors"),
    "ecc_aggregate_corrected": CounterRule(COUNT, 1, DEGRADED, "ours: DCGM has no limit for corrected errors"),
    # Ours for the move: DCGM judges the total (MonitorMemSbeDbeRetiredPages: DCGM_LIMIT_MAX_RETIRED_PAGES
    # 63 fails), which each reading applies (readings._page_rows). A page retired during the run is a
    # memory error under the benchmarks: degraded.
    "retired_pages": CounterRule(COUNT, 1, DEGRADED, "ours: DCGM judges the total, each reading applies it"),
    # Ours for the move: DCGM judges a remap failure (MonitorMemRowRemapFailures, fail: the remap_pending
    # row, failing) and the uncorrectable total (DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE 512, warn;
    # readings._page_rows), not the count of remapped rows. A row remapped during the run: degraded.
    "remapped_rows": CounterRule(COUNT, 1, DEGRADED, "ours: DCGM judges remap failures, each reading applies it"),
    # DCGM judges XIDs one by one (DcgmHealthWatch::BuildXidMappings: 48, 74, 79, 95, 119, 120, 140 fail
    # in every watch; others warn in the watch of their subsystem). A count of kernel-log lines does not
    # say which XID, so any XID during the run degrades (ours).
    "xid_kernel_log": CounterRule(COUNT, 1, DEGRADED, "ours: any XID; DCGM warns or fails by XID number"),
    # DcgmHealthWatch::MonitorThermal warns on any thermal violation time in its window
    # (DCGM_FR_CLOCK_THROTTLE_THERMAL): the figures measured then are the GPU's heat.
    "throttle_thermal_ms": CounterRule(COUNT, 1, DEGRADED, "DCGM's thermal watch warns on any thermal violation"),
    # DcgmHealthWatch::MonitorPower warns on any power violation time too (DCGM_FR_CLOCK_THROTTLE_POWER);
    # ours: under a full matmul load a GPU held at its power limit works as designed, so noted, not a fault.
    "throttle_power_ms": CounterRule(COUNT, 1, OK, "ours: DCGM warns",
                                     noted="ms at its power limit during the run (working as designed at full load)"),
}
# The PCIe replay counter (DCGM: MonitorPcie against GetExpectedPcieReplayRate, a per-minute rate by
# PCIe generation and width; DCGM_LIMIT_MAX_PCIREPLAY_RATE 8/min in older headers) is not read here.


@dataclass(frozen=True)
class Judgement:
    state: str
    reason: str
    rate_per_s: float | None = None


def _rate_text(delta: float, interval_s: float, rate_per_s: float) -> str:
    return f"+{delta:g} in {interval_s:.0f} s = {rate_per_s:.3g}/s"


def _judge_rate(rule: CounterRule, delta: float, interval_s: float | None) -> Judgement:
    if interval_s is None or not interval_s > 0:
        return Judgement(NOT_AVAILABLE, f"+{delta:g}; its rate is unknown (a reading has no read_at time), "
                                        f"so {rule.source} cannot be applied")
    rate = delta / interval_s
    moved = _rate_text(delta, interval_s, rate)
    if rate >= rule.limit:
        return Judgement(rule.state, f"{moved}, at or over {rule.source}", rate)
    return Judgement(OK, f"{WITHIN}: {moved}, under {rule.source}", rate)


def judge(item: str, delta: float, interval_s: float | None) -> Judgement:
    """The state of one counter's move `delta` (after - before) over `interval_s` seconds between the
    readings (None: not known)."""
    rule = RULES[item]
    if delta < 0:
        return Judgement(OK, "went down: the counter was reset (driver reload or GPU reset)")
    if delta == 0:
        return Judgement(OK, "did not move", 0.0 if rule.kind == RATE else None)
    if rule.kind == RATE:
        return _judge_rate(rule, delta, interval_s)
    if delta < rule.limit:
        return Judgement(OK, f"{WITHIN}: +{delta:g}, under {rule.limit:g} ({rule.source})")
    if rule.noted:
        return Judgement(rule.state, f"+{delta:g} {rule.noted}")
    return Judgement(rule.state, f"+{delta:g} during the run ({rule.source})")
