"""The estimate printed before a run (distbench.pipeline.estimate): job counts and the arithmetic of
the seconds on crafted plans (6 and 8 GPUs) and a crafted results tree, and the message in a dry run."""

import re
from pathlib import Path

import pytest

from distbench.pipeline.config import check_config
from distbench.pipeline.estimate import DEFAULTS, LAUNCH_COST_S, estimate, read_seconds, targets_plan
from distbench.pipeline.plan import make_plan, nccl_probe_params
from distbench.pipeline.quick import quick_jobs
from tests.conftest import RUN, snakemake

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _config(gpus: int) -> dict:
    # Everything that sets the job count pinned, so a change of the defaults does not move the counts.
    return check_config({"gpus": gpus, "backends": ["nccl", "gloo"], "world_sizes": [2, 4, 6, 8],
                         "comm": {"dtypes": ["float32"], "nccl_env": [{}], "gloo": {"world_sizes": [2, 4, 6, 8]}},
                         "training": {"models": ["mlp"]},
                         "memory": {"models": ["mlp"], "world_sizes": [1, 2], "gradient_as_bucket_view": [False, True]}})


def _tsv(root: Path, label: str, rel: str, *seconds: float) -> None:
    path = root / label / "benchmarks" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(f"{s}\t0:00:00\t1\t1\t1\t1\t0\t0\t50\t1\n" for s in seconds))


@pytest.fixture
def results(tmp_path) -> Path:
    """Three earlier runs' job times, and two jobs of this run ('now') already done."""
    root = tmp_path / "results"
    # NCCL comm at 2 ranks three times (median 50, mean 60), at 8 ranks once: the family's median is 75
    for label, s in (("a", 30), ("b", 100), ("c", 50)):
        _tsv(root, label, "comm/nccl/float32/ws2/default.tsv", s)
    _tsv(root, "a", "comm/nccl/float32/ws8/default.tsv", 200)
    # Gloo comm at 2 and 4 ranks (family median 70); the file with two repeats counts as their mean
    _tsv(root, "a", "comm/gloo/float32/ws2/default.tsv", 60)
    _tsv(root, "b", "comm/gloo/float32/ws4/default.tsv", 70, 90)
    # memory: one planned job (10 s) and one not planned (30 s): the family median is 20
    _tsv(root, "a", "memory/nccl/mlp/ws1/ddp.tsv", 10)
    _tsv(root, "b", "memory/nccl/gpt/ws2/fsdp.tsv", 30)
    # not a benchmark tsv: ignored
    (root / "c/benchmarks/memory/nccl/mlp/ws2").mkdir(parents=True)
    (root / "c/benchmarks/memory/nccl/mlp/ws2/ddp.tsv").write_text("no header\n")
    # done in this run: skipped; an output of another run is not this run's cache
    for rel in ("comm/gloo/float32/ws8/default/comm.csv", "training/nccl/mlp/ws1/plain/training.csv"):
        (root / "now" / rel).parent.mkdir(parents=True)
        (root / "now" / rel).write_text("x\n")
    (root / "a/comm/nccl/float32/ws2/default").mkdir(parents=True)
    (root / "a/comm/nccl/float32/ws2/default/comm.csv").write_text("x\n")
    return root


def _estimate(gpus: int, root: Path):
    cfg = _config(gpus)
    plan = make_plan(cfg)
    return estimate(plan, root, "now", nccl_probe_params(cfg, plan)["world_size"])


def _seconds(est) -> dict:
    return {(j.key.family, j.key.backend, j.key.world_size, j.key.config): (j.seconds, j.source)
            for j in est.jobs}


D = {k: v.seconds for k, v in DEFAULTS.items() if not v.per_rank_s}  # the flat defaults, by key
TRAIN, PROBE = D[("gpu", "training", "nccl")], D[("gpu", "probe", "nccl")]


def test_six_gpus_counts_and_seconds(results):
    est = _estimate(6, results)
    # comm: NCCL at 2/4/6 (8 > gpus), Gloo at 2/4/6/8; training 1/2/4/6; memory 2 sizes x 2 views; the probe at 6
    assert (len(est.jobs), est.cached, len(est.to_run)) == (16, 2, 14)
    s = _seconds(est)
    nccl, gloo = D[("gpu", "comm", "nccl")], D[("gpu", "comm", "gloo")]
    assert s[("comm", "nccl", 2, "default")] == (50, "job history")  # the median, not the mean (60)
    # no history at 4 or 6 ranks: the default, not the 2- and 8-rank jobs' times (a job grows with its ranks)
    assert s[("comm", "nccl", 4, "default")] == (nccl, "default")
    assert s[("comm", "gloo", 4, "default")] == (80, "job history")
    assert s[("comm", "gloo", 6, "default")] == (gloo, "default")
    assert s[("comm", "gloo", 8, "default")] == (0, "cached")
    assert s[("training", "nccl", 1, "plain")] == (0, "cached")
    assert s[("training", "nccl", 2, "plain")] == (TRAIN, "default")
    assert s[("memory", "nccl", 1, "ddp")] == (10, "job history")
    assert s[("memory", "nccl", 1, "ddp+gbv")] == (10, "family history")  # another job at the same world size
    assert s[("memory", "nccl", 2, "ddp")] == (30, "family history")  # the unreadable tsv is ignored
    assert s[("probe", "nccl", 6, "")] == (PROBE, "default")
    comm = 50 + 2 * nccl + 60 + 80 + gloo
    assert est.seconds == comm + 3 * TRAIN + 10 + 10 + 30 + 30 + PROBE
    assert (est.from_history, est.from_defaults) == (7, 7)
    assert est.per_family() == {"comm": (6, comm), "training": (3, 3 * TRAIN), "memory": (4, 80), "probe": (1, PROBE)}
    minutes = round(est.seconds / 60)
    assert est.message().startswith(f"distbench: 16 benchmark jobs planned, 2 cached, 14 to run, about {minutes} min")
    assert "(7 from earlier runs, 7 by default figures)" in est.message()


def test_eight_gpus_adds_the_eight_rank_jobs(results):
    est = _estimate(8, results)
    assert (len(est.jobs), est.cached, len(est.to_run)) == (18, 2, 16)
    s = _seconds(est)
    assert s[("comm", "nccl", 8, "default")] == (200, "job history")
    assert s[("training", "nccl", 8, "plain")] == (TRAIN, "default")
    assert s[("probe", "nccl", 8, "")] == (PROBE, "default")
    # NCCL comm 50 + 2 defaults + 200, Gloo 60 + 80 + a default, training 4 defaults, memory 80, the probe
    nccl, gloo = D[("gpu", "comm", "nccl")], D[("gpu", "comm", "gloo")]
    assert est.seconds == 50 + 2 * nccl + 200 + 60 + 80 + gloo + 4 * TRAIN + 80 + PROBE
    assert (est.from_history, est.from_defaults) == (8, 8)


def test_no_history_uses_the_hosts_defaults(tmp_path):
    gpu = _estimate(8, tmp_path)
    assert gpu.cached == 0 and gpu.from_history == 0
    alone = (4 * D[("gpu", "comm", "nccl")] + 4 * D[("gpu", "comm", "gloo")] + 5 * TRAIN
             + 4 * D[("gpu", "memory", "nccl")] + PROBE)
    # memory: ddp and ddp+gbv at 1 and at 2 ranks, two launches of two: the second of each without
    # the launch's fixed cost (training: one job per world size, nothing shared)
    assert gpu.seconds == alone - 2 * LAUNCH_COST_S[("gpu", "memory")]
    cfg = _config(8)
    plan = make_plan(cfg)
    assert estimate(plan, tmp_path, "now", nccl_probe_params(cfg, plan)["world_size"], batch=False).seconds == alone
    # CPU: no NCCL and no probe; Gloo comm, training and memory grow with the ranks (measured at several)
    cpu = _estimate(0, tmp_path)
    assert len(cpu.jobs) == 4 + 5 + 2
    at = {f: DEFAULTS[("cpu", f, "gloo")].at for f in ("comm", "training", "memory")}
    assert cpu.seconds == pytest.approx(sum(at["comm"](w) for w in (2, 4, 6, 8))
                                        + sum(at["training"](w) for w in (1, 2, 4, 6, 8)) + at["memory"](1) + at["memory"](2))
    assert DEFAULTS[("cpu", "comm", "gloo")].at(6) == pytest.approx(6 * 7.4)


def test_nothing_to_run(tmp_path):
    cfg = check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": [2], "training": {"enabled": False},
                        "memory": {"enabled": False}})
    out = tmp_path / "now/comm/gloo/float32/ws2/default/comm.csv"
    out.parent.mkdir(parents=True)
    out.write_text("x\n")
    est = estimate(make_plan(cfg), tmp_path, "now")
    assert est.seconds == 0 and est.message() == "distbench: 1 benchmark jobs planned, 1 cached, 0 to run."


def test_read_seconds_takes_the_mean_of_repeats(tmp_path):
    _tsv(tmp_path, "x", "t.tsv", 1.5, 2.5)
    assert read_seconds(tmp_path / "x/benchmarks/t.tsv") == 2.0
    assert read_seconds(tmp_path / "missing.tsv") is None


def test_dry_run_prints_the_estimate_once_and_a_cluster_job_does_not(workflow_dir):
    # a job of this run in place (cached) and an earlier run's time of a Gloo comm job
    done = workflow_dir / RUN / "comm/gloo/float32/ws2/default/comm.csv"
    done.parent.mkdir(parents=True)
    done.write_text("x\n")
    _tsv(workflow_dir / "results", "earlier", "comm/gloo/float32/ws4/default.tsv", 40)
    r = snakemake(workflow_dir, "-n")
    assert r.returncode == 0, r.stderr[-2000:]
    found = re.findall(r"distbench: (\d+) benchmark jobs planned, (\d+) cached, (\d+) to run, about .+ "
                       r"\((\d+) from earlier runs, (\d+) by default figures\)", r.stderr)
    assert len(found) == 1, r.stderr[-2000:]
    planned, cached, to_run, history, defaults = map(int, found[0])
    assert cached == 1 and planned == cached + to_run and history >= 1 and history + defaults == to_run
    # a cluster executor's job runs Snakemake in remote mode: it re-parses the workflow, silently
    r = snakemake(workflow_dir, "-n", "--mode", "remote", str(done.relative_to(workflow_dir)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "benchmark jobs planned" not in r.stdout + r.stderr


def test_a_job_measured_in_a_shared_launch_counts_its_own_seconds(tmp_path):
    """The Snakemake job that launched a group records the whole launch, the others their adoption
    (under a second): the history takes each configuration's own time from its placement file."""
    import json

    label = tmp_path / "then"
    for config, tsv_s, own_s in (("ddp", 30.0, 12.0), ("ddp+gbv", 0.2, 9.0)):
        tsv = label / f"benchmarks/memory/nccl/mlp/ws1/{config}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text(HEADER + f"{tsv_s}\t0:00:30\t1\t1\t1\t1\t0\t0\t0\t1\n")
        placement = label / f"memory/nccl/mlp/ws1/{config}/placement.json"
        placement.parent.mkdir(parents=True)
        placement.write_text(json.dumps({"provenance": {"batch": {"wall_s": own_s}}}))
    est = _estimate(8, tmp_path)
    s = _seconds(est)
    assert s[("memory", "nccl", 1, "ddp")] == (12.0, "job history")
    assert s[("memory", "nccl", 1, "ddp+gbv")] == (9.0, "job history")


@pytest.mark.parametrize("targets,jobs,probe", [
    (set(), (3, 20, 10), True),  # no target named: `all`
    ({"all"}, (3, 20, 10), True),
    ({"quick"}, (1, 2, 0), True),  # the quick answer's own jobs (and the probe its diagnosis reads)
    ({"comm"}, (3, 0, 0), True),
    ({"training", "memory"}, (0, 20, 10), False),
    ({"quick", "comm"}, (3, 2, 0), True),  # a job of both counted once
    ({"probes"}, (0, 0, 0), True),
])
def test_each_target_estimates_only_its_own_jobs(targets, jobs, probe):
    cfg = check_config({"gpus": 0})
    plan = make_plan(cfg)
    picked, with_probe = targets_plan(plan, quick_jobs(plan, cfg, cores=2), targets)
    assert tuple(len(picked[f"{f}_jobs"]) for f in ("comm", "training", "memory")) == jobs and with_probe == probe
    assert picked["gpus"] == plan["gpus"]


def test_report_and_unknown_targets_estimate_nothing():
    cfg = check_config({"gpus": 0})
    plan = make_plan(cfg)
    quick = quick_jobs(plan, cfg, cores=2)
    assert targets_plan(plan, quick, {"report"}) is None  # it renders from the cache
    assert targets_plan(plan, quick, {"results/x/probe/env.json"}) is None
