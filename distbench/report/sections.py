"""The report's sections, in the order it shows them.

The report's own sections (Verdict, Findings, Plan, the appendix...) are listed here; every family's
come from its manifest (distbench/<family>/manifest.py `sections`, distbench.pipeline.families), by
place: "top" after the Plan (what qualifies every result: the hardware health, a slow node), "body"
after the hung jobs (one section per family), "end" after the several-runs comparison. Within a place
they follow the registry's order. Adding a section to a family is one module (a
distbench.core.section.Section with its fragments <name>.md.j2 and <name>.html.j2 beside it) plus its
"module:NAME" in the family's manifest; render.py, the main templates and this file stay as they are.
The Verdict and the Findings gather what every section gives them, in this order within a verdict.
"""

from __future__ import annotations

import importlib

from distbench.core.section import Section
from distbench.pipeline.families import manifests
from distbench.report.appendix import APPENDIX, EXTRAS, TOPOLOGY
from distbench.report.hangs import HANGS
from distbench.report.overview import FINDINGS, OTHER_FIGURES, PLAN, REGRESSIONS, SEVERAL_RUNS, VERDICT

PLACES = ("top", "body", "end")


def _load(ref: str) -> Section:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def family_sections(place: str) -> tuple[Section, ...]:
    """The sections the families' manifests register at `place`, in the registry's order."""
    if place not in PLACES:
        raise ValueError(f"no place {place!r} in the report (places: {PLACES})")
    return tuple(_load(ref) for m in manifests() for ref in m.sections.get(place, ()))


SECTIONS = (VERDICT, REGRESSIONS, FINDINGS, PLAN, *family_sections("top"), HANGS, *family_sections("body"),
            SEVERAL_RUNS, *family_sections("end"), OTHER_FIGURES, TOPOLOGY, EXTRAS, APPENDIX)
