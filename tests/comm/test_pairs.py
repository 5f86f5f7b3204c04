"""The GPU-pair matrix in the comm job (comm.pairs): every ordered pair one way and every
unordered pair both ways, per size, checked; the failure rows of a job that ends early."""

import pandas as pd
import pytest

from distbench.comm.job import run_comm_job, write_failure_rows
from distbench.comm.pairs import plan_pairs
from distbench.pipeline.config import check_config
from distbench.comm.plan import CommJob, job_params, pairs_job
from distbench.pipeline.plan import make_plan
from distbench.comm.contract import read_pairs_csv


def _params(**kw):
    cfg = check_config({"backends": ["gloo"], "comm": {"pairs": True, "pairs_sizes": [8, "64KiB"]}})
    p = {**job_params(cfg, "gloo"), "ops": ["all_reduce"], "sizes": [1024], "trials": 2, "iters": 2, "warmup": 1,
         "job_timeout_s": 180, "pairs": True, "pairs_trials": 2, "pairs_iters": 3}
    p.update(kw)
    return p


def test_plan_orders_every_pair_per_size():
    pts = plan_pairs(3, [8, 1024])
    assert len(pts) == 2 * (6 + 3)
    assert [(p.mode, p.src, p.dst) for p in pts[:9]] == [("uni", 0, 1), ("uni", 0, 2), ("uni", 1, 0), ("uni", 1, 2),
                                                         ("uni", 2, 0), ("uni", 2, 1), ("bi", 0, 1), ("bi", 0, 2),
                                                         ("bi", 1, 2)]


def test_only_the_largest_world_size_with_defaults_measures_pairs():
    cfg = check_config({"backends": ["gloo"], "world_sizes": [2, 3], "comm": {"pairs": True}})
    plan = make_plan(cfg)
    chosen = [j.world_size for j in plan["jobs"]["comm"] if pairs_job(cfg, plan, j)]
    assert chosen == [3]
    off = check_config({"backends": ["gloo"], "world_sizes": [2, 3]})
    assert not any(pairs_job(off, make_plan(off), j) for j in make_plan(off)["jobs"]["comm"])


@pytest.mark.heavy
def test_a_three_rank_job_measures_the_pair_matrix(tmp_path):
    job = CommJob("gloo", "float32", 3, "default", {})
    out = tmp_path / "comm.csv"
    assert run_comm_job(job, _params(), out, tmp_path / "p.json", tmp_path / "log") == "ok"
    df = read_pairs_csv(tmp_path / "pairs.csv")
    assert len(df) == 2 * (6 + 3) * 2 and (df["status"] == "ok").all() and df["correct"].all()
    uni = df[df["mode"] == "uni"]
    assert set(zip(uni["src"], uni["dst"])) == {(s, d) for s in range(3) for d in range(3) if s != d}
    assert set(df["size_bytes"]) == {8, 65536} and (df["src_gpu"] == "cpu").all() and (df["time_us"] > 0).all()
    big = df[df["size_bytes"] == 65536]
    moved = big["size_bytes"] * big["mode"].map({"uni": 1, "bi": 2})
    assert ((moved / (big["time_us"] * 1e3) / big["algbw_gbps"] - 1).abs() < 1e-4).all()  # CSV keeps 6 digits
    # a job without pairs leaves a header-only pairs.csv
    run_comm_job(job, _params(pairs=False), tmp_path / "b" / "comm.csv", tmp_path / "b" / "p.json", tmp_path / "b" / "log")
    assert len(pd.read_csv(tmp_path / "b" / "pairs.csv")) == 0


def test_failure_rows_mark_the_pair_in_progress_and_the_rest(tmp_path):
    job = CommJob("gloo", "float32", 2, "default", {})
    out = tmp_path / "comm.csv"
    write_failure_rows(job, _params(), out, "rank 1 exited with code 9")
    df = read_pairs_csv(tmp_path / "pairs.csv")  # the sweep itself did not finish: no pair was reached
    assert len(df) == 2 * (2 + 1) * 2 and (df["status"] == "not_run").all()
    assert df["message"].str.contains("rank 1 exited with code 9").all()
