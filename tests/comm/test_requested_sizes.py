"""The size the sweep asked for is kept with every measurement (requested_bytes), so that the report
lines up jobs of different world sizes by it: a split op at 6 ranks measures 50 B as 48 B, and that
cell belongs in the 50 B row beside the 2-rank job's, marked, with a footnote that says why."""

import pandas as pd

from distbench.comm.analysis.findings import normalise_summary
from distbench.comm.analysis.section import _compact_table, _largest_table, _pivots
from distbench.comm.analysis.summary import SUMMARY_COLUMNS, largest, summarize
from distbench.comm.contract import COMM_COLUMN_NAMES, read_comm_csv, read_comm_ranks_csv
from distbench.comm.job import write_failure_rows
from distbench.comm.plan import CommJob, job_params
from distbench.core.ops_spec import SPECS, element_count
from distbench.core.units import human_bytes
from distbench.pipeline.config import check_config
from tests.conftest import torchrun

MiB = 2**20
REQUESTED = (50, 2000, MiB)


def _measured(requested: int, ws: int) -> int:
    return element_count(SPECS["all_gather"], requested, 4, ws) * 4


def _raw_row(ws: int, requested: int, trial: int) -> dict:
    size = _measured(requested, ws)
    return {"backend": "gloo", "world_size": ws, "nodes": 1, "op": "all_gather", "traffic": "none",
            "dtype": "float32", "nccl_env": "default", "timing": "host", "inplace": False, "size_bytes": size,
            "requested_bytes": requested, "count": size // 4, "trial": trial, "iters": 5, "rank_agg": "max",
            "time_us": 10.0 * ws + requested / 1e4, "time_us_rank_min": 9.0, "time_us_rank_max": 10.0 * ws,
            "slowest_rank": 0, "arrival_skew_us": 1.0, "last_rank": 1, "algbw_gbps": 0.1, "busbw_gbps": 0.1,
            "busiest_rank": None, "busiest_rank_bytes": None, "busiest_rank_time_us": None, "correct": True,
            "status": "ok", "message": ""}


def _summary() -> pd.DataFrame:
    raw = pd.DataFrame([_raw_row(ws, req, t) for ws in (2, 6) for req in REQUESTED for t in range(2)])
    return normalise_summary(summarize(raw))


def test_the_measured_sizes_really_differ_at_6_ranks():
    # the premise of the tests below: 50 B -> 48 B, 2000 B -> 1992 B, 1 MiB -> 1048560 B at 6 ranks
    assert [_measured(r, 6) for r in REQUESTED] == [48, 1992, 1048560]
    assert [_measured(r, 2) for r in REQUESTED] == [48, 2000, MiB]


def test_summary_has_one_row_per_requested_size():
    s = _summary()
    assert list(SUMMARY_COLUMNS) == list(s.columns) and "requested_bytes" in s
    assert len(s) == 6
    for ws in (2, 6):
        got = s[s["world_size"] == ws].sort_values("requested_bytes")
        assert list(got["requested_bytes"]) == list(REQUESTED)
        assert list(got["size_bytes"]) == [_measured(r, ws) for r in REQUESTED]
    big = largest(s)  # each series once, at its largest (requested and measured) size
    assert sorted(zip(big["world_size"], big["requested_bytes"], big["size_bytes"])) == [(2, MiB, MiB), (6, MiB, 1048560)]


def test_report_table_aligns_rows_by_requested_size_with_a_footnote():
    t = _compact_table(_summary(), primary=False)
    assert t["headers"] == ["op", "size", "gloo ws2 (host)", "gloo ws6 (host)"]
    sizes = [r[1] for r in t["rows"]]
    assert sizes == ["50 B", "2 KiB", "1 MiB"]  # one row per requested size: no 48 B, 1.9 KiB or 1024 KiB rows
    for row in t["rows"]:
        assert row[2] and row[3], row  # both world sizes filled in every row
    # ws 2 measured 2000 B and 1 MiB exactly (50 B is 12 whole float32 elements: 48 B); ws 6 rounded all three
    assert [r[2].endswith("*") for r in t["rows"]] == [True, False, False]
    assert all(r[3].endswith("*") for r in t["rows"])
    note = t["footnote"]
    assert note.startswith("* measured at a smaller size")
    for text in ("50 B → 48 B", "2 KiB (2000 B) → 1992 B", "1 MiB → 1048560 B", "6 equal chunks"):
        assert text in note, note
    # the pivots the report shows carry the same
    (pivot,) = _pivots(_summary())
    assert pivot["main"]["table"]["footnote"] == note


def test_largest_table_prints_the_requested_size_and_marks_the_rounded_one():
    t = _largest_table(largest(_summary()), None)
    size = t["headers"].index("size")
    assert sorted(r[size] for r in t["rows"]) == ["1 MiB", "1 MiB *"]
    assert "1 MiB → 1048560 B" in t["footnote"]


def test_a_size_just_under_a_unit_prints_as_that_unit():
    assert human_bytes(1048560) == human_bytes(MiB) == "1 MiB"  # never "1024 KiB"
    assert human_bytes(2**30 - 24) == "1 GiB" and human_bytes(1048064) == "1023.5 KiB"


def test_an_older_csv_reads_back_with_requested_bytes_equal_to_size_bytes(tmp_path):
    rows = [_raw_row(6, req, 0) for req in REQUESTED]
    old = pd.DataFrame(rows).drop(columns=["requested_bytes"])
    old.to_csv(tmp_path / "comm.csv", index=False)
    df = read_comm_csv(tmp_path / "comm.csv")
    assert list(df.columns) == list(COMM_COLUMN_NAMES)
    assert list(df["requested_bytes"]) == list(df["size_bytes"]) == [48, 1992, 1048560]
    ranks = old[["backend", "world_size", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
                 "trial"]].assign(rank=0, time_us=1.0, arrival_us=0.0)
    ranks.to_csv(tmp_path / "comm_ranks.csv", index=False)
    assert list(read_comm_ranks_csv(tmp_path / "comm_ranks.csv")["requested_bytes"]) == [48, 1992, 1048560]
    # an older summary too (the report reads those of earlier runs)
    s = _summary().drop(columns=["requested_bytes"])
    assert (normalise_summary(s)["requested_bytes"] == s["size_bytes"]).all()


def test_a_real_gloo_job_keeps_the_requested_size(tmp_path):
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "all_gather,all_reduce", "--sizes", "1000", "--warmup", "0",
                  "--iters", "2", "--trials", "1", "--out", str(out), "--placement-out", str(tmp_path / "p.json")],
                 nproc=3)
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out).set_index("op")
    assert (df["status"] == "ok").all() and df["correct"].all()
    # 1000 B = 250 float32; all_gather at 3 ranks: 249 elements = 996 B; all_reduce keeps 1000 B
    assert df.loc["all_gather", "requested_bytes"] == 1000 and df.loc["all_gather", "size_bytes"] == 996
    assert df.loc["all_reduce", "requested_bytes"] == 1000 and df.loc["all_reduce", "size_bytes"] == 1000
    ranks = read_comm_ranks_csv(tmp_path / "comm_ranks.csv")
    assert set(zip(ranks["op"], ranks["requested_bytes"], ranks["size_bytes"])) == {("all_gather", 1000, 996),
                                                                                 ("all_reduce", 1000, 1000)}


def test_failure_rows_keep_the_requested_size(tmp_path):
    cfg = check_config({"backends": ["gloo"]})
    params = {**job_params(cfg, "gloo"), "ops": ["all_gather"], "sizes": [50, 2000], "trials": 1, "iters": 2,
              "warmup": 0, "job_timeout_s": 60, "pairs": False}
    write_failure_rows(CommJob("gloo", "float32", 6, "default", {}), params, tmp_path / "comm.csv", "rank 3 died")
    df = read_comm_csv(tmp_path / "comm.csv")
    assert list(zip(df["requested_bytes"], df["size_bytes"])) == [(50, 48), (2000, 1992)]
