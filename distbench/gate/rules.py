"""The gate's rules, on recorded readings (torch-free): each reading becomes a Check with a state
(PASS, WARN, FAIL, or INFO for what is measured but not judged), and the worst state is the verdict.

- Health: the health check's own items and limits (distbench.health.readings, distbench.health.rules: DCGM's
  limits where DCGM has one, cited there by header and constant). A `failing` item fails the gate (the
  GPU's results may be wrong: DCGM's "fail", e.g. a volatile double-bit ECC error,
  DcgmHealthWatch::MonitorMemVolatileDbes, or DCGM_LIMIT_MAX_RETIRED_PAGES 63 retired pages), a
  `degraded` one warns (DCGM's "warn": the figures may show the hardware, the node still computes
  right), `ok` and `not available here` pass.
- The collective check against the published figure for this GPU and GPU count
  (distbench.core.references: EXPECTED, LATENCY), else the link peak: busbw from
  HEALTHY_OF_PUBLISHED (0.9) of the reference's low end passes, as the report's verdict says (it
  reads the same thresholds); under it warns (published figures come from other NCCL
  versions and settings); under FAULT_OF_REFERENCE (half) of it fails: no tuning difference halves
  busbw, a link does (a lost NVLink falls back to PCIe). A node with no baseline and no reference row
  is judged by the same rule against what its link can carry (REACHABLE_OF_PEAK of the link peak):
  under half of that fails, under LOW_PEAK_FRACTION of the peak warns. Latency over LATENCY_SLACK x the published
  one warns; it never fails (one user's post is the source, a weaker basis). Gloo on CPU is never a
  GPU verdict: measured, not judged.
- Against the node's own baseline (known-good runs of the same node type): its noise is the larger of
  its trials' and its runs' medians' largest deviation from their median (relative). A change for the
  worse within NOISE_MULTIPLE x that noise passes; beyond it warns; beyond it and by more than
  MATERIAL_REGRESSION it fails, and the reason says by how much. The noise alone would page on a
  healthy node: on 2x H100 four healthy launches in a row spread 0.45% and the next ones ran 1.0% under
  their median (the GPUs warming), where each launch's trials spread 0.2-0.3%
  (benchmarks/results/gate-h100x2-2026-11-27/noise.txt). MATERIAL_REGRESSION is the margin by which
  the report already calls a figure healthy against a published one (HEALTHY_OF_PUBLISHED), not a
  new number.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import median

from distbench.core.contract import Column, Contract
from distbench.core.references import (HEALTHY_OF_PUBLISHED, LOW_PEAK_FRACTION, PCIE_EFFECTIVE, TABLE, expected_for,
                                       latency_for, latency_text, missing_reference, reference_text)
from distbench.core.units import human_bytes, sig3
from distbench.health.readings import DEGRADED, FAILING, NOT_AVAILABLE, OK
from distbench.health.table import item_label

PASS, WARN, FAIL, INFO = "PASS", "WARN", "FAIL", "INFO"
STATES = (PASS, WARN, FAIL, INFO)
ORDER = {INFO: 0, PASS: 0, WARN: 1, FAIL: 2}
FAULT_OF_REFERENCE = 0.5  # under half the reference: a fault, not tuning
# Without a reference row, what the link can carry: ~80% of its line rate after protocol overhead
# (NVLink: the NCCL maintainer's ~20%, distbench.core.references' docstring; PCIe: PCIE_EFFECTIVE)
REACHABLE_OF_PEAK = PCIE_EFFECTIVE
LATENCY_SLACK = 1.5  # latency over 1.5x the published figure warns
NOISE_MULTIPLE = 3.0  # a regression beyond 3x the baseline's own noise fails (beyond 1x: warns)
MATERIAL_REGRESSION = 1 - HEALTHY_OF_PUBLISHED  # a regression fails only beyond this too (10%: see the docstring)
HEALTH_STATE = {FAILING: FAIL, DEGRADED: WARN, OK: PASS, NOT_AVAILABLE: INFO}

GATE = Contract(
    "gate",
    (Column("host", "string", "the node the gate ran on"),
     Column("check", "string", "host_lock, health, gpus, collective, reference, baseline, budget or verdict"),
     Column("subject", "string", "what was checked: a health item of a GPU, a collective point, the gate"),
     Column("value", "string", "the reading (units in the subject)"),
     Column("expected", "string", "the limit or figure it is held against (empty: none)"),
     Column("state", "string", "PASS, WARN, FAIL, or INFO (measured, not judged)"),
     Column("reason", "string", "why the state, with the limit's or figure's source")),
    allowed=(("state", STATES),),
)


@dataclass(frozen=True)
class Check:
    check: str
    subject: str
    value: str
    expected: str
    state: str
    reason: str


@dataclass(frozen=True)
class Point:
    """One measured collective point of the gate's comm job: its trials' figures."""
    backend: str
    world_size: int
    op: str
    size_bytes: int
    timing: str
    nccl_env: str
    busbw_gbps: tuple[float, ...]
    time_us: tuple[float, ...]
    status: str = "ok"
    message: str = ""
    # a baseline of several runs: each run's median (busbw, time); empty for one run
    run_busbw_gbps: tuple[float, ...] = ()
    run_time_us: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.op} {human_bytes(self.size_bytes)} ({self.timing}, {self.backend}, {self.world_size} ranks)"


# --------------------------------------------------------------------------------------------- health
def health_checks(rows) -> list[Check]:
    """Every health row as a check: failing fails, degraded warns (the health check's own states)."""
    out = []
    for r in rows:
        state = HEALTH_STATE.get(r.state, INFO)
        where = "node" if r.gpu in ("node", "all") else f"GPU {r.gpu}"
        out.append(Check("health", f"{where} {r.item}", r.value, r.expected, state, r.reason))
    return out


def gpu_count_check(checks: list[Check], expected: int, detected: int, source: str) -> list[Check]:
    """`checks` with the node's GPU count held against `expected` (--gpus): fewer GPUs seen than
    expected fails (the health check's own gpu_count item says so when NVML reads the node); none
    readable fails too, with the count: a node whose NVML cannot start, or that has lost its GPUs, is
    no GPU node to run jobs on. Without --gpus (0) a host without NVML is a CPU host: unchanged."""
    if expected <= 0:
        return checks
    mine = [c for c in checks if c.check == "health" and c.subject == "node gpu_count"]
    if mine and mine[0].state in (PASS, FAIL) and mine[0].value.isdigit():
        return checks  # NVML counted them; read_health failed a shortfall ("N GPU(s) of ... missing")
    why = mine[0].reason if mine else "no health reading"
    fail = Check("health", "node gpu_count", "0", str(expected), FAIL,
                 f"{expected} GPU(s) expected (--gpus {expected}), none readable: {why}; "
                 f"{source or f'detected {detected}'}")
    return [fail if c in mine else c for c in checks] if mine else [fail, *checks]


def health_summary(rows) -> str:
    bad = [r for r in rows if r.state in (FAILING, DEGRADED)]
    if bad:
        return "; ".join(f"{item_label(r)}: {r.reason}" for r in bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "")
    n_ok = sum(r.state == OK for r in rows)
    if not n_ok:
        return f"health not read here ({rows[0].reason})" if rows else "no health reading"
    return f"health {n_ok} item(s) ok"


# ---------------------------------------------------------------------------------------- collective
def spread(values) -> float:
    """A point's noise: the largest deviation of a trial from the trials' median, relative (0 with one trial)."""
    vals = [v for v in values if math.isfinite(v)]
    if len(vals) < 2:
        return 0.0
    m = median(vals)
    return max(abs(v - m) for v in vals) / m if m else 0.0


def _med(values) -> float:
    vals = [v for v in values if v == v]
    return median(vals) if vals else math.nan


def failed_checks(points: list[Point], comm_status: str) -> list[Check]:
    bad = [p for p in points if p.status != "ok"]
    # a launcher's message may open with its status already ("timeout: killed after ..."): said once
    out = [Check("collective", p.label, "", "", FAIL,
                 (p.message if p.message.startswith(f"{p.status}:") else f"{p.status}: {p.message}")[:300])
           for p in bad]
    if comm_status != "ok" and not bad:
        out.append(Check("collective", "comm job", "", "", FAIL, comm_status[:300]))
    return out


def _measured(p: Point, what: str, trials) -> list[Check]:
    """The figure as measured (INFO), and for Gloo the reason it is not judged."""
    v = f"{_med(trials):.4g}"
    out = [Check("collective", f"{p.label} {what}", v, "", INFO,
                 f"median of {len(trials)} trials, noise ±{spread(trials):.1%}")]
    if p.backend == "gloo":
        out.append(Check("reference", f"{p.label} {what}", v, "", INFO,
                         "Gloo on CPU processes: not a GPU verdict, and no reference applies"))
    return out


def busbw_check(p: Point, gpu_name: str | None, peak: dict | None, nvls: bool | None) -> list[Check]:
    bw = _med(p.busbw_gbps)
    value = f"{sig3(bw)} GB/s busbw"
    out = _measured(p, "busbw_gbps", p.busbw_gbps)
    if p.backend == "gloo":
        return out
    exp = expected_for(gpu_name, p.world_size, p.op, p.size_bytes, nvls=nvls)
    if exp:
        low = exp["expected_busbw_gbps_low"]
        state = PASS if bw >= HEALTHY_OF_PUBLISHED * low else WARN if bw >= FAULT_OF_REFERENCE * low else FAIL
        how = "within" if bw >= low else "near" if state == PASS else "below" if state == WARN else "under half of"
        out.append(Check("reference", f"{p.label} busbw_gbps", f"{bw:.4g}", f">= {HEALTHY_OF_PUBLISHED * low:.4g}",
                         state, f"{value}, {how} {reference_text(exp)}"))
        return out
    lacking = missing_reference(gpu_name, p.world_size, p.op, p.size_bytes, nvls)
    if peak and peak.get("peak_gbps"):
        # No reference row: the link's reachable bandwidth is the reference (REACHABLE_OF_PEAK), and the
        # rule is the same as with a row: under half of it fails; under LOW_PEAK_FRACTION of the line
        # rate (the report's own "suspicious") warns
        top = float(peak["peak_gbps"])
        healthy, fault = LOW_PEAK_FRACTION * top, FAULT_OF_REFERENCE * REACHABLE_OF_PEAK * top
        state = PASS if bw >= healthy else WARN if bw >= fault else FAIL
        tail = (f"at least {LOW_PEAK_FRACTION:.0%}" if state == PASS else f"under {LOW_PEAK_FRACTION:.0%}"
                if state == WARN else f"under half of the ~{sig3(REACHABLE_OF_PEAK * top)} GB/s reachable on it")
        out.append(Check("reference", f"{p.label} busbw_gbps", f"{bw:.4g}", f">= {healthy:.4g}", state,
                         f"{value} = {bw / top:.0%} of the {sig3(top)} GB/s {peak.get('link') or 'link'} peak "
                         f"({tail}); {lacking}"))
    else:
        out.append(Check("reference", f"{p.label} busbw_gbps", f"{bw:.4g}", "", INFO, f"no link peak, and {lacking}"))
    return out


def latency_check(p: Point, gpu_name: str | None) -> list[Check]:
    t = _med(p.time_us)
    out = _measured(p, "latency_us", p.time_us)
    if p.backend == "gloo":
        return out
    ref = latency_for(gpu_name, p.world_size, p.op, p.size_bytes) if p.timing == "graph" else None
    if not ref:
        out.append(Check("reference", f"{p.label} latency_us", f"{t:.4g}", "", INFO,
                         f"no published {p.world_size}x {gpu_name or 'GPU'} latency for {p.op} in "
                         f"{TABLE}'s table: measured, not judged"))
        return out
    limit = LATENCY_SLACK * ref["expected_latency_us"]
    state = PASS if t <= limit else WARN
    out.append(Check("reference", f"{p.label} latency_us", f"{t:.4g}", f"<= {limit:.3g}", state,
                     f"{t:.3g} µs per op, {'within' if state == PASS else 'over'} {LATENCY_SLACK:g}x "
                     f"{latency_text(ref)}"))
    return out


# ------------------------------------------------------------------------------------------ baseline
def _usable(values) -> tuple[float, ...]:
    """Finite, positive figures (NaN, inf, 0 or negative is no measurement to compare with)."""
    return tuple(v for v in values if isinstance(v, (int, float)) and math.isfinite(v) and v > 0)


def baseline_check(p: Point, base: Point | None, what: str) -> Check:
    """`what`: busbw_gbps (higher is better) or latency_us (lower is better). A check whose value is
    empty compared nothing (INFO, saying why); distbench.gate.cli.judge warns when no check could."""
    subject = f"{p.label} {what}"
    if base is None:
        return Check("baseline", subject, "", "", INFO, "not compared: the baseline has no such point")
    higher = what == "busbw_gbps"
    cur_trials, base_trials = (p.busbw_gbps, base.busbw_gbps) if higher else (p.time_us, base.time_us)
    base_trials = _usable(base_trials)
    cur, ref = _med(_usable(cur_trials)), _med(base_trials)
    if not (ref == ref):
        return Check("baseline", subject, "", "", INFO, "not compared: the baseline has no finite positive figure here")
    if not (cur == cur):
        return Check("baseline", subject, "", "", INFO, "not compared: this run has no finite positive figure here")
    runs = _usable(base.run_busbw_gbps if higher else base.run_time_us)
    noise = max(spread(base_trials), spread(runs)) or spread(cur_trials)
    worse = (ref - cur) / ref if higher else (cur - ref) / ref
    unit = "GB/s" if higher else "µs"
    moved = f"{sig3(cur)} {unit}, {abs(worse):.1%} {'worse' if worse > 0 else 'better'} than the baseline's {sig3(ref)} {unit}"
    expected = f"{sig3(ref)} {unit} ± {noise:.1%}"
    of = (f"its {len(runs)} runs' and their trials' largest deviation from their median" if len(runs) >= 2
          else "its trials' largest deviation from their median")
    band = NOISE_MULTIPLE * noise
    if p.backend == "gloo":  # CPU processes share the host with whatever else runs on it: compared, not judged
        return Check("baseline", subject, f"{cur:.4g}", expected, INFO,
                     f"{moved} (noise ±{noise:.1%}): Gloo on CPU processes, measured, not judged")
    if worse <= band:
        return Check("baseline", subject, f"{cur:.4g}", expected, PASS,
                     f"{moved}: within {NOISE_MULTIPLE:g}x its noise (±{noise:.1%}, {of})")
    if worse <= MATERIAL_REGRESSION:
        return Check("baseline", subject, f"{cur:.4g}", expected, WARN,
                     f"{moved}: beyond {NOISE_MULTIPLE:g}x its noise (±{noise:.1%}, {of}), under the "
                     f"{MATERIAL_REGRESSION:.0%} that fails")
    return Check("baseline", subject, f"{cur:.4g}", expected, FAIL,
                 f"{moved}: beyond {NOISE_MULTIPLE:g}x its noise (±{noise:.1%}, {of}; so {band:.1%}) "
                 f"and the {MATERIAL_REGRESSION:.0%} that fails, by {(worse - max(band, MATERIAL_REGRESSION)) * 100:.1f} points")


def comm_checks(points: list[Point], comm_status: str, gpu_name: str | None, peak: dict | None,
                nvls: bool | None, baseline: dict | None, large: int, small: int) -> list[Check]:
    """The collective's checks: failures, busbw at `large`, latency at `small`, each against the
    reference and the baseline (`baseline`: {(op, size, timing): Point}, None: none given)."""
    out = failed_checks(points, comm_status)
    ok = {(p.size_bytes, p.timing): p for p in points if p.status == "ok"}
    big = next((ok[k] for k in ok if k[0] >= large and k[1] != "graph"), None) or next(
        (ok[k] for k in ok if k[0] >= large), None)
    lat = next((ok[k] for k in ok if k[0] <= small and k[1] == "graph"), None) or next(
        (ok[k] for k in ok if k[0] <= small), None)
    if big is not None:
        out += busbw_check(big, gpu_name, peak, nvls)
        if baseline is not None:
            out.append(baseline_check(big, find_point(baseline, big, match_env=False), "busbw_gbps"))
    if lat is not None:
        out += latency_check(lat, gpu_name)
        if baseline is not None:
            out.append(baseline_check(lat, find_point(baseline, lat, match_env=True), "latency_us"))
    return out


def find_point(baseline: dict, p: Point, match_env: bool) -> Point | None:
    """The baseline's point of the same backend, ranks, op, size and timing (and NCCL settings where
    they move the figure: graph mixing costs ~5 µs per small op, nothing at 1 GiB)."""
    for b in baseline.values():
        if (b.backend, b.world_size, b.op, b.size_bytes, b.timing) == (p.backend, p.world_size, p.op, p.size_bytes, p.timing) \
                and (not match_env or b.nccl_env == p.nccl_env) and b.status == "ok":
            return b
    return None


# ----------------------------------------------------------------------------------------- transport
def transport_checks(readings: dict) -> list[Check]:
    """The transport NCCL used between the GPUs against what the hardware offers
    (distbench.gate.transport): a slower one warns, naming it and every NCCL_* variable set that can
    force it; the bandwidth checks decide how bad (under half the reference fails). A configuration
    cause, said first: distbench.gate.culprit puts it before "suspect the links"."""
    from distbench.gate import transport

    nccl = readings.get("nccl")
    if not nccl and readings.get("nccl_log_dir"):
        # the collective was cut short (the budget, a hang): NCCL wrote its account at init, before the
        # timed loop, and the readings process removed any earlier gate's logs before this one started
        nccl = transport.read_logs(transport.log_files(readings["nccl_log_dir"]))
    if not nccl:
        return []
    if not nccl.get("available"):
        return [Check("transport", "NCCL transport", "", "", INFO, f"NCCL's account not read: {nccl.get('reason', '')}"[:300])]
    topo, nvlink = readings.get("topology"), readings.get("nvlink")
    found = transport.findings(nccl, topo, nvlink, readings.get("nccl_env_vars") or {})
    if not found:
        used = transport.used_text(nccl, topo, nvlink)
        offered = "" if (topo or {}).get("available") else f" (the topology was not read: {(topo or {}).get('reason', 'not probed')})"
        return [Check("transport", "NCCL transport", used.split(" between ")[0] if used else "", "", INFO,
                      (f"NCCL used {used}: no slower path than the hardware offers" if used
                       else "NCCL logged no connection between GPUs") + offered)]
    return [Check("transport", "NCCL transport " + ", ".join(f"GPU{a}-GPU{b}" for a, b in f.pairs[:3]), f.transport,
                  f"P2P over {f.offered}" if f.offered.startswith("NVLink") else f"P2P or SHM ({f.offered})",
                  WARN, f.text) for f in found]


def configuration_causes(checks: list[Check]) -> list[Check]:
    """The transport checks that found NCCL on a slower path than the hardware offers."""
    return [c for c in checks if c.check == "transport" and c.state in (WARN, FAIL)]


# ------------------------------------------------------------------------------------------ verdict
def verdict(checks: list[Check]) -> str:
    worst = max((ORDER[c.state] for c in checks), default=0)
    return {0: PASS, 1: WARN, 2: FAIL}[worst]


def reason(checks: list[Check], state: str, summary: list[str]) -> str:
    """The one line's reason: the failing (or warning) checks' reasons, else the summary."""
    if state in (FAIL, WARN):
        hits = [c for c in checks if c.state == state]
        text = "; ".join(f"{c.subject}: {c.reason}" for c in hits[:2])
        text += f" (+{len(hits) - 2} more)" if len(hits) > 2 else ""
        # a configuration cause (NCCL on a slower transport than the hardware offers) is always said
        causes = [c for c in configuration_causes(checks) if c not in hits[:2]]
        return "; ".join([text] * bool(text) + [f"{c.subject}: {c.reason}" for c in causes])
    return "; ".join(s for s in summary if s)


def line(state: str, node: str, why: str) -> str:
    return f"distbench gate: {state} {node}: {' '.join(why.split())}"


def rows(host: str, checks: list[Check]) -> list[dict]:
    return [{"host": host, **asdict(c)} for c in checks]
