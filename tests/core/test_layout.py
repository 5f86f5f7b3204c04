"""The rules the package layout keeps, read from the code itself (every module under distbench/ is
found by walking the tree; nothing here lists modules by hand):

- a benchmark family is a package whose manifest registers a plan (distbench.core.manifest: its
  jobs), runnable alone with `torchrun -m distbench.<family>` (its `__main__.py`); no family imports
  another;
- what reads tables (every module in an `analysis/` folder, and the prediction, trace and report
  packages) never imports torch, a harness, the ops or the workloads, not even through another module;
- `core/` imports nothing above it, and no import runs back up the layers of LAYERS;
- the imports have no cycle.

Each rule is checked against a deliberately broken copy of the graph too, so a rule that stopped
finding anything would fail here.
"""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "distbench"
# The layers, lowest first: a module may import its own layer and those below it. Every top-level
# package must have a layer (a new one fails test_every_package_has_a_layer until it is placed).
FAMILY = "family"
LAYERS = ("core", "launch", "workloads", FAMILY, "probes", "analyses", "pipeline", "report")
LAYER_OF = {"core": "core", "launch": "launch", "workloads": "workloads", "probes": "probes",
            # the hardware health check reads NVML through the probes, beside them
            "health": "probes",
            "predict": "analyses", "traces": "analyses", "pipeline": "pipeline", "report": "report",
            # the node gate composes a family (comm) and the health check, as the pipeline does
            "gate": "pipeline"}
TABLE_READER_PACKAGES = ("predict", "traces", "report")  # besides every analysis/ folder
FORBIDDEN_FOR_READERS = ("torch", "distbench.workloads")  # and any *.harness or *.ops module


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def families() -> list[str]:
    """The benchmark families, from the registry itself: every manifest with a plan (its jobs)."""
    from distbench.pipeline.families import manifests

    return sorted(f"distbench.{m.name}" for m in manifests() if m.plan)


DYNAMIC = "<a module named at run time>"  # importlib.import_module / __import__ of a computed name


def imports(path: Path, name: str) -> set[str]:
    """Every module `path` imports (absolute names; `from x import y` also as x.y), at any depth of the
    file; importlib.import_module("x") and __import__("x") too, and DYNAMIC where the name is computed."""
    out = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in ("import_module", "__import__"):
                arg = node.args[0] if node.args else None
                literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                out.add(arg.value if literal and not arg.value.startswith(".") else DYNAMIC)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def registry_imports() -> dict[str, set[str]]:
    """What the families' registry imports by name at run time, read from the manifests themselves:
    distbench.pipeline.families loads every distbench/<family>/manifest.py, distbench.report.sections
    every section module a manifest names ("module:NAME")."""
    from distbench.pipeline.families import manifests

    found = manifests()
    return {"distbench.pipeline.families": {f"distbench.{m.name}.manifest" for m in found},
            "distbench.report.sections": {ref.partition(":")[0] for m in found for refs in m.sections.values()
                                          for ref in refs},
            # every hook a manifest names ("module:function"), loaded by distbench.pipeline.hooks.resolve
            "distbench.pipeline.hooks": {ref.partition(":")[0] for m in found for ref in hook_refs(m)}}


def hook_refs(m) -> list[str]:
    """Every "module:function" a manifest names: its own fields' and its steps' (entry, params)."""
    from dataclasses import fields

    def refs(obj) -> list[str]:
        return [v for f in fields(obj) for v in [getattr(obj, f.name)]
                if isinstance(v, str) and ":" in v and v.split(":")[0].startswith("distbench.")]

    return refs(m) + [r for s in m.steps for r in [*refs(s), *s.params.values()]]


def graph() -> dict[str, set[str]]:
    mods = modules()
    g = {m: imports(p, m) for m, p in mods.items()}
    for m, loaded in registry_imports().items():  # its dynamic imports are these, no other
        g[m] = (g[m] - {DYNAMIC}) | loaded
    return g


def internal(graph: dict[str, set[str]], name: str) -> set[str]:
    """The distbench modules `name` imports (a `from pkg import mod` counts as mod)."""
    return {n for n in graph[name] if n in graph and n != name}


def _in(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def family_of(name: str, fams: list[str]) -> str | None:
    return next((f for f in fams if _in(name, f)), None)


def layer_of(name: str, fams: list[str]) -> str | None:
    if name == "distbench":
        return "core"
    if family_of(name, fams):
        return FAMILY
    top = name.split(".")[1]
    return LAYER_OF.get(top)


def is_table_reader(name: str) -> bool:
    parts = name.split(".")
    return "analysis" in parts or (len(parts) > 1 and parts[1] in TABLE_READER_PACKAGES)


def forbidden_for_readers(name: str) -> bool:
    """What a table reader must not reach: torch, a harness, the ops, the workloads, or a module it
    names only at run time (which no check here can follow)."""
    last = name.rsplit(".", 1)[-1]
    return name == DYNAMIC or any(_in(name, f) for f in FORBIDDEN_FOR_READERS) or (
        name.startswith("distbench.") and last in ("harness", "ops"))


# ---------------------------------------------------------------- the checks, as functions of a graph
def reader_violations(g: dict[str, set[str]]) -> list[str]:
    """Table readers that reach torch, a harness, the ops or the workloads, directly or through
    another distbench module."""
    bad = []
    for start in (m for m in g if is_table_reader(m)):
        seen, todo = {start}, [start]
        while todo:
            m = todo.pop()
            for n in g[m]:
                if forbidden_for_readers(n):
                    bad.append(f"{start} reaches {n}" + (f" through {m}" if m != start else ""))
                elif n in g and n not in seen:
                    seen.add(n)
                    todo.append(n)
    return bad


def family_violations(g: dict[str, set[str]], fams: list[str]) -> list[str]:
    bad = []
    for m in g:
        own = family_of(m, fams)
        if own:
            bad += [f"{m} imports {n}" for n in g[m] if family_of(n, fams) not in (None, own)]
    return bad


def layer_violations(g: dict[str, set[str]], fams: list[str]) -> list[str]:
    bad = []
    for m in g:
        lm = layer_of(m, fams)
        for n in internal(g, m):
            ln = layer_of(n, fams)
            if lm and ln and LAYERS.index(ln) > LAYERS.index(lm):
                bad.append(f"{m} ({lm}) imports {n} ({ln})")
    return bad


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(m, stack):
        state[m] = "open"
        for n in sorted(internal(g, m)):
            if _in(m, n):  # a module importing its own package's __init__ is not a loop of files
                continue
            if state.get(n) == "open":
                found.append(stack[stack.index(n):] + [n] if n in stack else [m, n])
            elif n not in state:
                visit(n, stack + [n])
        state[m] = "done"

    for m in sorted(g):
        if m not in state:
            visit(m, [m])
    return found


# ---------------------------------------------------------------- the code as it is
def test_the_families_are_found():
    assert {"distbench.comm", "distbench.training", "distbench.memory"} <= set(families())


def test_every_package_has_a_layer():
    fams = families()
    missing = sorted({m for m in modules() if layer_of(m, fams) is None})
    assert not missing, f"no layer for {missing}: add its package to LAYER_OF"


def test_table_readers_never_import_torch_a_harness_ops_or_workloads():
    assert not reader_violations(graph())


def test_no_family_imports_another():
    assert not family_violations(graph(), families())


def test_core_imports_no_family_and_no_import_runs_back_up():
    assert not layer_violations(graph(), families())


def test_no_import_cycles():
    assert not cycles(graph())


def test_each_family_runs_alone_as_a_module():
    for family in families():
        assert (REPO / family.replace(".", "/") / "__main__.py").exists(), family


# ---------------------------------------------------------------- each rule catches a break
@pytest.fixture
def g():
    return graph()


def test_a_reader_importing_torch_is_caught(g):
    g["distbench.training.analysis.summary"] = g["distbench.training.analysis.summary"] | {"torch"}
    assert any("torch" in v for v in reader_violations(g))


def test_a_reader_reaching_a_harness_through_another_module_is_caught(g):
    g["distbench.core.units"] = g["distbench.core.units"] | {"distbench.comm.harness"}
    bad = reader_violations(g)
    assert any("through distbench.core.units" in v for v in bad), bad


def test_a_report_importing_the_workloads_is_caught(g):
    g["distbench.report.render"] = g["distbench.report.render"] | {"distbench.workloads.gpt"}
    assert reader_violations(g)


def test_a_family_importing_another_is_caught(g):
    g["distbench.memory.harness"] = g["distbench.memory.harness"] | {"distbench.training.harness"}
    assert family_violations(g, families()) == ["distbench.memory.harness imports distbench.training.harness"]


def test_core_importing_a_family_is_caught(g):
    g["distbench.core.io"] = g["distbench.core.io"] | {"distbench.comm.traffic"}
    assert layer_violations(g, families()) == ["distbench.core.io (core) imports distbench.comm.traffic (family)"]


def test_an_import_back_up_a_layer_is_caught(g):
    g["distbench.launch.cluster"] = g["distbench.launch.cluster"] | {"distbench.pipeline.config"}
    assert any("launch.cluster (launch) imports distbench.pipeline.config" in v
               for v in layer_violations(g, families()))


def test_a_cycle_is_caught(g):
    g["distbench.core.units"] = g["distbench.core.units"] | {"distbench.core.sizes"}
    assert cycles(g)


def test_a_reader_importing_torch_at_run_time_is_caught(tmp_path):
    src = tmp_path / "summary.py"
    src.write_text("import importlib\n\ndef f(name):\n    importlib.import_module('torch')\n"
                   "    return __import__(name)\n")
    found = imports(src, "distbench.training.analysis.summary")
    assert {"torch", DYNAMIC} <= found
    g = graph()
    g["distbench.training.analysis.summary"] = found
    bad = reader_violations(g)
    assert any(v.endswith("reaches torch") for v in bad) and any(DYNAMIC in v for v in bad), bad


# ---------------------------------------------------------------- what lies below and beside the families
# The packages every family is read or run through: they reach a family through its manifest (the
# registry: distbench.pipeline.families, distbench.pipeline.hooks, distbench.report.sections load what a
# manifest names), never by importing it, so a family's folder is all that names it.
SHARED_PACKAGES = ("traces", "gate", "predict", "report", "health", "probes", "pipeline", "launch", "core")
# what the shared packages imported from the families until the pieces moved down (or through a manifest)
NOT_YET_THROUGH_A_MANIFEST = {
    "gate": "distbench.gate.check runs the comm job (run_comm_job, CommJob) itself",
    "probes": "the NCCL probe's worker runs the comm family's ops (distbench.comm.ops)",
}


def shared_violations(g: dict[str, set[str]], fams: list[str], package: str) -> list[str]:
    """The modules of distbench.<package> that import a family's module."""
    return [f"{m} imports {n}" for m in sorted(g) if _in(m, f"distbench.{package}")
            for n in sorted(g[m]) if family_of(n, fams)]


def static_graph() -> dict[str, set[str]]:
    """Every module's own imports (what the registry loads by name at run time left out)."""
    return {m: imports(p, m) for m, p in modules().items()}


@pytest.mark.parametrize("package", [
    pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=NOT_YET_THROUGH_A_MANIFEST[p]))
    if p in NOT_YET_THROUGH_A_MANIFEST else p for p in SHARED_PACKAGES])
def test_shared_packages_import_no_family(package):
    assert not shared_violations(static_graph(), families(), package)


def test_a_shared_package_importing_a_family_is_caught(g):
    fams = families()
    g["distbench.predict.section"] = g["distbench.predict.section"] | {"distbench.comm.analysis.headlines"}
    assert shared_violations(g, fams, "predict") == ["distbench.predict.section imports distbench.comm.analysis.headlines"]
