"""Several hosts in one report (seed 001): a real CPU run writes everything under
results/<run_label>/; another host's run copied into results/ makes `snakemake report` render both
side by side, with per-op time ratios."""

import json
import os
import shutil

import pandas as pd
import pytest

from tests.conftest import REPO, snakemake

CONFIG = """
backends: [gloo]
world_sizes: [2]
run_label: laptop
comm:
  ops: [all_reduce, all_to_all]
  sizes: [1KiB, 1MiB]
  gloo: {max_bytes: 1MiB, warmup: 1, iters: 2, trials: 2}
training:
  enabled: false
memory:
  enabled: false
predict:
  enabled: false
"""


@pytest.mark.heavy
def test_a_copied_in_run_is_rendered_side_by_side(workflow_dir):
    (workflow_dir / "c.yaml").write_text(CONFIG)
    r = snakemake(workflow_dir, "comm", "report", "--configfile", "c.yaml")  # `report` alone runs no job
    assert r.returncode == 0, r.stderr[-3000:]
    mine = workflow_dir / "results/laptop"
    assert (mine / "tables/comm_summary.csv").exists() and (mine / "comm/gloo/float32/ws2/default/comm.csv").exists()
    assert sorted(p.name for p in (workflow_dir / "results").iterdir()) == ["laptop"]  # nothing outside the label
    about = json.loads((mine / "run.json").read_text())
    assert about["label"] == "laptop" and about["gpu"] is None
    md = (workflow_dir / "report/report.md").read_text()
    assert "## Several runs side by side" not in md  # one run only
    # each job's provenance, in its placement file and in the report's cache state
    prov = json.loads((mine / "comm/gloo/float32/ws2/default/placement.json").read_text())["provenance"]
    assert prov["commit"] == "not a git checkout" and prov["outcome"] == "ok" and prov["started"] <= prov["finished"]
    # the ranks' command: the job's values from its job.json (written by its rule, beside its result)
    assert "-m distbench.comm" in prov["commands"][0] and "--params" in prov["commands"][0]
    job = json.loads((mine / "comm/gloo/float32/ws2/default/job.json").read_text())
    assert job["wildcards"]["backend"] == "gloo" and job["params"]["job"]["sizes"]
    cache = md.split("### Cache state")[1].split("\n### Configuration")[0]
    assert "| comm/gloo/float32/ws2/default | this run |" in cache and "### Command lines" in cache

    # another host's run, copied in: the 4x H100 all_to_all sweep committed under benchmarks/
    other = workflow_dir / "results/cloud-h100/tables"
    other.mkdir(parents=True)
    shutil.copy(REPO / "benchmarks/results/comm-a2av-h100x4-2026-11-26/comm_summary.csv", other / "comm_summary.csv")
    (other.parent / "run.json").write_text(json.dumps({"label": "cloud-h100", "host": "gpu-node", "gpu_count": 4,
                                                       "gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130"}))
    # a third host (the 2x H100 run committed under benchmarks/, labelled by its host name there)
    shutil.copytree(REPO / "benchmarks/results/report-labels-h100x2-2026-11-26/run-vm", workflow_dir / "results/h100x2")
    dry = snakemake(workflow_dir, "-n", "report", "--configfile", "c.yaml")
    assert "rule report:" in dry.stdout and "rule comm_job" not in dry.stdout  # only the report is redone
    r = snakemake(workflow_dir, "report", "--configfile", "c.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    md = (workflow_dir / "report/report.md").read_text()
    assert "| comm/gloo/float32/ws2/default | reused from an earlier run |" in md  # the job was cached
    section = md.split("## Several runs side by side")[1].split("\n## ")[0]
    assert "| laptop |" in section and "| cloud-h100 | gpu-node | 4x NVIDIA H100 80GB HBM3 | NCCL (2, 4) |" in section
    assert "| op | laptop: Gloo ws2 | cloud-h100: NCCL ws4 | h100x2: Gloo ws2 | h100x2: NCCL ws2 |" in section
    # this run against each other one
    assert "cloud-h100 against laptop, per op" in section and "h100x2 against laptop, per op" in section
    # all_to_all at 2 ranks and 1 MiB in both runs: the ratio is the two CSVs' fastest primary times
    ours = pd.read_csv(mine / "tables/comm_summary.csv")
    theirs = pd.read_csv(other / "comm_summary.csv")
    t_ours = ours[(ours.op == "all_to_all") & (ours.size_bytes == 2**20) & (ours.status == "ok")].time_us_median.min()
    t_theirs = theirs[(theirs.op == "all_to_all") & (theirs.world_size == 2) & (theirs.size_bytes == 2**20)
                      & (theirs.timing == "events")].time_us_median.min()
    row = next(line for line in section.splitlines() if line.startswith("| all_to_all | 2 | 1 MiB |"))
    assert row.endswith(f"| {t_theirs / t_ours:.3g}x |"), row


def test_the_label_comes_from_the_config_then_the_environment_then_the_host(monkeypatch):
    import socket

    from distbench.pipeline.config import ConfigError, check_config
    from distbench.core.run_label import LABEL_ENV, resolve_label

    # setenv first: monkeypatch then restores the variable's absence, even though resolve_label sets it
    monkeypatch.setenv(LABEL_ENV, "placeholder")
    monkeypatch.delenv(LABEL_ENV)
    monkeypatch.setattr(socket, "gethostname", lambda: "gpu node/7")
    assert resolve_label("") == "gpu-node-7"
    # exported, so a job a cluster executor starts on another node writes under the same label
    monkeypatch.setattr(socket, "gethostname", lambda: "node-2")
    assert os.environ[LABEL_ENV] == "gpu-node-7" and resolve_label("") == "gpu-node-7"
    assert resolve_label("laptop") == "laptop" and os.environ[LABEL_ENV] == "laptop"
    monkeypatch.setenv(LABEL_ENV, "../etc")
    with pytest.raises(ValueError, match=r"run label '../etc' \(config key run_label, or DISTBENCH_RUN_LABEL\)"):
        resolve_label("")
    for bad in ("..", ".hidden", "a/b", "a b"):
        with pytest.raises(ConfigError, match="config key run_label"):
            check_config({"run_label": bad})


def test_a_label_from_the_environment_names_every_path(workflow_dir):
    (workflow_dir / "c.yaml").write_text(CONFIG.replace("run_label: laptop\n", ""))
    r = snakemake(workflow_dir, "-n", "--configfile", "c.yaml", env={"DISTBENCH_RUN_LABEL": "ci-7"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "results/ci-7/comm/gloo/float32/ws2/default/comm.csv" in r.stdout
    assert "results/ci-7/run.json" in r.stdout
    outputs = [line.split(":", 1)[1].strip() for line in r.stdout.splitlines() if line.strip().startswith("output:")]
    assert outputs and all(p.startswith(("results/ci-7/", "report/")) for o in outputs for p in o.split(", "))
    bad = snakemake(workflow_dir, "-n", "--configfile", "c.yaml", env={"DISTBENCH_RUN_LABEL": ".."})
    assert bad.returncode != 0 and "run label '..' (config key run_label, or DISTBENCH_RUN_LABEL)" in bad.stdout + bad.stderr
