"""What each collective is, written once and torch-free: one `OpSpec` per op, as nccl-tests keeps
one file per op. It sits below the families because more than one measures collectives: the collective
sweeps, the node-pair rounds and the cost model all take an op's bus factor from here.

Every table that names an op reads it from here: the config schema's op enum
(distbench.pipeline.config.load_schema), the harness's bus bandwidth and its nccl-tests-style table
(type/redop/root), the node-pair rounds' bus bandwidth, the cost model's bus factors and modelled
ops (the alpha-beta cost model), the NCCL log names and the nccl-tests -J documents' fields. The torch
side (buffers, inputs, the call, the expected output) lives with the family that runs the ops, one
`TorchOp` per spec, looked up by the spec's name.

Adding a collective
-------------------
1. one `OpSpec(...)` entry in `SPECS` below (its place in the tuple is its place in every table,
   the config's default op list included);
2. its torch side: a `TorchOp(SPECS["name"], make, run[, make_inplace])` in `TORCH_OPS` of the
   ops module beside the harness that runs the collectives (docs/architecture.md names it).
The config schema (enum and default), the harness's --ops and table, the job's failure rows, the
NCCL log names, summary.json (redop/root) and predict's bus factors follow from the spec.
The cost model predicts the op when its spec gives `ring_hops`, the latency
term on a flat ring; without it the op is measured and reported but not predicted. Its
hierarchical (multi-node) form is op-specific: an op without one in the cost model's
cluster form is predicted within one node and on a flat ring across nodes. tests/core/test_spec.py fails if the spec and
the torch ops disagree. docs/architecture.md has this recipe, and tests/core/test_recipes.py follows it
through the workflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class OpSpec:
    name: str
    bus_factor: Callable[[int], float]  # world size -> busbw / algbw (nccl-tests doc/PERFORMANCE.md)
    split_across_ranks: bool  # the buffer is world_size chunks: count rounds down (nccl-tests' `size`)
    nccl_tests_binary: str | None = None  # nccl-tests' program for this op (None: nccl-tests has none)
    nccl_name: str | None = None  # the op as NCCL's INFO/TUNING log lines name it (None: not a NCCL collective)
    redop: str = "none"  # the reduction nccl-tests prints (sum), "none" for ops that reduce nothing
    root: int = -1  # the root nccl-tests prints (broadcast: 0), -1 for rootless ops
    always_inplace: bool = False  # torch's API writes the output over the input (all_reduce, broadcast)
    has_inplace_variant: bool = False  # nccl-tests' in-place form exists in torch (all_gather, reduce_scatter)
    min_world_size: int = 1
    graph_capturable: bool = True  # can run inside a CUDA graph (barrier cannot)
    moves_data: bool = True  # barrier: latency only, no algbw/busbw
    takes_traffic: bool = False  # all_to_all_v: one point per traffic matrix (the traffic matrices)
    # The alpha-beta cost model's latency term: link latencies (hops) one op pays on a flat ring of n
    # ranks (the cost model's section 2). None: the model does not predict this op.
    ring_hops: Callable[[int], float] | None = None

    @property
    def reduces(self) -> bool:
        return self.redop != "none"

    @property
    def modelled(self) -> bool:
        """The alpha-beta cost model fits and predicts it: it moves data, its cost is not a traffic
        matrix's, and it has a latency term."""
        return self.moves_data and not self.takes_traffic and self.ring_hops is not None


def _ring(n: int) -> float:
    return (n - 1) / n


def _hops(n: int) -> float:
    return n - 1.0  # a ring's n-1 steps (all_gather, reduce_scatter), n-1 pairwise exchanges
    # (all_to_all), a pipelined chain's n-1 hops to fill (broadcast)


SPECS: dict[str, OpSpec] = {s.name: s for s in (
    # ring all_reduce: 2(n-1) steps of S/n each (reduce-scatter then all-gather)
    OpSpec("all_reduce", lambda n: 2 * (n - 1) / n, False, "all_reduce_perf", "AllReduce", redop="sum",
           always_inplace=True, ring_hops=lambda n: 2.0 * (n - 1)),
    OpSpec("all_gather", _ring, True, "all_gather_perf", "AllGather", has_inplace_variant=True, ring_hops=_hops),
    OpSpec("reduce_scatter", _ring, True, "reduce_scatter_perf", "ReduceScatter", redop="sum",
           has_inplace_variant=True, ring_hops=_hops),
    OpSpec("broadcast", lambda n: 1.0, False, "broadcast_perf", "Broadcast", root=0, always_inplace=True,
           ring_hops=_hops),
    # NCCL runs all_to_all as grouped send/recv: no collective name of its own in the logs
    OpSpec("all_to_all", _ring, True, "alltoall_perf", ring_hops=_hops),
    # busbw = algbw x (n-1)/n as all_to_all, with size = the mean bytes a rank sends: a skewed
    # matrix moves the same bytes in all, and the busiest rank's own rate is in busiest_rank_*.
    OpSpec("all_to_all_v", _ring, True, takes_traffic=True),
    OpSpec("send_recv", lambda n: 1.0, False, "sendrecv_perf", min_world_size=2, ring_hops=lambda n: 1.0),  # one hop
    OpSpec("barrier", lambda n: float("nan"), False, graph_capturable=False, moves_data=False),
)}
OPS: tuple[str, ...] = tuple(SPECS)  # every op, in the order of the config's default and of the tables
NCCL_NAMES: dict[str, str] = {s.nccl_name: s.name for s in SPECS.values() if s.nccl_name}  # NCCL log name -> op


def placements(spec: OpSpec, requested: list[bool]) -> list[bool]:
    """The in-place variants to run: torch fixes all_reduce/broadcast in place; ops without an
    in-place form (all_to_all, send_recv, barrier) run out of place only."""
    if spec.always_inplace:
        return [True]
    if not spec.has_inplace_variant:
        return [False]
    return list(dict.fromkeys(requested)) or [False]


def element_count(spec: OpSpec, size_bytes: int, elem_bytes: int, world_size: int) -> int:
    """Elements in the measured buffer; split ops round down to a multiple of world_size (as nccl-tests)."""
    if not spec.moves_data:
        return 0
    count = size_bytes // elem_bytes
    if spec.split_across_ranks:
        count -= count % world_size
    return count
