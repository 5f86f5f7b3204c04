"""The harness under real torchrun and real Gloo process groups (world size 2 unless a test needs more)."""

import os
import subprocess
import sys

import pytest

from distbench.launch.placement import check_placement
from distbench.core.ops_spec import OPS, SPECS
from distbench.comm.contract import COMM_COLUMN_NAMES, read_comm_csv
from tests.conftest import REPO, torchrun


def test_every_op_runs_and_checks_on_gloo(tmp_path):
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", ",".join(OPS), "--sizes", "8,64KiB,1MiB", "--warmup", "1",
                  "--iters", "3", "--trials", "2", "--out", str(out), "--placement-out", str(tmp_path / "p.json")])
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    assert list(df.columns) == list(COMM_COLUMN_NAMES)
    assert not (tmp_path / "comm.csv.partial").exists()
    data_ops = [o for o in OPS if SPECS[o].moves_data]
    assert set(df["op"]) == set(OPS)
    assert (df["status"] == "ok").all(), df[df["status"] != "ok"]
    assert (df["timing"] == "host").all()  # Gloo: host clock only
    moved = df[df["op"].isin(data_ops)]
    assert moved["correct"].all()
    # 3 sizes x 2 trials per data op, 1 point x 2 trials for barrier
    assert len(moved) == len(data_ops) * 3 * 2 and (df["op"] == "barrier").sum() == 2
    # nccl-tests definitions, row by row
    algbw = moved["size_bytes"] / (moved["time_us"] * 1e-6) / 1e9
    factors = moved["op"].map(lambda o: SPECS[o].bus_factor(2))
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
    r = torchrun(["--backend", "gloo", "--ops", "all_reduce", "--sizes", "8,512TiB,1KiB", "--warmup", "0",
                  "--iters", "2", "--trials", "1", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out).set_index("size_bytes")
    assert df.loc[512 * 2**40, "status"] == "oom"
    assert "alloc" in df.loc[512 * 2**40, "message"].lower()
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


def _helper(script, args, nproc=2, env=None, timeout=240):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           str(REPO / "tests/helpers" / script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})


def test_an_op_that_goes_wrong_after_warm_up_is_caught_by_the_check_after_timing(tmp_path):
    out = tmp_path / "comm.csv"
    r = _helper("wrong_after_warmup.py", ["--backend", "gloo", "--ops", "all_reduce", "--sizes", "1KiB",
                                          "--warmup", "1", "--iters", "2", "--trials", "2", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    assert (df["status"] == "wrong").all() and not df["correct"].any()
    msg = df["message"].iloc[0]
    assert "after the timed eager ops" in msg and "before timing" not in msg and "rank(s) 0, 1" in msg


def test_every_ranks_time_is_kept_and_combined_as_configured(tmp_path):
    from distbench.comm.contract import read_comm_ranks_csv

    r = _helper("rank_times.py", [str(tmp_path)], nproc=3)
    assert r.returncode == 0, r.stderr[-2000:]
    base = [20.0, 40.0, 10.0]  # rank r's time in trial t: base[r] + t (tests/helpers/rank_times.py)
    combine = {"max": max, "min": min, "avg": lambda v: sum(v) / len(v), "rank0": lambda v: v[0]}
    for how, f in combine.items():
        df = read_comm_csv(tmp_path / f"{how}.csv")
        assert (df["rank_agg"] == how).all()
        for t in range(3):
            row = df[df["trial"] == t].iloc[0]
            times = [b + t for b in base]
            assert row["time_us"] == pytest.approx(f(times), rel=1e-5), how  # CSV keeps 6 digits
            assert row["time_us_rank_min"] == pytest.approx(min(times))
            assert row["time_us_rank_max"] == pytest.approx(max(times)) and row["slowest_rank"] == 1
            # bandwidth follows the combined time (nccl-tests' definitions)
            assert row["algbw_gbps"] == pytest.approx(1024 / (f(times) * 1e-6) / 1e9, rel=1e-5)
        ranks = read_comm_ranks_csv(tmp_path / f"{how}_ranks.csv")
        got = {(int(x.trial), int(x.rank)): x.time_us for x in ranks.itertuples()}
        assert got == {(t, rk): base[rk] + t for t in range(3) for rk in range(3)}


@pytest.mark.parametrize("fail,status,text", [
    ("oom", "oom", "another rank could not allocate"),
    ("error", "failed", "injected failure on rank 0"),
])
def test_one_rank_failing_a_point_makes_every_rank_agree_and_go_on(tmp_path, fail, status, text):
    out = tmp_path / "comm.csv"
    r = _helper("one_rank_fails.py", ["--backend", "gloo", "--ops", "all_reduce", "--sizes", "1KiB,4KiB,16KiB",
                                      "--warmup", "0", "--iters", "2", "--trials", "2", "--op-timeout-s", "20",
                                      "--out", str(out)], env={"FAIL": fail}, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out).set_index(["size_bytes", "trial"])
    assert (df.loc[4096, "status"] == status).all()
    assert df.loc[4096, "message"].str.contains(text).all()  # rank 0 writes the CSV
    assert (df.loc[1024, "status"] == "ok").all() and (df.loc[16384, "status"] == "ok").all()


@pytest.mark.heavy
def test_bfloat16_sums_are_checked_exactly_at_20_ranks(tmp_path):
    # The inputs used before were not exact in bf16 beyond 17 ranks: a correct all_reduce came out `wrong`.
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "all_reduce,reduce_scatter", "--dtype", "bfloat16", "--sizes", "1KiB",
                  "--warmup", "0", "--iters", "1", "--trials", "1", "--out", str(out)], nproc=20, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    assert (df["status"] == "ok").all() and df["correct"].all(), df[["op", "status", "message"]]


def test_buffers_rotate_only_while_they_fit():
    from distbench.comm.harness import rotation_slots

    assert rotation_slots(3 * 1024, 20, 2**28) == 20  # small: one buffer set per timed op
    assert rotation_slots(3 * 2**26, 20, 2**28) == 1  # 64 MiB points: no room, one set
    assert rotation_slots(3 * 2**20, 20, 2**28) == 20 and rotation_slots(3 * 2**24, 20, 2**28) == 5
    assert rotation_slots(3 * 1024, 20, 0) == 1  # off


@pytest.mark.heavy
def test_rotated_buffers_are_all_checked(tmp_path):
    # 3 KiB per set, 4 iterations: 4 sets; with rotation off: 1. Both must be right.
    for rotate in ("1MiB", "0"):
        out = tmp_path / f"comm{rotate}.csv"
        r = torchrun(["--backend", "gloo", "--ops", "all_reduce,all_gather,reduce_scatter,all_to_all,send_recv",
                      "--sizes", "1KiB", "--inplace", "false,true", "--warmup", "1", "--iters", "4", "--trials", "2",
                      "--rotate-bytes", rotate, "--out", str(out)])
        assert r.returncode == 0, r.stderr[-2000:]
        df = read_comm_csv(out)
        assert (df["status"] == "ok").all() and df["correct"].all()
