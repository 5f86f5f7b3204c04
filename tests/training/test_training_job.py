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
