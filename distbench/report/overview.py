"""The report's sections before and between the families': the Verdict and the Findings (both
gathered from every section by distbench.report.render), regressions against a baseline, the plan,
several runs side by side, and the figures no section claims. Fragments: templates/sections/."""

from __future__ import annotations

from pathlib import Path

from distbench.core.choices import backend_name
from distbench.core.section import ReportInputs, Section, table
from distbench.core.units import human_bytes, human_time_us

TEMPLATES = Path(__file__).parent / "templates" / "sections"


def _gathered(_inputs: ReportInputs) -> dict:
    """The Verdict's and the Findings' content comes from every section: `gathered` in the context
    (render.build_context)."""
    return {}


def _plan(plan: dict) -> dict:
    """What ran, and what the plan skipped (the fragment adds the sections' skips: points of a sweep)."""
    ws = plan.get("world_sizes") or {}
    ran = [f"{backend_name(b)} ({b}): world sizes {', '.join(map(str, ws.get(b, [])))}"
           for b in plan.get("backends_run") or []]
    skipped = [f"{s.get('what')}: skipped — {s.get('why')}" for s in plan.get("skipped") or []]
    gpus = f"{plan.get('gpus')} ({plan.get('gpus_source')})" if "gpus" in plan else None
    return {"ran": ran, "skipped": skipped, "gpus": gpus}


def _regressions(inputs: ReportInputs) -> dict | None:
    """Against report.baseline: the figures that moved beyond their noise and the threshold."""
    opts = (inputs.config or {}).get("report") or {}
    if not opts.get("baseline"):
        return None
    from distbench.report.regressions import DEFAULT_THRESHOLD_PCT, compare

    threshold = float(opts.get("regression_threshold_pct") or DEFAULT_THRESHOLD_PCT)
    compared = compare({"comm_summary.csv": inputs.summary, "training_summary.csv": inputs.training_summary,
                        "memory_summary.csv": inputs.memory_summary}, opts["baseline"], threshold)
    flagged = compared[compared["flagged"]]

    def value(family, x):
        return {"comm": human_time_us(x), "training": human_time_us(1e3 * x)}.get(family) or human_bytes(int(x))
    rows = [[r["family"], r["what"], value(r["family"], r["baseline"]), value(r["family"], r["now"]),
             f"{r['change_pct']:+.1f}%", r["direction"], r["why"]]
            for _, r in flagged.sort_values("change_pct", key=abs, ascending=False).iterrows()]
    return {"baseline": str(opts["baseline"]),
            "note": (f"{len(compared)} figure(s) present in both runs compared; {len(flagged)} moved by more than "
                     f"{threshold:g}% and beyond their p5-p95 noise (memory: the threshold alone)."),
            "table": table(["family", "what", "baseline", "now", "change", "direction", "why"], rows)}


def _runs(inputs: ReportInputs) -> dict | None:
    """Several hosts side by side (distbench.report.runs): only when results/ holds another run."""
    if not inputs.results_dir:
        return None
    from distbench.report.runs import load_runs, ratios, runs_table, side_by_side

    runs = load_runs(inputs.results_dir, first=inputs.run_label)
    if len(runs) < 2:
        return None
    first, *others = list(runs)
    return {"runs": table(*runs_table(runs)), "side_by_side": table(*side_by_side(runs)),
            # this run against each other one (with three hosts copied in, every pair with this run)
            "comparisons": [{"a": first, "b": b, "ratios": table(*ratios(runs, first, b))} for b in others]}


VERDICT = Section("verdict", "Verdict", TEMPLATES, _gathered)
REGRESSIONS = Section("regressions", "Regressions against the baseline", TEMPLATES, _regressions)
FINDINGS = Section("findings", "Findings", TEMPLATES, _gathered)
PLAN = Section("plan", "Plan", TEMPLATES, lambda inputs: _plan(inputs.plan or {}))
SEVERAL_RUNS = Section("several_runs", "Several runs side by side", TEMPLATES, _runs)
# the figures of directories no section names (the fragment decides: shown when there are none at all)
OTHER_FIGURES = Section("other_figures", "Figures", TEMPLATES, _gathered)
