"""The plan checked against this host before any job (issue 28, the workflow's side): what fits, what is
refused with what would fit, a plan for other machines not held to this one, and a job this host
cannot run is not cached. (The cache's side of the same issue: tests/workflow/test_cache_inputs.py.)"""

from __future__ import annotations

import resource

import pytest
import yaml

from distbench.pipeline.config import check_config
from distbench.pipeline.host_fit import gloo_rank_limit, host_fit, other_host_reason
from distbench.pipeline.plan import make_plan
from tests.conftest import RUN, snakemake

NO_GPU = (0, "detected 0 via no NVIDIA driver on this host")


@pytest.fixture(autouse=True)
def _bounded_memory():
    """Planning under a memory limit: a regression fails here instead of taking the machine down."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 8 << 30
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _fit(cfg: dict, cores: int = 2, detected=NO_GPU):
    cfg = check_config(cfg)
    return host_fit(cfg, make_plan(cfg, detected), cores, detected)


def test_the_default_gloo_plan_runs_oversubscribed_on_two_cores_and_says_so():
    fit = _fit({"backends": ["gloo"]})
    assert fit.problems == []
    # 4 and 6 ranks on 2 cores: allowed (up to 4 per core) and named; 2 ranks are not oversubscribed
    assert [o.split(" (")[0] for o in fit.oversubscribed] == ["Gloo 4 ranks on 2 core(s)", "Gloo 6 ranks on 2 core(s)"]
    assert gloo_rank_limit(2) == 8 and gloo_rank_limit(1) == 8 and gloo_rank_limit(16) == 64


def test_too_many_gloo_ranks_or_declared_gpus_the_host_lacks_are_refused_with_what_fits():
    fit = _fit({"backends": ["gloo"], "world_sizes": [2, 1024]})
    assert len(fit.problems) == 1 and "Gloo world sizes [1024]" in fit.problems[0]
    assert "What fits: world sizes up to 8" in fit.problems[0]
    fit = _fit({"gpus": 6, "backends": ["nccl", "gloo"], "world_sizes": [2]})
    assert "gpus=6 is declared but this host has 0 GPU(s)" in fit.problems[0] and "gpus=auto" in fit.problems[0]
    assert _fit({"gpus": 2, "world_sizes": [2]}, detected=(8, "detected 8")).problems == []  # fewer than it has
    assert _fit({"gpus": "auto"}).problems == []  # auto plans what was detected: no NCCL job here


def test_a_plan_for_other_machines_is_not_held_to_this_host():
    cfg = check_config({"gpus": 6})
    assert other_host_reason(cfg, cluster_executor=False) is None
    assert other_host_reason(cfg, cluster_executor=True) == "a cluster executor runs the jobs"
    assert other_host_reason(check_config({"cluster": {"other_host": True}}), False) == "cluster.other_host is true"
    # cluster.nodes alone is not another machine: the local launcher runs every agent here (issue 37,
    # tests/workflow/test_plan_limits.py), and one-node jobs run here under every launcher
    assert other_host_reason(check_config({"cluster": {"nodes": 2}}), False) is None


def test_a_plan_that_does_not_fit_stops_a_run_before_any_job_and_a_dry_run_shows_it(workflow_dir):
    dry = snakemake(workflow_dir, "-n", "--config", "gpus=6")
    assert dry.returncode == 0 and "this plan cannot run on this host" in dry.stderr and "rule comm_job" in dry.stdout
    run = snakemake(workflow_dir, "--config", "gpus=6")
    assert run.returncode != 0 and "gpus=6 is declared but this host has 0 GPU(s)" in run.stderr + run.stdout
    assert not (workflow_dir / "results").exists()  # no job started, not even a probe
    run = snakemake(workflow_dir, "--config", "backends=[gloo]", "world_sizes=[1024]")
    assert run.returncode != 0 and "Gloo world sizes [1024]" in run.stderr + run.stdout
    assert not (workflow_dir / "results").exists()
    # declared for another machine: planned without the warning
    ok = snakemake(workflow_dir, "-n", "--config", "gpus=6", "cluster={other_host: true}")
    assert ok.returncode == 0 and "cannot run on this host" not in ok.stderr


@pytest.mark.heavy
@pytest.mark.e2e
def test_a_job_this_host_cannot_run_fails_the_run_and_is_retried(workflow_dir):
    cfg = {"gpus": 2, "backends": ["nccl"], "world_sizes": [2], "cluster": {"other_host": True},
           "comm": {"ops": ["all_reduce"], "sizes": [64]},
           "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False}}
    (workflow_dir / "nccl.yaml").write_text(yaml.safe_dump(cfg))
    job = f"{RUN}/comm/nccl/float32/ws2/default/comm.csv"
    for _ in range(2):  # the second run tries again: nothing was cached
        run = snakemake(workflow_dir, job, "--configfile", "nccl.yaml", timeout=300)
        out = run.stdout + run.stderr
        assert run.returncode != 0 and "Nothing to be done" not in out
        assert "this host cannot run this job: backend nccl needs CUDA" in out
        assert not (workflow_dir / job).exists() and not (workflow_dir / job).with_name("placement.json").exists()
