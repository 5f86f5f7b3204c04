"""One round of node-pair measurements: one torchrun world over every node (one agent per node),
one process group per pair of the round, every pair measuring at the same time.

Run alone (4 simulated nodes on this host, Gloo):
    torchrun --nnodes=4 --nproc_per_node=1 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:29555 \
        --rdzv-id=r0 -m distbench.nodes --backend gloo --nodes 4 --simulated true --pairs 0-3,1-2 \
        --sizes 8,65536 --out nodes.csv   # (start the same command 4 times: one agent per node)

Which node a rank is on: its agent's node name (SLURMD_NODENAME under SLURM, else the host name),
the nodes numbered in sorted order; simulated nodes (or nodes whose names repeat, as with the local
launcher) are numbered by their agent's GROUP_RANK and named node0, node1, ... Every rank creates
every pair's group in the same order (torch.distributed.new_group, members-only synchronization);
then each pair, per size: send/recv from local rank i of node a to local rank i of node b, then
back, then an all_reduce over the two nodes' ranks; each timed iteration starts after a barrier of
the pair, and every rank records its own median, p5 and p95. Rank 0 gathers the rows.

Test-only delays (CPU tests of the verdict, never set in a real run): DISTBENCH_TEST_SLOW_NODE=<k>
makes node k's ranks sleep inside every timed iteration; DISTBENCH_TEST_SLOW_LINK=<a>-<b> does so
only while nodes a and b are paired; DISTBENCH_TEST_SLOW_US sets the sleep (default 20000).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import sys
import time

from distbench.core.choices import BACKENDS
from distbench.core.io import atomic_write_text, csv_text
from distbench.core.ops_spec import SPECS
from distbench.launch import progress
from distbench.launch.timeline import mark
from distbench.nodes.contract import NODES_COLUMN_NAMES
from distbench.nodes.schedule import parse_pairs

SLOW_NODE_ENV, SLOW_LINK_ENV, SLOW_US_ENV = "DISTBENCH_TEST_SLOW_NODE", "DISTBENCH_TEST_SLOW_LINK", "DISTBENCH_TEST_SLOW_US"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="distbench.nodes", description=__doc__.split("\n")[0])
    p.add_argument("--params", help="a round's job.json, as its rule writes it: its values, read as JSON "
                                    "(distbench.nodes.job.ROUND_RECORD); only the outputs come from flags")
    p.add_argument("--backend", choices=BACKENDS)
    p.add_argument("--round", type=int, default=0)
    p.add_argument("--nodes", type=int)
    p.add_argument("--pairs", help="the round's pairs of node indices: 0-3,1-2")
    p.add_argument("--simulated", choices=("true", "false"), default="false")
    p.add_argument("--sizes", default="8,1048576", help="bytes per transfer, comma-separated")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--op-timeout-s", type=int, default=300)
    p.add_argument("--out", required=True)
    p.add_argument("--placement-out", default=None)
    args = p.parse_args(argv)
    if args.params:  # checked against the round's record, then set as typed: nothing parsed again
        from distbench.launch.job_record import read_for_ranks
        from distbench.launch.job_values import apply
        from distbench.nodes.job import ROUND_RECORD
        from distbench.workloads.job_fields import config_schema

        return apply(args, read_for_ranks(args.params, ROUND_RECORD, config_schema()).arguments(ROUND_RECORD))
    missing = [f"--{k}" for k in ("backend", "nodes", "pairs") if getattr(args, k) is None]
    if missing:
        p.error(f"{', '.join(missing)} (or --params) required")
    args.simulated = args.simulated == "true"
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        p.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    return args


def slow_us_for(node: int, pair: tuple[int, int] | None, env=os.environ) -> float:
    """The test-only delay this rank adds inside each timed iteration (0: none)."""
    us = float(env.get(SLOW_US_ENV, "20000"))
    if env.get(SLOW_NODE_ENV, "") not in ("", None) and int(env[SLOW_NODE_ENV]) == node:
        return us
    link = env.get(SLOW_LINK_ENV, "")
    if link and pair is not None and tuple(sorted(int(x) for x in link.split("-"))) == tuple(sorted(pair)):
        return us
    return 0.0


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    k = (len(s) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Round:
    def __init__(self, args):
        mark("torch_import")
        import torch
        import torch.distributed as dist

        mark("torch_imported")
        self.torch, self.dist, self.args = torch, dist, args
        self.rank, self.world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.per_node = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        self.group_rank = int(os.environ.get("GROUP_RANK", 0))
        self.simulated = args.simulated
        if args.backend == "nccl":
            from distbench.launch.failure import HOST_UNFIT

            if not torch.cuda.is_available():
                raise SystemExit(f"distbench error: {HOST_UNFIT}: backend nccl needs CUDA on this host")
            # simulated nodes share this host's GPUs: each rank its own, by global rank
            index = (self.group_rank * self.per_node + self.local_rank) if self.simulated else self.local_rank
            if index >= torch.cuda.device_count():
                raise SystemExit(f"distbench error: {HOST_UNFIT}: rank {self.rank} needs GPU {index}, "
                                 f"{torch.cuda.device_count()} visible")
            self.device = torch.device("cuda", index)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        kw = {"device_id": self.device} if args.backend == "nccl" else {}
        dist.init_process_group(args.backend, timeout=dt.timedelta(seconds=args.op_timeout_s), **kw)
        self.ctrl = dist.new_group(backend="gloo") if args.backend == "nccl" else None
        mark("pg_ready")

    def locate(self):
        """Every rank's node index and name; the ranks of each node (by local rank)."""
        name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        me = (name, self.group_rank, self.local_rank, self.rank)
        everyone = [None] * self.world
        self.dist.all_gather_object(everyone, me, group=self.ctrl)
        names = sorted({e[0] for e in everyone})
        by_group = len(names) != self.args.nodes or self.simulated
        if by_group:  # names repeat (one host): the agents' group ranks number the nodes
            key = {e[3]: e[1] for e in everyone}
            self.names = [f"node{k}" for k in range(self.args.nodes)]
        else:
            key = {e[3]: names.index(e[0]) for e in everyone}
            self.names = names
        self.node_of = key
        self.ranks_of = {k: sorted((e[2], e[3]) for e in everyone if key[e[3]] == k) for k in range(self.args.nodes)}
        self.node = key[self.rank]
        return everyone

    def write_placement(self, everyone) -> None:
        if self.rank == 0 and self.args.placement_out:
            from distbench.core.io import atomic_write_json

            ranks = [{"rank": e[3], "local_rank": e[2], "hostname": e[0], "group_rank": e[1],
                      "node": self.names[self.node_of[e[3]]]} for e in sorted(everyone, key=lambda e: e[3])]
            atomic_write_json(self.args.placement_out, {"ranks": ranks, "error": None})

    def run(self) -> list[dict]:
        a = self.args
        pairs = parse_pairs(a.pairs)
        groups = {}
        for pair in pairs:  # every rank, every group, the same order
            members = sorted(r for k in pair for _, r in self.ranks_of[k])
            groups[pair] = self.dist.new_group(members, use_local_synchronization=True)
        mine = next((p for p in pairs if self.node in p), None)
        rows = []
        if mine is not None:
            rows = self.measure(mine, groups[mine], a.sizes)
        gathered = [None] * self.world if self.rank == 0 else None
        self.dist.gather_object(rows, gathered, dst=0, group=self.ctrl)
        return [r for part in gathered for r in part] if self.rank == 0 else []

    def measure(self, pair, group, sizes) -> list[dict]:
        torch, dist, a = self.torch, self.dist, self.args
        na, nb = pair
        peer_node = nb if self.node == na else na
        peer = dict(self.ranks_of[peer_node]).get(self.local_rank)
        slow_s = slow_us_for(self.node, pair) / 1e6
        n_pair = len(self.ranks_of[na]) + len(self.ranks_of[nb])
        rows = []
        for size in sizes:
            numel = max(1, size // 4)
            buf = torch.ones(numel, dtype=torch.float32, device=self.device)
            for op, direction in (("send_recv", "a_to_b"), ("send_recv", "b_to_a"), ("all_reduce", "both")):
                sender = na if direction == "a_to_b" else nb

                def once():
                    if op == "all_reduce":
                        dist.all_reduce(buf, group=group)
                    elif peer is None:  # the other node has fewer ranks: nothing to pair with
                        pass
                    elif self.node == sender:
                        dist.send(buf, dst=peer, group=group)
                    else:
                        dist.recv(buf, src=peer, group=group)

                times = []
                beacon = progress.beacon(self.rank)
                beacon.at(f"round {a.round}: {op} {direction} {size} B with node {self.names[peer_node]}")
                for i in range(a.warmup + a.iters):
                    dist.barrier(group=group)
                    self.sync()
                    t0 = time.perf_counter()
                    if slow_s:
                        time.sleep(slow_s)
                    once()
                    self.sync()
                    if i >= a.warmup:
                        times.append((time.perf_counter() - t0) * 1e6)
                    beacon.done()  # after the clock is read
                med = percentile(times, 0.5)
                algbw = size / (med * 1e-6) / 1e9
                bus = algbw * SPECS[op].bus_factor(n_pair)  # nccl-tests' factor, as the comm jobs
                rows.append({"round": a.round, "nodes": a.nodes, "backend": a.backend,
                             "node_a": self.names[na], "node_b": self.names[nb], "node_a_index": na,
                             "node_b_index": nb, "op": op, "direction": direction, "size_bytes": numel * 4,
                             "rank": self.rank, "node": self.names[self.node], "local_rank": self.local_rank,
                             "iters": a.iters, "time_us": med, "time_us_p5": percentile(times, 0.05),
                             "time_us_p95": percentile(times, 0.95), "algbw_gbps": algbw, "busbw_gbps": bus,
                             "status": "ok", "message": ""})
        return rows

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)


def main(argv=None) -> int:
    args = parse_args(argv)
    r = Round(args)
    everyone = r.locate()
    r.write_placement(everyone)
    if r.rank == 0:
        print(f"distbench: round {args.round}: pairs {args.pairs} over {args.nodes} nodes "
              f"({', '.join(r.names)})", file=sys.stderr, flush=True)
    rows = r.run()
    if r.rank == 0:
        atomic_write_text(args.out, csv_text(rows, NODES_COLUMN_NAMES))
    r.dist.barrier(group=r.ctrl)
    r.dist.destroy_process_group()
    return 0
