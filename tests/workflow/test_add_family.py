"""docs/architecture.md's "Add a family", followed on a copy of the checkout: a benchmark family is
one folder. The worked example, tests/fixtures/family_h2d/h2d/ (host-to-device copy bandwidth per
rank), is copied in as distbench/h2d/ and nothing else is edited; the real workflow then plans it,
runs its torchrun jobs (Gloo, 1 and 2 ranks), aggregates its table and renders its report section.

The copy is what runs: PYTHONPATH=<copy> puts the copy's distbench ahead of the editable install
(setuptools' editable finder sits after the path finder, so PYTHONPATH wins; checked below), and
distbench.h2d exists only in the copy, so every job, step and section that ran proves it too.
"""

import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

pytestmark = pytest.mark.e2e
FIXTURE = REPO / "tests/fixtures/family_h2d/h2d"
FAMILY = "distbench/h2d"
LABEL = "h2d-recipe"
# as cheap as the schema allows: one comm job at 1 rank (comm has no off switch), no training, memory,
# prediction or health check; the family's own defaults (1 MiB and 16 MiB, 1 and 2 ranks)
CONFIG = {
    "run_label": LABEL,
    "backends": ["gloo"],
    "world_sizes": [1],
    "comm": {"ops": ["barrier"], "sizes": ["8"], "gloo": {"warmup": 1, "iters": 2, "trials": 1}},
    "training": {"enabled": False},
    "memory": {"enabled": False},
    "predict": {"enabled": False},
    "health": {"enabled": False},
}
SIZES = {1 << 20, 16 << 20}


def _git_files(cwd, *args) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", *args], cwd=cwd, capture_output=True, check=True).stdout
    return sorted(p for p in out.decode().split("\0") if p)


def _checkout() -> dict[str, bytes]:
    """The checkout as it is now: the tracked files and the untracked ones git does not ignore (the
    working changes of everyone editing it), with their content."""
    return {p: (REPO / p).read_bytes() for p in _git_files(REPO, "-co", "--exclude-standard") if (REPO / p).is_file()}


def _env(root) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "DISTBENCH_RUN_LABEL": LABEL}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not (REPO / ".git").exists():
        pytest.skip("needs the git checkout (git ls-files names what to copy)")
    root = tmp_path_factory.mktemp("add_family") / "checkout"
    original = _checkout()
    for rel, data in original.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    shutil.copytree(FIXTURE, root / FAMILY, ignore=shutil.ignore_patterns("__pycache__"))
    # git in the copy only lists what the run leaves that .gitignore does not ignore (no commit)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    cfg = root.parent / "h2d.yaml"  # outside the copy
    cfg.write_text(yaml.safe_dump(CONFIG))
    r = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "h2d", "report", "--configfile", str(cfg)],
                       cwd=root, capture_output=True, text=True, timeout=900, env=_env(root))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return root, original, r


def test_the_copy_is_what_runs_not_the_editable_install(run, tmp_path):
    root, _, r = run
    # from a directory that is not the copy: PYTHONPATH alone decides
    out = subprocess.run([sys.executable, "-c", "import distbench, distbench.h2d; print(distbench.__file__)"],
                         cwd=tmp_path, capture_output=True, text=True, env=_env(root))
    assert out.stdout.strip() == str(root / "distbench/__init__.py"), out.stderr
    assert not (REPO / FAMILY).exists()  # the checkout has no such family: only the copy can have run it
    ran = re.findall(r"^(?:local)?rule (\w+):", r.stderr, re.M)
    assert ran.count("h2d_job") == 2 and ran.count("aggregate_h2d") == 1, ran


def test_only_the_family_folder_is_new_and_nothing_else_changed(run):
    root, original, _ = run
    now = _git_files(root, "-o", "--exclude-standard")  # nothing is tracked in the copy: every file not ignored
    fixture = {f"{FAMILY}/{p.relative_to(FIXTURE).as_posix()}" for p in FIXTURE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert set(now) - set(original) == fixture, "the run left or needed files outside distbench/h2d/"
    assert set(original) - set(now) == set(), "files of the checkout are gone from the copy"
    changed = sorted(p for p in original if (root / p).read_bytes() != original[p])
    assert changed == [], changed
    assert all((root / p).read_bytes() == (FIXTURE / p[len(FAMILY) + 1:]).read_bytes() for p in fixture)


def test_every_rank_of_every_job_wrote_ok_rows(run):
    root, _, _ = run
    for ws in (1, 2):
        job = pd.read_csv(root / f"results/{LABEL}/h2d/gloo/ws{ws}/h2d.csv")
        assert (job["status"] == "ok").all(), job
        assert set(job["rank"]) == set(range(ws)) and (job["world_size"] == ws).all()
        assert {r: set(g["size_bytes"]) for r, g in job.groupby("rank")} == {r: SIZES for r in range(ws)}
        assert (job["time_us"] > 0).all() and (job["time_us_p5"] <= job["time_us_p95"]).all()
        assert (root / f"results/{LABEL}/h2d/gloo/ws{ws}/placement.json").exists()


def test_the_summary_table_has_positive_bandwidth_per_size_and_world_size(run):
    root, _, _ = run
    s = pd.read_csv(root / f"results/{LABEL}/tables/h2d_summary.csv")
    assert sorted(zip(s["world_size"], s["size_bytes"])) == sorted((ws, b) for ws in (1, 2) for b in SIZES)
    assert (s["bandwidth_gbps_median"] > 0).all() and (s["ranks"] == s["world_size"]).all()


def test_the_report_has_the_family_section_with_its_figures(run):
    from distbench.core.section import gbps_cell

    root, _, _ = run
    md = (root / "report/report.md").read_text()
    assert "## Host-to-device copies" in md and 'id="h2d"' in (root / "report/report.html").read_text()
    section = md.split("## Host-to-device copies", 1)[1].split("\n## ", 1)[0]
    s = pd.read_csv(root / f"results/{LABEL}/tables/h2d_summary.csv")
    for _, row in s.iterrows():  # each row's median bandwidth, as the section writes it
        assert f"| {gbps_cell(row['bandwidth_gbps_median'])} |" in section, section
    assert md.index("## Communication") < md.index("## Host-to-device copies")  # a body section, by its order


def test_it_runs_alone_under_torchrun(run, tmp_path):
    root, _, _ = run
    out = tmp_path / "h2d.csv"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "-m", "distbench.h2d", "--backend", "gloo", "--sizes", "65536", "--warmup", "1",
                        "--iters", "3", "--out", str(out)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**_env(root), "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    job = pd.read_csv(out)
    assert sorted(job["rank"]) == [0, 1] and (job["status"] == "ok").all() and (job["bandwidth_gbps"] > 0).all()
