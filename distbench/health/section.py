"""The report's "Hardware health" section (distbench.health.readings, read before and after the
benchmarks): the items that were not ok (in a reading, or in a counter's move during the run), the
counters that moved (each judged by distbench.health.rules: a rate or a count, DCGM's limit
where it has one), whether health.stop_on_failing was on, the benchmark jobs measured on an affected
GPU (their placement files against the GPU's UUID: distbench.health.jobs), and one Verdict
headline per degraded or failing GPU. That headline is the one place the GPU is named, with its
items and the jobs that ran on it (or that this is unknown); its `qualifies` is the short mark
(MARK) that the headlines of the families measured on it (every headline where that is unknown)
and the Findings carry, linking to it (distbench.report.verdict.ordered), since a figure measured
on that GPU may be its fault rather than the software's. Fragments: templates/health.*.j2.
Torch-free; imports no family.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.core.section import Headline, ReportInputs, Section, table
from distbench.health.readings import DEGRADED, FAILING, NODE, NOT_AVAILABLE, OK
from distbench.health.jobs import GpuJobs, describe, jobs_on, read_jobs
from distbench.health.rules import WITHIN
from distbench.health.table import HEALTH_DIFF, item_label, read_diff, read_health_csv, rows_of, worst

TEMPLATES = Path(__file__).parent / "templates"
AREA = "hardware health"
# The mark a figure measured on an affected GPU carries, in the Verdict and the Findings: it links to
# the Verdict row naming the GPU (distbench.report.verdict.mark_anchor), so the GPU is named once.
MARK = "†health"
PHASES = ("before", "after")


def _tables(inputs: ReportInputs) -> dict | None:
    """{"before": rows, "after": rows, "diff": DataFrame | None}, or None without a health check."""
    diff = inputs.path("health_diff")  # health_before.csv and health_after.csv beside it
    if diff is None:
        return None
    d = diff.parent
    out = {p: rows_of(read_health_csv(d / f"health_{p}.csv")) if (d / f"health_{p}.csv").exists() else []
           for p in PHASES}
    out["diff"] = read_diff(d / "health_diff.csv") if (d / "health_diff.csv").exists() else None
    return out if out["before"] or out["after"] else None


def _moved(diff: pd.DataFrame | None) -> pd.DataFrame:
    """Every counter that moved during the run: the faults (degraded, failing) and those whose move is
    listed but ok ("moved, within limits": NVLink CRC errors under DCGM's rate; time at the power limit)."""
    if diff is None or diff.empty:
        return pd.DataFrame(columns=list(HEALTH_DIFF.names))
    return diff[diff["state"].isin([DEGRADED, FAILING]) | (diff["delta"].fillna(0) != 0)]


def affected_gpus(inputs: ReportInputs) -> dict[tuple[str, str], dict]:
    """{(host, gpu): {"state": worst, "items": [labels]}} of every GPU (or node) with a degraded or
    failing item before, after or in the differences."""
    t = _tables(inputs)
    if t is None:
        return {}
    found: dict[tuple[str, str], dict] = {}
    for phase in PHASES:
        for r in t[phase]:
            if r.state in (DEGRADED, FAILING):
                g = found.setdefault((r.host, r.gpu), {"states": set(), "items": {}})
                g["states"].add(r.state)
                g["items"].setdefault(r.item, f"{item_label(r)} {phase}: {r.reason}")
    moved = _moved(t["diff"])
    for r in moved[moved["state"].isin([DEGRADED, FAILING])].itertuples(index=False):
        g = found.setdefault((r.host, r.gpu), {"states": set(), "items": {}})
        g["states"].add(r.state)
        g["items"][f"{r.item} moved"] = f"{item_label(r)}: {r.reason}"
    return {k: {"state": worst(v["states"]), "items": list(v["items"].values()), "names": list(v["items"])}
            for k, v in sorted(found.items())}


def affected_jobs(inputs: ReportInputs) -> dict[tuple[str, str], GpuJobs]:
    """{(host, gpu): the jobs measured on it} of every affected GPU (or node), from the jobs' placement
    files matched by the GPU's UUID (else host and PCI bus id; a node by its host name)."""
    affected = affected_gpus(inputs)
    if not affected:
        return {}
    t = _tables(inputs)
    rows = [r for p in PHASES for r in t[p]]
    identity: dict[tuple[str, str], tuple[str, str]] = {}
    for r in rows:
        if r.uuid or r.pci_bus_id:
            identity.setdefault((r.host, r.gpu), (r.uuid, r.pci_bus_id))
    hosts = {h for r in rows for h in r.host.split(",")}
    jobs = read_jobs(inputs.placements)
    return {k: jobs_on(k, identity.get(k, ("", "")), jobs, hosts) for k in affected}


def _who(host: str, gpu: str) -> str:
    return f"node {host}" if gpu == NODE else f"GPU {gpu} ({host})"


# A family's headline area where it is not the family's folder name (distbench.comm's headlines).
AREA_OF_FAMILY = {"comm": "communication"}


def _areas(found, any_jobs: bool) -> tuple[str, ...] | None:
    """The headline areas whose figures were measured on an affected GPU: the families of the jobs
    on it; None (every headline) while any job's placement cannot say, or no placement was read."""
    if found.unknown or not any_jobs:
        return None
    return tuple(sorted({AREA_OF_FAMILY.get(job.family, job.family) for job, _ in found.on}))


def _healthy_reason(t: dict) -> str:
    """The healthy headline's why: that nothing moved, or which counters moved within their limits."""
    moved = _moved(t["diff"])
    parts = []
    for state, what in ((OK, WITHIN), (NOT_AVAILABLE, "moved, not judged (see Hardware health)")):
        shown = [f"GPU {r.gpu} {r.item} {r.delta:+g}" + (f" ({_rate_cell(r)})" if _rate_cell(r) else "")
                 for r in moved[(moved["state"] == state) & (moved["delta"] > 0)].itertuples(index=False)]
        if shown:
            more = f" and {len(shown) - 4} more" if len(shown) > 4 else ""
            parts.append(f"{what} during the run: {', '.join(shown[:4])}{more}")
    return "; ".join(["before and after the benchmarks", *(parts or ["no error counter moved"])])


def health_headlines(inputs: ReportInputs) -> list[Headline]:
    """One headline per affected GPU (or node), the only place it is named: its items and the jobs
    measured on it; its mark goes to the other headlines it concerns. Else one healthy headline."""
    affected, jobs = affected_gpus(inputs), affected_jobs(inputs)
    any_jobs = bool(inputs.placements)
    out = [Headline(AREA, f"{_who(host, gpu)}: {g['state']}", "failing" if g["state"] == FAILING else "below expected",
                    "; ".join(g["items"]) + "; " + describe(jobs[(host, gpu)], any_jobs),
                    qualifies=MARK, qualifies_areas=_areas(jobs[(host, gpu)], any_jobs))
           for (host, gpu), g in affected.items()]
    t = _tables(inputs)
    if not out and t is not None:
        read = [r for p in PHASES for r in t[p] if r.state == OK and r.gpu != NODE]
        if read:
            gpus = sorted({(r.host, r.gpu) for r in read})
            out.append(Headline(AREA, f"{len(gpus)} GPU(s): every item ok", "healthy", _healthy_reason(t)))
    return out


def health_findings(inputs: ReportInputs) -> list[str]:
    """One short line, led by the mark that links to the Verdict rows naming the affected GPUs."""
    affected = affected_gpus(inputs)
    if not affected:
        return []
    states = sorted({g["state"] for g in affected.values()})
    return [f"{MARK} {len(affected)} GPU(s) or node(s) {' or '.join(states)} during this run: figures measured on "
            "them may show the hardware rather than the software (the Verdict names them and their jobs; "
            "see Hardware health)."]


def _jobs_table(inputs: ReportInputs) -> dict:
    """Jobs measured on an affected GPU: one row per (GPU, job), and one per job whose mapping is unknown."""
    affected = affected_gpus(inputs)
    rows = []
    for (host, gpu), found in affected_jobs(inputs).items():
        state = affected[(host, gpu)]["state"]
        rows += [[_who(host, gpu), state, job.family, job.configuration, ", ".join(map(str, ranks))]
                 for job, ranks in found.on]
        rows += [[_who(host, gpu), state, job.family, job.configuration, f"unknown: {why}"]
                 for job, why in found.unknown]
    return table(["GPU", "state", "family", "configuration", "ranks on it"], rows)


def _not_ok_rows(t: dict) -> list[list]:
    """The items not ok: those of each reading, then the counters whose move during the run was a
    fault (so this list and the counters' table agree)."""
    rows = [[phase, r.host, r.gpu, r.item, r.value, r.expected, r.state, r.reason]
            for phase in PHASES for r in t[phase] if r.state in (DEGRADED, FAILING)]
    moved = _moved(t["diff"])
    return rows + [["during the run", r.host, r.gpu, r.item, f"{r.before:g} → {r.after:g}", "", r.state, r.reason]
                   for r in moved[moved["state"].isin([DEGRADED, FAILING])].itertuples(index=False)]


def _rate_cell(r) -> str:
    """A counter judged as a rate: its move per second between the readings ("" for a count)."""
    return f"{r.rate_per_s:.3g}/s" if pd.notna(r.rate_per_s) else ""


def _build(inputs: ReportInputs) -> dict | None:
    t = _tables(inputs)
    if t is None:
        return None
    stop = bool(((inputs.config or {}).get("health") or {}).get("stop_on_failing"))
    rows, unavailable = _not_ok_rows(t), {}
    for phase in PHASES:
        for r in t[phase]:
            if r.state == NOT_AVAILABLE:
                unavailable.setdefault(r.reason, set()).add(r.item)
    hosts = sorted({r.host for p in PHASES for r in t[p]})
    gpus = sorted({(r.host, r.gpu) for p in PHASES for r in t[p] if r.gpu != NODE and r.state != NOT_AVAILABLE})
    ran = [p for p in PHASES if t[p]]
    note = (f"The health check ran {' and '.join(ran)} the benchmarks on {', '.join(hosts)} "
            f"({len(gpus)} GPU(s) read); health.stop_on_failing was {'on' if stop else 'off'}"
            + (" (a failing item stops the run before any benchmark job)." if stop else
               " (a failing item is reported, the benchmarks run anyway)."))
    na = [f"{len(items)} item(s) not available here: {reason}" for reason, items in sorted(unavailable.items())]
    diff = t["diff"]
    moved = _moved(diff)
    compared = 0 if diff is None else int((diff["state"] != NOT_AVAILABLE).sum())
    diff_rows = [[r.host, r.gpu, r.item, f"{r.before:g}", f"{r.after:g}", f"{r.delta:+g}", _rate_cell(r), r.state,
                  r.reason]
                 for r in moved.itertuples(index=False)]
    return {
        "note": note,
        "not_available": na[:10],
        "not_ok": table(["reading", "host", "gpu", "item", "value", "expected", "state", "why"], rows),
        "diff_note": (f"{compared} counter(s) read before and after; {len(moved)} moved during the run, "
                      f"{int(moved['state'].isin([DEGRADED, FAILING]).sum())} of them degraded or failing."
                      if diff is not None else "No after reading: the differences are not known."),
        "diff": table(["host", "gpu", "counter", "before", "after", "change", "rate", "state", "why"], diff_rows),
        "jobs": _jobs_table(inputs),
        "jobs_note": ("Each benchmark job's placement file (the GPU UUID, PCI bus id and host of every rank) "
                      "against the affected GPUs' UUIDs (else host and PCI bus id; a node by host name). A "
                      "figure of a job listed here was measured on that GPU while it was degraded or failing."),
    }


HEALTH_SECTION = Section("health", "Hardware health", TEMPLATES, _build, headlines=health_headlines,
                         findings=health_findings)
