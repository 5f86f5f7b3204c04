"""What the cache keys on and what `report` may start (issue 28, the workflow's side): a `file:` traffic
matrix reaches the jobs' params by content, so editing it reruns exactly the jobs that measure it; the
`report` target alone never starts a benchmark, not even one whose cached result is out of date."""

from __future__ import annotations

import resource

import pytest
import yaml

from distbench.comm.plan import job_params
from distbench.pipeline.config import check_config
from tests.conftest import RUN, snakemake


@pytest.fixture(autouse=True)
def _bounded_memory():
    """Planning under a memory limit: a regression fails here instead of taking the machine down."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 8 << 30
    if hard == resource.RLIM_INFINITY or hard > limit:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_report_alone_starts_no_benchmark_and_says_what_to_run_first(workflow_dir):
    dry = snakemake(workflow_dir, "-n", "report")
    for rule in ("comm_job", "training_job", "memory_job", "probe_env", "probe_topology", "probe_nccl"):
        assert f"rule {rule}" not in dry.stdout
    run = snakemake(workflow_dir, "report")
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "starts no benchmark" in out and "snakemake --cores 1 comm" in out
    assert not (workflow_dir / "results").exists()
    # the default target still plans the benchmarks (and the report after them)
    assert "rule comm_job" in snakemake(workflow_dir, "-n").stdout


def test_a_file_matrix_reaches_the_params_by_content_for_the_jobs_that_measure_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.csv").write_text("1,2\n3,4\n")
    cfg = check_config({"backends": ["gloo"], "comm": {"ops": ["all_to_all_v"], "traffic": ["uniform", "file:m.csv"]}})
    two, three = (job_params(cfg, "gloo", "default", ws)["traffic_digest"]["file:m.csv"] for ws in (2, 3))
    assert two.startswith("sha256:") and three == "not measured: 2x2"
    (tmp_path / "m.csv").write_text("1,2\n3,5\n")
    assert job_params(cfg, "gloo", "default", 2)["traffic_digest"]["file:m.csv"] != two
    assert "traffic_digest" not in job_params(check_config({"backends": ["gloo"]}), "gloo", "default", 2)


TINY = {"backends": ["gloo"], "world_sizes": [2, 3], "comm": {
            "ops": ["all_to_all_v", "all_reduce"], "traffic": ["file:m.csv"], "sizes": [64],
            "gloo": {"max_bytes": 64, "warmup": 0, "iters": 1, "trials": 1}},
        "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False}}


@pytest.mark.heavy
@pytest.mark.e2e
def test_editing_a_matrix_file_reruns_exactly_the_jobs_that_measure_it(workflow_dir):
    (workflow_dir / "m.csv").write_text("1,2\n3,4\n")
    (workflow_dir / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    jobs = [f"{RUN}/comm/gloo/float32/ws{w}/default/comm.csv" for w in (2, 3)]
    run = snakemake(workflow_dir, *jobs, "--configfile", "tiny.yaml")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Nothing to be done" in snakemake(workflow_dir, "-n", *jobs, "--configfile", "tiny.yaml").stdout
    (workflow_dir / "m.csv").write_text("1,2\n3,9\n")  # same shape, other weights
    dry = snakemake(workflow_dir, "-n", *jobs, "--configfile", "tiny.yaml").stdout
    planned = [line for line in dry.splitlines() if line.strip().startswith("output:")]
    assert len(planned) == 1 and "/ws2/default/comm.csv" in planned[0], dry  # ws3 skips a 2x2 matrix


REPORTED = {"backends": ["gloo"], "world_sizes": [2], "comm": {
                "ops": ["all_reduce"], "sizes": [64], "gloo": {"max_bytes": 64, "warmup": 0, "iters": 1, "trials": 1}},
            "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False},
            "health": {"enabled": False}}


@pytest.mark.heavy
@pytest.mark.e2e
def test_report_alone_never_reruns_a_benchmark_whose_cached_result_is_out_of_date(workflow_dir):
    (workflow_dir / "r.yaml").write_text(yaml.safe_dump(REPORTED))
    first = snakemake(workflow_dir, "--configfile", "r.yaml")
    assert first.returncode == 0, first.stderr[-3000:]
    csv = workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default/comm.csv"
    before = csv.stat().st_mtime_ns
    # a config edit that changes the comm job's params: the default target would rerun it, `report` must not
    edited = {**REPORTED, "comm": {**REPORTED["comm"], "gloo": {**REPORTED["comm"]["gloo"], "iters": 2}}}
    (workflow_dir / "r.yaml").write_text(yaml.safe_dump(edited))
    assert "rule comm_job" in snakemake(workflow_dir, "-n", "--configfile", "r.yaml").stdout
    run = snakemake(workflow_dir, "report", "--configfile", "r.yaml")
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "would run 1 benchmark job(s) again: comm_job" in out, out[-3000:]
    assert "--rerun-triggers mtime" in out and csv.stat().st_mtime_ns == before
    # as the message says: the cached result reported as it is, nothing measured
    cached = snakemake(workflow_dir, "report", "--configfile", "r.yaml", "--rerun-triggers", "mtime")
    assert cached.returncode == 0, cached.stderr[-3000:]
    assert "comm_job" not in cached.stderr and csv.stat().st_mtime_ns == before
