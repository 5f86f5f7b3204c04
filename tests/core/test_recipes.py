"""docs/architecture.md's three recipes, followed as written on a copy of the project, then run
through the real workflow (Snakemake -> torchrun on Gloo -> tables -> report):

1. add a collective: one OpSpec entry in distbench/core/ops_spec.py plus its TorchOp in
   distbench/comm/ops.py (here `reduce`, sum to rank 0, as nccl-tests' reduce_perf);
2. add a training workload: one model module plus one line in distbench/workloads/registry.py
   (here a small convolution net); it then runs in the training and memory families;
3. add a report section: one module (with its two fragments beside it) plus one entry in
   distbench/report/sections.py (here "Ops measured").

Nothing else of the copy is edited: if a recipe needs another file, the workflow fails here.
"""

import json
import os
import re
import shutil

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, snakemake

# `pytest -m heavy` (README: the second test command): the architecture's recipes through a real workflow run.
pytestmark = [pytest.mark.heavy, pytest.mark.e2e]
LABEL = "recipes"

# ---------------------------------------------------------------- recipe 1: a collective
SPEC_ENTRY = '''    OpSpec("reduce", lambda n: 1.0, False, "reduce_perf", "Reduce", redop="sum", root=0, always_inplace=True,
           ring_hops=lambda n: n - 1.0),
'''
OP_FUNCTION = '''def _reduce_make(ctx, count):
    # the sum lands on rank 0 only; another rank's buffer holds no result (nothing to check there)
    buf = _empty(ctx, count)
    result = buf if ctx.rank == 0 else buf.new_empty(0)
    b = Buffers(buf, result, lambda: buf.copy_(_reduce_input(ctx, count)),
                (lambda: _reduce_expected(ctx, count)) if ctx.rank == 0 else (lambda: result))
    b.init()
    return b


'''
OP_ENTRY = '''    TorchOp(SPECS["reduce"], _reduce_make, lambda c, b: dist.reduce(b.send, dst=0)),
'''

# ---------------------------------------------------------------- recipe 2: a workload
WORKLOAD_MODULE = '''"""A small convolution net on random 8x8 images: training.gpu/cpu's hidden_dim channels, num_layers
3x3 convolutions, a linear head over 10 classes."""

IMAGE = 8
CLASSES = 10


def shape(a) -> dict:
    return {"hidden_dim": a.hidden_dim, "num_layers": a.num_layers, "n_heads": None, "seq_len": None,
            "vocab_size": None, "lora_rank": None}


def build(a, rank, device):
    import torch
    from torch import nn

    from distbench.workloads.registry import Built

    c = a.hidden_dim
    layers = [m for _ in range(a.num_layers) for m in (nn.Conv2d(c, c, 3, padding=1), nn.GELU())]
    model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(c * IMAGE * IMAGE, CLASSES)).to(device)
    g = torch.Generator().manual_seed(4000 + rank)
    x = torch.randn(64, c, IMAGE, IMAGE, generator=g)
    y = torch.randint(0, CLASSES, (64,), generator=g)

    def data(batch):
        return x[:batch].to(device), y[:batch].to(device)

    n = sum(p.numel() for p in model.parameters())
    return Built(model, data, torch.nn.functional.cross_entropy, {"total": n, "trainable": n})


def flops_per_sample(a, counts) -> int:
    c = a.hidden_dim
    return 6 * (a.num_layers * c * c * 9 * IMAGE * IMAGE + c * IMAGE * IMAGE * CLASSES)
'''
REGISTRY_LINE = '''    "tinyconv": WorkloadSpec("tinyconv", "conv net", MLP_ARGS, _lazy("distbench.workloads.tinyconv", "build"),
                             _lazy("distbench.workloads.tinyconv", "flops_per_sample"), _mlp_shape, _mlp_check),
'''

# ---------------------------------------------------------------- recipe 3: a report section
SECTION_MODULE = '''"""The report's "Ops measured" section: per op, how many sizes were measured, and how many
per-rank rows comm_ranks.csv holds for it."""

from pathlib import Path

from distbench.core.section import ReportInputs, Section, table


def build(inputs: ReportInputs) -> dict | None:
    s = inputs.table("comm_ranks")
    if s is None or s.empty:
        return None
    rows = [[op, g["size_bytes"].nunique(), g["rank"].nunique()] for op, g in s.groupby("op", sort=True)]
    return {"table": table(["op", "sizes", "ranks"], rows)}


OPS_MEASURED = Section("ops_measured", "Ops measured", Path(__file__).parent / "templates", build)
'''
SECTION_MD = '''{% from "macros.md.j2" import table with context %}
## Ops measured

{{ table(ops_measured.table) }}
'''
SECTION_HTML = '''{% from "macros.html.j2" import table with context %}
<h2 id="ops-measured">Ops measured</h2>
{{ table(ops_measured.table) }}
'''

CONFIG = {
    "run_label": LABEL,
    "backends": ["gloo"],
    "world_sizes": [2],
    "comm": {"ops": ["all_reduce", "reduce"], "sizes": ["8", "4KiB", "64KiB", "1MiB"],
             "gloo": {"max_bytes": "1MiB", "warmup": 1, "iters": 3, "trials": 2}},
    "training": {"models": ["tinyconv"], "world_sizes": [2], "warmup_steps": 1, "steps": 3, "allreduce_trials": 2,
                 "cpu": {"hidden_dim": 4, "num_layers": 1, "batch_size": 8}},
    "memory": {"models": ["tinyconv"], "world_sizes": [1], "cpu": {"mlp_batch_sizes": [4, 8]}},
}


TOUCHED: dict[str, set[str]] = {}  # recipe -> the files of the copy it wrote
FILES_AT_MOST = {"collective": 2, "workload": 2, "report section": 4}  # docs/architecture.md's recipes


def _touch(recipe: str, root, path) -> None:
    TOUCHED.setdefault(recipe, set()).add(path.relative_to(root).as_posix())


def _insert_after(recipe, root, path, anchor_pattern: str, text: str) -> None:
    """Insert `text` after the first line matching anchor_pattern (and the lines continuing it)."""
    lines = path.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if re.search(anchor_pattern, line))
    while not lines[i].rstrip().endswith(("),", "},", ")),", ",")):  # the entry may span lines
        i += 1
    lines.insert(i + 1, text)
    path.write_text("".join(lines))
    _touch(recipe, root, path)


def _insert_before(recipe, root, path, anchor_pattern: str, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if re.search(anchor_pattern, line))
    lines.insert(i, text)
    path.write_text("".join(lines))
    _touch(recipe, root, path)


def _write(recipe, root, path, text: str) -> None:
    path.write_text(text)
    _touch(recipe, root, path)


def _replace(recipe, root, path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))
    _touch(recipe, root, path)


COPIED = ("distbench", "rules", "workflow", "envs", "profiles", "Snakefile", "config.yaml")


def _differing(root) -> set[str]:
    """The files of the copy that differ from the project's (or are new), under what was copied."""
    out = set()
    for name in COPIED:
        top = root / name
        for p in ([top] if top.is_file() else [q for q in top.rglob("*") if q.is_file() and "__pycache__" not in q.parts]):
            rel = p.relative_to(root)
            if not (REPO / rel).is_file() or (REPO / rel).read_bytes() != p.read_bytes():
                out.add(rel.as_posix())
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("recipes")
    shutil.copytree(REPO / "distbench", root / "distbench", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(REPO / name, root / name)
    for name in ("rules", "workflow", "envs", "profiles"):
        shutil.copytree(REPO / name, root / name)
    pkg = root / "distbench"
    # 1. a collective: a spec entry (after barrier's, so last in every table) and its torch op
    r = "collective"
    _insert_after(r, root, pkg / "core/ops_spec.py", r'^\s+OpSpec\("barrier"', SPEC_ENTRY)
    _insert_before(r, root, pkg / "comm/ops.py", r"^TORCH_OPS: dict", OP_FUNCTION)
    _insert_after(r, root, pkg / "comm/ops.py", r'^\s+TorchOp\(SPECS\["barrier"\]', OP_ENTRY)
    # 2. a workload: its module and one registry line
    r = "workload"
    _write(r, root, pkg / "workloads/tinyconv.py", WORKLOAD_MODULE)
    _insert_after(r, root, pkg / "workloads/registry.py", r'^\s+"lora": _lm_spec', REGISTRY_LINE)
    # 3. a report section over a table the report did not read: its module and fragments, and the
    # family's manifest (the table marked for the report, the section registered after Communication)
    r = "report section"
    _write(r, root, pkg / "comm/analysis/ops_measured.py", SECTION_MODULE)
    _write(r, root, pkg / "comm/analysis/templates/ops_measured.md.j2", SECTION_MD)
    _write(r, root, pkg / "comm/analysis/templates/ops_measured.html.j2", SECTION_HTML)
    manifest = pkg / "comm/manifest.py"
    _replace(r, root, manifest, 'Table("comm_ranks", "tables/comm_ranks.csv", report=False)',
             'Table("comm_ranks", "tables/comm_ranks.csv")')
    _replace(r, root, manifest, '"distbench.comm.analysis.section:COMMUNICATION",',
             '"distbench.comm.analysis.section:COMMUNICATION", "distbench.comm.analysis.ops_measured:OPS_MEASURED",')

    (root / "recipes.yaml").write_text(yaml.safe_dump(CONFIG))
    env = {"PYTHONPATH": str(root), "DISTBENCH_RUN_LABEL": LABEL}
    r = snakemake(root, "--configfile", "recipes.yaml", timeout=900, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    return root


def test_each_recipe_touches_the_files_the_architecture_says_and_no_other(run):
    for recipe, at_most in FILES_AT_MOST.items():
        assert 0 < len(TOUCHED[recipe]) <= at_most, (recipe, sorted(TOUCHED[recipe]))
    # nothing else of the copy was edited, and the workflow's run wrote nothing into the package
    assert _differing(run) == set().union(*TOUCHED.values())
    doc = (REPO / "docs/architecture.md").read_text()
    for recipe, at_most in FILES_AT_MOST.items():
        assert re.search(rf"(?im)^## Recipe: add a (?:\w+ )?{recipe}.*\n\n.*\b{['One', 'Two', 'Three', 'Four'][at_most - 1]} files\b",
                         doc), recipe


def test_the_copy_is_what_runs(run):
    """The workflow imported the edited copy, not the installed package."""
    env = {**os.environ, "PYTHONPATH": str(run)}
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import distbench.core.ops_spec as s; print(s.__file__, 'reduce' in s.OPS)"],
                         capture_output=True, text=True, env=env, cwd=run)
    assert out.stdout.split() == [str(run / "distbench/core/ops_spec.py"), "True"], out.stderr


def test_a_new_collective_is_measured_checked_predicted_and_reported(run):
    tables = run / "results" / LABEL / "tables"
    s = pd.read_csv(tables / "comm_summary.csv")
    red = s[s["op"] == "reduce"]
    assert len(red) == 4 and (red["status"] == "ok").all() and red["correct"].all()
    big = red[red["size_bytes"] == red["size_bytes"].max()].iloc[0]
    # bus factor 1: busbw = algbw = size / time
    assert big["busbw_gbps_median"] == pytest.approx(big["algbw_gbps_median"])
    # nccl-tests' own fields for it (summary.json's nccl_tests documents, from the spec)
    docs = [json.loads(p.read_text()) for p in (run / "results" / LABEL / "nccl_tests").glob("gloo_reduce_*.json")]
    assert docs and all(r["redop"] == "sum" and r["root"] == 0 and r["experiment_name"] == "distbench reduce"
                        for d in docs for r in d["results"])
    # the cost model fits it from its ring_hops (4 sizes at one world size)
    fits = pd.read_csv(tables / "predict/alpha_beta.csv")
    assert "reduce" in set(fits["op"])
    md = (run / "report/report.md").read_text()
    assert re.search(r"(?m)^### reduce$", md)


def test_a_new_workload_runs_in_the_training_and_memory_families(run):
    tables = run / "results" / LABEL / "tables"
    t = pd.read_csv(tables / "training.csv")
    assert set(t["model"]) == {"tinyconv"} and (t["status"] == "ok").all()
    assert set(t["phase"]) == {"step", "compute_only", "comm_alone"} and set(t["world_size"]) == {1, 2}
    summary = pd.read_csv(tables / "training_summary.csv")
    assert summary["samples_per_s_median"].gt(0).all() and summary["efficiency_vs_plain_1gpu"].notna().all()
    m = pd.read_csv(tables / "memory.csv")
    measured = m[m["phase"] == "measure"]
    assert set(m["model"]) == {"tinyconv"} and (measured["status"] == "ok").all()
    assert set(measured["batch_size"]) == {4, 8} and measured["activations_bytes"].gt(0).all()
    # the largest-batch search needs a device's memory limit: on CPU it is skipped, saying why
    assert m.loc[m["phase"] == "search", "status"].tolist() == ["skipped"]
    assert "tinyconv" in (run / "report/report.md").read_text()


def test_a_new_report_section_renders_in_both_reports(run):
    md = (run / "report/report.md").read_text()
    html = (run / "report/report.html").read_text()
    assert "## Ops measured" in md and 'id="ops-measured"' in html
    section = md.split("## Ops measured", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\| reduce \| 4 \| 2 \|", section), section  # 4 sizes, 2 ranks
    # placed where the manifest registered it: after Communication, before Training
    assert md.index("## Communication") < md.index("## Ops measured") < md.index("## Training")
