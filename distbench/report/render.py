"""The Markdown + self-contained HTML report.

Both are rendered from the same context by Jinja2 templates: report.md.j2 / report.html.j2 in
distbench/report/templates hold the page and include, in order, each registered section's fragment
(distbench.report.sections.SECTIONS; the API is distbench.core.section). The HTML inlines every figure
as a data: URI and has no external CSS/JS, so it can be mailed or archived as one file. The Markdown
links copies of its figures in figures/ beside it, so the report directory is portable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import jinja2

from distbench.core.readers import read_json, read_table, remake
from distbench.core.section import ReportInputs, Section
from distbench.report.publish import figures_dir_of, figures_of, full_tables_of, publish_report, tables_dir_of
from distbench.report.sections import SECTIONS
from distbench.report.verdict import verdict_rows

TEMPLATES = Path(__file__).parent / "templates"


def _shown_path(path: Path) -> str:
    """A path as the report names it: relative to the project (where Snakemake runs) when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def figures_in(directories) -> list[Path]:
    """The PNGs of the families' figure directories (each a plot rule's output), in order."""
    return [png for d in directories for png in sorted(Path(d).glob("*.png"))]


def documents_of(tables: Mapping) -> dict:
    """The JSON documents among a report's tables (a family's join of the probes' results: peak,
    topology, NCCL, placement, advice), merged: ReportInputs.extra."""
    out: dict = {}
    for path in tables.values():
        if path and str(path).endswith(".json"):
            out.update(read_json(path, remake(path)))
    return out


def check_full_tables(inputs: ReportInputs, paths) -> None:
    """Every table copied beside the report, read through the one reader first: one the report's text
    does not read (the raw measurements) would otherwise ship torn or binary as report/tables/<name>.
    A table of `inputs.tables` is read by its name (its manifest's columns and rows); any other as a
    whole CSV (an absent one is not made, and not copied). A damaged one raises UnreadableFile, before
    anything of the report is written."""
    names = {Path(p).resolve(): name for name, p in inputs.tables.items() if p}
    for path in (Path(p) for p in paths if p):
        name = names.get(path.resolve())
        if name is not None:
            inputs.table(name)
        else:
            read_table(path, remake(path), missing_ok=True)


def build_context(inputs: ReportInputs, out_md, figures_dir=None, tables_dir=None,
                  sections: Sequence[Section] = SECTIONS) -> dict:
    """The templates' context: each section's own under its name (a section whose context is None is
    left out), `sections` (the names to render, in order), and `gathered`: every section's headlines
    (ordered, for the Verdict), Findings lines and skips (for the Plan)."""
    # the sections that gather from the others (regressions, several runs) read the registry from inputs
    inputs = replace(inputs, sections=tuple(sections))
    built = {s.name: s.build(inputs) for s in sections}
    # default: every table of the run that a section describes as one of its full tables
    described = {name for s in sections for name in s.full_tables}
    full_tables = ([p for p in inputs.tables.values() if p and Path(p).name in described]
                   if inputs.full_tables is None else inputs.full_tables)
    check_full_tables(inputs, full_tables)
    tables_dir_now = inputs.tables_dir()
    return {
        **built,
        "title": "distbench benchmark report",
        "sections": [s.name for s in sections if built[s.name] is not None],
        "gathered": {"headlines": verdict_rows(sections, inputs),
                     "findings": [f for s in sections for f in s.findings(inputs)],
                     "skipped": [x for s in sections for x in s.skipped(inputs)]},
        # where this run's tables are (results/<label>/tables), named in the text
        "run_tables": _shown_path(tables_dir_now) if tables_dir_now else "",
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "figures": figures_of(inputs.figures, figures_dir_of(out_md, figures_dir), Path(out_md), sections),
        "full_tables": full_tables_of([p for p in full_tables if p], Path(out_md), tables_dir_of(out_md, tables_dir),
                                      sections),
    }


def render_report(inputs: ReportInputs, out_md, out_html, figures_dir=None, tables_dir=None,
                  sections: Sequence[Section] | None = None) -> None:
    """Write the Markdown report, the figures and tables it links and the self-contained HTML one.

    The figures are copied into figures_dir (default: figures/ beside out_md) and the full tables
    (inputs.full_tables, default: the run's tables its sections describe as full tables) into tables_dir (default:
    tables/ beside out_md), all linked relative to out_md, so the directory holding them can be copied
    elsewhere; the HTML inlines the figures as data: URIs and holds the tables collapsed.
    Every table is read (and a damaged one refused, naming it) and both texts are rendered before
    anything is written; then the figures, the tables and both pages are staged and swapped in together.
    """
    sections = SECTIONS if sections is None else sections
    figures_dir, tables_dir = figures_dir_of(out_md, figures_dir), tables_dir_of(out_md, tables_dir)
    ctx = build_context(inputs, out_md, figures_dir, tables_dir, sections)
    env = _environment(sections)
    md = env.get_template("report.md.j2").render(**ctx)
    html = env.get_template("report.html.j2").render(**ctx)
    # staged whole, then swapped in (distbench.report.publish): the last good page, figures and tables
    # stay as they were until the new ones are all ready
    publish_report({figures_dir: [p for f in ctx["figures"] for p in f["files"]],
                    tables_dir: [Path(t["source"]) for t in ctx["full_tables"]]},
                   {Path(out_md): md, Path(out_html): html})


_MD_HTML = str.maketrans({"<": "&lt;", ">": "&gt;"})
_MD_BARE_AMP = re.compile(r"&(?!#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")  # an & that starts no entity
_MD_ESCAPABLE = re.compile(r"\\(?=[!-/:-@\[-`{-~])")  # a backslash CommonMark would read as an escape


class _Verbatim(str):
    """Text placed inside a code fence longer than any backtick run in it (mdfence): shown as is, since
    nothing inside a fence is markup, and entities there would be shown literally."""


def _md_text(v) -> str:
    """Text for Markdown outside code: <, > and a bare & as HTML entities. Markdown renderers pass raw
    HTML through, so a probe value such as a hostname `<script>...` would otherwise become markup; as
    entities it renders as the same characters, inert. Idempotent (an entity's & is left alone), so
    text escaped once by a filter and again by the environment's finalize is unchanged."""
    return _MD_BARE_AMP.sub("&amp;", str(v)).translate(_MD_HTML)


@jinja2.pass_eval_context
def _md_finalize(eval_ctx, v):
    """Every {{ expression }} of a Markdown template, escaped unless it is fenced text (| verbatim):
    a value that came from a file or another host (a hang stack's rank key, a hostname, a message)
    cannot become markup in report.md whichever template shows it, filter or not. An HTML template
    (autoescape on) is left to Jinja's own escaping."""
    if eval_ctx.autoescape or isinstance(v, _Verbatim):
        return v if eval_ctx.autoescape else str(v)
    return _md_text(v) if isinstance(v, str) else v


def _md_cell(v) -> str:
    """One GFM table cell: _md_text, then backslashes that would escape the next character doubled
    and every `|` escaped (GFM splits a row on each unescaped pipe, even inside code spans, so a
    value with a pipe would shift the columns), and line breaks as spaces (a row is one line)."""
    text = _MD_ESCAPABLE.sub(r"\\\\", _md_text(v)).replace("|", "\\|")
    return re.sub(r"\r\n|[\r\n]", " ", text)


def _md_fence(text) -> str:
    """A code fence longer than any run of backticks in text, so the text cannot close it early."""
    longest = max((len(run) for run in re.findall(r"`+", str(text))), default=0)
    return "`" * max(3, longest + 1)


def _environment(sections: Sequence[Section]) -> jinja2.Environment:
    """Templates from report/templates (the page, its macros) and each section's own directory."""
    dirs = list(dict.fromkeys([TEMPLATES, *(Path(s.templates) for s in sections)]))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "html.j2"), default_for_string=False),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined,
    )
    # the HTML templates escape by autoescape, the Markdown ones through finalize
    env.finalize = _md_finalize
    env.filters["verbatim"] = _Verbatim
    env.filters["mdcell"] = _md_cell
    env.filters["mdtext"] = _md_text
    env.filters["mdfence"] = _md_fence
    return env
