"""A new training workload is its module plus one registration (distbench.workloads.registry): a
1-layer conv (tests/helpers/conv_workload.py), registered only through DISTBENCH_WORKLOAD_MODULES,
runs through the real training job (launcher, torchrun, Gloo, 2 ranks) and the real memory
harness, and the launcher's failure rows name its shape."""

import os
import subprocess
import sys

import pytest

from distbench.memory.contract import MEMORY_COLUMN_NAMES, read_memory_csv
from distbench.training.contract import TRAINING_PHASES, read_training_csv
from distbench.pipeline.config import check_config
from distbench.memory.plan import MemoryJob
from distbench.training.plan import TrainingJob, training_params
from distbench.workloads import registry
from tests.conftest import REPO

# `pytest -m heavy` (README: the second test command): a registered workload through real training and
# memory jobs.
pytestmark = pytest.mark.heavy

MODULE = "tests.helpers.conv_workload"


@pytest.fixture
def conv(monkeypatch):
    """The conv workload in this process too (the job's arguments and failure rows), taken out
    afterwards; the torchrun ranks get it from the environment variable alone."""
    monkeypatch.setenv(registry.EXTENSIONS_ENV, MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    monkeypatch.delitem(registry.WORKLOADS, "conv", raising=False)
    spec = registry.workload("conv")  # imported through the extension variable
    yield spec
    registry.WORKLOADS.pop("conv", None)
    sys.modules.pop(MODULE, None)


def _training(channels=4):
    cfg = check_config({"training": {"warmup_steps": 1, "steps": 2, "allreduce_trials": 2,
                                     "cpu": {"hidden_dim": 32, "num_layers": 1, "batch_size": 4}}})
    job = TrainingJob("gloo", 2, "plain", cfg["training"]["ddp"], {})
    params = {k: v for k, v in training_params(cfg, job).items() if k not in ("hidden_dim", "num_layers")}
    return job, {**params, "model": "conv", "channels": channels, "image_size": 8, "job_timeout_s": 120}


def test_the_job_arguments_and_failure_rows_come_from_the_registry(conv, tmp_path):
    from distbench.memory.job import memory_args, write_failure_rows as memory_failure
    from distbench.training.job import training_args, write_failure_rows as training_failure

    job, params = _training(channels=6)
    args = training_args(job, params, tmp_path / "t.csv", tmp_path / "p.json")
    assert args[args.index("--conv-channels") + 1] == "6" and "--hidden-dim" not in args
    training_failure(job, params, tmp_path / "t.csv", "boom")
    df = read_training_csv(tmp_path / "t.csv")
    assert list(df["phase"]) == list(TRAINING_PHASES) and list(df["status"]) == ["failed", "not_run", "not_run"]
    assert (df["model"] == "conv").all() and (df["hidden_dim"] == 6).all() and (df["num_layers"] == 1).all()

    mjob = MemoryJob("gloo", 1, "conv", "ddp", "ddp", False)
    mparams = {"channels": 6, "image_size": 8, "dtype": "float32", "optimizer": "adamw", "batch_sizes": [2, 4],
               "search": False, "search_max_batch": 64, "op_timeout_s": 60, "model": "conv", "snapshot": False,
               "job_timeout_s": 600, "job_env": {}}  # a whole job's params: the launcher checks them as the ranks do
    margs = memory_args(mjob, mparams, tmp_path / "m.csv", tmp_path / "mp.json")
    assert margs[margs.index("--conv-channels") + 1] == "6"
    memory_failure(mjob, mparams, tmp_path / "m.csv", "boom")
    m = read_memory_csv(tmp_path / "m.csv")
    assert list(m["status"]) == ["failed", "not_run"] and (m["hidden_dim"] == 6).all()


def test_a_registered_workload_runs_through_the_training_job(conv, tmp_path):
    from distbench.training.job import run_training_job

    job, params = _training()
    assert run_training_job(job, params, tmp_path / "t.csv", tmp_path / "p.json", tmp_path / "log") == "ok", \
        (tmp_path / "log").read_text()[-3000:]
    df = read_training_csv(tmp_path / "t.csv")
    assert set(df["phase"]) == set(TRAINING_PHASES) and (df["status"] == "ok").all()
    assert (df["model"] == "conv").all() and (df["hidden_dim"] == 4).all()
    step = df[df["phase"] == "step"]
    assert step["correct"].all()  # DDP kept the two replicas equal
    assert (step["flops_per_sample"] == 6 * (4 * 4 * 9 * 64 + 4 * 64 * 10)).all()
    assert (step["params_total"] == 4 * 4 * 9 + 4 + 4 * 64 * 10 + 10).all()
    assert step["tokens_per_s"].isna().all()  # not a token model


def test_a_registered_workload_runs_through_the_memory_harness(conv, tmp_path):
    out = tmp_path / "memory.csv"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "distbench.memory", "--backend", "gloo", "--model", "conv", "--conv-channels", "4",
           "--batch-sizes", "2,4", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    df = read_memory_csv(out)
    assert list(df.columns) == list(MEMORY_COLUMN_NAMES)
    m = df[df["phase"] == "measure"]
    assert list(m["batch_size"]) == [2, 4] and (m["status"] == "ok").all() and (m["model"] == "conv").all()
    assert (m["params_bytes"] == 4 * m["params_total"]).all() and m["activations_bytes"].is_monotonic_increasing


def test_fsdp_needs_a_workload_that_declares_it(conv):
    from distbench.training.harness import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--backend", "gloo", "--model", "conv", "--strategy", "fsdp", "--out", "x.csv"])
    assert not conv.fsdp and registry.WORKLOADS["gpt"].fsdp
