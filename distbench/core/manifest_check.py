"""The checks a manifest passes when it registers (distbench.core.manifest.Registry): each "module:name"
it names resolves, read from the module's source unless the module is loaded (a hook's module may
import torch, and the Snakefile reads the manifests while the DAG is built), and the files it declares
exist in its folder. A problem is a ManifestError naming the file. Torch-free, pandas-free.
"""

from __future__ import annotations

import ast
import importlib.util
import keyword
import sys
from functools import lru_cache
from pathlib import Path


class ManifestError(ValueError):
    """A manifest, or a file it declares, that cannot be what it says: the message starts with the file
    (the Snakefile prints it as one line, before any rule is built)."""

    def __init__(self, file, why: str):
        self.file = shown_file(file)
        self.why = why
        super().__init__(f"{self.file}: {why}")


# the folder holding the distbench package: files under it are named relative to it
_ROOT = Path(__file__).resolve().parents[2]


def shown_file(path) -> str:
    """A file as messages name it: relative to the checkout when under it."""
    p = Path(path)
    try:
        return p.resolve().relative_to(_ROOT).as_posix()
    except (ValueError, OSError):
        return str(path)


def module_file(module: str) -> Path | None:
    """The source file of a module, found without importing it or its packages (a hook's module may
    import torch; the manifests are read while the DAG is built): the loaded module's file when it is
    loaded, else each package's folder walked from the top package's spec."""
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__file__", None):
        return Path(loaded.__file__)
    top, *rest = module.split(".")
    if not top.isidentifier() or not all(part.isidentifier() for part in rest):
        return None
    if top in sys.modules:
        package = sys.modules[top]
        locations, origin = list(getattr(package, "__path__", ()) or ()), getattr(package, "__file__", None)
    else:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        if spec is None:
            return None
        locations, origin = list(spec.submodule_search_locations or ()), spec.origin
    for part in rest:
        for folder in map(Path, locations):
            if (folder / part / "__init__.py").is_file():
                origin, locations = str(folder / part / "__init__.py"), [str(folder / part)]
                break
            if (folder / f"{part}.py").is_file():
                origin, locations = str(folder / f"{part}.py"), []
                break
        else:
            return None
    return Path(origin) if origin and origin.endswith(".py") else None


# what a module-level name is bound to, read off its source: a function or class ("callable"), an
# import ("imported"), a literal ("value"), or anything else ("other")
_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr, ast.ListComp, ast.DictComp)


def _bound(body, found: dict[str, str]) -> None:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = "callable"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                found[a.asname or a.name.split(".")[0]] = "imported"  # "*": any name may be bound
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            kind = "value" if isinstance(node.value, _LITERALS) else "other"
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        found[n.id] = kind
        for sub in ("body", "orelse", "finalbody"):  # if/try/with/for at module level
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                _bound(getattr(node, sub, ()) or (), found)
        for handler in getattr(node, "handlers", ()) or ():
            _bound(handler.body, found)


@lru_cache(maxsize=None)
def _module_names(path: Path, _mtime: float) -> dict[str, str]:
    found: dict[str, str] = {}
    _bound(ast.parse(path.read_text(), str(path)).body, found)
    return found


def ref_problem(ref: str, callable_: bool = True) -> str:
    """Why a manifest's "module:name" names nothing (or, callable_, nothing callable), or "" when it
    does. Checked without importing the module unless it is loaded already (so without torch)."""
    module, sep, name = ref.partition(":")
    if not sep or not module or not name.isidentifier():
        return f"{ref!r} is not \"module:name\""
    loaded = sys.modules.get(module)
    spec = getattr(loaded, "__spec__", None)
    if loaded is not None and not getattr(spec, "_initializing", False):
        if not hasattr(loaded, name):
            return f"{ref!r}: {module} has no {name!r}"
        if callable_ and not callable(getattr(loaded, name)):
            return f"{ref!r}: {module}.{name} is not callable"
        return ""
    path = module_file(module)
    if path is None:
        return f"{ref!r}: no module {module}"
    try:
        names = _module_names(path, path.stat().st_mtime)
    except (OSError, SyntaxError, ValueError) as e:
        return f"{ref!r}: {shown_file(path)} cannot be read ({type(e).__name__}: {e})"
    kind = names.get(name)
    if kind is None:
        if "*" in names or "__getattr__" in names:  # bound where no reading of the source can tell
            return ""
        return f"{ref!r}: {module} has no {name!r}"
    if callable_ and kind == "value":
        return f"{ref!r}: {module}.{name} is not callable"
    return ""


def _table_places(m) -> set[str]:
    return {t.name for t in m.tables} | {f.path for f in m.figures}


def manifest_problems(m, folder: Path | None) -> list[str]:
    """What a manifest states that cannot be so: each "field: why". `folder` is the package's own (its
    captions, schema and package data are files there); None skips what is read from it."""
    problems = []
    if not m.name.isidentifier() or keyword.iskeyword(m.name):
        problems.append(f"name {m.name!r} is not a Python identifier (distbench.<name> is its package)")
    elif folder is not None and folder.name != m.name:
        problems.append(f"name {m.name!r} is not its folder's ({folder.name!r})")
    for f in m.HOOKS:
        ref = getattr(m, f)
        if ref and (why := ref_problem(ref)):
            problems.append(f"{f}: {why}")
    for place, refs in m.sections.items():
        if place not in SECTION_PLACES:
            problems.append(f"sections: place {place!r} is none of {', '.join(SECTION_PLACES)}")
        for ref in refs:
            if why := ref_problem(ref, callable_=False):
                problems.append(f"sections[{place!r}]: {why}")
    names = [t.name for t in m.tables]
    problems += [f"tables: {n!r} is declared twice" for n in sorted({n for n in names if names.count(n) > 1})]
    places = _table_places(m)
    rules = [s.rule for s in m.steps]
    problems += [f"steps: rule {r!r} is declared twice" for r in sorted({r for r in rules if rules.count(r) > 1})]
    for s in m.steps:
        if why := ref_problem(s.entry):
            problems.append(f"steps[{s.rule}].entry: {why}")
        for key, ref in s.params.items():
            if why := ref_problem(ref):
                problems.append(f"steps[{s.rule}].params[{key!r}]: {why}")
        for key, out in s.outputs.items():
            if out not in places:
                problems.append(f"steps[{s.rule}].outputs[{key!r}]: {out!r} is none of its tables or "
                                "figure directories")
    if folder is not None:
        if m.schema and not (folder / m.schema).is_file():
            problems.append(f"schema: no file {m.schema!r} in {shown_file(folder)}")
        for what, items in (("tables", m.tables), ("figures", m.figures)):
            for item in items:
                if item.caption and not (folder / item.caption).is_file():
                    problems.append(f"{what}: caption {item.caption!r} is no file in {shown_file(folder)}")
        for pattern in m.package_data:
            if not any(folder.glob(pattern)):
                problems.append(f"package_data: {pattern!r} matches no file in {shown_file(folder)}")
    return problems


# where a manifest's report sections go (distbench.report.sections)
SECTION_PLACES = ("top", "body", "end")
