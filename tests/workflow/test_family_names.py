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
    """An import, a quoted name or key, an identifier prefix; in prose, the name as a command's word
    (`snakemake --cores 1 <name>`), as a possessive (`<name>'s`), or before a noun that makes it the
    family's (`the <name> family`, `<name> jobs`, `<name> ranks`, `<name> harness`, `<name> figures`);
    and its config keys, as a path (`<name>.sizes`, `<name>.sizes[1]`) or on the command line
    (`<name>='{...}'`): its manifest carries them."""
    n = re.escape(name)
    return re.compile(rf"distbench\.{n}\b|[\"']{n}(?:[\"']|\.\w)|\b{n}_\w+|`[^`\n]*\s{n}`"
                      rf"|(?<![-\w]){n}(?:'s\b| (?:family|families|jobs?|ranks?|harness|figures?|workloads?)\b)"
                      rf"|(?<![-\w.]){n}(?:\.[a-z_]\w*|='|=\{{)")


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
    ('"`snakemake --cores 1 widgets`, then `snakemake --cores 1 report`."', True),
    ("# the widgets family's default", True),
    ("(widgets's requested_bytes: ...)", True),
    ('"""errors in order: widgets.sizes[2] before widgets.sizes[10]"""', True),
    ("# the command line's `widgets='{rotate_bytes: 0}'`", True),
    ("(v2 gadget.widgets, or cluster.widgets)", False),
    ("# every training and widgets rank imports these modules", True),
    ("# the most sizes one widgets job measures", True),
    ("# the activation-widgets figure", False),
    ("# widgets of a job", False),
])
def test_each_way_of_naming_a_family_is_caught(tmp_path, line, caught):
    bad = tmp_path / "bad.py"
    bad.write_text(line + "\n")
    hits = found(["widgets"], [bad], root=tmp_path)
    assert bool(hits) == caught, hits


def test_the_report_only_message_names_the_families_whose_results_are_missing(monkeypatch):
    """`snakemake report` with results missing names the families to run first (rules/common.smk
    report_from_cache): those owning the missing files, from the registry's job directories, not the
    first family registered nor a name written into the shared rules."""
    from types import SimpleNamespace

    from distbench.pipeline import report_only

    text = report_only.missing_message(["results/x/memory/nccl/gpt/ws1/ddp/memory.csv"], 3, "x")
    assert "`snakemake --cores 1 memory`, then `snakemake --cores 1 report`" in text, text
    assert "`snakemake --cores 1 comm`" not in text
    assert "1 of the 3 benchmark jobs and probes" in text and "results/x/ (e.g. results/x/memory/" in text
    both = report_only.missing_message(["results/x/nodes/gloo/n2/sim/round0/nodes.csv",
                                        "results/x/training/gloo/mlp/ws2/plain/training.csv"], 5, "x")
    assert "`snakemake --cores 1 nodes` and `snakemake --cores 1 training`" in both
    probe = report_only.missing_message(["results/x/probe/env.json"], 1, "x")
    assert "families missing results" not in probe and "Run them first: `snakemake --cores 1`" in probe
    monkeypatch.setattr(report_only, "families",
                        lambda: [SimpleNamespace(name="widgets", job_rule="widgets_job", job_dir="widgets/{backend}")])
    assert "`snakemake --cores 1 widgets`" in report_only.missing_message(["results/x/widgets/gloo/a.csv"], 1, "x")
