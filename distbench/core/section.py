"""The report's section API: what a family hands the report, and the cells its tables are made of.

It sits in core (not report/) because the families define their own sections and headlines, and a
family may import core but never the report above it. A section is one frozen Section: its name
(the key of its context and the stem of its template fragments, <name>.md.j2 and <name>.html.j2 in
`templates`), how to build that context from the run's ReportInputs (None: the section is left out),
and optionally the headlines it adds to the Verdict, the lines it adds to the Findings list, the
lines it adds to the Plan's "Skipped", and what the report's other outputs take from a family: the
figures compared against a baseline run (Measure), its part of summary.json (SummaryPart) and what it
shows of several runs side by side (AcrossRuns). distbench/report/sections.py lists the sections in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from distbench.core.manifest import rows_reason, table_spec
from distbench.core.readers import other_run_fix, read_json, read_table, remake
from distbench.core.judged import judged_world_size, node_gpus, oversubscribed  # noqa: F401 (the families' API)
from distbench.core.units import human_time_us, pct, sig3

MAX_TABLE_ROWS = 200  # beyond this a table stops being read; the CSVs hold everything


VERDICTS = ("failing", "below expected", "healthy", "measured")  # worst first (distbench.report.verdict)


def worse(a: str, b: str) -> str:
    """The worse of two verdicts (VERDICTS' order): a headline judged on two counts takes it."""
    return min(a, b, key=VERDICTS.index)


@dataclass(frozen=True)
class Headline:
    area: str  # communication, training, memory
    headline: str  # the number(s), with units
    verdict: str  # one of VERDICTS
    reason: str
    # a short mark ("†health") for a headline that holds for other headlines (a GPU the health check
    # found degraded, named in this one row): it opens the Verdict, and the others carry only the mark,
    # linking to it (distbench.report.verdict) ...
    qualifies: str = ""
    # ... those of these areas only (the families whose jobs ran on that GPU); None: every headline
    # (which jobs ran there is not known)
    qualifies_areas: tuple[str, ...] | None = None
    # where the headline stands among those of its verdict that are not failing: higher first. The
    # section that knows what the node can answer sets it (distbench.core.judged.node_gpus): on one GPU
    # the language models' tokens/s and MFU lead, memory next, and the row saying there is no
    # collective between GPUs to measure comes after them (docs/report.md, "Node shapes"). 0: the
    # sections' own order.
    lead: int = 0


@dataclass
class ReportInputs:
    """What one report is made from: the run's tables by name (paths; each read once, on first use),
    the probes' results and the plan. Any of them may be missing; the sections that need it are
    then left out. The names are those of the families' manifests (distbench.core.manifest.Table),
    so a new table reaches its section without a field here."""

    tables: Mapping[str, Path | str | None] = field(default_factory=dict)  # table name -> path
    env: Path | str | None = None  # probe/env.json
    figures: Sequence[Path] = ()
    config: dict | None = None
    plan: dict | None = None
    extra: dict | None = None  # the probes' results a family joined (peak, topology, nccl, placement, advice)
    placements: Sequence[Path] | None = None
    run_started: Any = None  # datetime of the Snakemake run rendering the report
    results_dir: Path | str | None = None  # results/, holding this run and any copied from other hosts
    run_label: str | None = None
    full_tables: Sequence[Path] | None = None  # copied beside the report; default: those a section describes
    # the sections this report is made of (render.build_context sets them): the report's own sections
    # that gather from the families (regressions, several runs) read their measures and parts here
    sections: Sequence[Section] = ()
    _tables: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def path(self, name: str) -> Path | None:
        """Where table `name` is (None: this report has none)."""
        p = self.tables.get(name)
        return Path(p) if p else None

    def table(self, name: str, reader: Callable[[Path], pd.DataFrame] = pd.read_csv) -> pd.DataFrame | None:
        """Table `name`, read once by `reader` through the one reader (distbench.core.readers); None when
        this report has none, or its file is absent (not made) and its family did not run. Whatever is
        wrong with a file that is there raises UnreadableFile naming it: empty (0 bytes), torn, binary,
        unparsable, without a column its readers need (its manifest's Table.columns), or a header alone
        (or no file) where its family ran (Table.rows, against the plan's jobs). So a section, or a
        part of summary.json, is never left out for a damaged table."""
        if (name, reader) not in self._tables:
            path = self.path(name)
            found = table_spec(name)
            columns = found[1].columns if found else ()
            why = rows_reason(name, self.plan)
            self._tables[(name, reader)] = read_table(
                path, remake(path), parse=reader, columns=columns, rows_because=why, missing_ok=not why
            ) if path else None
        return self._tables[(name, reader)]

    def tables_dir(self) -> Path | None:
        """This run's tables/ directory: results/<label>/tables, else where its first table is."""
        if self.results_dir and self.run_label:
            return Path(self.results_dir) / self.run_label / "tables"
        first = next((Path(p) for p in self.tables.values() if p), None)
        return first.parent if first else None

    def node_gpus(self) -> int | None:
        """The GPUs of this run's node (distbench.core.judged.node_gpus: the plan's, else env.json's)."""
        return node_gpus(self.plan, self.env_dict())

    def env_dict(self) -> dict:
        """env.json as a dict ({} when missing); one that cannot be read raises UnreadableFile."""
        if "env" not in self._tables:
            path = Path(self.env) if self.env else None
            self._tables["env"] = read_json(path, remake(path)) if path and path.exists() else {}
        return self._tables["env"]


SMOKE_TEST = "smoke test: {}, scaling not judged"  # what a row's judgement becomes when oversubscribed


def ranks_per_host(table: pd.DataFrame, ws: int, hosts: str) -> int:
    """Ranks per host of a table's jobs at world size `ws`, the table's column `hosts` holding each job's
    host count (one host where the column is absent): what `oversubscribed` compares with the cores."""
    counts = pd.to_numeric(table.loc[table["world_size"] == ws, hosts], errors="coerce").dropna() if hosts in table else ()
    return ws // max(int(counts.min()), 1) if len(counts) else ws


def _none(_inputs: ReportInputs) -> list:
    return []


@dataclass(frozen=True)
class Measure:
    """One figure of a family compared against a baseline run (distbench.report.regressions): the
    table holding it, the columns naming one point, the value and its p5/p95 noise."""

    family: str
    table: str  # file name under tables/, this run's and the baseline's; its stem is its ReportInputs name
    keys: tuple[str, ...]
    value: str
    low: str | None  # p5 column (None: no noise recorded, the threshold alone decides)
    high: str | None
    worse_when_higher: bool = True
    unit: str = ""  # µs, ms or B: how the value is written and a move named (slower/faster, more/less)
    # key columns added after tables were first written: the value they had in the older tables
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The table's name, as ReportInputs.table knows it."""
        return Path(self.table).stem


@dataclass(frozen=True)
class SummaryPart:
    """A family's part of report/summary.json: `results.<key>`, the records of one of its tables."""

    key: str
    input: str  # the table's name (ReportInputs.table)
    fields: tuple[str, ...]  # the columns each record keeps, in order (those the table lacks are left out)
    by: str | None = None  # records grouped under each value of this column (sorted); None: one list
    order: tuple[str, ...] = ()  # within a group, records sorted by these columns
    # the document's `config` keys this family sets, from its table (None when absent) and the config
    settings: Callable[[pd.DataFrame | None, dict], dict] | None = None
    # how the table is read: the family's own reader where its derived columns must be there (a column
    # added later, filled in for a summary written before it)
    reader: Callable[[Path], pd.DataFrame] = pd.read_csv
    # the JSON Schema of results.<key>, a file in the family's folder (distbench.report.summary_json
    # merges it into the document's schema); None: the part is not checked beyond being present
    schema: Path | None = None


@dataclass(frozen=True)
class Run:
    """One run under results/ (this host's, or another host's copied in): results/<label>/."""

    label: str
    about: dict  # its run.json: label, host, GPU, versions, when it was exported
    tables: Path  # its tables/ directory
    # its tables already read (distbench.report.runs.load_runs reads each once, through the one reader)
    frames: Mapping[str, pd.DataFrame] = field(default_factory=dict, compare=False, repr=False)

    def table(self, name: str) -> pd.DataFrame | None:
        """Its table `name` (a file under tables/), through the one reader; None when it has none."""
        if name in self.frames:
            return self.frames[name]
        return read_table(self.tables / name, other_run_fix(self.tables.parent), missing_ok=True)


@dataclass(frozen=True)
class AcrossRuns:
    """What a family shows when results/ holds several runs (the report's "Several runs side by side")."""

    table: str  # the file under a run's tables/ it compares; a results/<label>/ holding one is a run
    build: Callable[[Mapping[str, Run]], Any]  # its fragment's context from the runs (this one first)
    fragment: str  # stem of its fragments <fragment>.md.j2 / .html.j2, in its section's templates;
    # the context is the variable `across_runs` there
    # the columns `build` reads from each run's table, and those of them that must hold numbers (finite
    # on ok rows): a run whose table lacks one or holds anything else there is left out and named
    # (distbench.report.runs)
    columns: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()


@dataclass(frozen=True)
class Section:
    name: str  # context key and fragment stem: <name>.md.j2 / <name>.html.j2 in templates
    title: str  # the heading, for the registry's readers (the fragment writes its own)
    templates: Path  # the directory holding its fragments
    build: Callable[[ReportInputs], Any]  # its context; None leaves the section out
    headlines: Callable[[ReportInputs], list[Headline]] = _none
    findings: Callable[[ReportInputs], list[str]] = _none  # lines for the report's Findings list
    skipped: Callable[[ReportInputs], list[str]] = _none  # lines for the Plan's "Skipped"
    # the figure directories (the plot rules' outputs) whose figures this section shows, and their titles
    figure_dirs: tuple[str, ...] = ()
    figure_titles: Mapping[str, str] = field(default_factory=dict)
    # what each of its full tables (copied beside the report) holds, by file name
    full_tables: Mapping[str, str] = field(default_factory=dict)
    # what the report's other outputs take from this section (see Measure, SummaryPart, AcrossRuns)
    regressions: tuple[Measure, ...] = ()
    summary: SummaryPart | None = None
    across_runs: AcrossRuns | None = None

    def fragment(self, fmt: str) -> str:
        return f"{self.name}.{fmt}.j2"


def fmt_cell(v, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def table(headers, rows, total: int | None = None) -> dict:
    """A table both templates render: headers, rows of strings, how many rows were cut, a note and a
    footnote (printed under the table, for cells marked with *)."""
    rows = [[fmt_cell(c) for c in r] for r in rows]
    total = len(rows) if total is None else total
    return {"headers": list(headers), "rows": rows[:MAX_TABLE_ROWS], "omitted": max(0, total - MAX_TABLE_ROWS),
            "note": "", "footnote": ""}


def time_cell(us) -> str | None:
    """A time in µs as the report writes it (distbench.core.units): the unit that fits."""
    return None if us is None or pd.isna(us) else human_time_us(us)


def gbps_cell(x) -> str | None:
    """A bandwidth in GB/s, three significant digits (distbench.core.units); the header says GB/s."""
    return None if x is None or pd.isna(x) else sig3(x)


def pct_cell(x) -> str | None:
    return None if x is None or pd.isna(x) else pct(x, 1)
