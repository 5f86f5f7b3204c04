"""The report's first section: a few headline numbers, each with its unit, its reference and a
one-word verdict with the reason. Each section makes its own (distbench.core.section.Headline, from
its tables: no harness imported); this module only orders them: those that qualify every other one
(a GPU the health check found degraded or failing) first, then failing ones, and gives the others
the short mark that links to the row that qualifies them.

Verdicts:
- failing: results were wrong, or the measurement failed;
- below expected: under the reference that applies (each family's section says which);
- healthy: at or above it;
- measured: there is nothing to hold it against (Gloo on CPU, a GPU without a published figure or
  link peak, a measured split of memory).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

from distbench.core.section import VERDICTS, Headline, ReportInputs, Section


def verdict_rows(sections: Iterable[Section], inputs: ReportInputs) -> list[dict]:
    """The Verdict's rows: every section's headlines from `inputs`, ordered. The one function the full
    report (distbench.report.render) and the quick answer (distbench.report.quick) both call, so the
    two apply the same rules; each family's headline picks the world size it judges by one rule too
    (distbench.core.judged.judged_world_size), the one the quick answer picks its jobs by."""
    return ordered(h for s in sections for h in s.headlines(inputs))


def mark_anchor(mark: str) -> str:
    """The id of the Verdict row a mark links to: '†health' -> 'verdict-health'."""
    return "verdict-" + mark.lstrip("†")


def ordered(headlines: Iterable[Headline]) -> list[dict]:
    """Every headline, those with a `qualifies` mark first, then failing ones, then the others by their
    `lead` (what the node can answer first, as the section that made it says) and verdict (otherwise in the
    sections' order), as plain dicts for the templates. A qualifying headline (a GPU the health check
    found degraded) is the one row that names what it qualifies; the first of each mark gets the
    `anchor` its mark links to. Every other headline it concerns (the areas whose jobs ran on that GPU;
    all where that is unknown) carries only the short mark, in `marks`, never the whole note."""
    headlines = list(headlines)
    order = {v: i for i, v in enumerate(VERDICTS)}
    qualifying = [h for h in headlines if h.qualifies]
    anchored: set[str] = set()
    out = []
    for h in sorted(headlines, key=lambda h: (not h.qualifies, h.verdict != "failing", -h.lead, order[h.verdict])):
        d = asdict(h)
        d.pop("qualifies_areas")
        d.pop("lead")
        d["anchor"], d["marks"] = "", []
        if h.qualifies and h.qualifies not in anchored:
            anchored.add(h.qualifies)
            d["anchor"] = mark_anchor(h.qualifies)
        elif not h.qualifies:
            marks = dict.fromkeys(q.qualifies for q in qualifying
                                  if q.qualifies_areas is None or h.area in q.qualifies_areas)
            d["marks"] = [{"text": m, "anchor": mark_anchor(m)} for m in marks]
        out.append(d)
    return out
