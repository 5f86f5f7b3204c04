"""Issue 38: a wheel renders the report. The package data was a hand-kept list of template folders that
missed nodes' and the health probe's, so `pip install .` (not -e) gave a report that failed at the
health section. Here the wheel is built from this checkout and unpacked outside it; a Python whose
`distbench` is that unpacked copy (checked) finds every registered section's fragments, the config
schema and the summary schema, and renders a report from synthetic cached tables."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

CHECK = r"""
import sys
from pathlib import Path
import distbench
assert Path(distbench.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), distbench.__file__
from distbench.report.sections import SECTIONS
from distbench.pipeline.config import SCHEMA_PATH, check_config
missing = [f"{s.name}.{kind}.j2" for s in SECTIONS for kind in ("md", "html")
           if not (Path(s.templates) / f"{s.name}.{kind}.j2").is_file()]
assert not missing, missing
assert SCHEMA_PATH.is_file() and check_config({})["comm"]["ops"]
sys.path.insert(0, sys.argv[2])  # the tests' synthetic tables (tests/synthetic.py), not the package
from synthetic import render_synthetic_report
out = render_synthetic_report(sys.argv[3])
text = Path(out["out_md"]).read_text()
assert "## Verdict" in text and "## Communication" in text, text[:500]
print("rendered", len(text))
"""


def _source_copy(dest: Path) -> Path:
    """The checkout's files as git sees them (tracked and untracked, not ignored), without build/ or
    *.egg-info/: a build directory left by an earlier build would lend the wheel files the package
    data no longer names."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(src.read_bytes())
    return dest


@pytest.mark.heavy
def test_a_wheel_built_from_the_checkout_renders_the_report(tmp_path):
    src = _source_copy(tmp_path / "src")
    # the build backend of this environment when it has one (seconds, offline), else pip's isolated build
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *isolation,
                            "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("distbench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # every template of the source tree is in the wheel, found without a list
    tree = {p.relative_to(REPO).as_posix() for p in (REPO / "distbench").rglob("*.j2")}
    assert tree and tree <= names, sorted(tree - names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site), "MPLBACKEND": "Agg"}
    r = subprocess.run([sys.executable, "-c", CHECK, str(site), str(REPO / "tests"), str(tmp_path / "out")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "rendered" in r.stdout
