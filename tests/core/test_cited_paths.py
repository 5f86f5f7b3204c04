"""Every repository path that the package's code, templates and schemas cite (benchmarks/..., docs/...,
tests/..., tools/..., rules/...) exists: a comment's pointer to a test that was renamed misleads as a
stale results path does; results folders get renamed and moved (benchmarks/h200x2-2026-11-26 became
benchmarks/results/comm-fidelity-h200x2-2026-11-26), and a preset's source text that the report prints
then pointed at nothing. A path inside an address (preceded by '/') is another repository's."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITED = re.compile(r"(?<![/\w.-])((?:benchmarks|docs|tests|tools|rules|workflow|envs|profiles)/[A-Za-z0-9_./-]*[A-Za-z0-9_-])")
# an address split over two string literals: the second starts with a path of the other repository
CONTINUES_ADDRESS = re.compile(r'/"\s*\n\s*"$')
# other projects' files named in prose, not this repository's paths
ELSEWHERE = {"docs/performance.md",  # torchtitan's (distbench/training/analysis/mfu_reference.py)
             "tools/analyze_perf_json.py"}  # nccl-tests' (distbench/comm/analysis/nccl_tests_json.py)


def cited_paths() -> list[tuple[str, str]]:
    out = []
    for f in sorted((REPO / "distbench").rglob("*")):
        if f.suffix not in (".py", ".j2", ".yaml", ".rst", ".json") or "__pycache__" in f.parts:
            continue
        text = f.read_text()
        for m in CITED.finditer(text):
            path = m.group(1)
            if "{" in text[m.end():m.end() + 2] or path in ELSEWHERE:  # a pattern (a rule's benchmark file)
                continue
            if CONTINUES_ADDRESS.search(text[max(0, m.start() - 40):m.start()]):
                continue
            out.append((str(f.relative_to(REPO)), path))
    return out


def test_every_cited_repository_path_exists():
    paths = cited_paths()
    assert any(p.startswith("benchmarks/results/") for _, p in paths)  # the scan finds what it checks
    missing = sorted({(f, p) for f, p in paths if not (REPO / p).exists()})
    assert not missing, missing


def test_a_moved_folder_is_caught():
    assert CITED.findall("measured in benchmarks/h200x2-2026-11-26); see") == ["benchmarks/h200x2-2026-11-26"]
    assert CITED.findall("https://github.com/pytorch/torchtitan/blob/0413/docs/performance.md") == []
