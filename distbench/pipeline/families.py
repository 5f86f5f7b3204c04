"""The families' manifests (distbench.core.manifest): every package of distbench holding a
`manifest.py`, imported once so that each registers itself (distbench.core.manifest.register, which
refuses a name given twice), in the order each manifest states (`order`, then name).

A family is found by its folder: a new `distbench/<name>/manifest.py` is all it takes, and no file
here or elsewhere lists the families. A folder that looks like one (a manifest.py, a
config.schema.yaml, a name that is no identifier) and cannot register is refused, naming it. What is derived from them here: which of them a run has (its
config and plan), each one's planned job files, tables and figure directories, and the inputs of the
report. rules/families.smk builds each family's rules from these; distbench.pipeline.estimate,
distbench.pipeline.report_only, distbench.launch.batch (through the Snakefile) and
distbench.report.sections read the same manifests. Torch-free.
"""

from __future__ import annotations

import importlib
import keyword
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import distbench
from distbench.core.manifest import (
    REGISTRY,
    FamilyManifest,
    Manifest,
    ManifestError,
    PackageManifest,
    Table,
    shown_file,
)

# Folders under distbench/ that hold a manifest.py or a config.schema.yaml and are no package that
# registers: the manifest dataclass and registry, and the shared config schema.
NOT_REGISTERING = {"core": "manifest.py", "pipeline": "config.schema.yaml"}


def folder_problem(folder: Path) -> str:
    """Why a folder under distbench/ that looks like a package that registers (a manifest.py, a
    config.schema.yaml, or a name no import can reach) cannot be one, or "" when it can or is none
    (a folder holding neither file is a package of the shared layers)."""
    name = folder.name
    has_manifest, has_schema = (folder / "manifest.py").is_file(), (folder / "config.schema.yaml").is_file()
    if not name.isidentifier() or keyword.iskeyword(name):
        fixed = re.sub(r"\W", "_", name)
        return (f"the folder name {name!r} is not a Python identifier, so distbench.{name} cannot be "
                f"imported (a package's name is its folder's: {fixed!r}?)")
    if name in NOT_REGISTERING:
        return ""
    if has_schema and not has_manifest:
        return "config.schema.yaml without a manifest.py: no manifest names it, so it is never merged"
    if has_manifest and not (folder / "__init__.py").is_file():
        return "manifest.py without __init__.py: the folder is no package, so its manifest is never imported"
    return ""


@cache
def manifests() -> tuple[Manifest, ...]:
    """Every registered manifest (the families' and the other packages'), in their stated order: the
    packages of distbench holding a manifest module register theirs when imported
    (distbench.core.manifest.REGISTRY). A folder that looks like such a package and does not register
    is refused, naming it (ManifestError)."""
    root = Path(distbench.__path__[0])
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        shown = shown_file(folder)
        if why := folder_problem(folder):
            raise ManifestError(shown, why)
        if folder.name in NOT_REGISTERING or not (folder / "manifest.py").is_file():
            continue
        file = folder / "manifest.py"
        module = importlib.import_module(f"distbench.{folder.name}.manifest")
        m = getattr(module, "MANIFEST", None)
        if m is None:
            raise ManifestError(file, "defines no MANIFEST (MANIFEST = register(FamilyManifest(...)), or "
                                      "PackageManifest for a package that is no family)")
        if not isinstance(m, (FamilyManifest, PackageManifest)):
            raise ManifestError(file, f"MANIFEST is a {type(m).__name__}, not a FamilyManifest or PackageManifest")
        if m.name != folder.name:
            raise ManifestError(file, f"names its package {m.name!r}, not its folder's name {folder.name!r}")
        if REGISTRY.get(m.name) is not m:
            raise ManifestError(file, "does not register its MANIFEST (MANIFEST = register(FamilyManifest(...)))")
        if (folder / "config.schema.yaml").is_file() and not m.schema:
            raise ManifestError(file, "names no schema, but its folder holds config.schema.yaml "
                                      '(schema="config.schema.yaml" merges it)')
    return tuple(sorted(REGISTRY.values(), key=lambda m: (m.order, m.name)))


def families() -> tuple[FamilyManifest, ...]:
    """The benchmark families alone (FamilyManifest), in their order."""
    return tuple(m for m in manifests() if isinstance(m, FamilyManifest))


def manifest(name: str) -> Manifest:
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
