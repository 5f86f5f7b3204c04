"""Code comments and docstrings say why the code is so, not where it came from: "(issue 40)" or
"degraded, as before" sends the reader to a tracker or to a version of the file they do not have,
where the reason itself fits in the comment. The record of what was done and when is docs/ and
benchmarks/results/, not read here.

Read: the comments and docstrings of every Python file of the package, the workflow scripts, the
tools and benchmarks/runs; the comments of the Snakefile and rules/*.smk; the comment lines of the
shell scripts and YAML files of those trees and the {# comments #} of their templates. String
literals that are not docstrings are code (what a program prints or builds) and are left alone, as
are references to another project's tracker in its own form (NVIDIA/nccl#1455).
"""

import ast
import io
import re
import tokenize
from pathlib import Path

from tests.conftest import REPO

TREES = ("distbench", "workflow", "tools", "benchmarks/runs")
HISTORY = re.compile(r"\bissues?\s+\d+|\bas (?:it did )?before\b|\bthan before\b", re.IGNORECASE)
TEMPLATE_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)


def _hits(text: str, first_line: int) -> list[tuple[int, str]]:
    """(line, matched words) of every history reference in `text`, whose first line is `first_line`."""
    return [(first_line + text.count("\n", 0, m.start()), " ".join(m.group().split())) for m in HISTORY.finditer(text)]


def _comment_tokens(text: str) -> list[tuple[int, str]]:
    return [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT]


def history_references(path: Path) -> list[tuple[int, str]]:
    """(line, words) of each "issue N" or "as before" in the comments and docstrings of one file, by its kind."""
    text = path.read_text()
    if path.suffix == ".py":
        pieces = _comment_tokens(text)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
                first = node.body[0]
                if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                        and isinstance(first.value.value, str)):
                    pieces.append((first.value.lineno, first.value.value))
    elif path.name == "Snakefile" or path.suffix == ".smk":
        pieces = _comment_tokens(text)
    elif path.suffix in (".sh", ".yaml", ".yml"):
        pieces = [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("#")]
    elif path.suffix == ".j2":
        pieces = [(1 + text.count("\n", 0, m.start()), m.group()) for m in TEMPLATE_COMMENT.finditer(text)]
    else:
        pieces = []
    return sorted(hit for line, piece in pieces for hit in _hits(piece, line))


def scanned_files() -> list[Path]:
    found = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    for root in TREES:
        for suffix in ("py", "sh", "yaml", "yml", "j2"):
            found += [p for p in sorted((REPO / root).rglob(f"*.{suffix}")) if "__pycache__" not in p.parts]
    return found


def test_no_comment_or_docstring_cites_an_issue_or_an_earlier_version():
    bad = [f"{path.relative_to(REPO)}:{line}: {words!r}"
           for path in scanned_files() for line, words in history_references(path)]
    assert not bad, ("comments and docstrings say why, not which issue or what was before; "
                     "write the reason instead:\n" + "\n".join(bad))


def test_the_trees_are_read_at_all():
    names = {str(p.relative_to(REPO)) for p in scanned_files()}
    assert {"Snakefile", "rules/common.smk", "distbench/core/manifest.py", "tools/compare_nccl_tests.py"} <= names
    assert any(n.startswith("benchmarks/runs/") and n.endswith(".sh") for n in names)


def test_a_planted_history_reference_is_found(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text('"""A module.\n\nKept short (issue 12)."""\n\n'
                      'X = 1  # degraded, as before\n'
                      'Y = "quoted from issue 48"  # a printed string is output, not a comment\n'
                      'Z = 2  # would split the GPUs (plugin issues #316, #459; NVIDIA/nccl#1455)\n\n\n'
                      'def f():\n    """The figure (Issue\n    54: compiled)."""\n')
    assert history_references(source) == [(3, "issue 12"), (5, "as before"), (11, "Issue 54")]
    script = tmp_path / "run.sh"
    script.write_text('#!/usr/bin/env bash\n# Issue 25 on a lent machine\necho "issue 7"  # not a comment line\n')
    assert history_references(script) == [(2, "Issue 25")]
    smk = tmp_path / "Snakefile"
    smk.write_text('rule a:\n    # see issue 40\n    shell: "echo issue 41"\n')
    assert history_references(smk) == [(2, "issue 40")]
    template = tmp_path / "t.md.j2"
    template.write_text("{{ x }} issue 3 in the output\n{# kept\n   as before #}\n")
    assert history_references(template) == [(3, "as before")]
