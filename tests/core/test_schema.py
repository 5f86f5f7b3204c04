import pandas as pd
import pytest

from distbench.comm.analysis.summary import SUMMARY_COLUMNS, largest, summarize
from distbench.comm.contract import COMM_COLUMN_NAMES, check_comm_frame, check_comm_ranks_frame, read_comm_csv
from distbench.core.contract import SchemaError, markdown_table
from tests.conftest import REPO


def _row(**kw):
    r = {"backend": "gloo", "world_size": 2, "nodes": 1, "op": "all_reduce", "traffic": "none", "dtype": "float32",
         "nccl_env": "default",
         "timing": "host", "inplace": True, "size_bytes": 1024, "count": 256, "trial": 0, "iters": 5,
         "rank_agg": "max", "time_us": 10.0, "time_us_rank_min": 9.0, "time_us_rank_max": 10.0, "slowest_rank": 1,
         "algbw_gbps": 0.1, "busbw_gbps": 0.1, "busiest_rank": None, "busiest_rank_bytes": None,
         "busiest_rank_time_us": None, "correct": True, "status": "ok", "message": ""}
    r.update(kw)
    return r


def test_docs_show_the_contracts_as_written_in_code():
    from distbench.comm.contract import COMM, COMM_RANKS, PAIRS
    from distbench.memory.contract import MEMORY
    from distbench.nodes.contract import NODES
    from distbench.training.contract import TRAINING

    docs = (REPO / "docs/csv-schema.md").read_text()
    for contract in (COMM, COMM_RANKS, PAIRS, TRAINING, MEMORY, NODES):
        assert markdown_table(contract.columns) in docs, contract.name


def test_rank_contract_and_rank_agg_values():
    with pytest.raises(SchemaError, match="unknown rank_agg"):
        check_comm_frame(pd.DataFrame([_row(rank_agg="median")]))
    ranks = pd.DataFrame([{k: _row()[k] for k in ("backend", "world_size", "op", "dtype", "nccl_env", "timing",
                                                 "inplace", "size_bytes", "trial")} | {"rank": 0, "time_us": 3.0}])
    check_comm_ranks_frame(ranks)
    with pytest.raises(SchemaError, match="missing"):
        check_comm_ranks_frame(ranks.drop(columns=["rank"]))
    with pytest.raises(SchemaError, match="positive"):
        check_comm_ranks_frame(ranks.assign(time_us=0.0))


def test_summary_reports_the_spread_between_ranks():
    rows = [_row(trial=t, time_us_rank_min=lo, time_us_rank_max=10.0) for t, lo in enumerate([9.0, 5.0, 8.0])]
    s = summarize(pd.DataFrame(rows)).iloc[0]
    assert s["rank_spread_pct_median"] == pytest.approx(20.0) and s["rank_agg"] == "max"


def test_contract_rejects_missing_columns_and_unknown_status(tmp_path):
    df = pd.DataFrame([_row()])
    check_comm_frame(df)
    with pytest.raises(SchemaError, match="missing"):
        check_comm_frame(df.drop(columns=["busbw_gbps"]))
    with pytest.raises(SchemaError, match="unknown status"):
        check_comm_frame(pd.DataFrame([_row(status="great")]))
    with pytest.raises(SchemaError, match="positive time_us"):
        check_comm_frame(pd.DataFrame([_row(time_us=float("nan"))]))
    path = tmp_path / "x.csv"
    pd.DataFrame([_row(), _row(trial=1, correct=None, status="skipped", message="why")]).to_csv(path, index=False)
    back = read_comm_csv(path)
    assert list(back.columns) == list(COMM_COLUMN_NAMES) and back["correct"].isna().sum() == 1


def test_summary_statistics_and_worst_status():
    rows = [_row(trial=t, time_us=v) for t, v in enumerate([10.0, 12.0, 11.0, 100.0])]
    rows.append(_row(trial=4, status="failed", message="boom", time_us=float("nan")))
    s = summarize(pd.DataFrame(rows))
    assert list(s.columns) == SUMMARY_COLUMNS and len(s) == 1
    r = s.iloc[0]
    assert r["n_trials"] == 4 and r["time_us_median"] == pytest.approx(11.5) and r["time_us_min"] == 10.0
    assert r["status"] == "failed" and r["message"] == "boom"
    times = pd.Series([10.0, 12.0, 11.0, 100.0])
    assert r["time_us_cv"] == pytest.approx(times.std(ddof=0) / times.mean())
    assert r["time_us_p95"] == pytest.approx(times.quantile(0.95))


def test_largest_picks_each_series_largest_ok_size():
    rows = [_row(size_bytes=s, trial=0) for s in (8, 1024, 4096)] + [_row(size_bytes=8192, status="oom", time_us=float("nan"))]
    rows += [_row(world_size=4, size_bytes=64)]
    big = largest(summarize(pd.DataFrame(rows)))
    assert dict(zip(big["world_size"], big["size_bytes"])) == {2: 4096, 4: 64}


def test_a_csv_written_before_multi_node_support_reads_as_one_node(tmp_path):

    from distbench.comm.contract import COMM_COLUMN_NAMES

    path = tmp_path / "comm.csv"
    pd.DataFrame([_row(), _row(trial=1)]).to_csv(path, index=False)  # no `nodes` column: the old layout
    df = read_comm_csv(path)
    assert list(df.columns) == list(COMM_COLUMN_NAMES) and list(df["nodes"]) == [1, 1]
