"""The quick answer (`snakemake --cores 1 quick`): a subset of the full plan's own jobs (so a later full
run reuses them), and a verdict from only what ran."""

import json
import re

import pandas as pd
import pytest
from synthetic import build_summary, largest_of, summary_row

from distbench.comm.plan import job_params
from distbench.core.section import ReportInputs
from distbench.pipeline.config import check_config
from distbench.pipeline.plan import job_launch, make_plan, plan_summary
from distbench.pipeline.quick import quick_jobs, quick_summary
from distbench.report.quick import render_quick, supersede_quick
from distbench.report.render import render_report
from distbench.training.plan import training_params
from tests.conftest import snakemake
from tests.training.test_scaling import job as training_job
from tests.training.test_scaling import summary as training_summary

FAMILIES = ("comm", "training", "memory")  # the families the estimate counts, with jobs planned


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
    assert [(j.backend, j.world_size) for j in quick["jobs"]["comm"]] == comm
    assert sorted((j.backend, j.world_size) for j in quick["jobs"]["training"]) == training
    assert {(j.model, j.config_label) for j in quick["jobs"]["training"]} == {("mlp", "plain")}
    assert quick["jobs"]["memory"] == []
    # every quick job is one of the plan's, with identical params: the full run reuses it
    for family in FAMILIES:
        planned = {tuple(sorted(j.wildcards.items())): j for j in plan["jobs"][family]}
        for j in quick["jobs"][family]:
            twin = planned[tuple(sorted(j.wildcards.items()))]
            assert _params(cfg, plan, j) == _params(cfg, plan, twin)
    s = quick_summary(plan, quick)
    assert s["ran"] == len(comm) + len(training)
    assert s["planned"] == sum(len(plan["jobs"][f]) for f in FAMILIES) > s["ran"]


def test_quick_jobs_keep_every_dtype_and_nccl_setting_at_that_size():
    cfg = check_config({"gpus": 2, "comm": {"dtypes": ["float32", "bfloat16"], "nccl_env": [{}, {"NCCL_ALGO": "Ring"}]}})
    plan = make_plan(cfg)
    quick = quick_jobs(plan, cfg, cores=2)
    assert len(quick["jobs"]["comm"]) == 4 and {j.backend for j in quick["jobs"]["comm"]} == {"nccl"}


def test_quick_without_training_or_mlp():
    cfg = check_config({"gpus": 2, "training": {"enabled": False}})
    assert quick_jobs(make_plan(cfg), cfg, cores=2)["jobs"]["training"] == []
    cfg = check_config({"gpus": 2, "training": {"models": ["gpt"]}})
    quick = quick_jobs(make_plan(cfg), cfg, cores=2)
    assert {(j.model, j.config_label, j.world_size) for j in quick["jobs"]["training"]} == {("gpt", "plain", 1),
                                                                                            ("gpt", "plain", 2)}


def test_quick_report_judges_only_what_ran(tmp_path):
    summary = tmp_path / "comm_summary.csv"
    pd.DataFrame([summary_row(backend="gloo", world_size=2, op="all_reduce", size_bytes=2**24, time_us_median=2e4,
                              busbw_gbps_median=0.84)]).to_csv(summary, index=False)
    quick = {"ran": 1, "planned": 33, "families": {
        "comm": {"ran": [{"backend": "gloo", "dtype": "float32", "world_size": 2, "nccl_env": "default"}], "planned": 3},
        "training": {"ran": [], "planned": 20}, "memory": {"ran": [], "planned": 10}}}
    md = render_quick(ReportInputs({"comm_summary": summary, "comm_largest": summary}), quick, tmp_path / "quick.md")
    head = md.splitlines()[:4]
    assert any("quick answer from 1 of 33 planned benchmark jobs" in line for line in head)
    assert any("`snakemake --cores 1`" in line for line in head)
    rows = [line for line in md.splitlines() if line.startswith("| ") and "verdict" not in line and "---" not in line]
    assert len(rows) == 1 and rows[0].startswith("| communication | Gloo all_reduce 16 MiB")  # no training row
    assert "20 training jobs, 10 memory jobs" in md
    assert (tmp_path / "quick.md").read_text() == md


def test_quick_target_plans_only_its_jobs(workflow_dir):
    r = snakemake(workflow_dir, "-n", "quick", "--config", "gpus=0")
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout + r.stderr
    planned = set(re.findall(r"^(?:local)?rule (\w+):", out, flags=re.M))
    assert planned == {"probe_env", "probe_topology", "probe_nccl", "comm_job", "training_job", "quick_aggregate_comm",
                       "quick_aggregate_training", "quick_report", "quick"}, planned
    jobs = re.findall(r"^\s+wildcards: (.*)$", out, flags=re.M)
    assert sum("dtype=" in w for w in jobs) == 1 and sum("model=mlp, world_size=1, config=plain" in w for w in jobs) == 1
    assert len(jobs) == 3
    # the plan and estimate it prints are its own 3 jobs, not the full plan's 33 (issue 34)
    assert re.findall(r"^distbench: (\d+) benchmark jobs planned", r.stderr, flags=re.M) == ["3"], r.stderr[-2000:]
    assert re.search(r"^distbench: to run: comm 1 \(.*\), training 2 \(.*\)$", r.stderr, flags=re.M), r.stderr[-2000:]
    assert not (workflow_dir / "results").exists()


def _tables(d, comm: pd.DataFrame, training: pd.DataFrame, cores: int) -> ReportInputs:
    """comm_summary/largest, training_summary and an env.json of `cores` cores under d, as inputs."""
    d.mkdir(parents=True)
    comm.to_csv(d / "comm_summary.csv", index=False)
    largest_of(comm).to_csv(d / "comm_largest.csv", index=False)
    training.to_csv(d / "training_summary.csv", index=False)
    (d / "env.json").write_text(json.dumps({"cpu_count": cores, "gpu_count": 0, "hostname": "laptop"}))
    return ReportInputs({"comm_summary": d / "comm_summary.csv", "comm_largest": d / "comm_largest.csv",
                         "training_summary": d / "training_summary.csv"}, env=d / "env.json", config={}, plan={})


def _verdicts(md: str) -> dict[str, str]:
    """The Verdict table of a report's Markdown: {headline: verdict}."""
    part = md.split("## Verdict")[1].split("\n## ")[0]
    rows = [line.split(" | ") for line in part.splitlines() if line.startswith("| ") and "---" not in line]
    return {r[1]: r[2].strip("*") for r in rows if r[0] != "| area"}


def test_quick_and_full_verdicts_agree_on_the_same_tables(tmp_path):
    """Issue 34: on the 2-core CPU run quick.md said "below expected, communication-bound" at 2 ranks,
    the full Verdict "measured" on every row: it judged the 6-rank smoke test (6 ranks on 2 cores).
    Both now take their rows by one function (distbench.report.verdict.verdict_rows) at the world size
    one rule picks (distbench.core.judged.judged_world_size): the quick answer's jobs are that size."""
    cfg, plan = _plan(0)
    quick = quick_jobs(plan, cfg, cores=2)
    comm = build_summary(world_sizes=(2, 4, 6), backends=("gloo",), oom=False)
    # communication-bound at 2 ranks (64% of the step exposed), worse as the ranks crowd the 2 cores
    training = training_summary(
        training_job(1, backend="gloo", step=3.0, compute=2.9, allreduce=0.1),
        *(training_job(ws, backend="gloo", step=s, compute=1.9, allreduce=a)
          for ws, s, a in ((2, 5.2, 3.4), (4, 9.0, 7.0), (6, 15.0, 13.0))))
    full_md = tmp_path / "report.md"
    render_report(_tables(tmp_path / "full", comm, training, cores=2), full_md, tmp_path / "report.html")
    # the quick tables: the same rows, of the quick answer's jobs only
    ran = {(j.backend, j.world_size) for j in quick["jobs"]["comm"]}
    q_comm = comm[[(b, w) in ran for b, w in zip(comm["backend"], comm["world_size"], strict=True)]]
    trained = {(j.model, j.config_label, j.world_size) for j in quick["jobs"]["training"]}
    q_training = training[[k in trained for k in zip(training["model"], training["config"], training["world_size"],
                                                     strict=True)]]
    quick_md = render_quick(_tables(tmp_path / "quick", q_comm, q_training, cores=2), quick_summary(plan, quick),
                            tmp_path / "quick.md")
    full, fast = _verdicts(full_md.read_text()), _verdicts(quick_md)
    assert len(fast) == 2 and set(fast) <= set(full), (fast, full)
    assert {h: full[h] for h in fast} == fast
    mlp = next(h for h in fast if h.startswith("mlp"))
    assert mlp.startswith("mlp (ddp, plain) at 2 ranks") and fast[mlp] == "below expected"
    assert any(h.startswith("Gloo all_reduce") and "at 2 ranks" in h for h in fast)


def test_the_full_report_marks_the_quick_answer_superseded(tmp_path):
    """Issue 34: quick.md still said "Left for the full run: 30 jobs" after the full run had cached them
    all. The report rule (workflow/scripts/render_report.py) now marks it superseded, with the jobs it
    finds in the cache then; twice gives the same file."""
    cfg, plan = _plan(0)
    quick = quick_jobs(plan, cfg, cores=2)
    summary = tmp_path / "comm_summary.csv"
    pd.DataFrame([summary_row(backend="gloo", world_size=2, size_bytes=2**24, time_us_median=2e4)]).to_csv(
        summary, index=False)
    report = tmp_path / "report" / "report.md"
    assert not supersede_quick(report, plan_summary(plan), tmp_path / "run", "now")  # no quick answer: nothing
    before = render_quick(ReportInputs({"comm_summary": summary, "comm_largest": summary}), quick_summary(plan, quick),
                          report.with_name("quick.md"))
    assert "Left for the full run: 2 comm jobs, 18 training jobs, 10 memory jobs." in before
    run = tmp_path / "run"
    for wc in plan_summary(plan)["jobs"]["training"][:5]:  # 5 of the 33 jobs cached
        out = run / "training/{backend}/{model}/ws{world_size}/{config}/training.csv".format(**wc)
        out.parent.mkdir(parents=True)
        out.write_text("x\n")
    assert supersede_quick(report, plan_summary(plan), run, "2026-11-27 12:40:00 UTC")
    after = report.with_name("quick.md").read_text()
    assert after.splitlines()[:3] == [
        "# distbench quick answer", "",
        "**Superseded** by the full report, [report.md](report.md) (generated 2026-11-27 12:40:00 UTC, from 5 of 33 "
        "planned benchmark jobs): read its Verdict. Below, this quick answer as it was."]
    assert "Left for the full run" not in after and "For the full report" not in after
    assert "## Verdict" in after and "Judged from: comm gloo float32 default at 2 ranks" in after
    supersede_quick(report, plan_summary(plan), run, "2026-11-27 12:40:00 UTC")
    assert report.with_name("quick.md").read_text() == after
