"""The report's first section: a few headline numbers, each with its unit, its reference and a
one-word verdict with the reason. Each section makes its own (distbench.core.section.Headline, from
its tables: no harness imported); this module only orders them: those that qualify every other one
(a GPU the health check found degraded or failing) first, then failing ones.

Verdicts:
- failing: results were wrong, or the measurement failed;
- below expected: under the reference that applies (each family's section says which);
- healthy: at or above it;
- measured: there is nothing to hold it against (Gloo on CPU, a GPU without a published figure or
  link peak, memory figures).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict

from distbench.core.section import Headline

VERDICTS = ("failing", "below expected", "healthy", "measured")  # worst first


def ordered(headlines: Iterable[Headline]) -> list[dict]:
    """Every headline, those with a `qualifies` note first, then failing ones (otherwise in the
    sections' order), as plain dicts for the templates; each other headline's reason ends with the
    notes that concern it (a figure measured while a GPU was degraded says so next to it: the note
    goes to the headlines of the areas whose jobs ran on that GPU, to all where that is unknown)."""
    headlines = list(headlines)
    order = {v: i for i, v in enumerate(VERDICTS)}
    qualifying = [h for h in headlines if h.qualifies]
    out = []
    for h in sorted(headlines, key=lambda h: (not h.qualifies, order[h.verdict])):
        d = asdict(h)
        d.pop("qualifies_areas")
        notes = "; ".join(q.qualifies for q in qualifying
                          if q.qualifies_areas is None or h.area in q.qualifies_areas)
        if notes and not h.qualifies:
            d["reason"] = f"{d['reason']} ({notes})" if d["reason"] else notes
        out.append(d)
    return out
