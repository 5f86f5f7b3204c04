"""The estimate printed before a run (distbench.pipeline.estimate): job counts and the arithmetic of
the seconds on crafted plans (6 and 8 GPUs) and a crafted results tree, and the message in a dry run.
Which jobs run is Snakemake's decision (distbench.launch.dag_view); here a job whose output is in
place under results/now/ stands for one Snakemake finds cached."""

import re
from pathlib import Path

import pytest

from distbench.pipeline.config import check_config
from distbench.pipeline.estimate import DEFAULTS, FAMILIES, LAUNCH_COST_S, OUTPUTS, JobKey, estimate, read_seconds
from distbench.pipeline.plan import make_plan, nccl_probe_params
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
    # memory: one planned job (10 s) and one of another workload (gpt, 30 s): never the mlp's figure
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


def _keys(plan: dict, probe_world_size: int = 0) -> list[JobKey]:
    """The plan's benchmark jobs (what Snakemake's DAG holds for the default target)."""
    keys = [JobKey.of(family, j.wildcards) for family, jobs in plan["jobs"].items() if family in FAMILIES
            for j in jobs]
    return keys + ([JobKey("probe", "nccl", probe_world_size)] if probe_world_size >= 2 else [])


def _jobs(plan: dict, root: Path, probe_world_size: int = 0) -> list[tuple[JobKey, bool]]:
    """(key, runs): a job runs unless its output is in place under root/now/."""
    return [(k, not (root / "now" / OUTPUTS[k.family].format(**k.wildcards)).exists())
            for k in _keys(plan, probe_world_size)]


def _estimate(gpus: int, root: Path, batch: bool = True):
    cfg = _config(gpus)
    plan = make_plan(cfg)
    return estimate(_jobs(plan, root, nccl_probe_params(cfg, plan)["world_size"]), root, gpus, batch)


def _seconds(est) -> dict:
    # a job by its family, backend, world size and its last wildcard (its NCCL settings or config label)
    return {(j.key.family, j.key.backend, j.key.world_size, (j.key.rest or ("",))[-1]): (j.seconds, j.source)
            for j in est.jobs}


D = {k: v.seconds for k, v in DEFAULTS.items() if not v.per_rank_s}  # the flat defaults, by key
TRAIN, PROBE = D[("gpu", "training", "nccl")], D[("gpu", "probe", "nccl")]
# memory's two default figures at one world size share a launch: the second without its fixed cost
MEM = D[("gpu", "memory", "nccl")]
MEM2 = 2 * MEM - LAUNCH_COST_S[("gpu", "memory")]


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
    # the unreadable tsv is ignored, and the gpt job at 2 ranks is another workload: the default
    assert s[("memory", "nccl", 2, "ddp")] == (MEM, "default")
    assert s[("probe", "nccl", 6, "")] == (PROBE, "default")
    comm = 50 + 2 * nccl + 60 + 80 + gloo
    assert est.seconds == comm + 3 * TRAIN + 10 + 10 + MEM2 + PROBE
    assert (est.from_history, est.from_defaults) == (5, 9)
    assert est.per_family() == {"comm": (6, comm), "training": (3, 3 * TRAIN), "memory": (4, 20 + MEM2),
                                "probe": (1, PROBE)}
    minutes = round(est.seconds / 60)
    assert est.message().startswith(f"distbench: 16 benchmark jobs planned, 2 cached, 14 to run, about {minutes} min")
    assert "(5 from earlier runs, 9 by default figures)" in est.message()


def test_eight_gpus_adds_the_eight_rank_jobs(results):
    est = _estimate(8, results)
    assert (len(est.jobs), est.cached, len(est.to_run)) == (18, 2, 16)
    s = _seconds(est)
    assert s[("comm", "nccl", 8, "default")] == (200, "job history")
    assert s[("training", "nccl", 8, "plain")] == (TRAIN, "default")
    assert s[("probe", "nccl", 8, "")] == (PROBE, "default")
    # NCCL comm 50 + 2 defaults + 200, Gloo 60 + 80 + a default, training 4 defaults, memory 20 + 2 defaults, the probe
    nccl, gloo = D[("gpu", "comm", "nccl")], D[("gpu", "comm", "gloo")]
    assert est.seconds == 50 + 2 * nccl + 200 + 60 + 80 + gloo + 4 * TRAIN + 20 + MEM2 + PROBE
    assert (est.from_history, est.from_defaults) == (6, 10)


def test_no_history_uses_the_hosts_defaults(tmp_path):
    gpu = _estimate(8, tmp_path)
    assert gpu.cached == 0 and gpu.from_history == 0
    alone = (4 * D[("gpu", "comm", "nccl")] + 4 * D[("gpu", "comm", "gloo")] + 5 * TRAIN
             + 4 * D[("gpu", "memory", "nccl")] + PROBE)
    # memory: ddp and ddp+gbv at 1 and at 2 ranks, two launches of two: the second of each without
    # the launch's fixed cost (training: one job per world size, nothing shared)
    assert gpu.seconds == alone - 2 * LAUNCH_COST_S[("gpu", "memory")]
    assert _estimate(8, tmp_path, batch=False).seconds == alone
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
    est = estimate(_jobs(make_plan(cfg), tmp_path), tmp_path, 0)
    assert est.seconds == 0 and est.message() == "distbench: 1 benchmark jobs planned, 1 cached, 0 to run."


def test_read_seconds_takes_the_mean_of_repeats(tmp_path):
    _tsv(tmp_path, "x", "t.tsv", 1.5, 2.5)
    assert read_seconds(tmp_path / "x/benchmarks/t.tsv") == 2.0
    assert read_seconds(tmp_path / "missing.tsv") is None


def test_dry_run_prints_the_estimate_once_and_a_cluster_job_does_not(workflow_dir):
    # a job of this run in place (all its outputs: Snakemake finds it cached) and an earlier run's
    # time of a Gloo comm job
    done = workflow_dir / RUN / "comm/gloo/float32/ws2/default/comm.csv"
    done.parent.mkdir(parents=True)
    for name in ("comm.csv", "comm_ranks.csv", "placement.json", "pairs.csv"):
        done.with_name(name).write_text("x\n")
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


def test_a_wait_for_the_host_lock_is_not_counted_as_the_jobs_time(tmp_path):
    """Snakemake's benchmark time holds the wait for the host lock (distbench.launch.hostlock); the
    history keeps the job's own time, so one run that waited does not inflate the next estimate."""
    import json

    from distbench.pipeline import estimate as est
    from distbench.pipeline.estimate import JobKey

    _tsv(tmp_path, "earlier", "comm/gloo/float32/ws2/default.tsv", 40)
    job = tmp_path / "earlier/comm/gloo/float32/ws2/default"
    job.mkdir(parents=True)
    (job / "placement.json").write_text(json.dumps({"provenance": {"host_lock": {"waited_s": 30.0}}}))
    key = JobKey("comm", "gloo", 2, ("float32", "default"))
    assert est.history(tmp_path).times[key] == [10.0]
    (job / "placement.json").write_text(json.dumps({"provenance": {"host_lock": {"waited_s": 0.0}}}))
    assert est.history(tmp_path).times[key] == [40.0]


def test_earlier_times_stand_only_for_the_same_kind_of_job_scaled_to_its_weight(tmp_path):
    """A quick run's MLP times never stand for a GPT job, and a GPT time is scaled to the job estimated
    by the weights of their params (job.json): compiled after eager, 2.7b after 1.3b. Before, the family's
    history at that world size stood for any job: 12 s MLP jobs made 4 min 15 s of GPT jobs '2 min'."""
    import json

    from distbench.pipeline.estimate import params_weight

    gpt = {"model": "gpt", "size": "1.3b", "seq_len": 1024, "batch_size": 8, "vocab_size": 50304,
           "warmup_steps": 5, "steps": 20, "compile": False}

    def record(label, model, config, seconds, job):
        _tsv(tmp_path, label, f"training/nccl/{model}/ws2/{config}.tsv", seconds)
        d = tmp_path / label / f"training/nccl/{model}/ws2/{config}"
        d.mkdir(parents=True)
        wildcards = {"backend": "nccl", "model": model, "world_size": "2", "config": config}
        (d / "job.json").write_text(json.dumps({"wildcards": wildcards, "params": {"job": job}}))

    record("quick", "mlp", "plain", 12.0, {"model": "mlp"})
    record("then", "gpt", "plain", 40.0, gpt)

    def job(model, config, **params):
        wildcards = {"backend": "nccl", "model": model, "world_size": "2", "config": config}
        weight = params_weight("training", wildcards, {**gpt, "model": model, **params})
        return JobKey.of("training", wildcards), True, True, weight

    fixed = LAUNCH_COST_S[("gpu", "training")]
    est = {(j.key.rest, j.source): j.seconds for j in estimate(
        [job("gpt", "plain+compile", compile=True), job("gpt", "plain", size="2.7b"), job("mlp", "fsdp")],
        tmp_path, gpus=2).jobs}
    eager_w = params_weight("training", {"model": "gpt"}, gpt)
    compiled_w = params_weight("training", {"model": "gpt"}, {**gpt, "compile": True})
    assert compiled_w > eager_w
    # the compiled job: the eager gpt job's measuring part scaled by the weights, never the MLP's 12 s
    assert est[(("gpt", "plain+compile"), "family history")] == pytest.approx(
        fixed + (40.0 - fixed) * compiled_w / eager_w)
    # gpt 2.7b: the same job's 1.3b time, scaled (about twice the FLOPs per rank)
    big = est[(("gpt", "plain"), "job history")]
    assert 1.8 * (40.0 - fixed) < big - fixed < 2.2 * (40.0 - fixed)
    # an MLP job: the MLP's time, not the gpt's
    assert est[(("mlp", "fsdp"), "family history")] == 12.0
