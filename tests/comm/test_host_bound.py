"""Events timing at small sizes measures torch's per-call host cost, not the link (issue 24): the harness
takes the host's issue time per op beside the CUDA events, a point whose time is no more than that is
host-bound, and the summary, the report's tables and sentences, the verdict, summary.json and the
live table say so. Crafted tables (and a fake CUDA clock for the harness), so this runs on CPU."""

import json
import math
import time
from types import SimpleNamespace

import pandas as pd
import pytest

from distbench.comm.analysis.findings import compute_findings, normalise_summary
from distbench.comm.analysis.headlines import comm_headlines
from distbench.comm.analysis.section import HOST_BOUND_MARK, _largest_table, _pivots
from distbench.comm.analysis.summary import summarize
from distbench.comm.main import table_line
from distbench.comm.contract import (
    COMM_COLUMN_NAMES,
    host_bound,
    read_comm_csv,
    read_comm_ranks_csv,
)
from distbench.core.section import ReportInputs
from distbench.launch.progress import Beacon
from distbench.pipeline.config import check_config
from distbench.report.summary_json import summary_document, validate_summary

HOST_COST = "torch's per-call host cost, not link latency"
SMALL, LARGE = 8, 64 << 20


def raw_row(size, timing, time_us, issue_us, trial=0, **kw) -> dict:
    """One comm.csv row (2 NCCL ranks, all_reduce)."""
    count = max(size // 4, 1)
    algbw = size / (time_us * 1e3)
    r = {c: None for c in COMM_COLUMN_NAMES} | dict(
        backend="nccl", world_size=2, nodes=1, op="all_reduce", traffic="none", dtype="float32", nccl_env="default",
        timing=timing, inplace=False, size_bytes=size, requested_bytes=size, count=count, trial=trial, iters=20,
        rank_agg="max", time_us=time_us, time_us_rank_min=time_us * 0.99, time_us_rank_max=time_us, slowest_rank=0,
        arrival_skew_us=1.0, last_rank=1, host_issue_us=issue_us, algbw_gbps=algbw, busbw_gbps=algbw,
        correct=True, status="ok", message="")
    return r | kw


def raw_table() -> pd.DataFrame:
    """events at 8 B: the GPU waited for the host (42 µs per op, the host took 40.5 to issue each);
    events at 64 MiB: GPU-bound (300 µs against 6 µs of issuing); graph at 8 B: 10.4 µs against 1."""
    rows = []
    for t in range(3):
        rows += [raw_row(SMALL, "events", 42.0 + t * 0.1, 40.5, t), raw_row(LARGE, "events", 300.0 + t, 6.0, t),
                 raw_row(SMALL, "graph", 10.4, 1.0, t), raw_row(LARGE, "graph", 299.0 + t, 0.5, t)]
    return pd.DataFrame(rows, columns=list(COMM_COLUMN_NAMES))


@pytest.fixture
def summary() -> pd.DataFrame:
    return normalise_summary(summarize(raw_table()))


def _row(s, size, timing):
    r = s[(s["size_bytes"] == size) & (s["timing"] == timing)]
    assert len(r) == 1
    return r.iloc[0]


def test_the_flag_compares_the_time_with_the_issue_time():
    assert host_bound(42.0, 40.5) and host_bound(40.0, 40.5)
    # measured on 2x H200: 1 KiB all_reduce under events 43.27 us, issue 40.79 us (6% over: the event
    # records and the last op's run) is host-bound; send_recv at 32 MiB, 150.6 against 97.9 us, is not
    assert host_bound(43.27, 40.79) and not host_bound(150.6, 97.9)
    assert not host_bound(300.0, 6.0) and not host_bound(50.0, 40.0)  # 25% over: the GPU took longer
    assert not any(host_bound(42.0, x) for x in (math.nan, None, pd.NA, 0.0))  # not measured: not host-bound


def test_summary_marks_only_the_point_where_the_gpu_waited_for_the_host(summary):
    small, large = _row(summary, SMALL, "events"), _row(summary, LARGE, "events")
    assert bool(small["host_bound"]) and small["host_issue_us_median"] == pytest.approx(40.5)
    assert not large["host_bound"] and large["host_issue_us_median"] == pytest.approx(6.0)
    assert not _row(summary, SMALL, "graph")["host_bound"]


def test_report_tables_mark_the_host_bound_cell_with_a_footnote(summary):
    # without a graph measurement of the point, the main table keeps the events figure, marked
    main = _pivots(summary[summary["timing"] == "events"])[0]["main"]["table"]
    cells = {r[1]: r[2] for r in main["rows"]}
    assert cells["8 B"].split(" · ")[0].endswith(HOST_BOUND_MARK)
    assert HOST_BOUND_MARK not in cells["64 MiB"]
    foot = main["footnote"]
    assert HOST_COST in foot and "events timing at 8 B" in foot and "40.5 µs to issue each op" in foot
    # the events table itself (collapsed in HTML) marks it the same way beside the graph one
    events = next(o for o in _pivots(summary)[0]["others"] if o["timing"] == "events")["table"]
    assert {r[1]: r[2] for r in events["rows"]}["8 B"].split(" · ")[0].endswith(HOST_BOUND_MARK)
    graph = next(o for o in _pivots(summary)[0]["others"] if o["timing"] == "graph")["table"]
    assert HOST_BOUND_MARK not in str(graph["rows"]) and not graph["footnote"]
    # the largest size is GPU-bound: nothing marked there
    largest = summary[summary["size_bytes"] == LARGE]
    assert HOST_BOUND_MARK not in str(_largest_table(largest, None)["rows"])


def test_findings_label_the_host_bound_figure_and_point_to_graph_timing(summary):
    lines = compute_findings(summary)
    hb = [x for x in lines if "host-bound up to" in x]
    assert len(hb) == 1, lines
    assert "NCCL events timing" in hb[0] and HOST_COST in hb[0] and "the host took 40.5 µs" in hb[0]
    assert "graph timing there: 10.4 µs" in hb[0]
    # the timing-mode comparison quotes the events figure at 8 B: labelled as the host's
    overhead = next(x for x in lines if x.startswith("CUDA-graph timing"))
    assert "(host-bound)" in overhead
    # a GPU-bound sweep says nothing of the kind
    gpu_bound = summary.assign(host_bound=False, host_issue_us_median=1.0, time_us_median=summary["time_us_median"])
    assert not any("host-bound" in x for x in compute_findings(gpu_bound))


def test_a_verdict_on_a_host_bound_point_is_not_a_judgement_of_the_link():
    only_small = normalise_summary(summarize(raw_table()[lambda d: d["size_bytes"] == SMALL]))
    peak = {"peak_gbps": 450.0, "link": "NVLink"}
    (h,) = comm_headlines(only_small, peak=peak)
    assert h.verdict == "measured" and "host-bound" in h.reason and HOST_COST in h.reason
    # the same figure without the issue time would be judged against the link peak
    (judged,) = comm_headlines(only_small.drop(columns=["host_issue_us_median", "host_bound"]), peak=peak)
    assert judged.verdict == "below expected"


def test_summary_json_carries_the_flag_and_the_issue_time(tmp_path, summary):
    path = tmp_path / "comm_summary.csv"
    summarize(raw_table()).to_csv(path, index=False)
    doc = summary_document(ReportInputs({"comm_summary": path}), check_config({}))
    validate_summary(doc)
    recs = {(r["timing"], r["size_bytes"]): r for r in doc["results"]["communication"]["all_reduce"]}
    assert recs[("events", SMALL)]["host_bound"] is True
    assert recs[("events", SMALL)]["host_issue_us_median"] == pytest.approx(40.5)
    assert recs[("events", LARGE)]["host_bound"] is False and recs[("graph", SMALL)]["host_bound"] is False
    bad = json.loads(json.dumps(doc))
    bad["results"]["communication"]["all_reduce"][0]["host_bound"] = "yes"
    with pytest.raises(Exception, match="is not of type 'boolean'"):
        validate_summary(bad)


def test_csvs_from_before_the_column_read_as_not_host_bound(tmp_path):
    old = raw_table().drop(columns=["host_issue_us"])
    path = tmp_path / "comm.csv"
    old.to_csv(path, index=False)
    df = read_comm_csv(path)
    assert df["host_issue_us"].isna().all()
    s = normalise_summary(summarize(df))
    assert not s["host_bound"].any() and len(s) == 4
    ranks = old[["backend", "world_size", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
                 "requested_bytes", "trial"]].assign(rank=0, time_us=1.0, arrival_us=0.0)
    ranks.to_csv(tmp_path / "comm_ranks.csv", index=False)
    assert read_comm_ranks_csv(tmp_path / "comm_ranks.csv")["host_issue_us"].isna().all()
    # a summary written before the columns: summary.json says false, not host-bound
    old_summary = summarize(df).drop(columns=["host_issue_us_median", "host_bound"])
    old_summary.to_csv(tmp_path / "comm_summary.csv", index=False)
    doc = summary_document(ReportInputs({"comm_summary": tmp_path / "comm_summary.csv"}), check_config({}))
    validate_summary(doc)
    assert all(r["host_bound"] is False for r in doc["results"]["communication"]["all_reduce"])


def test_the_live_table_marks_a_host_bound_line():
    base = dict(size_bytes=8, count=2, dtype="float32", op="all_reduce", timing="events", inplace=True,
                status="ok", message="", correct=True, algbw_gbps=0.0, busbw_gbps=0.0)
    bound = table_line([dict(base, time_us=42.0, host_issue_us=40.5)] * 3)
    assert bound.endswith("ok  host-bound (issue 40.5 µs)")
    assert table_line([dict(base, time_us=300.0, host_issue_us=6.0)] * 3).endswith("  ok")


class _FakeCuda:
    """CUDA events on a fake GPU that runs each op in `gpu_us`, in the order the host issues it: the
    end event's time is when the last op finished, so a fast GPU waits for the host."""

    def __init__(self, gpu_us):
        self.gpu_us, self.gpu_free = gpu_us, 0.0

    def issue(self):  # one op reaches the fake GPU now
        self.gpu_free = max(self.gpu_free, time.perf_counter()) + self.gpu_us * 1e-6

    def Event(self, enable_timing=True):
        cuda = self

        class Event:
            def record(self):
                self.at = max(cuda.gpu_free, time.perf_counter())

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return (end.at - self.at) * 1e3  # ms

        return Event()


@pytest.mark.parametrize("gpu_us, bound", [(1.0, True), (20_000.0, False)])
def test_the_harness_times_the_issuing_loop_beside_the_events(gpu_us, bound):
    """The harness's events path against a fake GPU: each op costs the host ~2 ms to issue. A GPU that
    takes 1 µs per op waits for the host (host-bound); one that takes 20 ms does not."""
    from distbench.comm.harness import Harness

    cuda = _FakeCuda(gpu_us)
    h = object.__new__(Harness)
    h.torch, h.slow_ms, h.sync = SimpleNamespace(cuda=cuda), 0, lambda: None
    h.args = SimpleNamespace(warmup=0, iters=3, trials=2, graph_launches=1)
    # no progress directory: the beacon writes nothing (distbench.launch.progress)
    h.beacon, h.where, h.op_s, h.op_s_per_byte, h.size_bytes = Beacon(None, 0), "all_reduce 8 B (events)", 0.0, 0.0, 8

    def run(ctx, slot):
        time.sleep(0.002)  # torch's per-call host cost, exaggerated
        cuda.issue()

    op = SimpleNamespace(run=run)
    slots = [SimpleNamespace(expected=None)]
    times, after = h._time_and_check(op, None, slots, "events")
    assert after is None and len(times) == len(h.issue_us) == 2
    assert all(i >= 1900 for i in h.issue_us)  # per op, µs: the 2 ms sleep
    assert [host_bound(t, i) for t, i in zip(times, h.issue_us)] == [bound, bound]


def test_advice_does_not_call_a_host_bound_events_figure_the_gpu_time(summary):
    from distbench.comm.analysis.advice import advise

    both = pd.concat([summary, summary[summary["timing"] == "events"].assign(timing="host", time_us_median=
                                                                             summary["time_us_median"] * 3,
                                                                             host_bound=False)])
    (item,) = [a for a in advise(both) if "host timing is much slower" in a["text"]]
    assert "with CUDA events" in item["text"] and "itself host-bound" in item["text"]
    assert "on the GPU" not in item["text"]


# Issue 35: where events timing is host-bound and graph timing measured the same point, the headline
# and the main tables show the GPU's side (graph), the graph-mixing setting named, and torch's per-call
# host cost beside it, labelled; nccl-tests' default output is compared like with like.
def test_a_host_bound_events_series_does_not_make_the_main_table(summary):
    from distbench.comm.analysis.section import GPU_SIDE_MARK

    (pivot,) = _pivots(summary)
    main = pivot["main"]["table"]
    assert main["headers"][2] == "nccl ws2 (events; ‡ graph)"
    cells = {r[1]: r[2] for r in main["rows"]}
    small = cells["8 B"].split(" · ")
    assert small[0] == f"10.4 µs {GPU_SIDE_MARK}" and small[-1] == "torch host cost 42.1 µs"  # graph; events beside it
    assert HOST_BOUND_MARK not in cells["8 B"] and "42.1 µs" not in small[0]
    assert cells["64 MiB"].startswith("301 µs ·") and GPU_SIDE_MARK not in cells["64 MiB"]  # GPU-bound: events
    foot = main["footnote"]
    assert "8 B (graph mixing on: NCCL_GRAPH_MIXING_SUPPORT unset, NCCL's default)" in foot
    assert HOST_COST in foot and "40.5 µs to issue each op" in foot and "NCCL_GRAPH_MIXING_SUPPORT: 0" in foot
    assert f"{HOST_BOUND_MARK} host-bound" not in foot  # no cell left host-bound


def test_a_host_bound_events_series_does_not_make_the_headline():
    """Only small sizes ran (the quick answer's shape): events timing at 8 B is torch's host cost, so
    the headline quotes graph timing there, names graph mixing and puts the host cost beside it."""
    only_small = normalise_summary(summarize(raw_table()[lambda d: d["size_bytes"] == SMALL]))
    (h,) = comm_headlines(only_small, peak={"peak_gbps": 450.0, "link": "NVLink"})
    assert "10.4 µs per op" in h.headline and "(graph timing, graph mixing on: NCCL_GRAPH_MIXING_SUPPORT unset" in h.headline
    assert "torch host cost: 42.1 µs per op under events timing" in h.headline
    assert h.headline.index("10.4 µs") < h.headline.index("42.1 µs")
    assert h.verdict == "measured" and "not judged" in h.reason and "host-bound" in h.reason
    # graph mixing set off in the config's job_env, or by the launcher (env.json), is named so
    (off,) = comm_headlines(only_small, job_env={"NCCL_GRAPH_MIXING_SUPPORT": "0"})
    assert "graph mixing off: NCCL_GRAPH_MIXING_SUPPORT=0 in job_env;" in off.headline
    (launcher,) = comm_headlines(only_small, env={"job_env": {"NCCL_GRAPH_MIXING_SUPPORT": "0"}})
    assert "NCCL_GRAPH_MIXING_SUPPORT=0 in the launcher's environment" in launcher.headline
    # without graph timing the events figure stays, said to be the host's and not judged
    (events,) = comm_headlines(only_small[only_small["timing"] == "events"], peak={"peak_gbps": 450.0})
    assert "42.1" not in events.headline or "graph" not in events.headline
    assert events.verdict == "measured" and HOST_COST in events.reason
    # a GPU-bound largest size keeps its events headline, judged as before
    (full,) = comm_headlines(normalise_summary(summarize(raw_table())), peak={"peak_gbps": 450.0, "link": "NVLink"})
    assert "graph" not in full.headline and full.verdict != "measured"


def test_the_graph_mixing_setting_comes_from_the_point_then_job_env_then_the_launcher():
    from distbench.comm.analysis.headlines import graph_mixing

    assert graph_mixing("default") == "graph mixing on: NCCL_GRAPH_MIXING_SUPPORT unset, NCCL's default"
    assert graph_mixing("NCCL_ALGO=Ring+NCCL_GRAPH_MIXING_SUPPORT=0", {"NCCL_GRAPH_MIXING_SUPPORT": "1"}) == (
        "graph mixing off: NCCL_GRAPH_MIXING_SUPPORT=0 in comm.nccl_env")
    assert graph_mixing("default", {"NCCL_GRAPH_MIXING_SUPPORT": 1}, {"NCCL_GRAPH_MIXING_SUPPORT": "0"}) == (
        "graph mixing on: NCCL_GRAPH_MIXING_SUPPORT=1 in job_env")
