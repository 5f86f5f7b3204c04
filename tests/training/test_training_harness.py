"""The DDP training harness under real torchrun and real Gloo process groups, on a tiny MLP."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from distbench.core.contract import to_bool
from distbench.training.contract import TRAINING_COLUMNS, TRAINING_COLUMN_NAMES, TRAINING_PHASES
from distbench.training.trainer import ddp_bucket_layout
from distbench.workloads.registry import even_split as per_rank_batch
from tests.conftest import REPO

TINY = ["--hidden-dim", "64", "--num-layers", "2", "--batch-size", "8", "--warmup-steps", "2", "--steps", "3",
        "--allreduce-trials", "2"]


def train(args, nproc=2, script=None, env=None, timeout=120):
    """torchrun --standalone -m distbench.training (or a helper script) with Gloo."""
    target = [str(script)] if script else ["-m", "distbench.training"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *target,
           "--backend", "gloo", *args]
    e = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)


def read(path):
    """The CSV with the contract's dtypes (reading fails if a cell does not fit its column's type)."""
    dtypes = {c.name: c.dtype for c in TRAINING_COLUMNS if c.dtype not in ("bool", "boolean")}
    df = pd.read_csv(path, dtype=dtypes)
    for c in TRAINING_COLUMNS:
        if c.dtype in ("bool", "boolean"):
            df[c.name] = df[c.name].map(to_bool).astype("boolean")
    df["message"] = df["message"].fillna("")
    return df


def mlp_param_bytes(hidden, layers):
    classes = max(16, hidden // 4)
    return 4 * (layers * (hidden * hidden + hidden) + hidden * classes + classes)


def test_two_ranks_write_the_contract(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--out", str(out), "--placement-out", str(tmp_path / "placement.json")])
    assert r.returncode == 0, r.stderr[-3000:]
    assert not (tmp_path / "training.csv.partial").exists()
    assert (tmp_path / "placement.json").exists()
    df = read(out)
    assert list(df.columns) == list(TRAINING_COLUMN_NAMES)
    assert list(df["phase"].unique()) == list(TRAINING_PHASES)
    counts = df["phase"].value_counts()
    assert counts["step"] == 3 and counts["compute_only"] == 3 and counts["comm_alone"] == 2
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["phase", "status", "message"]]
    assert (df["message"] == "").all()
    assert list(df[df["phase"] == "step"]["step"]) == [0, 1, 2]
    # the job's settings, on every row
    assert (df["world_size"] == 2).all() and (df["model"] == "mlp").all() and (df["backend"] == "gloo").all()
    assert (df["batch_size"] == 8).all() and (df["global_batch_size"] == 16).all() and (df["scaling"] == "weak").all()
    assert (df["config"] == "plain").all() and (df["nccl_env"] == "default").all() and (df["comm_hook"] == "none").all()
    assert (df["bucket_cap_mb"] == 25).all() and (df["broadcast_buffers"]).all() and (~df["static_graph"]).all()
    assert (df["grad_bytes"] == mlp_param_bytes(64, 2)).all()
    assert (df["n_buckets"] == 1).all()  # 37 KB of gradients: one bucket under DDP's default caps
    # replicas checked after phase step
    assert df[df["phase"] == "step"]["correct"].fillna(False).all()
    assert df[df["phase"] == "compute_only"]["correct"].isna().all()
    # times: max over ranks, between the fastest and the slowest rank
    assert (df["step_time_ms"] > 0).all()
    assert (df["step_time_ms_rank_min"] <= df["step_time_ms"]).all()
    assert (df["step_time_ms"] <= df["step_time_ms_rank_max"]).all()
    steps = df[df["phase"] != "comm_alone"]
    expect = steps["global_batch_size"] / (steps["step_time_ms"] / 1000)
    assert list(steps["samples_per_s"]) == pytest.approx(list(expect), rel=1e-5)
    assert list(steps["samples_per_s_per_device"]) == pytest.approx(list(steps["samples_per_s"] / 2), rel=1e-5)
    assert steps["last_bucket_ms"].isna().all()
    ar = df[df["phase"] == "comm_alone"]
    assert (ar["last_bucket_ms"] > 0).all() and ar["samples_per_s"].isna().all()
    # CPU: no GPU memory, no NVML energy
    for col in ("peak_mem_allocated_bytes", "peak_mem_reserved_bytes", "energy_j"):
        assert df[col].isna().all(), col
    # one line per phase on rank 0's stderr
    for phase in TRAINING_PHASES:
        assert f"distbench: {phase}: median step" in r.stderr


def test_one_rank_job(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--out", str(out)], nproc=1)
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert list(df.columns) == list(TRAINING_COLUMN_NAMES)
    assert (df["status"] == "ok").all() and (df["world_size"] == 1).all()
    assert (df["global_batch_size"] == 8).all()
    assert df[df["phase"] == "step"]["correct"].fillna(False).all()
    assert (df["step_time_ms_rank_min"] == df["step_time_ms_rank_max"]).all()


@pytest.mark.heavy
def test_strong_scaling_splits_the_global_batch(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--scaling", "strong", "--global-batch-size", "12", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["scaling"] == "strong").all()
    assert (df["batch_size"] == 6).all() and (df["global_batch_size"] == 12).all()
    steps = df[df["phase"] != "comm_alone"]
    assert list(steps["samples_per_s"]) == pytest.approx(list(12 / (steps["step_time_ms"] / 1000)), rel=1e-5)


def test_strong_scaling_needs_a_divisible_global_batch():
    assert per_rank_batch("strong", 99, 12, 4) == (3, 12)
    assert per_rank_batch("weak", 8, None, 4) == (8, 32)
    with pytest.raises(ValueError, match="not divisible"):
        per_rank_batch("strong", 8, 10, 4)


@pytest.mark.heavy
def test_fp16_hook_and_grad_accum_run_and_are_recorded(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--comm-hook", "fp16_compress", "--grad-accum", "2", "--optimizer", "adamw",
               "--dtype", "bfloat16", "--config-label", "fp16hook", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["phase", "status", "message"]]
    assert (df["comm_hook"] == "fp16_compress").all() and (df["grad_accum"] == 2).all()
    assert (df["optimizer"] == "adamw").all() and (df["dtype"] == "bfloat16").all() and (df["config"] == "fp16hook").all()
    assert (df["grad_bytes"] == mlp_param_bytes(64, 2) // 2).all()  # fp16 on the wire
    assert df[df["phase"] == "step"]["correct"].fillna(False).all()


@pytest.mark.heavy
def test_bf16_hook_is_recorded_and_skipped_where_ddp_rejects_it(tmp_path):
    # DDP accepts bf16_compress_hook only in a CUDA build with NCCL >= 2.10; the CPU wheel rejects
    # it at registration. Phase ddp is then skipped with DDP's reason; the other phases still run.
    import torch

    out = tmp_path / "training.csv"
    r = train([*TINY, "--comm-hook", "bf16_compress", "--grad-accum", "2", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["comm_hook"] == "bf16_compress").all() and (df["grad_accum"] == 2).all()
    assert (df["grad_bytes"] == mlp_param_bytes(64, 2) // 2).all()
    ddp = df[df["phase"] == "step"]
    if torch.version.cuda is None:
        assert (ddp["status"] == "skipped").all() and ddp["message"].str.contains("bf16_compress").all()
        assert ddp["step_time_ms"].isna().all() and ddp["correct"].isna().all()
        assert len(ddp) == 3
    else:
        assert (ddp["status"] == "ok").all()
    assert (df[df["phase"] != "step"]["status"] == "ok").all()


@pytest.mark.heavy
def test_small_buckets_follow_ddp_layout(tmp_path):
    # hidden 64, 3 layers, cap 0.01 MB (10485 B): every hidden layer (16640 B) closes a bucket, the
    # head (4160 B) joins the last layer's: 3 buckets, as DDP's reducer reports after its rebuild.
    out = tmp_path / "training.csv"
    args = [*TINY, "--num-layers", "3", "--bucket-cap-mb", "0.01", "--gradient-as-bucket-view", "true",
            "--static-graph", "true", "--broadcast-buffers", "false", "--warmup-steps", "3", "--out", str(out)]
    r = train(args)
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"][["phase", "status", "message"]]
    assert (df["n_buckets"] == 3).all()
    assert df["gradient_as_bucket_view"].all() and df["static_graph"].all() and (~df["broadcast_buffers"]).all()
    assert (df["bucket_cap_mb"] == 0.01).all()
    assert "(reducer layout)" in r.stderr


def test_computed_layout_matches_the_reducers_rebuild():
    # Reducer layouts seen with torch 2.13 (Gloo, 4 x Linear(256, 256) + Linear(256, 64)).
    params = [262144, 1024] * 4 + [65536, 256]
    assert ddp_bucket_layout(params, 262144, 262144) == [328960, 263168, 263168, 263168]
    assert ddp_bucket_layout(params, 629145, 629145) == [855296, 263168]
    assert ddp_bucket_layout(params, 25 * 2**20, 2**20) == [1118464]
    assert ddp_bucket_layout([100], 10, 10) == [100]


def test_placement_is_printed_for_every_rank_before_measuring(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.splitlines()
    first_measure = next(i for i, line in enumerate(lines) if line.startswith("distbench: measuring"))
    for rank in (0, 1):
        idx = [i for i, line in enumerate(lines) if line.startswith(f"placement: rank {rank} ")]
        assert len(idx) == 1 and idx[0] < first_measure, r.stderr[-3000:]


@pytest.mark.heavy
def test_diverged_replicas_are_wrong(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--out", str(out)], script=REPO / "tests/helpers/training_faults.py", env={"FAULT": "diverge"})
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    ddp = df[df["phase"] == "step"]
    assert (ddp["status"] == "wrong").all() and (~ddp["correct"].fillna(True)).all()
    assert ddp["message"].str.contains("rank(s) 1", regex=False).all() and ddp["message"].str.contains("0.bias").all()
    assert (df[df["phase"] != "step"]["status"] == "ok").all()


@pytest.mark.heavy
def test_oom_in_a_phase_is_recorded_and_the_job_goes_on(tmp_path):
    out = tmp_path / "training.csv"
    r = train([*TINY, "--out", str(out)], script=REPO / "tests/helpers/training_faults.py", env={"FAULT": "oom"})
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert list(df.columns) == list(TRAINING_COLUMN_NAMES)
    co = df[df["phase"] == "compute_only"]
    assert len(co) == 3 and (co["status"] == "oom").all() and co["message"].str.contains("out of memory").all()
    assert co["step_time_ms"].isna().all()
    assert (df[df["phase"] != "compute_only"]["status"] == "ok").all()
