"""The families' manifests (distbench.core.manifest): every package of distbench holding a
`manifest.py`, imported once so that each registers itself (distbench.core.manifest.register, which
refuses a name given twice), in the order each manifest states (`order`, then name).

A family is found by its folder: a new `distbench/<name>/manifest.py` is all it takes, and no file
here or elsewhere lists the families. What is derived from them here: which of them a run has (its
config and plan), each one's planned job files, tables and figure directories, and the inputs of the
report. rules/families.smk builds each family's rules from these; distbench.pipeline.estimate,
distbench.pipeline.report_only, distbench.launch.batch (through the Snakefile) and
distbench.report.sections read the same manifests. Torch-free.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import distbench
from distbench.core.manifest import REGISTRY, FamilyManifest, Table

@cache
def manifests() -> tuple[FamilyManifest, ...]:
    """Every family's manifest, in their stated order: the packages of distbench holding a manifest
    module register theirs when imported (distbench.core.manifest.REGISTRY)."""
    for info in pkgutil.iter_modules(distbench.__path__):
        if info.ispkg and (Path(distbench.__path__[0]) / info.name / "manifest.py").exists():
            module = importlib.import_module(f"distbench.{info.name}.manifest")
            m = getattr(module, "MANIFEST", None)
            if m is None:  # distbench.core.manifest: the dataclass and the registry, no family
                continue
            if m.name != info.name:
                raise ValueError(f"distbench/{info.name}/manifest.py names its family {m.name!r}")
            if REGISTRY.get(m.name) is not m:
                raise ValueError(f"distbench/{info.name}/manifest.py does not register its MANIFEST "
                                 "(MANIFEST = register(FamilyManifest(...)))")
    return tuple(sorted(REGISTRY.values(), key=lambda m: (m.order, m.name)))


def manifest(name: str) -> FamilyManifest:
    for m in manifests():
        if m.name == name:
            return m
    raise KeyError(f"no family {name!r} (families: {[m.name for m in manifests()]})")


def family_names() -> tuple[str, ...]:
    return tuple(m.name for m in manifests())


def active(config: Mapping, plan: Mapping) -> tuple[FamilyManifest, ...]:
    """The families this run has (their tables and figures are made)."""
    return tuple(m for m in manifests() if m.active(config, plan))


def planned_wildcards(m: FamilyManifest, plan: Mapping) -> list[Mapping]:
    """The wildcards of every planned job of family m ([] for one without jobs in the plan)."""
    if not m.job_rule:
        return []
    return [j.wildcards for j in plan["jobs"].get(m.name, [])] if m.plan else [{}]


def job_files(m: FamilyManifest, plan: Mapping, name: str | None = None) -> list[str]:
    """A file (default: the result) of every planned job of m, under results/<label>/."""
    return [m.job_file(name).format(**wc) for wc in planned_wildcards(m, plan)]


def tables_of(m: FamilyManifest, config: Mapping, plan: Mapping) -> tuple[Table, ...]:
    """The tables m writes in this run."""
    if not m.active(config, plan):
        return ()
    return tuple(t for t in m.tables if t.when is None or t.when(config, plan))


def figure_dirs(config: Mapping, plan: Mapping) -> list[str]:
    """Every active family's figure directories in this run, under results/<label>/."""
    return [f.path for m in active(config, plan) for f in m.figures if f.when is None or f.when(config, plan)]


def report_tables(config: Mapping, plan: Mapping) -> dict[str, Table]:
    """{name: Table} of every table the report reads in this run (ReportInputs.tables' keys)."""
    return {t.name: t for m in manifests() for t in tables_of(m, config, plan) if t.report or t.beside_report}


def benchmark_rules() -> tuple[str, ...]:
    """Every rule that measures (never started by `report` alone)."""
    return tuple(r for m in manifests() for r in m.benchmark_rules)


def batch_rules() -> tuple[str, ...]:
    """The job rules of the families whose jobs share a launch (distbench.launch.batch)."""
    return tuple(m.job_rule for m in manifests() if m.shares_launches)


def package_data() -> dict[str, tuple[str, ...]]:
    """{package: globs of the files it ships besides modules}."""
    return {f"distbench.{m.name}": m.package_data for m in manifests() if m.package_data}
