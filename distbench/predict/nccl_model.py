"""NCCL's own cost model of a collective, per algorithm and protocol, and a version of it calibrated
on a node's measured sweep.

1. NCCL's model (`tuning_table`, `nccl_time`, `nccl_choice`): distbench.predict.nccl_tuning
------------------------------------------------------------------------------------------
NCCL estimates every (algorithm, protocol) pair from its tuning tables and runs the cheapest; nccl_tuning
reproduces those tables (NCCL 2.28.9's tuning.cc) and that choice.

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
and the loop are NCCL's at n. all_to_all and send_recv (grouped point-to-point, no protocol choice
here) use Simple's form with a pure ring of n-1 steps (all_to_all) or one step (send_recv).

3. The ring loop's bubble
-------------------------
The measured ring asymptote rises with n by an amount that depends on the op: nccl_channels section 3
(`bubble_efficiency`, `bubble_from_etas`); `CalibratedComm.bubble` carries the node's b. What the
calibration still cannot know from n0 alone: a host floor that grows with n.

4. send_recv on NCCL's p2p split (`CalibratedComm.p2p`, distbench.predict.nccl_p2p)
----------------------------------------------------------------------------------
A send_recv's time follows how NCCL splits each peer's transfer over channels, which halves from 2 to 4
ranks up to 128 MiB (nccl_p2p sections 1-2), not a ring: fit_calibrated fits nccl_p2p's model on the
sweep (with the timing floor above kept as max(floor, t)), and predict uses it; a node whose GPUs are
not all on NVLink keeps the ring form (the split's channel counts are an NVLink node's). all_to_all keeps
the ring form of section 2, with NCCL's p2p protocol rule (choose): on the committed 2 -> 4 rank runs
nccl_p2p's model of it (the link rate taken from the node's send_recv) missed by more at >= 1 MiB
(H200 39.8%, H100 31.3%: LL parts of two steps at 2 MiB that no 2-rank sweep runs) than the ring form
(19.5%, 20.7%: too slow at 512 MiB; tests/predict/test_selfcheck_comm.py holds both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from distbench.predict.nccl_channels import (bubble_efficiency, channel_share, chunk_bytes, fit_top_simple,
                                             loop_bytes)
from distbench.predict.nccl_channels import rel_lsq as _rel_lsq
from distbench.predict.nccl_p2p import P2pFit, fit_p2p, p2p_plan
from distbench.predict.nccl_tuning import (ALGORITHMS, BASE_LAT, HW_LAT, NAN, NCCL_OPS, P2P_OPS, PROTOCOLS,  # noqa: F401
                                           NcclTopo, _nsteps, _tree_factor, nccl_choice, nccl_time, tuning_table)
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
    bubble: float = 0.0  # the ring loop's bubble b, in chunk-times per loop (section 3); 0: none
    p2p: P2pFit | None = None  # send_recv: NCCL's p2p split and its fitted rates (nccl_p2p), not the ring form

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
        if self.p2p is not None:
            plans = self.p2p.plans(s, n)
            t = np.array([self.p2p.time(p) for p in plans])
            protos = np.array([p.protocol for p in plans], dtype=object)
        else:
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

    def with_bubble(self, bubble: float) -> "CalibratedComm":
        """The same calibration with the ring loop's bubble b (section 3; 0 or NaN: none)."""
        b = float(bubble)
        return replace(self, bubble=b if math.isfinite(b) and b > 0 else 0.0)

    def _time(self, cal, a, p, s, n):
        pf = self.protos[p]
        lat, bw = cal[(self.op, a, p)]
        topo = self.topo.with_ranks(n)
        eta = pf.eta
        # Simple's loop, and a protocol that took Simple's efficiency because NCCL never ran it at n0
        # (LL128 on 2 ranks); not LL's measured sizes: the LL rows of the 4-rank runs do not rise
        if a == "ring" and (p == "Simple" or (pf.n_points == 0 and pf.source == "Simple")):
            eta *= bubble_efficiency(self.op, n, self.bubble) / bubble_efficiency(self.op, self.n0, self.bubble)
        return (pf.extra_us + lat + _bw_time(self.op, topo, a, p, s, bw) / eta
                + pf.phi * _fill_time(self.op, topo, a, p, s, bw) / pf.eta)


def choose(op: str, tab: dict, sizes, n: int, algorithms=ALGORITHMS):
    """NCCL's (algos, protos, times) per size: nccl_choice for the collectives; for the
    point-to-point ops NCCL's own rule as nccl_p2p reads it (enqueue.cc lines 779, 821, 834): LL while
    each peer's bytes stay within nChannelsMax x NCCL_P2P_LL_THRESHOLD, else Simple."""
    if op not in P2P_OPS:
        return nccl_choice(tab, op, sizes, algorithms)
    s = np.atleast_1d(np.asarray(sizes, dtype=float))
    protos = np.array([p2p_plan(op, int(x), n).protocol for x in s], dtype=object)
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
    """Calibrate NCCL's model on one measured sweep of `op` at n0 ranks (section 2; send_recv on
    NCCL's p2p split, section 4)."""
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
    p2p = None
    # the split's channel counts are an all-NVLink node's (nccl_p2p section 1); elsewhere the ring form
    p2p_ok = topo.intra == "nvlink" and topo.n_nodes == 1
    if p2p_ok and op == "send_recv":
        try:  # NCCL's p2p channels per peer halve with the ranks (nccl_p2p section 2)
            p2p = fit_p2p(op, s, t, n0)
        except ValueError:  # too few Simple sizes: the ring form above
            p2p = None
    return CalibratedComm(op=op, n0=int(n0), topo=topo, protos=out, floor_us=floor, algorithms=tuple(algorithms),
                          p2p=p2p,
                          fitted_sizes=tuple(s.tolist()))

