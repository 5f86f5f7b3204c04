"""The rules the package layout must keep: analysis reads tables and never imports a harness, and
no benchmark family imports another (shared pieces live in distbench/*.py)."""

import ast
from pathlib import Path

from tests.conftest import REPO

FAMILIES = ("distbench.comm", "distbench.training", "distbench.memory")
ANALYSIS = ("aggregate", "findings", "advice", "plots", "plots_training", "report", "scaling", "diagnose", "peak",
            "memory_analysis", "plots_memory", "predict", "plots_predict",
            "pairs_analysis", "plots_pairs")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_analysis_modules_never_import_a_harness():
    for mod in ANALYSIS:
        bad = [n for n in _imports(REPO / "distbench" / f"{mod}.py") if any(_in(n, f) for f in FAMILIES)]
        assert not bad, f"distbench/{mod}.py imports {bad}"


def test_analysis_never_imports_the_torch_workloads():
    for mod in ANALYSIS:
        bad = [n for n in _imports(REPO / "distbench" / f"{mod}.py") if _in(n, "distbench.workloads")]
        assert not bad, f"distbench/{mod}.py imports {bad}"


def test_no_family_imports_another():
    for family in FAMILIES:
        folder = REPO / family.replace(".", "/")
        others = [f for f in FAMILIES if f != family]
        for path in folder.glob("*.py"):
            bad = [n for n in _imports(path) if any(_in(n, o) for o in others)]
            assert not bad, f"{path.relative_to(REPO)} imports {bad}"


def test_each_family_runs_alone_as_a_module():
    for family in FAMILIES:
        assert (REPO / family.replace(".", "/") / "__main__.py").exists(), family
