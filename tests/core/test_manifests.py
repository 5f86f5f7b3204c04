"""One manifest per family (distbench/<family>/manifest.py, distbench.core.manifest): the registry
finds them by walking the package, what the workflow, the estimate, the shared launches, the
report-only check, the report's sections and the package data need is derived from them, and core/
names no family (the names are read from the registry, never listed here)."""

import ast
import fnmatch
import io
import re
import tokenize
from pathlib import Path

import pytest

from distbench.core.manifest import FamilyManifest, PackageManifest, Table
from distbench.pipeline import estimate, families, report_only
from distbench.report.sections import SECTIONS
from tests.conftest import REPO

CORE = REPO / "distbench" / "core"


def _families() -> list[str]:
    return [m.name for m in families.families()]


def test_the_registry_finds_every_manifest_by_walking_the_package():
    on_disk = sorted(p.parent.name for p in (REPO / "distbench").glob("*/manifest.py") if p.parent.name != "core")
    assert sorted(m.name for m in families.manifests()) == on_disk
    assert {"comm", "training", "memory", "nodes"} == set(_families())
    # a benchmark family (a plan of jobs) registers a FamilyManifest, every other package a PackageManifest
    assert all(isinstance(m, FamilyManifest) == bool(m.plan) for m in families.manifests())
    assert all(isinstance(m, FamilyManifest | PackageManifest) for m in families.manifests())


def _code_words(path: Path) -> set[str]:
    """The words of a module's code: its identifiers and the string constants that are neither
    docstrings nor sentences, split at '_' and '.' (comments, docstrings and sentences are prose, read
    by _prose_refs)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    words = set()
    for node in ast.walk(tree):
        text = None
        if isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            text = node.name
        elif isinstance(node, ast.arg):
            text = node.arg
        elif isinstance(node, ast.alias):
            text = node.name
        elif isinstance(node, ast.ImportFrom):
            text = node.module or ""
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and not re.search(r"\s", node.value)):
            # a string with no whitespace is a key or a name (a table's, a column's); a sentence for
            # people ("on 2 nodes NCCL uses Tree") is prose, read like a comment by _prose_refs
            text = node.value
        if text:
            words.update(w.lower() for w in re.split(r"[^A-Za-z0-9]+|_", text) if w)
    return words


def _prose_refs(path: Path) -> set[str]:
    """The distbench.<package> modules its comments and docstrings name."""
    text = path.read_text()
    comments = " ".join(t.string for t in tokenize.generate_tokens(io.StringIO(text).readline)
                        if t.type == tokenize.COMMENT)
    return set(re.findall(r"distbench\.(\w+)", text + comments))


def core_naming(names) -> list[str]:
    found = []
    for path in sorted(CORE.glob("*.py")):
        words, refs = _code_words(path), _prose_refs(path)
        found += [f"{path.name}: {n} (in its code)" for n in names if n in words]
        found += [f"{path.name}: distbench.{n} (named)" for n in names if n in refs]
    return found


def test_core_names_no_family():
    """No module of core names a family in its code (an identifier, an import, a table's name) nor
    points at a family's module; the family names come from the registry."""
    assert not core_naming(_families())


def test_a_family_named_in_core_is_caught(tmp_path, monkeypatch):
    (tmp_path / "bad.py").write_text('"""A module."""\nTABLE = "widgets_summary"\n')
    (tmp_path / "prose.py").write_text('"""See distbench.widgets.plan for the jobs."""\n')
    (tmp_path / "fine.py").write_text('"""The widgets of a run."""\n# widgets, in prose\nX = 1\n')
    monkeypatch.setattr(f"{__name__}.CORE", tmp_path)
    assert core_naming(["widgets"]) == ["bad.py: widgets (in its code)", "prose.py: distbench.widgets (named)"]


def test_the_estimate_reads_the_manifests_templates():
    for name, m in ((n, m) for n, m in estimate._ESTIMATED.items()):
        assert estimate.BENCHMARKS[name] == m.benchmark and estimate.OUTPUTS[name] == m.job_file()
        assert estimate.RULE_FAMILIES[m.job_rule] == name
    assert set(estimate.BATCHED) == {n for n, m in estimate._ESTIMATED.items() if m.shares_launches}
    assert set(families.batch_rules()) == {"training_job", "memory_job"}


def test_report_only_never_starts_a_rule_a_manifest_says_measures():
    for m in families.manifests():
        assert set(m.benchmark_rules) <= set(report_only.BENCHMARK_RULES)
    assert report_only.rerun_message([("nodes_round", "params changed")])


def test_every_section_a_manifest_registers_is_in_the_report():
    names = {s.name for s in SECTIONS}
    for m in families.manifests():
        for refs in m.sections.values():
            for ref in refs:
                module, _, attr = ref.partition(":")
                assert module.startswith(f"distbench.{m.name}.")
                assert getattr(__import__(module, fromlist=[attr]), attr).name in names


def test_the_tables_summary_json_reads_are_the_ones_the_manifests_mark():
    read = {s.summary.input for s in SECTIONS if s.summary}
    marked = {t.name for m in families.manifests() for t in m.tables if t.summary_json}
    assert read == marked


def test_every_table_a_section_reads_is_declared_by_a_manifest():
    """A section reads its table by name (inputs.table("<name>")): the name is a manifest's table."""
    declared = {t.name for m in families.manifests() for t in m.tables}
    for path in (REPO / "distbench").rglob("*.py"):
        for name in re.findall(r"""inputs\.(?:table|path)\(\s*["']([\w/]+)["']""", path.read_text()):
            assert name in declared, f"{path.relative_to(REPO)} reads {name!r}, which no manifest declares"
    for s in SECTIONS:
        for measure in s.regressions:
            assert measure.name in declared


def _package_data_patterns() -> list[str]:
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    return data["distbench"]


def test_the_wheel_ships_every_file_a_manifest_declares():
    """Each manifest's package_data (its templates) is matched by pyproject.toml's package-data, and
    every file it names exists."""
    patterns = _package_data_patterns()
    for pkg, globs in families.package_data().items():
        root = REPO / pkg.replace(".", "/")
        for g in globs:
            files = list(root.glob(g))
            assert files, f"{pkg}: {g} matches no file"
            for f in files:
                rel = f.relative_to(REPO / "distbench").as_posix()
                assert any(fnmatch.fnmatch(rel, p.replace("**/", "*")) or fnmatch.fnmatch(rel, p)
                           for p in patterns), f"{rel} is not shipped by pyproject.toml's package-data {patterns}"


def test_every_template_folder_belongs_to_a_manifest_or_the_report():
    declared = {(REPO / pkg.replace(".", "/") / g).parent for pkg, globs in families.package_data().items()
                for g in globs}
    for folder in {p.parent for p in (REPO / "distbench").rglob("*.j2")}:
        if (REPO / "distbench/report") in (folder, *folder.parents):
            continue
        assert folder in declared, f"{folder.relative_to(REPO)} holds templates no manifest declares"


@pytest.mark.parametrize("when", [None, lambda c, p: c["x"]])
def test_a_table_is_written_when_its_family_is_active_and_its_condition_holds(when):
    m = FamilyManifest("widgets", active=lambda c, p: p["on"], tables=(Table("w", "tables/w.csv", when=when),))
    assert families.tables_of(m, {"x": True}, {"on": True}) == m.tables
    assert families.tables_of(m, {"x": True}, {"on": False}) == ()
    assert families.tables_of(m, {"x": False}, {"on": True}) == (() if when else m.tables)


def test_a_job_file_is_told_by_its_familys_job_directory():
    training = families.manifest("training")
    assert training.wildcards_of("results/lab/training/gloo/mlp/ws4/plain/placement.json") == {
        "backend": "gloo", "model": "mlp", "world_size": "4", "config": "plain"}
    assert training.wildcards_of("results/lab/comm/gloo/float32/ws2/default/placement.json") is None


def test_training_placement_is_read_from_the_jobs_placement_files(tmp_path):
    """The training section judges a Gloo row oversubscribed by the ranks one node ran, as the job's
    placement.json records them (not a layout computed again from the config)."""
    import json

    import pandas as pd

    from distbench.core.section import ReportInputs
    from distbench.training.analysis.section import ranks_per_node, with_host

    job = tmp_path / "results/lab/training/gloo/mlp/ws4/plain"
    job.mkdir(parents=True)
    ranks = [{"rank": r, "node": f"n{r // 2}"} for r in range(4)]  # two nodes, two ranks each
    (job / "placement.json").write_text(json.dumps({"ranks": ranks, "error": None}))
    assert ranks_per_node([job / "placement.json"]) == {("gloo", "mlp", 4, "plain"): 2}
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"cpu_count": 2, "gpu_count": 0}))
    summary = pd.DataFrame({"backend": ["gloo"], "model": ["mlp"], "world_size": [4], "config": ["plain"]})
    two_nodes = with_host(summary, ReportInputs(env=env, placements=[job / "placement.json"]))
    one_node = with_host(summary, ReportInputs(env=env, placements=[]))
    assert pd.isna(two_nodes["oversubscribed"][0]) or not two_nodes["oversubscribed"][0]
    assert one_node["oversubscribed"][0]  # 4 ranks on a 2-core host


def _workflow_local_rules(tmp_path) -> tuple[set[str], set[str]]:
    """(every rule, the local ones) of the workflow as Snakemake parses it (its API; no job runs)."""
    import os

    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings, ResourceSettings

    from tests.conftest import copy_workflow

    d = copy_workflow(tmp_path / "wf")
    here = Path.cwd()
    os.chdir(d)  # the Snakefile's includes and profiles are relative to its directory
    try:
        with SnakemakeApi(OutputSettings()) as api:
            w = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=d / "Snakefile", workdir=d)._workflow
            return {r.name for r in w.rules}, set(w._localrules)
    finally:
        os.chdir(here)


def test_each_rule_says_itself_whether_it_runs_where_snakemake_runs(tmp_path):
    """No central `localrules:` list (a family's rules file says it, rule by rule: `localrule: True`); a
    rule that measures (a manifest's job or measuring rule) never runs on the submitting host under a
    cluster executor, and each family's target, `all` and the report do."""
    for f in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        assert not re.search(r"^\s*localrules\s*:", f.read_text(), flags=re.M), f"{f.name}: a localrules list"
    rules, local = _workflow_local_rules(tmp_path)
    measuring = {r for m in families.manifests() for r in m.benchmark_rules}
    assert measuring <= rules and not measuring & local, sorted(measuring & local)
    # the families with a target rule of their name (the gate's rule of its name measures: not a target)
    targets = ({m.name for m in families.manifests()} & rules) - measuring
    assert {"comm", "training", "memory", "nodes"} <= targets
    assert targets | {"all", "report", "summary_json"} <= local
    # each family's tables and figures are made locally (cheap steps that read tables)
    assert {r for r in rules if r.startswith("plot_")} | ({f"aggregate_{t}" for t in targets} & rules) <= local
