"""How NCCL 2.28.9 runs the point-to-point ops (send_recv, all_to_all) on a node, and a time model
for them calibrated on a 2-rank sweep.

Sources: NCCL at tag v2.28.9-1 (commit dbc86fd06e8b), file and line below. Described, not copied.

1. The p2p channels of a communicator (`p2p_channels`)
------------------------------------------------------
src/graph/paths.cc `ncclTopoComputeP2pChannels`, lines 860-891: p2pnChannels starts as the
communicator's collective channels (comm->nChannels, "24 coll channels" on our H200 node), bounded by
NCCL_MIN/MAX_P2P_NCHANNELS (1, MAXCHANNELS 64; lines 856-857, 866-867). The channels per peer are the
minimum over all peers of `ncclTopoGetNchannels` (lines 817-853), which for an NVLink peer is
2 x max(1, int(path bw / per-link bw)) (line 831; per-link bw SM90_NVLINK_BW 20.6 GB/s, graph/topo.h
line 19): on NV18 through NVSwitch the path is 370.8 GB/s (the log's "NVL[370.8]"), 2 x 18 = 36,
so the minimum is p2pnChannels' own 24. Both are then rounded up to a power of two (lines 882-883)
and per peer capped at p2pnChannels (886): 32 and 32, what the 2-rank log prints ("32 p2p channels,
32 p2p channels per peer"). Nothing here depends on the rank count: each GPU's path to every other
GPU through the switch is the same 18 links, so at 4 and 8 ranks it is 32 and 32 again, as long as
the communicator keeps 17-32 collective channels (our 4- and 8-rank runs' logs are not committed; a
ring graph of 12 or 16 channels, duplicated, is inside that range; the pasted 4-GPU NCCL 2.23 log
tests/fixtures/nccl/paste-init-hang-4gpu-2.23.log prints the same 24 / 32 / 32).

2. How one send (or recv) of B bytes is split (`peer_transfer`)
---------------------------------------------------------------
src/enqueue.cc `scheduleP2pTasksToPlan` (line 1039) fixes per plan, lines 1053-1056:

    nChannelsMax = p2pnChannelsPerPeer (32)
    nChannelsMin = nChannelsMax, halved while nChannelsMin x nRanks > p2pnChannels (32)
                 = 16 at 2 ranks, 8 at 4, 4 at 8

and `addP2pToPlan` (line 786) for each direction of each peer:

  protocol  LL when B <= nChannelsMax x NCCL_P2P_LL_THRESHOLD (32 x 16 KiB = 512 KiB; lines 779, 821,
            834) and the peer is not this rank; else Simple.
  step      Simple: comm->p2pChunkSize, NCCL_P2P_NVL_CHUNKSIZE 512 KiB on an all-NVLink node (init.cc
            lines 706, 716-721; not above NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 = 512 KiB, init.cc 699,
            device.h 24). LL: its buffer / 8 = 8 lines x 512 threads x 8 steps x 16 B / 8 = 64 KiB
            (init.cc 697, device.h 92-93), carrying 32 KiB of data (line 849: 8 data bytes per 16-byte
            line, device.h 70-79).
  channels  min(nChannelsMin, ceil(B / (step/8))), then doubled while the part B/channels exceeds
            32 steps (16 MiB Simple, 2 MiB LL) and the count is <= nChannelsMax/2 (lines 892-901).
  parts     ceil(B/channels) rounded up to 4 KiB (device.h `ncclP2pPartBounds`, lines 254-262); each
            part is one channel's (one thread block's) share, moved in chunks of one step
            (device/sendrecv.h runSend/runRecv, lines 16-46) through the 8-step FIFO.

So a send_recv of S bytes (nccl-tests' size: each rank sends S to rank+1 and receives S from rank-1)
runs on 16 channels of S/16 at 2 ranks from 1 MiB to 256 MiB and on 32 channels at 512 MiB (S/16 =
32 MiB > 16 MiB doubles it), but on 8 channels of S/8 at 4 ranks up to 128 MiB, 16 at 256 MiB and
32 at 512 MiB. The 4-rank shift therefore moves each channel's part twice as large as at 2 ranks up
to 128 MiB, and exactly the same 32 x 16 MiB at 512 MiB: that is the "53-72% of the 2-rank bandwidth,
then full catch-up at 512 MiB" of the measured sweeps, from NCCL's own split.

3. Which channels the peers share (`p2p_plan`)
----------------------------------------------
init.cc lines 806-828: on one node round d pairs the send to rank+d with the recv from rank-d (round
0 is the copy to self), and both directions of a round are one work on the same channels.
include/channel.h lines 19-31: round d starts at channel bitreverse(d) over log2(p2pnChannels) bits;
part p is on channel (base + p) mod p2pnChannels (device.h lines 270-272). With 32 channels the bases
of rounds 0..7 are 0, 16, 8, 24, 4, 20, 12, 28, so at n = 2, 4, 8 ranks the n rounds of an all_to_all
(n tasks of S/n, enqueue.cc lines 2585-2589 for ncclAlltoAll; torch's grouped sends are the same
tasks) take n disjoint blocks of 32/n channels: the peer traffic runs on 32 - 32/n channels, each
with a part of S/32 (the self copy on the remaining block), until a part passes 16 MiB (S > 512 MiB at
4 ranks) and the blocks overlap. Works sharing a channel split its warps (device/sendrecv.h lines
101-108; up to 8 works per batch, device.h line 364), so a channel's load is the sum of its parts.

4. The calibrated time (`fit_p2p`, `P2pFit.predict`)
----------------------------------------------------
NCCL has no cost model for p2p (tuning.cc tunes collectives only), so what the source gives is the
structure above; the rates are fitted. Per plan: L = the largest load of one channel (bytes it sends,
and as many it receives), c = that part's first chunk (min(part, step data)), k = the channels
carrying traffic to other GPUs:

    Simple  t = F + (L + phi c) / min(b, B / k)
    LL      t = F_LL + 2 L / b                        (LL moves 16 bytes per 8 of data)

b is one channel's (thread block's) rate through the FIFO, B the GPU's NVLink rate shared by its k
busy channels, phi c the pipeline fill (the first chunk crosses both copies before the steady state),
F the start-up. From the sweep at n0:
  - b: the slope of t over L across the Simple sizes on the fewest channels whose parts hold a whole
    chunk (the fill no longer grows there: at 2 ranks 8, 32, 128 MiB of send_recv); then F and phi by
    relative least squares over all Simple sizes on those channels (with fewer than two whole-chunk
    sizes: F, b, phi together). Those sizes must be channel-bound (k b < B).
  - B: from the Simple sizes on more channels that run over 5% above that channel-bound line (at 2
    ranks: send_recv of 512 MiB, 32 channels), relative least squares of t - F = (L + phi c) k / B.
    all_to_all at 2 ranks peaks on 16 channels, under B, so its own sweep cannot give B: pass
    `link_gbps` (`prediction_errors` takes it from send_recv's fit at n0, the same node's link).
  - F_LL: the relative mean of t - 2 L / b over the LL sizes.

Fit on 2 ranks, predict 4 (graph timing, |error|, max / median; `prediction_errors`):

    dataset  op          >= 1 MiB       < 1 MiB
    H200     send_recv   28.1 / 7.1     29.3 / 25.1
    H200     all_to_all  39.8 / 7.6     26.1 / 19.7    (B from send_recv; without: 39.8 / 25.1)
    H100     send_recv   10.6 / 6.8     37.8 / 24.8
    H100     all_to_all  31.3 / 9.5     17.3 / 13.1    (without B: 31.3 / 22.3)

What the source does not give (and a 2-rank sweep cannot show):
  - LL parts of two steps. At 2 ranks every LL part is <= 32 KiB, one LL step, and costs nothing
    visible over the start-up; at 4 ranks send_recv of 512 KiB and all_to_all of 2 MiB run LL parts of
    64 KiB (two steps) and take 7-12 us more than the model (-25% and -31/-40%). No default 2-rank
    sweep reaches a two-step LL part (16 channels x 32 KiB = the 512 KiB LL limit); a 2-rank sweep
    with NCCL_P2P_LL_THRESHOLD=65536 at 0.5-2 MiB would measure it.
  - all_to_all at 4 ranks is link-bound at 300-335 GB/s of egress against the 364 GB/s send_recv
    reaches over the same links (32 channels, one peer): 6-12% under-predicted at 8-512 MiB. Three
    peers at once through the switch is not in NCCL's scheduling; it needs a 3+ rank measurement.
  - H200 send_recv of 2 MiB at 4 ranks: 53.8 us (p5-p95 52.7-54.3) where H100, the same NCCL plan
    (8 channels x 256 KiB), takes 37.5 and the model 38.6.
  - The start-up grows from 2 to 4 ranks (graph timing, small sizes: 12-14 -> 17-18 us send_recv),
    which is the < 1 MiB error.
Events timing has a host-issue floor (40-100 us here) this module does not model (nccl_model's
max(floor, t) would be the place); its 2 -> 4 figures are not claimed.

Analysis code: numpy and the standard library only.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distbench.predict.nccl_tuning import NCCL_VERSION, P2P_OPS  # noqa: F401

MAXCHANNELS = 64  # device.h line 86
NCCL_STEPS = 8  # device.h line 24
BUFFSIZE = 4 << 20  # init.cc line 699, NCCL_BUFFSIZE
P2P_NVL_CHUNKSIZE = 512 << 10  # init.cc line 706 (NCCL_P2P_NVL_CHUNKSIZE)
P2P_LL_THRESHOLD = 16 << 10  # enqueue.cc line 779 (NCCL_P2P_LL_THRESHOLD)
LL_BUFFSIZE = 8 * 512 * NCCL_STEPS * 16  # init.cc line 697: lines/thread x LL threads x steps x 16 B
PART_ALIGN = 4 << 10  # device.h line 255
SM90_NVLINK_BW = 20.6  # graph/topo.h line 19, GB/s per link
NODE_PATH_BW = 370.8  # our H200 NV18 log: "GPU/0-70 (2/370.8/NVL)"
NODE_COMM_CHANNELS = 24  # our H200 log: "24 coll channels"
LINK_CHECK = 1.05  # a size is link-bound when its time is this far above the channel-bound line


def _div_up(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def _pow2_up(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _reverse_bits(x: int, bits: int) -> int:
    out = 0
    for _ in range(bits):
        out = (out << 1) | (x & 1)
        x >>= 1
    return out


# ---------------------------------------------------------------- section 1
def p2p_channels(comm_channels: int = NODE_COMM_CHANNELS, path_bw: float = NODE_PATH_BW,
                 link_bw: float = SM90_NVLINK_BW, max_p2p: int = MAXCHANNELS, min_p2p: int = 1) -> tuple[int, int]:
    """(p2pnChannels, p2pnChannelsPerPeer) as ncclTopoComputeP2pChannels sets them on one node whose
    GPUs all reach each other over NVLink at path_bw (GB/s). Independent of the rank count."""
    p2p = max(min(int(comm_channels), int(max_p2p)), int(min_p2p))
    per_peer_nvl = 2 * max(1, int(path_bw / link_bw))
    min_ch = min(p2p, per_peer_nvl)
    p2p = min(_pow2_up(p2p), MAXCHANNELS)
    return p2p, min(_pow2_up(min_ch), p2p)


P2P_CHANNELS, P2P_CHANNELS_PER_PEER = p2p_channels()


def channel_bounds(n_ranks: int, p2p: int = P2P_CHANNELS, per_peer: int = P2P_CHANNELS_PER_PEER) -> tuple[int, int]:
    """(nChannelsMin, nChannelsMax) of scheduleP2pTasksToPlan at n_ranks."""
    lo = int(per_peer)
    while lo * int(n_ranks) > p2p and lo > 1:
        lo //= 2
    return lo, int(per_peer)


# ---------------------------------------------------------------- section 2
@dataclass(frozen=True)
class Transfer:
    """One direction of one peer's task: its protocol, channels, part (bytes per channel), the step
    (FIFO slot, bytes) and the data bytes one step carries."""

    nbytes: int
    protocol: str
    channels: int
    part: int
    step: int
    step_data: int

    @property
    def steps_per_part(self) -> int:
        return _div_up(self.part, self.step_data) if self.part else 0


def peer_transfer(nbytes: int, n_ranks: int, p2p: int = P2P_CHANNELS, per_peer: int = P2P_CHANNELS_PER_PEER,
                  self_copy: bool = False, chunk: int = P2P_NVL_CHUNKSIZE) -> Transfer:
    """addP2pToPlan's split of a send (or recv) of nbytes on one node."""
    nbytes = int(nbytes)
    lo, hi = channel_bounds(n_ranks, p2p, per_peer)
    ll = (not self_copy) and nbytes <= hi * P2P_LL_THRESHOLD
    step = LL_BUFFSIZE // NCCL_STEPS if ll else min(int(chunk), BUFFSIZE // NCCL_STEPS)
    data = step // 2 if ll else step
    if nbytes <= 0:
        return Transfer(nbytes, "LL" if ll else "Simple", 1, 0, step, data)
    min_part, max_part = step // 8, step * 32
    nch = min(lo, _div_up(nbytes, min_part))
    part = max(min_part, _div_up(nbytes, nch))
    while part > max_part and nch <= hi // 2:
        nch *= 2
        part = _div_up(nbytes, nch)
    part = min(nbytes, _div_up(_div_up(nbytes, nch), PART_ALIGN) * PART_ALIGN)
    return Transfer(nbytes, "LL" if ll else "Simple", nch, part, step, data)


# ---------------------------------------------------------------- section 3
def channel_base(round_: int, p2p: int = P2P_CHANNELS) -> int:
    """ncclP2pChannelBaseForRound on one node."""
    return _reverse_bits(int(round_), int(round(np.log2(p2p))))


@dataclass(frozen=True)
class P2pPlan:
    """What one rank's kernel does for op of nbytes (nccl-tests' size) at n_ranks.

    peer: the transfer to one other rank; rounds: (round, channels) of the peer rounds; load: the
    bytes each of the p2p channels sends to other GPUs (receives as many). max_load (L), fill_chunk
    (c), busy_channels (k): section 4; egress: the bytes this GPU sends to other GPUs."""

    op: str
    nbytes: int
    n_ranks: int
    peer: Transfer
    rounds: tuple
    load: tuple

    @property
    def protocol(self) -> str:
        return self.peer.protocol

    @property
    def max_load(self) -> int:  # L
        return int(max(self.load))

    @property
    def busy_channels(self) -> int:  # k
        return int(sum(1 for x in self.load if x > 0))

    @property
    def egress(self) -> int:  # E
        return int(sum(self.load))

    @property
    def fill_chunk(self) -> int:  # c
        return min(self.peer.part, self.peer.step_data)

    @property
    def works_per_channel(self) -> int:
        counts: dict[int, int] = {}
        for _, chans in self.rounds:
            for c in chans:
                counts[c] = counts.get(c, 0) + 1
        return max(counts.values()) if counts else 0


def p2p_plan(op: str, nbytes: int, n_ranks: int, p2p: int = P2P_CHANNELS,
             per_peer: int = P2P_CHANNELS_PER_PEER) -> P2pPlan:
    """The channels and loads of send_recv (S to rank+1, S from rank-1) or all_to_all (S/n to each
    rank) of S = nbytes at n_ranks, one node."""
    n, s = int(n_ranks), int(nbytes)
    if op == "send_recv":
        rounds_, per = [1], s
    elif op == "all_to_all":
        rounds_, per = list(range(1, n)), s // n
    else:
        raise ValueError(f"unknown p2p op {op!r} (one of {', '.join(P2P_OPS)})")
    t = peer_transfer(per, n, p2p, per_peer)
    load = [0] * p2p
    rounds = []
    for r in rounds_:
        base = channel_base(r, p2p)
        chans = tuple((base + i) & (p2p - 1) for i in range(t.channels))
        for i, c in enumerate(chans):
            load[c] += max(0, min(t.part, per - i * t.part))
        rounds.append((r, chans))
    return P2pPlan(op, s, n, t, tuple(rounds), tuple(load))


# ---------------------------------------------------------------- section 4
def _us(nbytes, gbps):
    return np.asarray(nbytes, dtype=float) / (1e3 * gbps)


@dataclass(frozen=True)
class P2pFit:
    """The calibrated model (section 4). Rates in GB/s, times in us; link_gbps None: no link bound."""

    op: str
    n0: int
    startup_us: float
    chan_gbps: float
    fill: float
    link_gbps: float | None
    ll_startup_us: float
    p2p: int = P2P_CHANNELS
    per_peer: int = P2P_CHANNELS_PER_PEER

    def channel_gbps(self, plan: P2pPlan) -> float:
        """One channel's rate in this plan: its own, or its share of the link."""
        if not self.link_gbps:
            return self.chan_gbps
        return min(self.chan_gbps, self.link_gbps / max(1, plan.busy_channels))

    def time(self, plan: P2pPlan) -> float:
        if plan.protocol == "LL":
            return float(self.ll_startup_us + _us(2 * plan.max_load, self.chan_gbps))
        return float(self.startup_us + _us(plan.max_load + self.fill * plan.fill_chunk, self.channel_gbps(plan)))

    def plans(self, sizes, n: int) -> list[P2pPlan]:
        return [p2p_plan(self.op, int(s), n, self.p2p, self.per_peer) for s in np.atleast_1d(sizes)]

    def predict(self, sizes, n: int) -> np.ndarray:
        return np.array([self.time(p) for p in self.plans(sizes, n)])


def _rel_lsq(cols: list[np.ndarray], y: np.ndarray, t: np.ndarray) -> np.ndarray:
    w = 1.0 / t
    a = np.column_stack([c * w for c in cols])
    coef, *_ = np.linalg.lstsq(a, y * w, rcond=None)
    return coef


def fit_p2p(op: str, sizes, times_us, n0: int, link_gbps: float | None = None,
            p2p: int = P2P_CHANNELS, per_peer: int = P2P_CHANNELS_PER_PEER) -> P2pFit:
    """Section 4's fit on one sweep at n0 ranks (nccl-tests sizes in bytes, times in us). link_gbps:
    the NVLink rate where the sweep cannot give it (used only then)."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    ok = np.isfinite(t) & (t > 0) & (s > 0)
    s, t = s[ok], t[ok]
    plans = [p2p_plan(op, int(x), n0, p2p, per_peer) for x in s]
    simple = np.array([p.protocol == "Simple" for p in plans])
    L = np.array([p.max_load for p in plans], dtype=float)
    c = np.array([p.fill_chunk for p in plans], dtype=float)
    k = np.array([p.busy_channels for p in plans])
    if simple.sum() < 2:
        raise ValueError("fit_p2p needs 2+ Simple sizes (> 512 KiB per peer)")
    base = simple & (k == k[simple].min())
    full = base & (c == np.array([p.peer.step_data for p in plans]))  # fill constant: slope = 1/b
    if full.sum() >= 2:
        slope = float(np.polyfit(L[full] / 1e3, t[full], 1)[0])
        u = slope
        if base.sum() >= 3 and (c[base] != c[full][0]).any():
            f, v = _rel_lsq([np.ones(base.sum()), c[base] / 1e3], t[base] - u * L[base] / 1e3, t[base])
        else:
            v = 0.0
            (f,) = _rel_lsq([np.ones(base.sum())], t[base] - u * L[base] / 1e3, t[base])
        if v < 0:
            v = 0.0
            (f,) = _rel_lsq([np.ones(base.sum())], t[base] - u * L[base] / 1e3, t[base])
    elif base.sum() >= 3:  # F, 1/b, phi/b together
        f, u, v = _rel_lsq([np.ones(base.sum()), L[base] / 1e3, c[base] / 1e3], t[base], t[base])
        if v < 0:
            v = 0.0
            f, u = _rel_lsq([np.ones(base.sum()), L[base] / 1e3], t[base], t[base])
    elif base.sum() == 2:
        v = 0.0
        f, u = _rel_lsq([np.ones(2), L[base] / 1e3], t[base], t[base])
    else:
        raise ValueError("fit_p2p needs 2+ Simple sizes on the fewest channels")
    if u <= 0:
        raise ValueError("fit_p2p: no positive channel rate from the channel-bound sizes")
    b, phi = 1.0 / u, v / u
    line = f + _us(L + phi * c, b)
    over = simple & ~base & (t > LINK_CHECK * line)
    link = link_gbps
    if over.any():  # t - F = (L + phi c) k / B
        (inv,) = _rel_lsq([(L[over] + phi * c[over]) * k[over] / 1e3], t[over] - f, t[over])
        link = 1.0 / inv if inv > 0 else link_gbps
    ll = ~simple
    ll_f = float(f)
    if ll.any():
        ll_f = float(np.sum((t[ll] - _us(2 * L[ll], b)) / t[ll] ** 2) / np.sum(1.0 / t[ll] ** 2))
    return P2pFit(op, int(n0), float(f), float(b), float(phi), None if link is None else float(link), ll_f, p2p, per_peer)


# ---------------------------------------------------------------- measured sweeps
def load_sweep(path, op: str, world_size: int, timing: str = "graph") -> tuple[np.ndarray, np.ndarray]:
    """(sizes, medians us) of a comm_summary.csv for NCCL with its default environment."""
    rows = []
    with Path(path).open() as fh:
        for r in csv.DictReader(fh):
            if (r.get("backend") == "nccl" and r.get("nccl_env", "default") == "default" and r.get("op") == op
                    and r.get("timing") == timing and int(r.get("world_size", 0)) == int(world_size)
                    and r.get("status", "ok") == "ok" and r.get("time_us_median")):
                rows.append((int(r["size_bytes"]), float(r["time_us_median"])))
    rows.sort()
    return np.array([x for x, _ in rows], dtype=float), np.array([y for _, y in rows], dtype=float)


def prediction_errors(path, op: str, n0: int = 2, n: int = 4, timing: str = "graph",
                      link_from_send_recv: bool = True) -> dict:
    """Fit op on the n0 sweep of a comm_summary.csv, predict n: {"fit", "sizes", "measured",
    "predicted", "rel_err"} (rel_err = predicted / measured - 1). all_to_all takes the NVLink rate
    from send_recv's fit at n0 when link_from_send_recv (its own n0 sweep cannot give it)."""
    s0, t0 = load_sweep(path, op, n0, timing)
    link = None
    if op == "all_to_all" and link_from_send_recv:
        ss, ts = load_sweep(path, "send_recv", n0, timing)
        link = fit_p2p("send_recv", ss, ts, n0).link_gbps
    fit = fit_p2p(op, s0, t0, n0, link_gbps=link)
    s1, t1 = load_sweep(path, op, n, timing)
    pred = fit.predict(s1, n)
    return {"fit": fit, "sizes": s1, "measured": t1, "predicted": pred, "rel_err": pred / t1 - 1.0}
