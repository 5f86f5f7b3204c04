"""Every module and file the docs name exists (issue 46): docs/*.md, README.md and the docstring of
every package (distbench/**/__init__.py).

What counts as a name:
- a dotted name `distbench.x.y`: a module or package, or an attribute of one (`distbench.x.y.NAME`,
  `distbench.x.y.Class.method`), resolved against the source files (nothing is imported, so naming a
  module that imports torch costs nothing);
- a path from the repository's root: `distbench/x/y.py`, `rules/x.smk`, `workflow/scripts/x.py`,
  `tools/x.sh`, `tests/x/test_y.py` (`rules/{a,b}.smk` names both);
- a path inside the package, `x/y.py` where x is a package of distbench (`launch/batch.py`).

A name with a placeholder (`distbench.<family>`, `distbench/<family>/manifest.py`) or a glob is no
name of one file and is left alone.
"""

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "distbench"
ROOTS = ("distbench", "rules", "workflow", "tools", "tests")
SUFFIXES = ("py", "smk", "sh", "yaml", "yml", "j2", "json", "md")

DOTTED = re.compile(r"(?<![\w./-])distbench(?:\.[A-Za-z_]\w*)+")
ROOT_PATH = re.compile(r"(?<![\w./{}-])((?:%s)/[\w./-]*\.(?:%s))(?![\w*{<-])" % ("|".join(ROOTS), "|".join(SUFFIXES)))
BRACES = re.compile(r"([\w./-]*)\{([\w.,-]+)\}([\w./-]*)")
# Names that look like ours and are not: each with what it is
NOT_OURS = {
    "distbench.prom": "the gate's Prometheus textfile (distbench.gate.prom.FILE), a file name",
    "tools/analyze_perf_json.py": "nccl-tests' own tool, in its repository",
}


def packages() -> list[str]:
    return sorted(d.name for d in PACKAGE.iterdir() if (d / "__init__.py").exists())


def package_path() -> re.Pattern:
    return re.compile(r"(?<![\w./-])((?:%s)/[\w/]*\.py)(?![\w*{<-])" % "|".join(packages()))


def expand_braces(text: str) -> str:
    """`rules/{common,probe}.smk` -> `rules/common.smk rules/probe.smk` (each name, as a shell would)."""
    return BRACES.sub(lambda m: " ".join(m.group(1) + part + m.group(3) for part in m.group(2).split(",")), text)


def sources() -> dict[str, str]:
    """{where: text} of every place checked: the docs, README and each package's docstring."""
    found = {str(p.relative_to(REPO)): p.read_text() for p in sorted((REPO / "docs").glob("*.md"))}
    found["README.md"] = (REPO / "README.md").read_text()
    for init in sorted(PACKAGE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        if doc:
            found[str(init.relative_to(REPO))] = doc
    return found


@cache
def module_file(dotted: str) -> Path | None:
    """The source of a module or package named `distbench.x.y`, or None."""
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _names(body: list[ast.stmt]) -> set[str]:
    """The names a module or class body defines (defs, classes, assignments, imports), at any depth
    of its if/try/with blocks."""
    out = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        for field in ("body", "orelse", "finalbody", "handlers"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out |= _names([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
    return out


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _class_names(tree: ast.Module, cls: ast.ClassDef) -> set[str]:
    """What a class defines, with what it inherits from the classes of its own module."""
    names = _names(cls.body)
    for base in cls.bases:
        parent = next((n for n in tree.body if isinstance(n, ast.ClassDef) and isinstance(base, ast.Name)
                       and n.name == base.id), None)
        if parent is not None and parent is not cls:
            names |= _class_names(tree, parent)
    return names


def dotted_problem(name: str) -> str | None:
    """None when `name` is a module, a package or an attribute of one; else what is missing."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:k]))
        if path is None:
            continue
        rest = parts[k:]
        if not rest:
            return None
        tree = _tree(path)
        if rest[0] not in _names(tree.body):
            return f"no module {'.'.join(parts[:k + 1])}, and {'.'.join(parts[:k])} defines no {rest[0]}"
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == rest[0]), None)
        if cls is not None and len(rest) > 1 and rest[1] not in _class_names(tree, cls):
            return f"class {'.'.join(parts[:k + 1])} defines no {rest[1]}"
        return None
    return "no such module"


def path_problem(path: str, root: Path = REPO) -> str | None:
    return None if (root / path).exists() else f"no such file under {root.relative_to(REPO.parent)}"


def violations(texts: dict[str, str]) -> list[str]:
    bad = []
    pkg_path = package_path()
    for where, text in texts.items():
        text = expand_braces(text)
        for name in sorted(set(DOTTED.findall(text)) - set(NOT_OURS)):
            why = dotted_problem(name)
            if why:
                bad.append(f"{where}: {name}: {why}")
        for path in sorted(set(ROOT_PATH.findall(text)) - set(NOT_OURS)):
            why = path_problem(path)
            if why:
                bad.append(f"{where}: {path}: {why}")
        for path in sorted(set(pkg_path.findall(text))):
            why = path_problem(path, PACKAGE)
            if why:
                bad.append(f"{where}: {path}: {why}")
    return bad


def test_every_module_and_file_the_docs_name_exists():
    bad = violations(sources())
    assert not bad, "the docs name what does not exist:\n" + "\n".join(bad)


def test_the_docs_are_read_at_all():
    texts = sources()
    assert {"README.md", "docs/layout.md", "docs/architecture.md", "distbench/health/__init__.py"} <= set(texts)
    names = {n for t in texts.values() for n in DOTTED.findall(t)}
    assert "distbench.health" in names and len(names) > 20


def test_the_layout_names_every_package():
    """docs/layout.md says in one line what each package under distbench/ owns."""
    layout = (REPO / "docs/layout.md").read_text()
    missing = [p for p in packages() if f"| `distbench/{p}/` |" not in layout]
    assert not missing, f"docs/layout.md has no row of its own for {missing}"


@pytest.mark.parametrize("text, missing", [
    ("see distbench.probes.health_node", "distbench.probes.health_node"),  # a module moved away
    ("`distbench.comm.spec` says what", "distbench.comm.spec"),
    ("distbench.core.manifest.NoSuchThing", "distbench.core.manifest.NoSuchThing"),
    ("distbench.core.manifest.FamilyManifest.no_such_field", "distbench.core.manifest.FamilyManifest.no_such_field"),
    ("in distbench/training/wrap.py", "distbench/training/wrap.py"),
    ("its rules: rules/{probe,no_such_family}.smk", "rules/no_such_family.smk"),
    ("workflow/scripts/no_such_script.py and tools/no_such_tool.sh", "workflow/scripts/no_such_script.py"),
    ("the batch (launch/no_such_module.py)", "launch/no_such_module.py"),
])
def test_a_name_that_does_not_exist_is_found(text, missing):
    bad = violations({"doc.md": text})
    assert any(f": {missing}:" in line for line in bad), bad


@pytest.mark.parametrize("text", [
    "distbench.core.manifest, distbench.core.manifest.FamilyManifest.job_file and distbench.health.",
    "python -m distbench.gate; torchrun -m distbench.<family>; distbench/<family>/manifest.py",
    "rules/{probe,report}.smk, workflow/scripts/*.py, launch/batch.py, distbench/health/templates/health.md.j2",
])
def test_names_that_exist_or_name_no_one_file_pass(text):
    assert violations({"doc.md": text}) == []
