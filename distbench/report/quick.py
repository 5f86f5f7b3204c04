"""report/quick.md: the Verdict of a quick answer (`snakemake --cores 1 quick`, the jobs of
distbench.pipeline.quick), headed by what it stands on and how to get the full report. The full
report, rendered later beside it, marks it superseded (supersede_quick): its "left for the full run"
no longer holds.

The headlines are every registered section's own (distbench.report.sections), from the quick tables:
a family without a table adds none, so nothing that did not run is judged."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from distbench.core.io import atomic_write_text
from distbench.core.readers import UnreadableFile, read_text, remake
from distbench.core.section import ReportInputs
from distbench.core.units import count_noun
from distbench.pipeline.families import manifest, manifests
from distbench.report.render import _environment
from distbench.report.sections import SECTIONS
from distbench.report.verdict import verdict_rows

FULL_COMMAND = "snakemake --cores 1"
QUICK_MD = "quick.md"  # beside report.md (rules/quick.smk writes report/quick.md)
# The quick answer's lines (quick.md.j2) that hold only until the full report, and the line that
# replaces them then.
UNTIL_FULL = ("For the full report (", "Left for the full run:")
SUPERSEDED = ("**Superseded** by the full report, [report.md](report.md) (generated {generated}, from {cached} of "
              "{planned} planned benchmark jobs): read its Verdict. Below, this quick answer as it was.")


def _job(family: str, wc: dict) -> str:
    """One job as its family's plan names it: '<family> nccl float32 default at 2 ranks' (its
    wildcards in the plan's order, whatever the family)."""
    named = " ".join(str(v) for k, v in wc.items() if k != "world_size")
    return f"{family} {named} at {count_noun(wc['world_size'], 'rank')}"


def quick_context(inputs: ReportInputs, quick: dict) -> dict:
    """The template's context: the ordered headlines, what ran, and what the full run adds."""
    headlines = verdict_rows(SECTIONS, inputs)  # the full report's Verdict: the same function
    families = quick["families"]
    return {
        "gathered": {"headlines": headlines},
        "ran": quick["ran"], "planned": quick["planned"], "full_command": FULL_COMMAND,
        "jobs": [_job(f, wc) for f, v in families.items() for wc in v["ran"]],
        "left": [count_noun(v['planned'] - len(v['ran']), f"{f} job") for f, v in families.items()
                 if v["planned"] > len(v["ran"])],
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def render_quick(inputs: ReportInputs, quick: dict, out_md) -> str:
    """Write the quick report's Markdown to out_md; return it (the quick target prints it)."""
    md = _environment(SECTIONS).get_template("quick.md.j2").render(**quick_context(inputs, quick))
    atomic_write_text(out_md, md)
    return md


def jobs_cached(plan: dict, run_dir: Path) -> tuple[int, int]:
    """(planned, cached): the plan's benchmark jobs (distbench.pipeline.plan.plan_summary's wildcards)
    and how many of them have their result under run_dir (results/<label>/), now."""
    counted = [m.name for m in manifests() if m.estimated and m.name in plan["jobs"]]  # as the quick summary's
    jobs = [(f, wc) for f in counted for wc in plan["jobs"][f]]
    return len(jobs), sum((Path(run_dir) / manifest(f).job_file().format(**wc)).exists() for f, wc in jobs)


def supersede_quick(report_md, plan: dict, run_dir: Path, generated: str) -> bool:
    """Mark the quick answer beside report_md superseded by it (True), if there is one: its lines that
    held only until the full report (UNTIL_FULL) go, and a line under its title names the full report,
    when it was generated and from how many of the plan's jobs (counted in the cache now). Idempotent."""
    path = Path(report_md).with_name(QUICK_MD)
    if not path.exists():
        return False
    planned, cached = jobs_cached(plan, run_dir)
    notice = SUPERSEDED.format(generated=generated, cached=cached, planned=planned)
    try:
        text = read_text(path, remake(path))
    except UnreadableFile as e:  # a side note to the report just written: said in the log, not a failure
        print(f"distbench: the quick answer is not marked superseded: {e}")
        return False
    lines = [line for line in text.splitlines() if not line.startswith(("**Superseded**", *UNTIL_FULL))]
    title = next((i for i, line in enumerate(lines) if line.startswith("# ")), -1)
    head, rest = lines[:title + 1], lines[title + 1:]
    while rest and not rest[0].strip():  # the blank line of an earlier notice: one stays
        rest.pop(0)
    atomic_write_text(path, "\n".join([*head, "", notice, "", *rest]).rstrip("\n") + "\n")
    return True
