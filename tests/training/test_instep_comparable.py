"""issue 49: an in-step figure (kernel time) is set only beside a standalone figure measured the same
way, as device time: graph timing, else events timing where it is not host-bound; a ratio above 1.1 is
never called "as fast as alone"."""

import math

from distbench.training.analysis.instep import FASTER_RATIO, bucket_sentence, standalone_busbw, verdict_of

MIB = 2**20


def _row(size, bw, timing="events", host_bound=False, op="all_reduce", dtype="float32"):
    # comm_summary.csv read as text, as instep_tables hands it (astype(str))
    return {"backend": "nccl", "world_size": "4", "op": op, "dtype": dtype, "timing": timing, "nccl_env": "default",
            "status": "ok", "size_bytes": str(size), "busbw_gbps_median": str(bw), "host_bound": str(host_bound)}


# the 4x H200 run: events timing host-bound up to 16 MiB, not above
EVENTS = [_row(s * MIB, bw, host_bound=s <= 16) for s, bw in ((1, 20.0), (2, 30.0), (16, 150.0), (32, 200.0))]
GRAPH = [_row(s * MIB, bw, timing="graph") for s, bw in ((1, 60.0), (2, 90.0), (16, 190.0))]


def test_a_host_bound_standalone_figure_is_not_comparable():
    bw, why = standalone_busbw(EVENTS, "nccl", 4, "all_reduce", "float32", 1.1 * MIB)
    assert math.isnan(bw)
    assert why.startswith("not comparable: the standalone figure is host-bound at this size")
    # above the host-bound sizes events timing is device time: comparable
    assert standalone_busbw(EVENTS, "nccl", 4, "all_reduce", "float32", 32 * MIB) == (200.0, "")


def test_graph_timing_is_preferred_where_it_measured_that_size():
    rows = EVENTS + GRAPH
    bw, why = standalone_busbw(rows, "nccl", 4, "all_reduce", "float32", 2 * MIB)
    assert (bw, why) == (90.0, "")
    bw, _ = standalone_busbw(rows, "nccl", 4, "all_reduce", "float32", 1.5 * MIB)
    assert 60.0 < bw < 90.0  # between graph's own points, never events'
    # between graph's largest size (16 MiB) and events' next one (32 MiB): graph there, events above
    bw, why = standalone_busbw(rows, "nccl", 4, "all_reduce", "float32", 20 * MIB)
    assert why == "" and 190.0 < bw < 200.0


def test_host_timing_alone_is_not_comparable():
    rows = [_row(s * MIB, 5.0, timing="host") for s in (1, 2)]
    bw, why = standalone_busbw(rows, "nccl", 4, "all_reduce", "float32", 1.5 * MIB)
    assert math.isnan(bw) and why.startswith("not comparable") and "host clock" in why


def test_the_sentence_gives_no_ratio_where_not_comparable():
    bw, why = standalone_busbw(EVENTS, "nccl", 4, "all_reduce", "float32", 1.1 * MIB)
    b = {"op": "all_reduce", "size_bytes": 1.1 * MIB, "busbw_gbps_median": 51.4, "per_step": 4.0, "n": 80,
         "ratio": math.nan, "standalone_busbw_gbps": bw, "standalone_note": why, "time_us_median": 40.0}
    s = bucket_sentence("ddp", b)
    assert "not comparable: the standalone figure is host-bound at this size" in s
    assert "%" not in s and "as fast as alone" not in s


def test_faster_than_alone_is_not_as_fast_as_alone():
    assert verdict_of(2.13).startswith("faster inside the step than alone: not a link figure")
    assert verdict_of(FASTER_RATIO + 0.01).startswith("faster inside the step")
    assert verdict_of(1.05) == "as fast as alone" and verdict_of(FASTER_RATIO) == "as fast as alone"


def test_the_report_says_how_the_standalone_figure_is_taken():
    import pandas as pd

    from distbench.training.analysis.instep_view import instep_context

    ctx = instep_context(pd.DataFrame(columns=["job", "sentence"]),
                         pd.DataFrame([{"job": "j", "step_ms": 1.0, "compute_ms": 0.5, "compute_slowdown_ms": 0.1,
                                        "exposed_comm_ms": 0.1, "rest_ms": 0.3}]))
    assert "as device time" in ctx["note"] and "not comparable" in ctx["note"]
