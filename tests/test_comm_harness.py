"""The harness under real torchrun and real Gloo process groups (world size 2)."""

import os
import subprocess
import sys


from distbench.comm import check_placement
from distbench.ops import OPS
from distbench.schema import COMM_COLUMN_NAMES, read_comm_csv
from tests.conftest import REPO, torchrun


def test_every_op_runs_and_checks_on_gloo(tmp_path):
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", ",".join(OPS), "--sizes", "8,64KiB,1MiB", "--warmup", "1",
                  "--iters", "3", "--trials", "2", "--out", str(out), "--placement-out", str(tmp_path / "p.json")])
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    assert list(df.columns) == list(COMM_COLUMN_NAMES)
    assert not (tmp_path / "comm.csv.partial").exists()
    data_ops = [o for o in OPS if OPS[o].moves_data]
    assert set(df["op"]) == set(OPS)
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"]
    assert (df["timing"] == "host").all()  # Gloo: host clock only
    moved = df[df["op"].isin(data_ops)]
    assert moved["correct"].all()
    # 3 sizes x 2 trials per data op, 1 point x 2 trials for barrier
    assert len(moved) == len(data_ops) * 3 * 2 and (df["op"] == "barrier").sum() == 2
    # nccl-tests definitions, row by row
    algbw = moved["size_bytes"] / (moved["time_us"] * 1e-6) / 1e9
    factors = moved["op"].map(lambda o: OPS[o].bus_factor(2))
    assert (algbw / moved["algbw_gbps"]).between(0.999, 1.001).all()
    assert (moved["busbw_gbps"] / (moved["algbw_gbps"] * factors)).between(0.999, 1.001).all()
    # all_gather's size is the total buffer (nccl-tests' size column)
    ag = df[(df["op"] == "all_gather") & (df["size_bytes"] == 2**20)]
    assert (ag["count"] == 2**18).all()


def test_a_wrong_result_is_flagged(tmp_path):
    out = tmp_path / "comm.csv"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(REPO / "tests/helpers/broken_all_reduce.py"), "--backend", "gloo", "--ops", "all_reduce,broadcast",
           "--sizes", "1KiB", "--warmup", "0", "--iters", "2", "--trials", "2", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    bad = df[df["op"] == "all_reduce"]
    assert (bad["status"] == "wrong").all() and (~bad["correct"].astype(bool)).all()
    good = df[df["op"] == "broadcast"]
    assert (good["status"] == "ok").all() and good["correct"].all()


def test_unallocatable_size_is_oom_and_the_sweep_goes_on(tmp_path):
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "all_reduce", "--sizes", "8,4096TiB,1KiB", "--warmup", "0",
                  "--iters", "2", "--trials", "1", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out).set_index("size_bytes")
    assert df.loc[4096 * 2**40, "status"] == "oom"
    assert "alloc" in df.loc[4096 * 2**40, "message"].lower()
    assert df.loc[8, "status"] == "ok" and df.loc[1024, "status"] == "ok"


def test_device_timings_are_skipped_with_a_reason_without_cuda(tmp_path):
    # On a CPU host, asking the harness for events timing on gloo falls back to host (gloo has no stream).
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "barrier", "--timing", "events,graph", "--warmup", "0",
                  "--iters", "1", "--trials", "1", "--out", str(out)])
    assert r.returncode == 0
    assert set(read_comm_csv(out)["timing"]) == {"host"}


def test_two_ranks_on_one_gpu_is_an_error_that_says_how_to_fix_it():
    recs = [{"rank": 0, "local_rank": 0, "hostname": "h", "uuid": "GPU-a", "cuda_visible_devices": "0"},
            {"rank": 1, "local_rank": 1, "hostname": "h", "uuid": "GPU-a", "cuda_visible_devices": "0"}]
    msg = check_placement(recs)
    assert "ranks 0 and 1 share one GPU" in msg and "--nproc_per_node" in msg
    recs[1]["uuid"] = "GPU-b"
    assert check_placement(recs) is None
    # same GPU UUID string on two hosts is not sharing
    assert check_placement([{**recs[0]}, {**recs[0], "rank": 1, "hostname": "other"}]) is None


def test_inplace_variants_run_and_check(tmp_path):
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "all_gather,reduce_scatter,all_reduce", "--sizes", "1KiB",
                  "--inplace", "false,true", "--warmup", "0", "--iters", "2", "--trials", "1", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    got = sorted(zip(df["op"], df["inplace"].astype(bool)))
    assert got == [("all_gather", False), ("all_gather", True), ("all_reduce", True),
                   ("reduce_scatter", False), ("reduce_scatter", True)]
    assert (df["status"] == "ok").all() and df["correct"].all()
