"""docs/architecture.md's "Recipe: add a parallel layout", followed as written on a copy of the package:
`zero2` (FSDP2 that keeps the gathered parameters after forward, reshard_after_forward=False) is one
LayoutSpec entry in distbench/core/layout_spec.py plus its torch side in distbench/workloads/layouts.py.
Nothing else of the copy is edited, and the copy's plan schedules it (its jobs, its params, the
collectives its inspected jobs want measured standalone), the harness takes it as --strategy, its phases
follow its spec, and the report names it by its title in the layouts' Verdict row.

The config schema's enum is a data file the spec cannot fill (the recipe says so): the config here is
checked first and the new layout put into it after."""

import json
import re
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO

SPEC_ENTRY = '''    # FSDP2 keeping the gathered parameters from forward to backward (ZeRO-2): no second all-gather
    LayoutSpec("zero2", "FSDP2 no reshard", "ZeRO-2", (_dim(SHARD),), _FSDP, sharded=True),
'''
TORCH_SIDE = '''def _zero2(model, bfloat16, world_size, device_type, shard_size, tp_size) -> None:
    from torch.distributed.fsdp import fully_shard

    mp = _mp_policy(bfloat16)
    for block in model.blocks:
        fully_shard(block, mp_policy=mp, reshard_after_forward=False)
    fully_shard(model, mp_policy=mp, reshard_after_forward=False)


'''
SHARD_ENTRY = '''    "zero2": _zero2,
'''
FILES_AT_MOST = 2

CHECK = r'''
import json, sys
import pandas as pd
import distbench.core.layout_spec as spec
from distbench.pipeline.config import check_config
from distbench.training.plan import rule_params, standalone_collectives, training_jobs
from distbench.training.analysis.layout_verdict import layout_rows, layout_verdict
from distbench.training.analysis.layouts import layout_name

cfg = check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": [2],
                    "training": {"models": ["gpt"], "inspect": True,
                                 "lm": {"strategies": ["ddp", "fsdp", "zero2"], "world_sizes": [1, 2]}}})
jobs, skipped = training_jobs(cfg, 0)
z = [j for j in jobs if j.strategy == "zero2"]
params = rule_params(cfg, {}, z[-1])
for j in jobs:  # the collectives asked for standalone read the backend only: plan them as on GPUs
    object.__setattr__(j, "backend", "nccl")
wanted = standalone_collectives(cfg, [j for j in jobs if j.strategy == "zero2"])

from distbench.training.harness import parse_args
import os
os.environ["WORLD_SIZE"] = "2"
args = parse_args(["--backend", "gloo", "--model", "gpt", "--gpt-size", "tiny", "--seq-len", "16", "--vocab-size", "64",
                   "--strategy", "zero2", "--batch-size", "2", "--out", "x.csv"])
lay = spec.layout(args.strategy)

base = {"backend": "nccl", "model": "gpt", "world_size": 2, "num_layers": 24, "n_heads": 32, "hidden_dim": 2048,
        "seq_len": 1024, "global_batch_size": 16, "device_name": "NVIDIA H200", "compile": False,
        "shard_size": None, "tp_size": None, "status": "ok", "peak_mem_allocated_bytes": 20 * 2**30}
rows = pd.DataFrame([{**base, "strategy": "ddp", "config": "plain", "tokens_per_s_median": 8000.0},
                     {**base, "strategy": "fsdp", "config": "fsdp", "tokens_per_s_median": 9000.0},
                     {**base, "strategy": "zero2", "config": "zero2", "tokens_per_s_median": 10000.0}])
text, verdict, reason = layout_verdict(layout_rows(rows)["gpt"])
print(json.dumps({"file": spec.__file__, "labels": sorted((j.world_size, j.config_label) for j in z),
                  "params_strategy": params["strategy"], "wanted": wanted, "strategy": args.strategy,
                  "compute_only": lay.has_compute_only, "replay": lay.replay, "sharded": lay.sharded,
                  "name": layout_name(rows.iloc[2]), "verdict": text}))
'''


def _insert_after(path, anchor: str, text: str) -> None:
    """Insert `text` after the first line matching `anchor` and the lines continuing its entry."""
    lines = path.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if re.search(anchor, line))
    while not lines[i].rstrip().endswith(("),", ",")):
        i += 1
    lines.insert(i + 1, text)
    path.write_text("".join(lines))


def _insert_before(path, anchor: str, text: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if re.search(anchor, line))
    lines.insert(i, text)
    path.write_text("".join(lines))


def _differing(root) -> set[str]:
    out = set()
    for p in (root / "distbench").rglob("*"):
        if p.is_file() and "__pycache__" not in p.parts:
            rel = p.relative_to(root)
            if not (REPO / rel).is_file() or (REPO / rel).read_bytes() != p.read_bytes():
                out.add(rel.as_posix())
    return out


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("layout_recipe")
    shutil.copytree(REPO / "distbench", root / "distbench", ignore=shutil.ignore_patterns("__pycache__"))
    pkg = root / "distbench"
    # 1. the spec: one entry, the last of SPECS (so last in the report's order)
    spec = pkg / "core/layout_spec.py"
    text = spec.read_text()
    assert text.count("\n)\nLAYOUTS: ") == 1
    spec.write_text(text.replace("\n)\nLAYOUTS: ", "\n" + SPEC_ENTRY + ")\nLAYOUTS: "))
    # 2. its torch side: the function that shards, and its entry in SHARD
    _insert_before(pkg / "workloads/layouts.py", r"^# Each sharded layout's torch side", TORCH_SIDE)
    _insert_after(pkg / "workloads/layouts.py", r'^\s+"fsdp_tp": _fsdp_tp,', SHARD_ENTRY)
    return root


def test_the_recipe_touches_two_files_and_the_doc_says_so(copy):
    touched = _differing(copy)
    assert touched == {"distbench/core/layout_spec.py", "distbench/workloads/layouts.py"}
    assert len(touched) <= FILES_AT_MOST
    doc = (REPO / "docs/architecture.md").read_text()
    assert re.search(r"(?m)^## Recipe: add a parallel layout\n\nTwo files\b", doc)
    assert "tests/core/test_recipe_layout.py" in doc


def test_the_copy_plans_runs_and_reports_the_new_layout(copy):
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=copy,
                         env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["file"] == str(copy / "distbench/core/layout_spec.py")  # the copy is what ran
    # the plan: a job per world size (its own 1-rank run too, on CPU), labelled by its name
    assert got["labels"] == [[1, "zero2"], [2, "zero2"]] and got["params_strategy"] == "zero2"
    # the collectives its inspected job wants beside the standalone figures: FSDP's, from its spec (the
    # all-gather in the parameters' dtype: the GPU shape's bfloat16)
    assert sorted((w["op"], w["dtype"], w["world_size"]) for w in got["wanted"]) == [
        ("all_gather", "bfloat16", 2), ("reduce_scatter", "float32", 2)]
    # the harness takes it; its phases: a compute-only step (FSDP's collectives off), no replay alone
    assert got["strategy"] == "zero2" and got["sharded"] and got["compute_only"] and got["replay"] is None
    # the report: its title, in the layouts' Verdict row
    assert got["name"] == "FSDP2 no reshard"
    assert got["verdict"].startswith("gpt 1.3b on 2x H200: FSDP2 no reshard, 10,000 tokens/s, 25% faster than DDP")
