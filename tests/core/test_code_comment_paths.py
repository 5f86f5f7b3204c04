"""Every module and file a code comment or docstring names exists, as tests/core/test_docs_paths.py
checks for the docs: a comment that sends the reader to `tests/x/test_y.py` or `distbench.x.y` is
only worth keeping while that place is there.

Read: the comments and docstrings of every Python file of the package, the workflow scripts and
tools, and the comments of the Snakefile and rules/*.smk. String literals that are not docstrings
are code (paths a program builds), not pointers for a reader, and are left alone.
"""

import ast
import io
import tokenize
from pathlib import Path

from tests.conftest import REPO
from tests.core.test_docs_paths import violations

PY_ROOTS = ("distbench", "workflow", "tools", "benchmarks/runs")


def python_comments(path: Path) -> str:
    """The comments and docstrings of one Python file, one per line."""
    text = path.read_text()
    out = [tok.string for tok in tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append(doc)
    return "\n".join(out)


def workflow_comments(path: Path) -> str:
    """The comments of a Snakemake file: whatever follows a `#` that opens a comment."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type == tokenize.COMMENT:
            out.append(tok.string)
    return "\n".join(out)


def comment_sources() -> dict[str, str]:
    found = {}
    for root in PY_ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[str(path.relative_to(REPO))] = python_comments(path)
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        found[str(path.relative_to(REPO))] = workflow_comments(path)
    return found


def test_every_place_a_code_comment_names_exists():
    bad = violations(comment_sources())
    assert not bad, "code comments name what does not exist:\n" + "\n".join(bad)


def test_comments_are_read_at_all():
    texts = comment_sources()
    assert "rules/common.smk" in texts and "distbench/core/manifest.py" in texts
    assert "FamilyManifest" in texts["distbench/core/manifest.py"]


def test_a_comment_naming_a_test_that_is_gone_is_found(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text('"""Checked by tests/no_such_dir/test_gone.py."""\n\nX = 1  # see distbench.core.no_such_module\n'
                      'Y = "tests/built/at/run_time.py"  # a path the code builds is no pointer\n')
    bad = violations({"mod.py": python_comments(source)})
    assert any("tests/no_such_dir/test_gone.py" in b for b in bad)
    assert any("distbench.core.no_such_module" in b for b in bad)
    assert not any("run_time.py" in b for b in bad)
