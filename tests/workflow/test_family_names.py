"""No file of the shared layers names a benchmark family (issue 46): a family is one folder, and its
manifest is its whole interface. For every registered family with a plan (from the registry, no list
kept here), every file under distbench/pipeline/, distbench/report/, distbench/core/ and
rules/common.smk is searched for the family's name as an import (`distbench.<name>`), a quoted string
(`"<name>"`, or a key or module under it: `"<name>.sizes"`) or an identifier prefix (`<name>_jobs`).

A line whose word only looks like a family's (a cgroup controller, a field another tool names) says so
with a comment holding NOT_A_FAMILY; each such line is there for a reviewer to judge."""

import re

import pytest

from distbench.pipeline.families import manifests
from tests.conftest import REPO

SHARED = ("distbench/pipeline", "distbench/report", "distbench/core")
# the generic rules (every family's rules built in one loop) and their scripts too, and the Snakefile
SHARED_FILES = ("rules/common.smk", "rules/families.smk", "rules/family_inputs.smk", "workflow/scripts/run_job.py",
                "workflow/scripts/run_step.py", "Snakefile")
NOT_A_FAMILY = "not a family name"


def shared_files() -> list:
    files = [p for d in SHARED for p in sorted((REPO / d).rglob("*")) if p.is_file() and "__pycache__" not in p.parts]
    return files + [REPO / f for f in SHARED_FILES if (REPO / f).exists()]


def family_names() -> list[str]:
    return [m.name for m in manifests() if m.plan]


def naming(name: str) -> re.Pattern:
    n = re.escape(name)
    return re.compile(rf"distbench\.{n}\b|[\"']{n}(?:[\"']|\.\w)|\b{n}_\w+")


def found(names, files, root=REPO) -> list[str]:
    hits = []
    for path in files:
        try:
            lines = path.read_text().splitlines()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(lines, 1):
            if NOT_A_FAMILY in line:
                continue
            for name in names:
                m = naming(name).search(line)
                if m:
                    hits.append(f"{path.relative_to(root)}:{number}: {m.group(0)} ({name}): {line.strip()[:120]}")
    return hits


def test_there_are_families_to_look_for():
    assert len(family_names()) >= 2


def test_no_shared_file_names_a_family():
    hits = found(family_names(), shared_files())
    assert not hits, "a shared file names a family (move it into the family's folder, behind its manifest):\n" + \
        "\n".join(hits)


@pytest.mark.parametrize("line,caught", [
    ("from distbench.widgets.plan import widgets_jobs", True),
    ('plan["widgets"]', True),
    ("key = 'widgets.sizes'", True),
    ("jobs = widgets_jobs(config)", True),
    ('"""The widgets of a run."""', False),
    ("# widgets, in prose", False),
    ("gadgets_widgets = 1", False),
    ('CONTROLLER = "widgets"  # a cgroup controller: not a family name', False),
])
def test_each_way_of_naming_a_family_is_caught(tmp_path, line, caught):
    bad = tmp_path / "bad.py"
    bad.write_text(line + "\n")
    hits = found(["widgets"], [bad], root=tmp_path)
    assert bool(hits) == caught, hits
