"""The comm family's CSV contracts. comm.csv: one row per measurement (backend, world_size, op, dtype,
nccl_env, timing, inplace, size_bytes, requested_bytes, trial), its time aggregated over ranks. comm_ranks.csv: the
same keys plus `rank`, one row per rank and trial. pairs.csv: the GPU-pair matrix, one row per
(pair, mode, size, trial). The harness writes these columns, aggregation checks them, and the tests
hold both to them.
"""

from __future__ import annotations

from distbench.core.choices import RANK_AGGS, STATUSES, TIMINGS
from distbench.core.contract import (
    MESSAGE_COLUMN, STATUS_COLUMN, Column, Contract, Positive, SameAs, TableContract, check_frame, print_tables,
    read_csv, register_tables,
)

PAIR_MODES = ("uni", "bi")  # GPU-pair matrix: one direction at a time, or both at once

# A device-timed point is host-bound when its time per op is no more than this times the host's time
# to issue one op. When the GPU finishes each op before the host has issued the next, the elapsed
# time between the CUDA events is the issuing itself plus the last op's run, so the two agree to within
# a few percent; a GPU-bound point's events span the ops' execution while the host has long finished
# issuing (time >> issue). On 2x H200 (benchmarks/results/nccl-layouts-h200x2-2026-11-26, run 1) every
# all_reduce at 8 B - 1 MiB under events was 1.03-1.06x its issue time (about 2.5 us per op more: the
# event records and the last op's run), while every op at 32 MiB - 1 GiB was 1.5x (send_recv at 32 MiB)
# to 60x its issue time; 1.2 keeps the first host-bound and the second not. (A host that blocks because the launch queue
# is full, about a thousand pending launches, would look host-bound too; a trial's iters is far below
# that at the default 20.)
HOST_BOUND_FACTOR = 1.2


def host_bound(time_us: float, host_issue_us: float) -> bool:
    """Whether a time per op is the host's per-call cost rather than the GPU's (False when the issue
    time was not measured: host timing, Gloo, CSVs written before host_issue_us)."""
    try:
        t, issue = float(time_us), float(host_issue_us)
    except (TypeError, ValueError):  # None, pd.NA
        return False
    return issue > 0 and t <= HOST_BOUND_FACTOR * issue  # NaN compares False


COMM_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "number of ranks in the job"),
    Column("nodes", "int64", "nodes the ranks ran on, one torchrun agent each (world_size / nodes ranks per node)"),
    Column("op", "string", "collective name from distbench.core.ops_spec.OPS"),
    Column("traffic", "string", "all_to_all_v's traffic matrix: uniform, zipf:S (rank d receives in proportion to 1/(d+1)^S, MoE routing) or file:PATH (distbench.comm.traffic); none for every other op"),
    Column("dtype", "string", "element type (float32, bfloat16, ...)"),
    Column("nccl_env", "string", "label of the NCCL environment sweep point ('default' when none)"),
    Column("timing", "string", "events, graph or host (how elapsed time was taken: see below)"),
    Column("inplace", "bool", "True when the output buffer is the input buffer"),
    Column("size_bytes", "int64", "nccl-tests 'size': bytes of the largest buffer (total for gather/scatter/alltoall)"),
    Column("requested_bytes", "int64", "the size the sweep asked for; size_bytes differs when an op splits its buffer into world_size equal chunks (all_gather, reduce_scatter, all_to_all[_v]) and the count rounds down to a multiple of world_size, or the size is not a whole number of elements (CSVs written before this column: size_bytes)"),
    Column("count", "int64", "elements in that buffer (size_bytes / element size)"),
    Column("trial", "int64", "trial index, 0-based; each trial times `iters` back-to-back ops"),
    Column("iters", "int64", "ops timed in this trial (graph: ops per graph x graph launches)"),
    Column("rank_agg", "string", "how `time_us` combines the ranks' times: max (default), avg, min or rank0"),
    Column("time_us", "float64", "time per op in microseconds: trial elapsed / iters on each rank, combined over ranks by `rank_agg`"),
    Column("time_us_rank_min", "float64", "the fastest rank's time per op in this trial"),
    Column("time_us_rank_max", "float64", "the slowest rank's time per op in this trial"),
    Column("slowest_rank", "Int64", "rank with the largest time in this trial"),
    Column("arrival_skew_us", "float64", "how long the first rank waited for the last at the start of the trial: the spread of the ranks' wall-clock times when each was ready to issue the trial's first op (one host: one clock; across nodes it includes the hosts' clock offset)"),
    Column("last_rank", "Int64", "the rank that was ready last in this trial (a rank that is consistently last is a straggler)"),
    Column("host_issue_us", "float64", "events and graph timing: how long the host took to issue the trial's ops, per op in microseconds (host clock from just after the start event is recorded to just before the end event; the launches only, no synchronisation), the slowest rank's; empty for host timing (there the host clock is the measurement) and so for Gloo. time_us <= HOST_BOUND_FACTOR x this: the GPU waited for the host, so time_us is torch's per-call host cost, not link latency (comm_summary.csv's host_bound)"),
    Column("algbw_gbps", "float64", "size_bytes / time, in GB/s (1e9 B/s); empty for barrier"),
    Column("busbw_gbps", "float64", "algbw x the op's nccl-tests bus factor, in GB/s; empty for barrier"),
    Column("busiest_rank", "Int64", "all_to_all_v: the rank that sends or receives the most over its links (the diagonal excluded); empty for other ops"),
    Column("busiest_rank_bytes", "Int64", "all_to_all_v: the bytes that rank sends or receives to / from other ranks, whichever is larger"),
    Column("busiest_rank_time_us", "float64", "all_to_all_v: that rank's own time per op in this trial (busiest_rank_bytes / it = its link rate)"),
    Column("correct", "boolean", "output equal to the expected values on every rank, before warm-up and after the timed trials (empty if not applicable)"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)

COMM_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COMM_COLUMNS)

_RANK_KEYS = ("backend", "world_size", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes", "requested_bytes",
              "trial")
COMM_RANK_COLUMNS: tuple[Column, ...] = tuple(c for c in COMM_COLUMNS if c.name in _RANK_KEYS) + (
    Column("rank", "int64", "global rank"),
    Column("time_us", "float64", "this rank's time per op in this trial (its elapsed / iters)"),
    Column("arrival_us", "float64", "when this rank was ready to issue the trial's first op, after the first rank (µs, wall clock)"),
    Column("host_issue_us", "float64", "events and graph timing: how long this rank's host took to issue the trial's ops, per op in microseconds (no synchronisation inside); empty for host timing"),
)
COMM_RANK_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COMM_RANK_COLUMNS)


PAIRS_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "ranks in the job (every ordered pair of them is measured, one pair at a time)"),
    Column("nodes", "int64", "nodes of the job"),
    Column("dtype", "string", "element type of the buffers"),
    Column("mode", "string", "uni: src sends to dst, every other rank idle; bi: src and dst send to each other at once"),
    Column("src", "int64", "sending rank (bi: the lower rank of the pair)"),
    Column("dst", "int64", "receiving rank (bi: the higher rank)"),
    Column("src_host", "string", "hostname of src"),
    Column("dst_host", "string", "hostname of dst"),
    Column("src_gpu", "string", "GPU UUID of src ('cpu' under Gloo on CPU)"),
    Column("dst_gpu", "string", "GPU UUID of dst"),
    Column("size_bytes", "int64", "bytes sent by each sender per op"),
    Column("trial", "int64", "trial index, 0-based"),
    Column("iters", "int64", "back-to-back transfers timed in this trial"),
    Column("time_us", "float64", "time per transfer: the slower of the pair's two ranks' elapsed / iters"),
    Column("algbw_gbps", "float64", "bytes moved / time in GB/s (1e9 B/s): size_bytes (uni) or 2 x size_bytes (bi)"),
    Column("correct", "boolean", "the receiver(s) got exactly the sender's values after the timed transfers"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)
PAIRS_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in PAIRS_COLUMNS)


COMM = Contract("comm", COMM_COLUMNS, (("status", STATUSES), ("timing", TIMINGS), ("rank_agg", RANK_AGGS)),
                positive_when_ok="time_us",
                filled_when_missing=(("nodes", 1), ("traffic", "none"), ("requested_bytes", SameAs("size_bytes")),
                                     ("arrival_skew_us", None), ("last_rank", None), ("host_issue_us", None),
                                     ("busiest_rank", None), ("busiest_rank_bytes", None),
                                     ("busiest_rank_time_us", None)), job_rule="comm_job")
COMM_RANKS = Contract("comm_ranks", COMM_RANK_COLUMNS, (("timing", TIMINGS),), positive_when_ok="time_us",
                      filled_when_missing=(("traffic", "none"), ("requested_bytes", SameAs("size_bytes")),
                                          ("arrival_us", None), ("host_issue_us", None)), job_rule="comm_job")
PAIRS = Contract("pairs", PAIRS_COLUMNS, (("status", STATUSES), ("mode", PAIR_MODES)), positive_when_ok="time_us")


# The tables under tables/ as their readers take them (distbench.core.readers.read_table holds each
# file of the name to it): the columns the report, summary.json, the plots, the nccl-tests documents
# and the prediction index without asking whether they are there, and the measurements an ok row must
# hold. The barrier moves no bytes: its rows have a time and no bandwidth.
_NO_BYTES = ("op", ("barrier",))
_SUMMARY_COLUMNS = ("backend", "world_size", "op", "dtype", "nccl_env", "timing", "size_bytes", "time_us_median",
                    "busbw_gbps_median", "status")
# one rank moves no bytes between ranks either: its bus bandwidth is 0 by the bus factor, 2(n-1)/n
_NO_BUS = (_NO_BYTES, ("world_size", ("1",)))
_SUMMARY_POSITIVE = ("time_us_median", Positive("busbw_gbps_median", except_where=_NO_BUS),
                     Positive("algbw_gbps_median", except_where=(_NO_BYTES,)))
TABLES = register_tables(
    TableContract("comm_summary", _SUMMARY_COLUMNS, positive=_SUMMARY_POSITIVE),
    TableContract("comm_largest", _SUMMARY_COLUMNS, positive=_SUMMARY_POSITIVE),  # the summary's largest sizes
    TableContract("comm", ("backend", "world_size", "op", "size_bytes", "trial", "time_us", "status"),
                  positive=("time_us", Positive("busbw_gbps", except_where=_NO_BUS))),
)


def check_comm_frame(df) -> None:
    check_frame(COMM, df)


def check_comm_ranks_frame(df) -> None:
    check_frame(COMM_RANKS, df)


def read_comm_csv(path):
    return read_csv(COMM, path)


def read_comm_ranks_csv(path):
    return read_csv(COMM_RANKS, path)


def read_pairs_csv(path):
    return read_csv(PAIRS, path)


if __name__ == "__main__":
    print_tables(COMM, COMM_RANKS, PAIRS)
