"""The training family under the shared launcher: a job that fails leaves a complete CSV with the
reason, and two ranks on one GPU stop the job with the fix written out."""

import json

from distbench.pipeline.config import check_config
from distbench.training.plan import TrainingJob, training_params
from distbench.training.contract import TRAINING_PHASES, read_training_csv
from distbench.training.job import run_training_job


def _params(**training):
    cfg = check_config({"training": {"warmup_steps": 1, "steps": 2, "allreduce_trials": 2, "cpu": {
        "hidden_dim": 32, "num_layers": 1, "batch_size": 8}, **training}})
    job = TrainingJob("gloo", 2, "plain", cfg["training"]["ddp"], {})
    params = training_params(cfg, job)
    params["job_timeout_s"] = 120
    return job, params


def test_two_ranks_on_one_gpu_stop_the_job_with_the_fix(tmp_path, monkeypatch):
    from tests.launch.test_launch import _swap_entry_point

    _swap_entry_point(monkeypatch, "shared_gpu.py", module="distbench.training")
    job, params = _params()
    msg = run_training_job(job, params, tmp_path / "t.csv", tmp_path / "p.json", tmp_path / "log")
    assert "share one GPU" in msg and "--nproc_per_node" in msg
    df = read_training_csv(tmp_path / "t.csv")
    assert list(df["phase"]) == list(TRAINING_PHASES)
    assert list(df["status"]) == ["failed", "not_run", "not_run"]
    placement = json.loads((tmp_path / "p.json").read_text())
    assert "share one GPU" in placement["error"] and len(placement["ranks"]) == 2
    assert "placement: rank 1" in (tmp_path / "log").read_text()  # every rank's placement, printed first


def test_a_crashing_training_job_records_failed_and_not_run_rows(tmp_path, monkeypatch):
    from tests.launch.test_launch import _swap_entry_point

    _swap_entry_point(monkeypatch, "training_faults.py", module="distbench.training")
    monkeypatch.setenv("FAULT", "die")  # rank 1 dies at its first step
    job, params = _params()
    msg = run_training_job(job, params, tmp_path / "t.csv", tmp_path / "p.json", tmp_path / "log")
    assert "rank 1 exited with code 17" in msg
    df = read_training_csv(tmp_path / "t.csv")
    assert list(df["status"]) == ["failed", "not_run", "not_run"] and df["message"].str.contains("code 17").all()


def test_a_job_this_host_cannot_run_leaves_nothing_cached(tmp_path):
    import pytest

    from distbench.launch.torchrun import HostCannotRun

    job, params = _params()
    job = TrainingJob("nccl", 2, "plain", job.ddp, {})  # NCCL on a host without CUDA
    with pytest.raises(HostCannotRun, match="needs CUDA"):
        run_training_job(job, params, tmp_path / "t.csv", tmp_path / "p.json", tmp_path / "log")
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "p.json").exists()


def test_a_training_job_runs_under_the_launcher(tmp_path):
    job, params = _params()
    assert run_training_job(job, params, tmp_path / "t.csv", tmp_path / "p.json", tmp_path / "log") == "ok"
    df = read_training_csv(tmp_path / "t.csv")
    assert set(df["phase"]) == set(TRAINING_PHASES) and (df["status"] == "ok").all()
    assert (df["world_size"] == 2).all() and (df["config"] == "plain").all()


def _job_json(tmp_path, cfg_training: dict, model: str = "gpt", strategy: str = "fsdp_tp"):
    """A training job's job.json as its rule writes it (distbench.pipeline.run_rules): the plan's job and
    its rule params, wildcards as Snakemake's strings."""
    from distbench.training.plan import rule_params, training_jobs

    cfg = check_config({"gpus": 4, "backends": ["nccl"], "training": cfg_training})
    job = next(j for j in training_jobs(cfg, 4)[0] if j.model == model and j.strategy == strategy)
    entry = {"rule": "training_job", "wildcards": {k: str(v) for k, v in job.wildcards.items()},
             "params": {"job": rule_params(cfg, {}, job), "launch": {}},
             "output": {"csv": str(tmp_path / "t.csv"), "placement": str(tmp_path / "p.json"),
                        "job_json": str(tmp_path / "job.json")}, "log": str(tmp_path / "log")}
    (tmp_path / "job.json").write_text(json.dumps(entry))
    return tmp_path / "job.json"


def test_the_ranks_read_the_jobs_values_from_its_job_json_as_the_flags_give_them(tmp_path, monkeypatch):
    """Issue 46: a job reads its parameters from the job.json its rule writes; nothing is joined into a
    string and parsed again. The ranks' arguments from `--params job.json` equal those from the flags a
    person would type (training_args without it), for a 2D layout of the GPT with every kind of value."""
    from distbench.launch.batch import read_entry
    from distbench.training.harness import parse_args
    from distbench.training.job import _batch_args, job_of, training_args

    monkeypatch.setenv("WORLD_SIZE", "4")  # as torchrun sets it for the job's ranks
    path = _job_json(tmp_path, {"models": ["gpt"], "lm": {"strategies": ["fsdp_tp"], "world_sizes": [4],
                                                           "tp_size": 2}})
    job, params = job_of(read_entry(path))
    by_flags = training_args(job, params, tmp_path / "t.csv", tmp_path / "p.json")
    by_json = training_args(job, {**params, "params_json": str(path)}, tmp_path / "t.csv", tmp_path / "p.json")
    assert by_json == ["--params", str(path), "--out", str(tmp_path / "t.csv"), "--placement-out", str(tmp_path / "p.json")]
    assert "--tp-size" in by_flags and "--bucket-cap-mb" in by_flags  # the flags still say it all, for people
    a, b = vars(parse_args(by_flags)), vars(parse_args(by_json))
    assert b.pop("params") == str(path) and a.pop("params") is None
    assert a == b and b["tp_size"] == 2 and b["strategy"] == "fsdp_tp" and b["gpt_size"] == "1.3b"
    assert type(b["bucket_cap_mb"]) is float and b["compile"] is False and type(b["batch_size"]) is int
    # a shared launch passes the job.json it writes for each configuration (distbench.launch.batch.run_job)
    assert _batch_args(read_entry(path), {"csv": "c.csv", "placement": "p.json", "job_json": "s/job.json"})[:2] == [
        "--params", "s/job.json"]


def test_a_job_json_that_is_not_one_is_a_usage_error(tmp_path, capsys):
    import pytest

    from distbench.training.harness import parse_args

    (tmp_path / "job.json").write_text("{not json")
    with pytest.raises(SystemExit) as e:
        parse_args(["--params", str(tmp_path / "job.json"), "--out", str(tmp_path / "t.csv")])
    assert e.value.code == 2 and "not a job's job.json" in capsys.readouterr().err
