"""What a benchmark family declares about itself, once: its FamilyManifest.

Each family package holds one `manifest.py` defining `MANIFEST`; distbench.pipeline.families lists
them (core names no family). The workflow (rules/common.smk: the job files, the `all` target, the
report's and summary.json's inputs), the estimate (distbench.pipeline.estimate: where each job's
benchmark tsv and result are), the shared launches (distbench.launch.batch), the report-only check
(distbench.pipeline.report_only), the report's section list (distbench.report.sections) and the
package data are all derived from the manifests.

Paths are templates under results/<run label>/ with Snakemake's {wildcards}. Torch-free, pandas-free:
the Snakefile reads the manifests while the DAG is built.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field


def _always(_config: Mapping, _plan: Mapping) -> bool:
    return True


def config_flag(*keys: str) -> Callable[[Mapping, Mapping], bool]:
    """A condition on one config value: `config_flag("comm", "pairs")` is config["comm"]["pairs"]."""

    def flag(config: Mapping, _plan: Mapping = None) -> bool:  # type: ignore[assignment]
        value = config
        for k in keys:
            value = value[k]
        return bool(value)

    flag.__qualname__ = "config_flag(" + ".".join(keys) + ")"
    return flag


def _match(template: list[str], parts: list[str]) -> dict[str, str] | None:
    """One directory template's wildcards read off path parts ("ws{world_size}" against "ws2")."""
    found: dict[str, str] = {}
    for t, part in zip(template, parts, strict=True):
        pattern = "".join(re.escape(lit) + (f"(?P<{f}>[^/]+)" if f else "")
                          for lit, f, _, _ in string.Formatter().parse(t))
        m = re.fullmatch(pattern, part)
        if not m:
            return None
        found.update(m.groupdict())
    return found


@dataclass(frozen=True)
class Table:
    """One file a family writes for its readers (a table under tables/, or a document)."""

    name: str  # the key its readers use: ReportInputs.table(name)
    path: str  # under results/<label>/, e.g. "tables/comm_summary.csv"
    # an input of the report (and of summary.json); False: written for people and other rules only
    report: bool = True
    # (config, plan) -> whether this run writes it; None: whenever the family is active
    when: Callable[[Mapping, Mapping], bool] | None = None
    # `snakemake report` alone goes on without it when it was never made (a reading the report names
    # as not taken), instead of stopping
    optional_cached: bool = False
    # copied beside the report (its full tables), whether or not a section reads it
    beside_report: bool = False
    # read by summary.json too (a SummaryPart of the family's section names it: tests/test_manifests.py)
    summary_json: bool = False


@dataclass(frozen=True)
class Figures:
    """A plot rule's output directory (under results/<label>/) whose PNGs the report shows."""

    path: str
    when: Callable[[Mapping, Mapping], bool] | None = None


@dataclass(frozen=True)
class FamilyManifest:
    name: str  # the package's name under distbench/ (distbench.<name>)
    # (config, plan) -> whether this run has the family at all (its tables and figures are made)
    active: Callable[[Mapping, Mapping], bool] = _always
    # its benchmark jobs: the rule, the job directory and the files each job writes there (the first
    # is its result: a target of `all`, and what `report` alone needs cached), the benchmark tsv
    job_rule: str = ""
    job_dir: str = ""
    job_files: tuple[str, ...] = ()
    benchmark: str = ""
    # the plan -> the wildcards of every planned job (dicts with job_dir's fields)
    jobs: Callable[[Mapping], Sequence[Mapping]] | None = None
    # the other rules that measure (a GPU or the host under load): `report` alone never starts them
    measuring_rules: tuple[str, ...] = ()
    # the jobs of one backend and world size may share a launch (distbench.launch.batch)
    shares_launches: bool = False
    # its jobs are counted by the time estimate printed before a run (distbench.pipeline.estimate)
    estimated: bool = False
    # its jobs write a trace directory when the config's `profile` asks (distbench.launch.profiling)
    traced: bool = False
    # files `snakemake report` alone needs cached besides each job's result (under results/<label>/)
    cached: tuple[str, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Figures, ...] = ()
    # the report sections it registers, as "module:NAME" (imported by distbench.report.sections), by
    # where they go in the report: "top" (before the families: what qualifies every result), "body",
    # "end" (after every family's body section)
    sections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # files of the package that are not modules (globs under distbench/<name>/): the wheel ships them
    package_data: tuple[str, ...] = ()

    @property
    def benchmark_rules(self) -> tuple[str, ...]:
        """Every rule of this family that measures."""
        return ((self.job_rule,) if self.job_rule else ()) + self.measuring_rules

    @property
    def job_fields(self) -> tuple[str, ...]:
        """The wildcards of job_dir, in their order."""
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.job_dir) if f)

    def job_file(self, name: str | None = None) -> str:
        """A job's file (default: its result) under results/<label>/, wildcards left in."""
        return f"{self.job_dir}/{name or self.job_files[0]}"

    def wildcards_of(self, path) -> dict[str, str] | None:
        """The wildcards of the job whose file `path` is (a job file under any results/<label>/), or None
        when it is no file of this family's jobs."""
        parts = str(path).replace("\\", "/").split("/")
        template = self.job_dir.split("/")
        for start in range(len(parts) - len(template)):
            found = _match(template, parts[start:start + len(template)])
            if found is not None and len(parts) == start + len(template) + 1:
                return found
        return None

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"{self.name} writes no table {name!r} (its tables: {[t.name for t in self.tables]})")
