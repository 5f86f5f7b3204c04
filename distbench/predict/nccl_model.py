"""NCCL's own cost model of a collective, per algorithm and protocol, and a version of it calibrated
on a node's measured sweep.

1. NCCL's model (`tuning_table`, `nccl_time`, `nccl_choice`)
-------------------------------------------------------------
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

2. The calibrated model (`fit_calibrated`, `CalibratedComm.predict`)
--------------------------------------------------------------------
NCCL's figures are its estimates, not the times measured through a framework: the measured
small-size floor includes the harness, and Simple's measured start-up is larger than its modelled
one. So each protocol p gets, from the measured sweep at one world size n0:

    t_p(S, n) = F_p + L_p(n) + S / (eta_p algBw_p(n) c(S, n)) + phi_p chunk(S, n) / (eta_p busBw_p)

with L_p and algBw_p NCCL's own (section 1, at n ranks), c(S, n) the share of the communicator's
channels NCCL runs a collective of S bytes on (nccl_channels: its threadThreshold ramp and cells,
which reproduce the log's channel{Lo..Hi} at all 112 logged sizes), chunk(S, n) the bytes of one
ring Simple chunk over all channels (the size / n up to one loop, constant beyond: nccl_channels
section 2) and phi_p the pipeline fill in chunks. Simple's eta is the slope over the sizes past one
loop at n0 (where the fill no longer grows: the asymptote is the top sizes', not a compromise with
the mid sizes), F and phi the relative least squares of the rest over its sizes; with fewer than two
sizes past one loop, or for the point-to-point ops, phi = 0 and eta, F are fitted together. The other
protocols: F_p and eta_p on the sizes where NCCL's choice at n0 ran p; where those sizes do not pin
the bandwidth (the bandwidth term under a third of the time at the largest), or NCCL never ran p at
n0 (LL128 on 2 ranks), eta_p and F_p are Simple's. A timing floor (events timing: the host's issue
rate) is kept as max(floor, t): the median of the sizes <= 64 KiB; sizes within 25% of it fit no
protocol.

At n ranks the protocol and algorithm are NCCL's choice from its own table at n (the same graph),
the time is that protocol's t_p(S, n): the latency grows by NCCL's per-step hwLat, the channel ramp
and the loop are NCCL's at n, the bus bandwidth stays that of n0. What this cannot know from n0
alone: a bus bandwidth that itself changes with n (all_gather and reduce_scatter at 2 ranks are a
single exchange), p2p-channel effects (send_recv) and a host floor that grows with n. all_to_all and
send_recv (grouped point-to-point, no protocol choice here) use Simple's form with a pure ring of
n-1 steps (all_to_all) or one step (send_recv).

Analysis code: numpy and the standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from distbench.predict.nccl_channels import COMM_CHANNELS, channel_share, chunk_bytes, fit_top_simple, loop_bytes
from distbench.predict.nccl_channels import rel_lsq as _rel_lsq
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


# ================================================================ section 2: calibrated on a measured sweep
FLOOR_BYTES = 64 * 1024  # sizes that set the timing floor
FLOOR_MARGIN = 1.25  # sizes within 25% of the floor fit no protocol
PIN_FRACTION = 1 / 3  # a protocol's bandwidth is pinned when S/bw is at least this share of its largest time


@dataclass(frozen=True)
class ProtoFit:
    """One protocol's calibration: F (us) beyond NCCL's latency, eta: measured / NCCL bandwidth,
    how many sizes fitted it and whether they pinned the bandwidth (else Simple's was used)."""

    extra_us: float
    eta: float
    n_points: int = 0
    pinned: bool = False
    source: str = "fit"  # "fit" or "simple" (borrowed)
    phi: float = 0.0  # the ring pipeline's fill, in chunks (Simple)


@dataclass(frozen=True)
class CalibratedComm:
    """A series calibrated at n0 ranks (section 2): per protocol its ProtoFit, the timing floor and
    NCCL's topology inputs."""

    op: str
    n0: int
    topo: NcclTopo
    protos: dict
    floor_us: float
    algorithms: tuple = ("tree", "ring")
    fitted_sizes: tuple = field(default=(), repr=False)

    def table(self, n: int) -> dict:
        """NCCL's own table at n ranks (what it chooses from)."""
        return op_table(self.op, self.topo.with_ranks(n))

    def choice(self, sizes, n: int):
        """NCCL's (algo, proto) per size at n ranks, from its own table."""
        return choose(self.op, self.table(n), sizes, n, self.algorithms)

    def predict(self, sizes, n: int) -> dict:
        """{'time_us', 'algorithm', 'protocol'} arrays at n ranks."""
        s = np.atleast_1d(np.asarray(sizes, dtype=float))
        algos, protos, _ = self.choice(s, n)
        cal = calib_table(self.op, self.topo.with_ranks(n))
        t = np.array([self._time(cal, a, p, x, n) for a, p, x in zip(algos, protos, s)])
        floor = self.floor_us + (_min_lat(cal) - _min_lat(calib_table(self.op, self.topo.with_ranks(self.n0))))
        return {"time_us": np.maximum(t, floor), "algorithm": algos, "protocol": protos}

    def with_eta(self, eta_simple: float, protocols=PROTOCOLS) -> "CalibratedComm":
        """The same calibration with Simple's bandwidth efficiency set to eta_simple and that of the
        other `protocols` scaled by the same factor (the self-check's oracle-bandwidth controls: the
        start-ups and NCCL's protocol ratios are kept, only the asymptote changes)."""
        r = float(eta_simple) / self.protos["Simple"].eta
        return replace(self, protos={p: replace(f, eta=f.eta * r) if p in protocols or p == "Simple" else f
                                     for p, f in self.protos.items()})

    def with_startup_shift(self, delta_us: float) -> "CalibratedComm":
        """The same calibration with every protocol's start-up F and the timing floor moved by
        delta_us (the self-check's oracle-latency control)."""
        d = float(delta_us)
        return replace(self, floor_us=self.floor_us + d,
                       protos={p: replace(f, extra_us=f.extra_us + d) for p, f in self.protos.items()})

    def _time(self, cal, a, p, s, n):
        pf = self.protos[p]
        lat, bw = cal[(self.op, a, p)]
        topo = self.topo.with_ranks(n)
        return (pf.extra_us + lat + _bw_time(self.op, topo, a, p, s, bw) / pf.eta
                + pf.phi * _fill_time(self.op, topo, a, p, s, bw) / pf.eta)


P2P_LL_MAX_BYTES = 16384  # enqueue.cc line 779, NCCL_P2P_LL_THRESHOLD: LL up to 16 KiB per peer and channel


def choose(op: str, tab: dict, sizes, n: int, algorithms=ALGORITHMS):
    """NCCL's (algos, protos, times) per size: nccl_choice for the collectives; for the
    point-to-point ops NCCL's own rule (enqueue.cc line 821): LL while the bytes per peer stay within
    NCCL_P2P_LL_THRESHOLD (taken for one channel), else Simple."""
    if op not in P2P_OPS:
        return nccl_choice(tab, op, sizes, algorithms)
    s = np.atleast_1d(np.asarray(sizes, dtype=float))
    per_peer = s / n if op == "all_to_all" else s
    protos = np.where(per_peer <= P2P_LL_MAX_BYTES, "LL", "Simple").astype(object)
    times = np.array([nccl_time(tab, op, "ring", p, x) for p, x in zip(protos, s)])
    return np.array(["ring"] * len(s), dtype=object), protos, times


def op_table(op: str, topo: NcclTopo) -> dict:
    """NCCL's (latency, algBw) per (op, algo, proto) for `op`: tuning_table for the collectives; for
    all_to_all and send_recv (grouped point-to-point, no tuning table in NCCL) a ring-like stand-in:
    LL and Simple at the ring graph's bus bandwidth (LL: its flag halving), latency base + steps x
    hwLat (all_to_all n-1 steps, send_recv 1) and algBw = bus / the share of the buffer each rank
    sends ((n-1)/n, 1)."""
    if op not in P2P_OPS:
        return tuning_table(topo, ops=(op,))
    n = int(topo.n_ranks)
    tab = {}
    ring = tuning_table(topo, ops=("all_reduce",))
    for pi, p in enumerate(PROTOCOLS):
        for a in ALGORITHMS:
            tab[(op, a, p)] = (0.0, 0.0)
        if n <= 1 or p == "LL128":
            continue
        lat_ar, bw_ar = ring[("all_reduce", "ring", p)]
        bus = bw_ar * _nsteps("all_reduce", n) / n
        steps = n - 1 if op == "all_to_all" else 1
        share = (n - 1) / n if op == "all_to_all" else 1.0
        tab[(op, "ring", p)] = (BASE_LAT["ring"][pi] + steps * HW_LAT[topo.intra]["ring"][pi], bus / share)
    return tab


def calib_table(op: str, topo: NcclTopo) -> dict:
    """The table the calibrated times use: NCCL's, except that a ring broadcast's latency counts its
    n-1 hops (NCCL's model pays hwLat once on a graph with the same channels both ways, which leaves
    the measured growth from 2 to 4 ranks unexplained: 7.8 -> 10.8 us on H200, graph timing)."""
    tab = op_table(op, topo)
    if op == "broadcast" and topo.n_ranks > 1:
        for pi, p in enumerate(PROTOCOLS):
            lat, bw = tab[(op, "ring", p)]
            if bw > 0:
                tab[(op, "ring", p)] = (BASE_LAT["ring"][pi] + (topo.n_ranks - 1) * HW_LAT[topo.intra]["ring"][pi], bw)
    return tab


def _min_lat(tab: dict) -> float:
    lats = [lat for lat, bw in tab.values() if bw > 0]
    return min(lats) if lats else 0.0


def _tree_corr(op, a, p, s):
    if a == "tree" and op == "all_reduce":
        return float(_tree_factor(p, np.asarray([s], float))[0])
    return 1.0


def _bw_time(op, topo, a, p, s, bw):
    """NCCL's bandwidth time (us) of s bytes on the channels NCCL runs it on: algBw x the tree
    correction x the share of the communicator's channels busy (nccl_channels.channel_share)."""
    share = 1.0 if op in P2P_OPS or a == "nvls" else channel_share(op, s, a, p, topo.n_ranks, topo.comm_channels)
    return s / (1000.0 * bw * _tree_corr(op, a, p, s) * share)


def _fill_time(op, topo, a, p, s, bw):
    """One ring Simple chunk over all channels at NCCL's bus bandwidth (us): the unit of the pipeline
    fill (0 for the other algorithms and protocols and for the point-to-point ops)."""
    if a != "ring" or p != "Simple" or op in P2P_OPS or not np.isfinite(loop_bytes(op, topo.n_ranks)):
        return 0.0
    bus = bw * _nsteps(op, topo.n_ranks) / topo.n_ranks
    return float(chunk_bytes(op, s, topo.n_ranks, topo.comm_channels)) / (1000.0 * bus)


UNSEEN_STARTUP = "Simple"  # a protocol NCCL never ran at n0 takes this protocol's start-up (F)


def fit_calibrated(op: str, sizes, times_us, n0: int, topo: NcclTopo | None = None,
                   algorithms=("tree", "ring")) -> CalibratedComm:
    """Calibrate NCCL's model on one measured sweep of `op` at n0 ranks (section 2)."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    keep = np.isfinite(s) & np.isfinite(t) & (s > 0) & (t > 0)
    s, t = s[keep], t[keep]
    order = np.argsort(s)
    s, t = s[order], t[order]
    if len(s) < 3:
        raise ValueError(f"need at least 3 sizes to calibrate, got {len(s)}")
    topo = (topo or NcclTopo(n_ranks=n0)).with_ranks(n0)
    tab = op_table(op, topo)
    cal = calib_table(op, topo)
    small = s <= FLOOR_BYTES
    floor = float(np.median(t[small])) if small.any() else float(np.min(t))
    algos, protos, _ = choose(op, tab, s, n0, algorithms)
    free = t > FLOOR_MARGIN * floor  # not bound by the timing floor
    lat = np.array([cal[(op, a, p)][0] for a, p in zip(algos, protos)])
    x = np.array([_bw_time(op, topo, a, p, si, cal[(op, a, p)][1]) for a, p, si in zip(algos, protos, s)])
    y = np.array([_fill_time(op, topo, a, p, si, cal[(op, a, p)][1]) for a, p, si in zip(algos, protos, s)])
    raw = {}
    for p in PROTOCOLS:
        m = protos == p
        if not m.any():
            continue
        mf = m & free
        if mf.sum() >= 2:
            c0, c1 = _rel_lsq(x[mf], t[mf] - lat[mf], t[mf])
            last = np.flatnonzero(mf)[-1]
            # both the fitted and NCCL's own bandwidth time must be a share of the time: floor noise
            # at sizes that run on a channel or two must not pass for a bandwidth
            pinned = c1 > 0 and min(x[last] * c1, x[last]) >= PIN_FRACTION * t[last]
            raw[p] = (c0, (1.0 / c1) if c1 > 0 else NAN, int(m.sum()), bool(pinned))
        else:
            raw[p] = (NAN, NAN, int(m.sum()), False)
    phi = fit_top_simple(raw, protos == "Simple", free, s, t, lat, x, y, loop_bytes(op, n0, topo.comm_channels))
    pinned = [p for p in ("Simple", "LL128", "LL") if p in raw and raw[p][3]]
    eta_ref = raw[pinned[0]][1] if pinned else 1.0  # no protocol pinned: NCCL's own bandwidths
    out = {}
    for p in PROTOCOLS:
        if p in raw and raw[p][3]:
            out[p] = ProtoFit(extra_us=raw[p][0], eta=raw[p][1], n_points=raw[p][2], pinned=True,
                              phi=phi if p == "Simple" else 0.0)
        elif p in raw:  # measured but its bandwidth not pinned: the reference efficiency, its own start-up
            m = protos == p
            extra = float(np.median(t[m] - lat[m] - x[m] / eta_ref))
            out[p] = ProtoFit(extra_us=extra, eta=eta_ref, n_points=raw[p][2], pinned=False,
                              source=pinned[0] if pinned else "nccl")
    for p in PROTOCOLS:
        if p not in out:  # never run at n0
            ref = out.get(UNSEEN_STARTUP) or next(iter(out.values()))
            out[p] = ProtoFit(extra_us=ref.extra_us, eta=eta_ref, n_points=0, pinned=False,
                              source=pinned[0] if pinned else "nccl")
    return CalibratedComm(op=op, n0=int(n0), topo=topo, protos=out, floor_us=floor, algorithms=tuple(algorithms),
                          fitted_sizes=tuple(s.tolist()))

