"""The nodes family's CSV contract. nodes.csv: one row per (round, pair, op, direction, size, rank):
every rank's own median over the timed iterations. The harness writes it, aggregation checks it."""

from __future__ import annotations

from distbench.core.choices import STATUSES
from distbench.core.contract import (
    MESSAGE_COLUMN, STATUS_COLUMN, Column, Contract, TableContract, print_tables, read_csv, register_tables,
)

NODE_OPS = ("send_recv", "all_reduce")
DIRECTIONS = ("a_to_b", "b_to_a", "both")

NODES_COLUMNS: tuple[Column, ...] = (
    Column("round", "int64", "the round (distbench.nodes.schedule)"),
    Column("nodes", "int64", "nodes in the world (N)"),
    Column("backend", "string", "nccl or gloo"),
    Column("node_a", "string", "the pair's first node (host name, SLURM node name, or nodeK when simulated)"),
    Column("node_b", "string", "the pair's second node"),
    Column("node_a_index", "int64", "its index in the schedule"),
    Column("node_b_index", "int64", "its index in the schedule"),
    Column("op", "string", "send_recv (local rank i of one node to local rank i of the other) or all_reduce (the two nodes' ranks)"),
    Column("direction", "string", "send_recv: a_to_b or b_to_a; all_reduce: both"),
    Column("size_bytes", "int64", "bytes per transfer (per rank for all_reduce)"),
    Column("rank", "Int64", "global rank that recorded the row"),
    Column("node", "string", "the node this rank is on"),
    Column("local_rank", "Int64", "its rank within the node"),
    Column("iters", "Int64", "timed iterations"),
    Column("time_us", "float64", "median over the timed iterations, on this rank"),
    Column("time_us_p5", "float64", "5th percentile over the timed iterations"),
    Column("time_us_p95", "float64", "95th percentile over the timed iterations"),
    Column("algbw_gbps", "float64", "size / time, GB/s"),
    Column("busbw_gbps", "float64", "send_recv: algbw; all_reduce: algbw x 2(n-1)/n over the pair's n ranks"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)
NODES_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in NODES_COLUMNS)

NODES = Contract("nodes", NODES_COLUMNS, (("status", STATUSES), ("op", NODE_OPS), ("direction", DIRECTIONS)),
                 positive_when_ok="time_us", job_rule="nodes_round")


# The tables under tables/ as their readers take them (distbench.core.readers.read_table holds each
# file of the name to it): the columns the report and the plots index without asking whether they are
# there, and the measurements an ok row must hold. A pair's figures are not owed: a pair whose
# smallest or largest size failed has none at that size.
TABLES = register_tables(
    TableContract("nodes_scores", ("node", "pairs", "slow_pairs", "latency_score", "bandwidth_score", "state",
                                   "evidence")),
    TableContract("nodes_pairs", ("round", "node_a", "node_b", "latency_ratio", "bandwidth_ratio", "slow", "cause",
                                  "status", "message")),
    TableContract("nodes", ("round", "node_a", "node_b", "op", "size_bytes", "time_us", "busbw_gbps", "status"),
                  positive=("time_us", "busbw_gbps")),
)


def read_nodes_csv(path):
    return read_csv(NODES, path)


if __name__ == "__main__":
    print_tables(NODES)
