"""NCCL's own cost model of a collective, per algorithm and protocol (nccl_model section 1).

NCCL estimates every (algorithm, protocol) pair as time = latency + nBytes / (1000 algBw) (us, bytes,
GB/s) and runs the cheapest (src/graph/tuning.cc `ncclTopoTuneModel` builds the latencies and
bandwidths; `ncclTopoGetAlgoTime` the time; src/enqueue.cc `topoGetAlgoInfo` takes the minimum).
nBytes is nccl-tests' size: the whole buffer for all_reduce and broadcast, the full output of
all_gather and the full input of reduce_scatter (enqueue.cc `ncclFuncMaxSendRecvCount`; the
"Bytes -> Algo" TUNING log line prints the per-rank count instead for those two).

    busBw     = nChannels x bw per channel of the algorithm's graph (the topology search)
    ring LL     min(llMaxBw, busBw / 2)          LL sends a flag with every 8 bytes
    ring LL128  min(0.92 busBw, nChannels x perChMaxRingLL128Bw)   120 of every 128 bytes are data
    tree        min(0.92 busBw, nChannels x perChMaxTreeBw) (all_reduce), then LL: / 3.8 (capped at
                llMaxBw), LL128: x 7/9 on one node (120/128 across nodes), capped per channel
    algBw     = busBw x nRanks / nsteps (ring: nsteps 2(n-1) all_reduce, n-1 all_gather and
                reduce_scatter, n broadcast) or busBw / 2 (tree)
    latency   = baseLat[algo][proto] + nsteps x hwLat[link][algo][proto] (ring; broadcast on a
                graph with the same channels both ways pays hwLat once), tree all_reduce:
                baseLat + 2 ((n/nodes - 1) hwLat_intra + log2(nodes) hwLat_net)

NVLS (all_reduce on NVSwitch with multicast): busBw = nChannels x min(2 x 0.85 (nCh-1)/nCh bwIntra,
bwInter), latency = hwLat NVLS (25 us on NVLink), no base latency. LL128 is enabled by default only
where the graph stays on NVLink (Hopper and newer also over C2C/PXN); LL and Simple always.

Constants: NCCL 2.28.9 (the version every committed GPU run used), src/graph/tuning.cc at tag
v2.28.9-1, in nccl_constants (line numbers there). A table printed by that version (2x H200 NV18) is
the fixture tests/fixtures/nccl_tuning/h200x2-nccl-2.28.9.txt; `tuning_table` with that node's graph
(ring 12 channels x 30 GB/s, tree 12 x 60) reproduces it to its printed digit.

Analysis code: numpy and the standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from distbench.predict.nccl_channels import COMM_CHANNELS
from distbench.predict.nccl_constants import (ARCHS, BASE_LAT, HW_LAT, LL128_DATA_FRACTION, LL_FLAG_FRACTION, LL_MAX_BW,  # noqa: F401
                                              NVLS_EFFICIENCY, PER_CH_MAX_RING_LL128_BW, PER_CH_MAX_TREE_BW,
                                              PER_CH_MAX_TREE_LL128_BW, TREE_ALLREDUCE_EFF, TREE_CORRECTION,
                                              TREE_LL128_ONE_NODE, TREE_LL_DIVISOR)

NAN = float("nan")
PROTOCOLS = ("LL", "LL128", "Simple")
ALGORITHMS = ("tree", "ring", "nvls")
NCCL_VERSION = "2.28.9"

# Collectives NCCL tunes (reduce shares broadcast's model); the point-to-point ones are modelled apart.
NCCL_OPS = ("broadcast", "reduce", "all_gather", "reduce_scatter", "all_reduce")
P2P_OPS = ("all_to_all", "send_recv")


@dataclass(frozen=True)
class NcclTopo:
    """What NCCL's tuning reads of a communicator: ranks, nodes, GPU generation, the intra-node link,
    and per algorithm the graph's channels and bandwidth per channel (GB/s; the INFO log prints them
    as "Pattern P, crossNic C, nChannels N, bw intra/inter": pattern 4 ring, 1-3 tree, 5 NVLS).

    The defaults are those NCCL 2.28.9 found on our 2x H200 NV18 node (the fixture's log): ring 12 x
    30 GB/s, tree 12 x 60. On an NVSwitch node each GPU keeps its 18 links to the switches whatever
    the rank count, so the same graph stands for 4 and 8 ranks unless a log says otherwise."""

    n_ranks: int
    n_nodes: int = 1
    arch: str = "hopper"
    intra: str = "nvlink"  # "nvlink" or "pci"
    ring_channels: int = 12
    ring_bw: float = 30.0
    tree_channels: int = 12
    tree_bw: float = 60.0
    ring_inter_bw: float | None = None  # bwInter per channel when nodes > 2 (None: = bw)
    tree_inter_bw: float | None = None
    same_channels: bool = True  # the ring graph's sameChannels (broadcast pays hwLat once)
    tree_pattern_tree: bool = False  # maxTreePattern == NCCL_TOPO_PATTERN_TREE: tree bw x 0.85
    nvls_channels: int = 0  # 0: NVLS off (NCCL_NVLS_ENABLE=0, or no NVSwitch multicast)
    nvls_bw_intra: float = 0.0
    nvls_bw_inter: float = 0.0
    ll128: bool | None = None  # None: NCCL's default (on where the graph stays on NVLink)
    latency_inter: float = 0.0  # the graph's latencyInter (network only)
    comm_channels: int = COMM_CHANNELS  # "N coll channels": the ring graph's, duplicated

    def with_ranks(self, n_ranks: int) -> "NcclTopo":
        """The same node at n_ranks. The 2-rank tree graph is one link used both ways (60 GB/s per
        channel on H200, twice the ring's); a chain through more GPUs loads each GPU's links as the
        ring does, so from 3 ranks on one node the tree's bandwidth per channel is taken as the ring's."""
        n = int(n_ranks)
        if self.n_nodes == 1 and n > 2 and self.tree_bw > self.ring_bw:
            return replace(self, n_ranks=n, tree_bw=self.ring_bw)
        return replace(self, n_ranks=n)


def _nsteps(op: str, n: int) -> int:
    """tuning.cc line 268: the ring's steps."""
    if op == "all_reduce":
        return 2 * (n - 1)
    if op in ("all_gather", "reduce_scatter"):
        return n - 1
    return n


def _index2(n_nodes: int) -> int:
    return n_nodes - 1 if n_nodes <= 2 else 2


def tuning_table(topo: NcclTopo, ops=NCCL_OPS) -> dict:
    """{(op, algo, proto): (latency_us, algbw_gbps)} as NCCL's ncclTopoTuneModel fills it for a
    communicator like `topo` (section 1); a disabled pair has bandwidth 0."""
    n, nodes = int(topo.n_ranks), int(topo.n_nodes)
    if topo.arch not in ARCHS:
        raise ValueError(f"unknown arch {topo.arch!r} (one of {', '.join(ARCHS)})")
    i2 = _index2(nodes)
    ll_max = LL_MAX_BW[topo.arch][i2] if nodes == 1 else LL_MAX_BW["volta"][i2]  # Intel CPUs across nodes
    ppn = n / nodes
    intra_hw = topo.intra
    hw = intra_hw if nodes == 1 else "net"
    ll128_on = topo.ll128 if topo.ll128 is not None else (topo.intra == "nvlink")
    out = {}
    for op in ops:
        nsteps = _nsteps(op, n)
        for a in ALGORITHMS:
            for pi, p in enumerate(PROTOCOLS):
                key = (op, a, p)
                if n <= 1:
                    out[key] = (0.0, 0.0)
                    continue
                allowed = (a == "ring" or (a == "tree" and op == "all_reduce")
                           or (a == "nvls" and op in ("all_reduce", "all_gather", "reduce_scatter") and p == "Simple"
                               and topo.nvls_channels >= 2 and (nodes == 1 or op == "all_reduce")))
                if not allowed:
                    out[key] = (0.0, 0.0)
                    continue
                if a == "ring":
                    ch, bw = topo.ring_channels, (topo.ring_bw if nodes <= 2 or topo.ring_inter_bw is None
                                                  else topo.ring_inter_bw)
                elif a == "tree":
                    ch, bw = topo.tree_channels, (topo.tree_bw if nodes <= 2 or topo.tree_inter_bw is None
                                                  else topo.tree_inter_bw)
                else:
                    ch = topo.nvls_channels
                    intra_bw = topo.nvls_bw_intra * NVLS_EFFICIENCY[topo.arch] * (ch - 1) / ch
                    intra_bw *= 2.0 if op == "all_reduce" else (ppn - 1) / ppn
                    bw = min(intra_bw, topo.nvls_bw_inter)
                bus = ch * bw
                if a == "ring" and p == "LL":
                    bus = min(ll_max, bus * LL_FLAG_FRACTION)
                if a == "ring" and p == "LL128":
                    bus = min(bus * LL128_DATA_FRACTION, ch * PER_CH_MAX_RING_LL128_BW[topo.arch][i2])
                if a == "tree" and op == "all_reduce":
                    bus = min(bus * TREE_ALLREDUCE_EFF, ch * PER_CH_MAX_TREE_BW[topo.arch][i2])
                if a == "tree" and p == "LL":
                    bus = min(bus / TREE_LL_DIVISOR, ll_max)
                if a == "tree" and p == "LL128":
                    bus = min(bus * (TREE_LL128_ONE_NODE if nodes == 1 else 120.0 / 128.0),
                              ch * PER_CH_MAX_TREE_LL128_BW[topo.arch][i2])
                if a == "tree" and topo.tree_pattern_tree:
                    bus *= 0.85
                if p == "LL128" and not ll128_on:
                    bus = 0.0
                if not (a != "ring" and op in ("all_gather", "reduce_scatter")):
                    bus *= (n / nsteps) if a in ("ring", "nvls") else 0.5
                # latencies (lines 354-396)
                intra_lat = HW_LAT[intra_hw][a][pi]
                inter_lat = (HW_LAT["net"]["tree"][pi] if ppn == 1 else HW_LAT["net"][a][pi]) + topo.latency_inter
                if p == "Simple":
                    inter_lat += topo.latency_inter
                lat = BASE_LAT[a][pi]
                if a == "ring":
                    step = HW_LAT[hw][a][pi]
                    if op in ("broadcast", "reduce"):
                        if topo.same_channels:
                            lat += step
                        else:
                            lat += nsteps * (HW_LAT[hw]["tree"][pi] if p == "Simple" else step)
                    else:
                        net_overhead = (3.0 if p == "Simple" else 1.0) if nodes > 1 else 0.0
                        intra_lat = max(intra_lat, net_overhead)
                        inter_steps = 0 if nodes == 1 else (2 * (nodes - 1) if op == "all_reduce" else nodes - 1)
                        lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
                elif a == "tree":
                    if op == "all_reduce":
                        lat += 2 * ((n // nodes - 1) * intra_lat + int(math.log2(nodes)) * inter_lat)
                else:  # nvls
                    lat = intra_lat + (inter_lat if nodes > 1 else 0.0)
                out[key] = (float(lat), float(bus))
    return out


def nccl_time(table: dict, op: str, algo: str, proto: str, nbytes, n_nodes: int = 1):
    """NCCL's estimate (us) of one op of `nbytes` with (algo, proto): ncclTopoGetAlgoTime (tuning.cc
    line 585-600): latency + nBytes / (1000 algBw), tree all_reduce's bandwidth times its correction
    factor by size. NaN where the pair is disabled."""
    lat, bw = table[(_tune_op(op), algo, proto)]
    s = np.asarray(nbytes, dtype=float)
    if bw <= 0:
        out = np.full(s.shape, NAN)
    else:
        eff = np.full(s.shape, bw)
        if algo == "tree" and _tune_op(op) == "all_reduce":
            eff = bw * _tree_factor(proto, s)
        out = lat + s / (1000.0 * eff)
    return float(out) if np.ndim(out) == 0 else out


def _tree_factor(proto: str, s: np.ndarray) -> np.ndarray:
    row = TREE_CORRECTION[PROTOCOLS.index(proto)]
    with np.errstate(divide="ignore"):
        log = np.floor(np.log2(np.maximum(s, 1) / 64.0)).astype(int)
    f = np.ones_like(s, dtype=float)
    ok = (log >= 0) & (log < len(row))
    f[ok] = np.asarray(row)[log[ok]]
    return f


def _tune_op(op: str) -> str:
    return "reduce" if op == "reduce" else op


def nccl_choice(table: dict, op: str, nbytes, algorithms=ALGORITHMS):
    """NCCL's pick at each size: (algos, protos, times) arrays (topoGetAlgoInfo: the least estimated
    time over the enabled pairs, first in NCCL's order tree, ring, ..., nvls on a tie)."""
    s = np.atleast_1d(np.asarray(nbytes, dtype=float))
    best_t = np.full(s.shape, np.inf)
    best_a = np.array([""] * len(s), dtype=object)
    best_p = np.array([""] * len(s), dtype=object)
    for a in ALGORITHMS:  # NCCL's loop order: tree, ring, (collnet), nvls
        if a not in algorithms:
            continue
        for p in PROTOCOLS:
            t = np.atleast_1d(nccl_time(table, op, a, p, s))
            better = np.isfinite(t) & (t < best_t)
            best_t = np.where(better, t, best_t)
            best_a[better] = a
            best_p[better] = p
    return best_a, best_p, best_t
