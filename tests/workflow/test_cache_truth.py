"""The cache is the truth (issue 36): a staged result of a shared launch is adopted only by the
invocation that measured it, for the same digest and code (distbench.launch.batch); the estimate
counts the jobs Snakemake itself will run (distbench.launch.dag_view) and reads only what it should
of the earlier runs' job times (distbench.pipeline.estimate)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from conftest import RUN, snakemake
from distbench.launch import batch
from distbench.launch.invocation import code_version, current_invocation
from distbench.pipeline import estimate as est
from distbench.pipeline.estimate import JobKey

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def _tsv(path: Path, *values) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(f"{v}\t0:00:01\t1\t1\t1\t1\t0\t0\t50\t1\n" for v in values))
    return path


def _entry(tmp: Path, model: str) -> batch.Entry:
    out = tmp / f"training/gloo/{model}/ws1/plain"
    return batch.Entry("training_job", {"backend": "gloo", "model": model, "world_size": "1", "config": "plain"},
                       {"launch": {"nodes": 1}, "job": {"steps": 2, "job_env": {}}, "nccl_env": {}},
                       {"csv": str(out / "training.csv"), "placement": str(out / "placement.json")},
                       str(tmp / f"logs/{model}.log"))


# --- shared launches: nothing of another invocation is used ---------------------------------------------


def test_a_manifest_or_failed_list_of_another_invocation_is_never_read(tmp_path):
    me, other = _entry(tmp_path, "mlp"), _entry(tmp_path, "lora")
    batch.write_manifest(tmp_path, [me, other], invocation="1-1")  # an earlier run's (--no-hooks writes none)
    assert batch.members(tmp_path, me, invocation="2-2") == [me]
    assert batch.members(tmp_path, me, invocation="1-1") == [me, other]
    batch.record_failed(tmp_path, [me, other], invocation="1-1")
    assert batch.members(tmp_path, me, invocation="1-1") == [me]
    batch.write_manifest(tmp_path, [me, other], invocation="2-2")
    assert batch.members(tmp_path, me, invocation="2-2") == [me, other]  # 1-1's failures are not 2-2's


def test_staged_results_of_ended_invocations_are_discarded_and_named(tmp_path, capsys):
    me, other = _entry(tmp_path, "mlp"), _entry(tmp_path, "lora")
    ended = "1-1"  # pid 1 did not start at tick 1
    for e, done in ((me, True), (other, False)):
        d = batch.staged_dir(tmp_path, e, ended)
        d.mkdir(parents=True)
        (d / "training.csv").write_text("rows\n")
        if done:
            (d / batch.DONE).write_text(json.dumps({"digest": e.digest, "name": e.name, "code": code_version()}))
    old_layout = tmp_path / "staged/training_job/abc"  # before results were tied to an invocation
    old_layout.mkdir(parents=True)
    (old_layout / "training.csv").write_text("rows\n")
    running = batch.staged_dir(tmp_path, me, current_invocation())  # a run still going (this process)
    running.mkdir(parents=True)
    (running / "training.csv").write_text("rows\n")
    named = batch.discard_stale(tmp_path, "3-3")
    assert sorted(named) == sorted(["training gloo/mlp/1/plain (measured)", "training_job abc (unfinished)",
                                    f"{other.rule} {other.digest} (unfinished)"])
    assert "discarded 3 staged result(s)" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "staged").iterdir()) == [current_invocation()]
    assert batch.adopt(tmp_path, me, invocation=ended) is None  # gone: nothing left to adopt


# Two configurations of one group, the cheapest there are: the MLP at 1 rank, plain DDP (the baseline)
# and the configured bucket size.
TRAINING = {
    "backends": ["gloo"], "world_sizes": [1], "health": {"enabled": False},
    "training": {"warmup_steps": 1, "steps": 2, "allreduce_trials": 1, "models": ["mlp"], "ddp": {"bucket_cap_mb": 100},
                 "cpu": {"hidden_dim": 32, "num_layers": 1, "batch_size": 8}},
    "memory": {"enabled": False},
}
CONFIGS = ("plain", "bucket=100")


def _launcher_lines(run: Path) -> dict:
    return {f.name: f.read_text() for f in (run / "logs/training/gloo").rglob("*.log.launcher")}


@pytest.mark.heavy
@pytest.mark.e2e
def test_a_stale_launch_is_never_adopted_and_a_deleted_output_is_measured_again(workflow_dir, monkeypatch):
    """Issue 36's sequence: a run, then `steps` changed, the outputs deleted and a run with --no-hooks
    (no onstart: the earlier run's manifest must not be used), then `steps` restored, the outputs
    deleted and a normal run, which finds a staged result of the first configuration left by an
    earlier invocation: it is discarded, named, and the configuration measured again."""
    run = workflow_dir / RUN
    csvs = [f"{RUN}/training/gloo/mlp/ws1/{c}/training.csv" for c in CONFIGS]

    def go(steps: int, *extra, targets=csvs):
        cfg = {**TRAINING, "training": {**TRAINING["training"], "steps": steps}}
        (workflow_dir / "t.yaml").write_text(yaml.safe_dump(cfg))
        r = snakemake(workflow_dir, *targets, "--configfile", "t.yaml", *extra)
        assert r.returncode == 0, r.stderr[-3000:]
        return r

    go(2)
    assert any("one launch" in v for v in _launcher_lines(run).values())  # shared: one launch of both
    manifest = json.loads((run / batch.MANIFEST).read_text())
    first = next(batch.Entry(**e) for e in manifest["entries"] if e["wildcards"]["config"] == "plain")

    import shutil

    shutil.rmtree(run / "training")
    shutil.rmtree(run / "logs/training")
    # one job is enough: with the earlier manifest it launched the other configuration too, with the old params
    go(3, "--no-hooks", targets=csvs[:1])
    lines = _launcher_lines(run)
    assert list(lines) == ["plain.log.launcher"] and "one launch" not in lines["plain.log.launcher"], lines  # alone
    assert not [p for p in (run / "staged").rglob("*") if p.is_file()]  # nothing measured for another config

    # what an earlier invocation that ended before adopting it leaves: the first configuration, at
    # `steps` 2, measured and done, by this very code
    monkeypatch.chdir(workflow_dir)  # the code version a job sees (its commit: of the workflow directory)
    code_version.cache_clear()
    left = batch.staged_dir(run, first, manifest["invocation"])
    left.mkdir(parents=True)
    (left / "training.csv").write_text("planted\n")
    (left / "placement.json").write_text("{}")
    (left / batch.DONE).write_text(json.dumps({"digest": first.digest, "name": first.name, "code": code_version(),
                                               "wall_s": 1.0, "configurations": 2, "launched_by": first.name}))
    shutil.rmtree(run / "training")
    r = go(2)
    assert "discarded 1 staged result(s)" in r.stderr, r.stderr[-3000:]
    assert "training gloo/mlp/1/plain (measured)" in r.stderr  # named
    assert (workflow_dir / csvs[0]).read_text() != "planted\n"
    assert any("one launch" in v for v in _launcher_lines(run).values())  # measured in this run's own launch


# --- the estimate ---------------------------------------------------------------------------------------


def test_history_reads_only_regular_files_inside_results(tmp_path):
    root = tmp_path / "results"
    real = _tsv(root / "a/benchmarks/comm/gloo/float32/ws2/default.tsv", 10)
    elsewhere = tmp_path / "elsewhere"  # a run outside results/: its times are read only through links
    outside = _tsv(elsewhere / "benchmarks/comm/gloo/float32/ws4/default.tsv", 42)
    bench = root / "a/benchmarks/comm/gloo"
    (bench / "float32/ws4").symlink_to(outside.parent)
    (bench / "root").symlink_to("/")  # issue 36: the estimate walked the whole filesystem
    (bench / "float32/loop").symlink_to(bench)
    (root / "linked").symlink_to(elsewhere)  # a run label that is a link
    _tsv(root / "b/benchmarks/comm/gloo/float32/ws8/x.tsv", 5)
    (root / "b/benchmarks/comm/gloo/float32/ws8/default.tsv").symlink_to(real)
    os.mkfifo(root / "b/benchmarks/comm/gloo/float32/ws8/fifo.tsv")  # reading it would wait forever
    t0 = time.monotonic()
    past = est.history(root)
    assert time.monotonic() - t0 < 2
    assert past.times == {JobKey("comm", "gloo", 2, ("float32", "default")): [10.0],
                          JobKey("comm", "gloo", 8, ("float32", "x")): [5.0]}


def test_history_caps_what_it_reads(tmp_path, monkeypatch):
    root = tmp_path / "results"
    _tsv(root / "a/benchmarks/comm/gloo/float32/ws2/default.tsv", 10)
    (root / "a/benchmarks/comm/gloo/float32/ws2/big.tsv").write_text(HEADER + "1\n" * (est.MAX_FILE_BYTES // 2))
    for i in range(30):
        (root / f"z{i:02d}").mkdir()
    assert set(est.history(root).times) == {JobKey("comm", "gloo", 2, ("float32", "default"))}
    monkeypatch.setattr(est, "MAX_ENTRIES", 20)
    capped = est.history(root)
    assert capped.ignored == [f"{root}: more than 20 entries; the rest not read"]


def test_values_that_are_not_job_times_are_ignored_and_named(tmp_path):
    root = tmp_path / "results"
    base = root / "a/benchmarks/comm/gloo/float32"
    _tsv(base / "ws2/default.tsv", 12)
    for ws, value in ((4, -100000), (6, "nan"), (8, 1e300)):  # issue 36: "about -100000 s", "nan h", 300 digits
        _tsv(base / f"ws{ws}/default.tsv", value)
    _tsv(base / "ws10/default.tsv", "inf", 0, 20)  # the good repeat counts, the others are named
    keys = [(JobKey("comm", "gloo", ws, ("float32", "default")), True) for ws in (2, 4, 6, 8, 10)]
    e = est.estimate(keys, root, 0, batch=False)
    s = {j.key.world_size: (j.seconds, j.source) for j in e.jobs}
    assert s[2] == (12, "job history") and s[10] == (20, "job history")
    for ws in (4, 6, 8):  # no usable time of their own (nor of their world size): the stated default
        assert s[ws] == (est.DEFAULTS[("cpu", "comm", "gloo")].at(ws), "default")
    message = e.message()
    for ws, shown in ((4, "-100000"), (6, "nan"), (8, "1e+300"), (10, "inf, 0")):
        assert f"ws{ws}/default.tsv: {shown} s" in message, message
    assert "5 recorded job time(s) not used" not in message and "4 recorded job time(s) not used" in message
    assert all(len(n) < 12 for n in re.findall(r"\d+", message.splitlines()[0]))
    assert est.human_duration(float("nan")) == "an unknown time"


TINY_COMM = {"backends": ["gloo"], "world_sizes": [2], "health": {"enabled": False},
             "comm": {"ops": ["all_to_all_v"], "traffic": ["file:m.csv"], "sizes": [64],
                      "gloo": {"max_bytes": 64, "warmup": 0, "iters": 1, "trials": 1}},
             "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False}}


def _estimated(stderr: str) -> tuple[int, int, int]:
    found = re.findall(r"^distbench: (\d+) benchmark jobs planned, (\d+) cached, (\d+) to run", stderr, flags=re.M)
    assert len(found) == 1, stderr[-2000:]
    return tuple(map(int, found[0]))


@pytest.mark.heavy
@pytest.mark.e2e
def test_the_estimate_agrees_with_snakemakes_plan(workflow_dir):
    """Issue 36: after comm.iters changed, or the traffic matrix file was edited, `-n` said "1 cached,
    0 to run" while Snakemake reran comm_job."""
    (workflow_dir / "m.csv").write_text("1,2\n3,4\n")
    job = f"{RUN}/comm/gloo/float32/ws2/default/comm.csv"

    def dry(cfg):
        (workflow_dir / "c.yaml").write_text(yaml.safe_dump(cfg))
        r = snakemake(workflow_dir, "-n", job, "--configfile", "c.yaml")
        assert r.returncode == 0, r.stderr[-3000:]
        return len(re.findall(r"^rule comm_job:", r.stdout, flags=re.M)), _estimated(r.stderr)

    (workflow_dir / "c.yaml").write_text(yaml.safe_dump(TINY_COMM))
    first = snakemake(workflow_dir, job, "--configfile", "c.yaml")
    assert first.returncode == 0, first.stderr[-3000:]
    assert dry(TINY_COMM) == (0, (1, 1, 0))
    more = {**TINY_COMM, "comm": {**TINY_COMM["comm"], "gloo": {**TINY_COMM["comm"]["gloo"], "iters": 2}}}
    assert dry(more) == (1, (1, 0, 1))  # Snakemake reruns it for its params: the estimate says so
    (workflow_dir / "m.csv").write_text("1,2\n3,9\n")  # same shape, other weights
    assert dry(TINY_COMM) == (1, (1, 0, 1))
