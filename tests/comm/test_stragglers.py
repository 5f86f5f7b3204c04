"""Per-rank arrival and stragglers (issue 13): every trial records how long the first rank waited
for the last one and which rank that was; a rank made slow on purpose (the test-only setting
DISTBENCH_TEST_SLOW_RANK) is flagged, and the same job without it is not."""

import pandas as pd

import pytest

from distbench.comm.analysis.summary import stragglers
from distbench.comm.job import run_comm_job
from distbench.pipeline.config import check_config
from distbench.comm.analysis.findings import straggler_findings
from distbench.comm.plan import CommJob, job_params
from distbench.comm.contract import read_comm_csv, read_comm_ranks_csv


def _run(tmp_path, name, world_size, extra_env):
    cfg = check_config({"backends": ["gloo"]})
    params = {**job_params(cfg, "gloo"), "ops": ["all_reduce", "broadcast"], "sizes": [8, 4096], "trials": 4,
              "iters": 2, "warmup": 1, "job_timeout_s": 180}
    params["job_env"] = {**params["job_env"], **extra_env}
    out = tmp_path / name / "comm.csv"
    job = CommJob("gloo", "float32", world_size, "default", {})
    status = run_comm_job(job, params, out, out.with_name("placement.json"), out.with_name("job.log"))
    assert status == "ok", out.with_name("job.log").read_text()[-2000:]
    return read_comm_csv(out), read_comm_ranks_csv(out.with_name("comm_ranks.csv"))


@pytest.mark.heavy
def test_a_slow_rank_is_flagged_as_a_straggler_and_a_normal_job_is_not(tmp_path):
    slow, slow_ranks = _run(tmp_path, "slow", 3, {"DISTBENCH_TEST_SLOW_RANK": "2:100"})
    # every trial: rank 2 ready last, the first rank waiting ~100 ms for it (50 ms either side of the
    # 50 ms line: room for a busy host to delay any rank)
    assert (slow["last_rank"] == 2).all() and (slow["arrival_skew_us"] > 50_000).all()
    late = slow_ranks[slow_ranks["rank"] == 2]["arrival_us"]
    assert (late > 50_000).all() and (slow_ranks[slow_ranks["rank"] != 2]["arrival_us"] < 50_000).all()
    found = stragglers(slow)
    assert list(found["straggler"]) == [True] and int(found["last_rank"].iloc[0]) == 2
    (line,) = straggler_findings(found)
    assert line.startswith("Straggler: rank 2 was ready last in 100% of the 16 timed trials of the Gloo float32 job at 3 ranks")

    normal, _ = _run(tmp_path, "normal", 2, {})
    assert normal["arrival_skew_us"].notna().all() and normal["last_rank"].isin([0, 1]).all()
    found = stragglers(normal)
    assert not found["straggler"].any() and straggler_findings(found) == [], (
        found.to_string() + "\n" + normal[["op", "size_bytes", "trial", "arrival_skew_us", "last_rank",
                                            "time_us_rank_min"]].to_string())


def test_the_rule_needs_enough_trials_and_a_skew_that_matters():
    base = dict(backend="nccl", world_size=4, nodes=1, dtype="float32", nccl_env="default", status="ok",
                time_us=100.0, time_us_rank_min=100.0, iters=20)
    rows = [dict(base, last_rank=3, arrival_skew_us=5_000.0) for _ in range(12)]
    assert stragglers(pd.DataFrame(rows))["straggler"].tolist() == [True]
    assert stragglers(pd.DataFrame(rows[:8]))["straggler"].tolist() == [False]  # too few trials
    tiny = [dict(r, arrival_skew_us=50.0) for r in rows]  # host jitter, not a straggler
    assert stragglers(pd.DataFrame(tiny))["straggler"].tolist() == [False]
    mixed = [dict(r, last_rank=i % 4) for i, r in enumerate(rows)]  # last rank changes: no straggler
    assert stragglers(pd.DataFrame(mixed))["straggler"].tolist() == [False]
    # Short trials of slow ops (a busy 2-core host, Gloo): the same rank leaves the aligning op last
    # by less than one op's time; that is the collective's exit order, not a slow host.
    exit_order = [dict(r, iters=2, time_us=1_500.0, time_us_rank_min=1_200.0, arrival_skew_us=400.0) for r in rows]
    assert stragglers(pd.DataFrame(exit_order))["straggler"].tolist() == [False]
    late = [dict(r, arrival_skew_us=1_300.0) for r in exit_order]  # later than one op: a straggler
    assert stragglers(pd.DataFrame(late))["straggler"].tolist() == [True]
