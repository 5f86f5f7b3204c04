"""The quick answer (`snakemake --cores 1 quick`): a subset of the full plan's own jobs (so a later full
run reuses them), and a verdict from only what ran."""

import re

import pandas as pd
import pytest
from synthetic import summary_row

from distbench.comm.plan import job_params
from distbench.core.section import ReportInputs
from distbench.pipeline.config import check_config
from distbench.pipeline.plan import job_launch, make_plan
from distbench.pipeline.quick import quick_jobs, quick_summary
from distbench.report.quick import render_quick
from distbench.training.plan import training_params
from tests.conftest import snakemake

FAMILIES = ("comm_jobs", "training_jobs", "memory_jobs")


def _plan(gpus: int):
    cfg = check_config({"gpus": gpus})
    return cfg, make_plan(cfg)


def _ids(jobs):
    return sorted(tuple(sorted(j.wildcards.items())) for j in jobs)


def _params(config, plan, job):
    """What the job rules pass as params (rules/comm.smk, rules/training.smk): a change reruns the job."""
    own = job_params(config, job.backend, job.nccl_env) if hasattr(job, "dtype") else training_params(config, job)
    return own, job_launch(config, plan, job.backend, job.world_size), job.nccl_env


@pytest.mark.parametrize("gpus,cores,comm,training", [
    # CPU, 2 cores: Gloo at 6 ranks would be a smoke test (6 ranks on 2 cores), 2 is the largest judged
    (0, 2, [("gloo", 2)], [("gloo", 1), ("gloo", 2)]),
    (0, 16, [("gloo", 6)], [("gloo", 1), ("gloo", 6)]),
    # GPU hosts: NCCL (the first backend) at its largest world size; Gloo left for the full run
    (2, 2, [("nccl", 2)], [("nccl", 1), ("nccl", 2)]),
    (6, 2, [("nccl", 6)], [("nccl", 1), ("nccl", 6)]),
])
def test_quick_jobs_are_the_plans_own_at_the_judged_world_size(gpus, cores, comm, training):
    cfg, plan = _plan(gpus)
    quick = quick_jobs(plan, cfg, cores=cores)
    assert [(j.backend, j.world_size) for j in quick["comm_jobs"]] == comm
    assert sorted((j.backend, j.world_size) for j in quick["training_jobs"]) == training
    assert {(j.model, j.config_label) for j in quick["training_jobs"]} == {("mlp", "plain")}
    assert quick["memory_jobs"] == []
    # every quick job is one of the plan's, with identical params: the full run reuses it
    for family in FAMILIES:
        planned = {tuple(sorted(j.wildcards.items())): j for j in plan[family]}
        for j in quick[family]:
            twin = planned[tuple(sorted(j.wildcards.items()))]
            assert _params(cfg, plan, j) == _params(cfg, plan, twin)
    s = quick_summary(plan, quick)
    assert s["ran"] == len(comm) + len(training)
    assert s["planned"] == sum(len(plan[f]) for f in FAMILIES) > s["ran"]


def test_quick_jobs_keep_every_dtype_and_nccl_setting_at_that_size():
    cfg = check_config({"gpus": 2, "comm": {"dtypes": ["float32", "bfloat16"], "nccl_env": [{}, {"NCCL_ALGO": "Ring"}]}})
    plan = make_plan(cfg)
    quick = quick_jobs(plan, cfg, cores=2)
    assert len(quick["comm_jobs"]) == 4 and {j.backend for j in quick["comm_jobs"]} == {"nccl"}


def test_quick_without_training_or_mlp():
    cfg = check_config({"gpus": 2, "training": {"enabled": False}})
    assert quick_jobs(make_plan(cfg), cfg, cores=2)["training_jobs"] == []
    cfg = check_config({"gpus": 2, "training": {"models": ["gpt"]}})
    quick = quick_jobs(make_plan(cfg), cfg, cores=2)
    assert {(j.model, j.config_label, j.world_size) for j in quick["training_jobs"]} == {("gpt", "plain", 1),
                                                                                            ("gpt", "plain", 2)}


def test_quick_report_judges_only_what_ran(tmp_path):
    summary = tmp_path / "comm_summary.csv"
    pd.DataFrame([summary_row(backend="gloo", world_size=2, op="all_reduce", size_bytes=2**24, time_us_median=2e4,
                              busbw_gbps_median=0.84)]).to_csv(summary, index=False)
    quick = {"ran": 1, "planned": 33, "families": {
        "comm": {"ran": [{"backend": "gloo", "dtype": "float32", "world_size": 2, "nccl_env": "default"}], "planned": 3},
        "training": {"ran": [], "planned": 20}, "memory": {"ran": [], "planned": 10}}}
    md = render_quick(ReportInputs(summary=summary, largest=summary), quick, tmp_path / "quick.md")
    head = md.splitlines()[:4]
    assert any("quick answer from 1 of 33 planned benchmark jobs" in line for line in head)
    assert any("`snakemake --cores 1`" in line for line in head)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "verdict" not in line and "---" not in line]
    assert len(rows) == 1 and rows[0].startswith("| communication | Gloo all_reduce 16 MiB")  # no training row
    assert "20 training job(s), 10 memory job(s)" in md
    assert (tmp_path / "quick.md").read_text() == md


def test_quick_target_plans_only_its_jobs(workflow_dir):
    r = snakemake(workflow_dir, "-n", "quick", "--config", "gpus=0")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    planned = set(re.findall(r"^(?:local)?rule (\w+):", out, flags=re.M))
    assert planned == {"probe_env", "probe_topology", "probe_nccl", "comm_job", "training_job", "quick_aggregate_comm",
                       "quick_diagnose", "quick_aggregate_training", "quick_report", "quick"}, planned
    jobs = re.findall(r"^\s+wildcards: (.*)$", out, flags=re.M)
    assert sum("dtype=" in w for w in jobs) == 1 and sum("model=mlp, world_size=1, config=plain" in w for w in jobs) == 1
    assert len(jobs) == 3
    assert not (workflow_dir / "results").exists()
