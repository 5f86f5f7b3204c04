"""report/quick.md: the Verdict of a quick answer (`snakemake --cores 1 quick`, the jobs of
distbench.pipeline.quick), headed by what it stands on and how to get the full report.

The headlines are every registered section's own (distbench.report.sections), from the quick tables:
a family without a table adds none, so nothing that did not run is judged."""

from __future__ import annotations

from datetime import datetime, timezone

from distbench.core.io import atomic_write_text
from distbench.core.section import ReportInputs
from distbench.report.render import _environment
from distbench.report.sections import SECTIONS
from distbench.report.verdict import ordered

FULL_COMMAND = "snakemake --cores 1"


def _job(family: str, wc: dict) -> str:
    """One job as its family's plan names it: 'comm nccl float32 default at 2 rank(s)' (its wildcards
    in the plan's order, whatever the family)."""
    named = " ".join(str(v) for k, v in wc.items() if k != "world_size")
    return f"{family} {named} at {wc['world_size']} rank(s)"


def quick_context(inputs: ReportInputs, quick: dict) -> dict:
    """The template's context: the ordered headlines, what ran, and what the full run adds."""
    headlines = ordered(h for s in SECTIONS for h in s.headlines(inputs))
    families = quick["families"]
    return {
        "gathered": {"headlines": headlines},
        "ran": quick["ran"], "planned": quick["planned"], "full_command": FULL_COMMAND,
        "jobs": [_job(f, wc) for f, v in families.items() for wc in v["ran"]],
        "left": [f"{v['planned'] - len(v['ran'])} {f} job(s)" for f, v in families.items()
                 if v["planned"] > len(v["ran"])],
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def render_quick(inputs: ReportInputs, quick: dict, out_md) -> str:
    """Write the quick report's Markdown to out_md; return it (the quick target prints it)."""
    md = _environment(SECTIONS).get_template("quick.md.j2").render(**quick_context(inputs, quick))
    atomic_write_text(out_md, md)
    return md
