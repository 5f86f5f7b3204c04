"""Tables read as contracts: every reader of a table under tables/ (the report, summary.json, the plots)
meets the columns it indexes and measurements it can rank and draw, or the one reader
(distbench.core.readers.read_table) stops first with one line naming the file and what is wrong.

Hostile inputs that got through before: a repeated header (pandas renamed the second `x.1`, and a
first `tokens_per_s_median` of 999999 became the Verdict's "DDP, 999,999 tokens/s"), a table without
`mfu`, `strategy` or `tokens_per_s_median` (a KeyError traceback in the report or the plots), an
infinite or zero tokens/s on an ok row (matplotlib's "Axis limits cannot be NaN or Inf", a
ZeroDivisionError, "level" yet "100% below"), a NaN tokens/s listed ok, a FIFO at a table's path (the
plot rule hung) and a symlink to /dev/zero (read until memory ran out).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

import distbench.comm.contract  # noqa: F401 - each registers its tables' contracts (its manifest imports it)
import distbench.memory.contract  # noqa: F401
import distbench.nodes.contract  # noqa: F401
import distbench.training.contract  # noqa: F401
from distbench.core import readers
from distbench.core.contract import TABLE_CONTRACTS, Positive, TableContract
from distbench.core.readers import UnreadableFile, read_table, remake

REPO = Path(__file__).resolve().parents[2]
H100X4 = REPO / "benchmarks/results/report-h100x4-2026-11-26/run-h100x4/tables"
ONE_GPU = REPO / "benchmarks/results/one-gpu-h200x1-2026-11-29/run/tables"
NODES = REPO / "benchmarks/results/hang-nodes-h200x2-2026-11-27/nodes"
# a real file of each table, as the run wrote it
REAL = {"training_summary": H100X4, "comm_summary": H100X4, "memory_summary": H100X4, "training": ONE_GPU,
        "comm": ONE_GPU, "comm_largest": ONE_GPU, "memory": ONE_GPU, "nodes": NODES, "nodes_pairs": NODES,
        "nodes_scores": NODES}


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / "tables" / f"{name}.csv"
    dst.parent.mkdir(exist_ok=True)
    shutil.copy(REAL[name] / f"{name}.csv", dst)
    return dst


def _refused(path: Path, **kw) -> str:
    with pytest.raises(UnreadableFile) as e:
        read_table(path, remake(path), **kw)
    text = str(e.value)
    assert text.startswith(f"{path} cannot be read: ") and f"rm {path}" in text and "\n" not in text, text
    return e.value.problem


def test_every_family_table_has_a_contract_and_the_real_runs_meet_it(tmp_path):
    contracts = TABLE_CONTRACTS
    assert set(REAL) <= set(contracts)
    for name in REAL:
        c = contracts[name]
        assert isinstance(c, TableContract) and "status" in c.columns or name == "nodes_scores", name
        assert read_table(_copy(name, tmp_path), "") is not None  # the real file passes
        header = set(pd.read_csv(tmp_path / "tables" / f"{name}.csv", nrows=0).columns)
        assert set(c.columns) <= header, (name, set(c.columns) - header)
        assert {p.column for p in c.positives} <= header, name


def test_a_repeated_header_is_refused_naming_the_file_and_the_column(tmp_path):
    path = _copy("training_summary", tmp_path)
    lines = path.read_text().splitlines(keepends=True)
    # a tokens_per_s_median of 999999 placed first: pandas would call the real one tokens_per_s_median.1
    path.write_text("tokens_per_s_median," + lines[0] + "".join("999999," + ln for ln in lines[1:]))
    problem = _refused(path)
    assert "['tokens_per_s_median'] more than once" in problem, problem


def test_a_repeated_header_is_refused_in_a_table_without_a_contract(tmp_path):
    path = tmp_path / "anything.csv"
    path.write_text("a,b,a\n1,2,3\n")
    assert "['a'] more than once" in _refused(path)


@pytest.mark.parametrize("name,column", [
    ("training_summary", "mfu"), ("training_summary", "strategy"), ("training_summary", "tokens_per_s_median"),
    ("training", "step_time_ms"), ("comm_summary", "busbw_gbps_median"), ("comm_largest", "time_us_median"),
    ("comm", "time_us"), ("memory_summary", "peak_allocated_bytes"), ("memory", "batch_size"),
    ("nodes_pairs", "cause"), ("nodes_scores", "state"), ("nodes", "busbw_gbps"),
])
def test_a_missing_used_column_is_refused_naming_the_file_and_the_column(tmp_path, name, column):
    path = _copy(name, tmp_path)
    pd.read_csv(path).drop(columns=[column]).to_csv(path, index=False)
    assert _refused(path) == f"it lacks the column(s) ['{column}']"


def _lm_row(path: Path) -> int:
    """The 1-based data row of the first ok language-model row (one that owes tokens/s)."""
    df = pd.read_csv(path)
    return int(((df["status"] == "ok") & df["seq_len"].notna()).to_numpy().nonzero()[0][0]) + 1


def _set(path: Path, row: int, column: str, cell: str, **others) -> None:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[row - 1, column] = cell
    for k, v in others.items():
        df.loc[row - 1, k] = v
    df.to_csv(path, index=False)


@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "NaN", "", "0", "0.0", "-12.5"])
def test_a_tokens_per_s_that_is_not_a_positive_finite_number_on_an_ok_row_is_refused(tmp_path, cell):
    path = _copy("training_summary", tmp_path)
    row = _lm_row(path)
    _set(path, row, "tokens_per_s_median", cell)
    problem = _refused(path)
    assert problem.startswith(f"column tokens_per_s_median, row {row}: ") and "status is ok" in problem, problem


@pytest.mark.parametrize("name,column", [("training_summary", "step_time_ms_median"), ("comm_summary", "time_us_median"),
                                         ("comm_summary", "busbw_gbps_median"), ("comm", "time_us"),
                                         ("nodes", "busbw_gbps")])
@pytest.mark.parametrize("cell", ["inf", "0", ""])
def test_each_measurement_is_held_on_ok_rows(tmp_path, name, column, cell):
    path = _copy(name, tmp_path)
    df = pd.read_csv(path)
    row = int(((df["status"] == "ok") & (df.get("op", "") != "barrier")).to_numpy().nonzero()[0][0]) + 1
    _set(path, row, column, cell)
    assert _refused(path).startswith(f"column {column}, row {row}: ")


def test_rows_that_owe_no_measurement_may_leave_it_empty(tmp_path):
    """A failed row may hold NaN; an mlp row has no tokens/s; the barrier has no bandwidth."""
    path = _copy("training_summary", tmp_path)
    row = _lm_row(path)
    _set(path, row, "tokens_per_s_median", "", status="failed", message="rank 1 died")
    _set(path, row, "step_time_ms_median", "nan")
    df = read_table(path, "")
    assert df["tokens_per_s_median"].isna().sum() >= 2 and (df["model"] == "mlp").any()

    comm = _copy("comm_summary", tmp_path)
    table = pd.read_csv(comm)
    barrier = table.index[(table["op"] == "barrier") & (table["status"] == "ok")]
    assert len(barrier) and table.loc[barrier, "busbw_gbps_median"].isna().all()
    read_table(comm, "")
    _set(comm, int(barrier[0]) + 1, "busbw_gbps_median", "inf")  # a value that is there is still a measurement
    assert _refused(comm).startswith(f"column busbw_gbps_median, row {int(barrier[0]) + 1}: inf ")


def test_one_ranks_bus_bandwidth_may_be_zero_and_no_other(tmp_path):
    """The bus factor 2(n-1)/n is 0 at one rank: its busbw is 0 by definition, not a damaged file."""
    path = _copy("comm_summary", tmp_path)
    table = pd.read_csv(path)
    row = int(((table["status"] == "ok") & (table["op"] == "all_reduce")).to_numpy().nonzero()[0][0]) + 1
    _set(path, row, "busbw_gbps_median", "0", world_size="1")
    read_table(path, "")
    _set(path, row, "busbw_gbps_median", "0", world_size="2")
    assert _refused(path).startswith(f"column busbw_gbps_median, row {row}: 0 ")


def test_positive_where_filled_and_except_where():
    raw = pd.DataFrame({"m": ["", "", "5", "0"], "seq": ["", "8", "8", ""], "status": ["ok"] * 4}, dtype=str)
    assert readers.table_problem(raw.iloc[:1], positive=[Positive("m", where_filled="seq")]) is None
    assert "row 2: empty" in readers.table_problem(raw.iloc[:2], positive=[Positive("m", where_filled="seq")])
    # row 3 owes nothing (no seq): a 0 there is allowed, a negative or infinite figure is not
    rest = raw.iloc[[0, 2, 3]].reset_index(drop=True)
    assert readers.table_problem(rest, positive=[Positive("m", where_filled="seq")]) is None
    rest.loc[2, "m"] = "-1"
    assert "row 3: -1 " in readers.table_problem(rest, positive=[Positive("m", where_filled="seq")])
    ops = pd.DataFrame({"bw": ["", "3"], "op": ["barrier", "all_reduce"], "status": ["ok", "ok"]}, dtype=str)
    assert readers.table_problem(ops, positive=[Positive("bw", except_where=(("op", ("barrier",)),))]) is None
    assert "row 1: empty" in readers.table_problem(ops, positive=[Positive("bw")])


def _in_time(fn, seconds: float = 2.0):
    """fn() in a thread that must end within `seconds`: the proof the reader did not block."""
    out: dict = {}

    def run():
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"the reader was still reading after {seconds} s"
    assert time.monotonic() - start < seconds
    return out.get("error")


def test_a_fifo_at_a_table_path_is_refused_at_once(tmp_path):
    path = tmp_path / "training_summary.csv"
    os.mkfifo(path)
    e = _in_time(lambda: read_table(path, remake(path)))
    assert isinstance(e, UnreadableFile) and str(e).startswith(f"{path} cannot be read: it is a FIFO"), e


def test_a_symlink_to_dev_zero_is_refused_without_reading_it(tmp_path):
    path = tmp_path / "comm_summary.csv"
    path.symlink_to("/dev/zero")
    e = _in_time(lambda: read_table(path, remake(path)))
    assert isinstance(e, UnreadableFile) and "it is a character device, not a regular file" in str(e), e
    doc = tmp_path / "env.json"
    doc.symlink_to("/dev/zero")
    e = _in_time(lambda: readers.read_json(doc, remake(doc)))
    assert isinstance(e, UnreadableFile) and str(e).startswith(f"{doc} cannot be read: it is a character device")


def test_a_directory_is_refused(tmp_path):
    path = tmp_path / "memory_summary.csv"
    path.mkdir()
    assert "it is a directory, not a regular file" in _refused(path)


def test_a_file_beyond_the_size_cap_is_refused(tmp_path, monkeypatch):
    path = _copy("memory_summary", tmp_path)
    monkeypatch.setattr(readers, "MAX_BYTES", path.stat().st_size - 1)
    assert _refused(path).startswith(f"it holds more than {path.stat().st_size - 1:,} bytes")
    monkeypatch.setattr(readers, "MAX_BYTES", path.stat().st_size)
    assert read_table(path, "") is not None


def test_a_regular_file_swapped_for_a_fifo_after_the_path_check_is_refused_at_once(tmp_path, monkeypatch):
    """The kind is checked again on the open file: a path swapped between the two is not read."""
    path = tmp_path / "training_summary.csv"
    path.write_text("a\n1\n")
    real = os.open

    def swapped(p, flags, *a, **kw):
        path.unlink()
        os.mkfifo(path)
        return real(p, flags, *a, **kw)

    monkeypatch.setattr(readers.os, "open", swapped)
    e = _in_time(lambda: readers.read_text(path, "fix"))
    assert isinstance(e, UnreadableFile) and "it is a FIFO" in str(e), e


# -- the rules: one line, exit non-zero, no traceback, the last good report whole --------------------


def test_the_training_plot_rule_stops_on_a_fifo_and_on_an_infinite_tokens_per_s(tmp_path):
    from distbench.launch.in_rule import figures_in_rule
    from distbench.training.analysis.plots import plot_training

    fifo = tmp_path / "fifo" / "training_summary.csv"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    bad = _copy("training_summary", tmp_path)
    _set(bad, _lm_row(bad), "tokens_per_s_median", "inf")
    for path, words in ((fifo, "it is a FIFO"), (bad, "column tokens_per_s_median, row")):
        log = tmp_path / "plot.log"
        sm = SimpleNamespace(input={"summary": str(path)}, output=SimpleNamespace(figures=str(tmp_path / "figs")),
                             log=[str(log)])
        e = _in_time(lambda: figures_in_rule(sm, plot_training, "summary"), 20)
        assert isinstance(e, SystemExit), e
        assert str(e.code).startswith(f"distbench error: {path} cannot be read: ") and words in str(e.code), e.code
        assert "Traceback" not in log.read_text()


def test_the_report_stops_on_a_repeated_header_naming_the_file_and_keeps_the_last_good_report(tmp_path):
    from synthetic import ENV, PLAN, largest_of

    from distbench.core.section import ReportInputs
    from distbench.pipeline.config import check_config
    from distbench.report.render import render_report
    from distbench.report.summary_json import summary_document

    tables = tmp_path / "results/now/tables"
    tables.mkdir(parents=True)
    names = ("comm_summary", "training_summary", "memory_summary")
    for name in names:
        shutil.copy(H100X4 / f"{name}.csv", tables / f"{name}.csv")
    largest_of(pd.read_csv(tables / "comm_summary.csv")).to_csv(tables / "comm_largest.csv", index=False)
    (tmp_path / "env.json").write_text(json.dumps(ENV))
    jobs = {"comm": [{"backend": "nccl"}], "training": [{"backend": "nccl"}], "memory": [{"backend": "nccl"}]}

    def inputs():
        return ReportInputs({n: tables / f"{n}.csv" for n in (*names, "comm_largest")}, tmp_path / "env.json", [],
                            check_config({}), {**PLAN, "jobs": jobs})

    md, html = tmp_path / "report/report.md", tmp_path / "report/report.html"
    render_report(inputs(), md, html)
    before = md.read_bytes(), html.read_bytes()
    assert b"tokens/s" in before[0]

    path = tables / "training_summary.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("tokens_per_s_median," + lines[0] + "".join("999999," + ln for ln in lines[1:]))
    with pytest.raises(UnreadableFile) as e:
        render_report(inputs(), md, html)
    text = str(e.value)
    assert text.startswith(f"{path} cannot be read: its header names the column(s) ['tokens_per_s_median'] more "
                           "than once"), text
    assert (md.read_bytes(), html.read_bytes()) == before and b"999,999" not in before[0]
    with pytest.raises(UnreadableFile) as e:
        summary_document(inputs(), check_config({}))
    assert str(e.value) == text
