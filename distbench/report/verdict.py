"""The report's first section: a few headline numbers, each with its unit, its reference and a
one-word verdict with the reason. Each section makes its own (distbench.core.section.Headline, from
its tables: no harness imported); this module only orders them, failing ones first.

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
    """Every headline, failing ones first (otherwise in the sections' order), as plain dicts for the
    templates."""
    order = {v: i for i, v in enumerate(VERDICTS)}
    return [asdict(h) for h in sorted(headlines, key=lambda h: order[h.verdict])]
