"""How many channels NCCL runs one collective on, and its loop size: NCCL 2.28.9's own rules.

1. The channel ramp (`coll_channels`)
-------------------------------------
src/enqueue.cc (tag v2.28.9-1) `topoGetAlgoInfo`, lines 1865-1911: starting from the communicator's
channels (comm->nChannels: 24 on our 2x H200, "24 coll channels"), ring and tree drop one channel
while nBytes < nc x nThreads x threadThreshold:

    nThreads          Simple 512 (ring on NVLink; NCCL_SIMPLE_MAX_NTHREADS, tuning.cc line 231),
                      LL 512 (NCCL_LL_MAX_NTHREADS), LL128 640 (NCCL_LL128_MAX_NTHREADS):
                      src/include/device.h lines 90, 92, 109
    threadThreshold   LL 8, LL128 8, Simple 64 (src/include/comm.h lines 41-43); ring LL x nRanks
                      (tuning.cc line 547) -- the log prints "threadThresholds 8/8/64 | 16/8/64"

so Simple fills 24 channels from 24 x 32 KiB = 768 KiB, ring LL from 24 x 4 KiB x nRanks. The task is
then cut into cells over those channels (`scheduleCollTasksToPlan`, enqueue.cc lines 519-690: 16 KiB
of traffic per cell at least, traffic per byte 2 for all_reduce, nRanks for all_gather and
reduce_scatter, 1 otherwise, x 4 for LL), which is what the log's "channel{Lo..Hi}" prints. With the
channels reproduced, NCCL's bus bandwidth at a size is its graph's times the share of channels busy.
On our 2x H200 node every size >= 2 MiB runs on 22-24 of the 24 channels: the ramp shapes the sizes
below 1 MiB only, not the 2-128 MiB shortfall of Simple against its asymptote.

2. The loop (`loop_bytes`)
--------------------------
calcCollChunking (enqueue.cc lines 2022-2120): a ring Simple chunk is stepSize x chunkSteps (stepSize
= NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 = 512 KiB, init.cc line 699, device.h line 24; chunkSteps 4 for
all_reduce, all_gather and reduce_scatter, 1 for broadcast: src/include/collectives.h lines 17-26) and
one loop covers nChannels x nchunksPerLoop (nRanks for a ring) chunks. Below one loop the kernel
shrinks the chunk to fit the data (src/device/all_reduce.h runRing: chunkCount = divUp(remCount,
nranks)), so the ring's pipeline fill, a fixed share of one chunk, grows with the size until one
loop (96 MiB for all_reduce on 2 ranks, 192 MiB on 4) and stays constant beyond. The calibrated model
(nccl_model section 2) charges Simple that fill: phi x (bytes of one chunk over all channels) / busBw.

3. The ring loop's bubble (`bubble_from_etas`, `bubble_efficiency`; nccl_model's `CalibratedComm.bubble`)
----------------------------------------------------------------------------------------------------------
NCCL's bus bandwidth is the same at every rank count on an NVSwitch node (nccl_model section 1), yet the
measured ring asymptote rises with n, and by how much depends on the op: busbw at 512 MiB on 2x ->
4x H200 all_gather 255 -> 316 GB/s, reduce_scatter 254 -> 314, all_reduce 316 -> 347, broadcast
(a pipeline, no loop) 366 -> 356; H100 the same. A ring loop moves one chunk per channel per step
for `steps` steps (n-1 for all_gather and reduce_scatter, 2(n-1) for all_reduce); a fixed bubble of
b chunk-times per loop makes the Simple asymptote E steps / (steps + b). At one world size the
ops' steps differ, so the ratio of all_reduce's asymptote to all_gather's fixes b:
r = 2 (k + b) / (2k + b), k = n0 - 1, b = 2k (r - 1) / (2 - r). The committed runs give b = 0.56 -
0.64 at 2 ranks (H200 and H100, graph and events timing) and b = 0.45 at 4 (H200 graph): the same
order, while E falls about 7% from 2 to 4 ranks, which no 2-rank fit can know (the self-check's
remaining +/- 8% at 128 - 512 MiB). The calibrated model scales Simple's efficiency (and that of a
protocol NCCL never ran at n0, which borrowed it: LL128 on 2 ranks; LL's measured sizes keep theirs,
the 4-rank LL rows do not rise) by (steps(n) / (steps(n) + b)) / (steps(n0) / (steps(n0) + b)) for ring
all_reduce, all_gather and reduce_scatter; b is fitted across the node's ops
(node_fit.series_bubble: from each op's Simple eta at n0) and 0 (no scaling) where the node measured
only one of all_reduce and all_gather / reduce_scatter.

Analysis code: numpy and the standard library only.
"""

from __future__ import annotations

import numpy as np

COMM_CHANNELS = 24  # our 2x H200 log: "24 coll channels" (the 12-channel ring graph, duplicated)
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}  # device.h lines 90, 92, 109; tuning.cc 231-243
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}  # comm.h lines 41-43
MIN_TRAFFIC_PER_CHANNEL = 16 << 10  # enqueue.cc line 529
STEP_BYTES = {"Simple": (4 << 20) // 8}  # DEFAULT_BUFFSIZE / NCCL_STEPS
CHUNK_STEPS = {"all_reduce": 4, "all_gather": 4, "reduce_scatter": 4, "broadcast": 1, "reduce": 1}


def _div_up(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def max_channels(nbytes: float, algo: str, proto: str, n_ranks: int, comm_channels: int = COMM_CHANNELS) -> int:
    """topoGetAlgoInfo's nMaxChannels (ring/tree) for a collective of nbytes (nccl-tests' size)."""
    nc = int(comm_channels)
    thr = THREAD_THRESHOLD[proto] * (n_ranks if (algo == "ring" and proto == "LL") else 1)
    per = MAX_THREADS[proto] * thr
    while nbytes < nc * per and nc >= 2:
        nc -= 1
    return nc


def _traffic_per_byte(op: str, n_ranks: int, proto: str) -> int:
    t = 2 if op == "all_reduce" else (n_ranks if op in ("all_gather", "reduce_scatter") else 1)
    return 4 * t if proto == "LL" else t


def coll_channels(op: str, nbytes: float, algo: str, proto: str, n_ranks: int,
                  comm_channels: int = COMM_CHANNELS) -> int:
    """The channels one collective of nbytes (nccl-tests' size) alone in its kernel runs on: the
    cells of scheduleCollTasksToPlan over topoGetAlgoInfo's nMaxChannels (the log's
    channel{Lo..Hi} + 1)."""
    n = int(n_ranks)
    nc = max_channels(nbytes, algo, proto, n, comm_channels)
    own = int(nbytes) // n if op in ("all_gather", "reduce_scatter") else int(nbytes)  # the task's count bytes
    tpb = _traffic_per_byte(op, n, proto)
    traffic = max(MIN_TRAFFIC_PER_CHANNEL, own * tpb)
    per_channel = max(MIN_TRAFFIC_PER_CHANNEL, traffic // nc)
    cell = _div_up(_div_up(MIN_TRAFFIC_PER_CHANNEL, tpb), 16) * 16
    cells = max(1, _div_up(own, cell))
    per_cell = cell * tpb
    cells_per_ch = min(cells, _div_up(per_channel, per_cell))
    lo = cells if comm_channels == 1 else min(cells, _div_up(per_channel, per_cell))
    mid = (cells - lo) // cells_per_ch
    hi = (cells - lo) % cells_per_ch
    if (lo != 0) + mid + (hi != 0) > comm_channels:  # overflow: the rest spread over the last channels
        mid = comm_channels - 2
        cells_per_ch = (cells - lo) // (mid + 1)
        hi = cells_per_ch + (cells - lo) % (mid + 1)
    if hi == 0 and mid != 0:
        hi, mid = cells_per_ch, mid - 1
    return int((lo != 0) + mid + (hi != 0))


def channel_share(op: str, nbytes, algo: str, proto: str, n_ranks: int, comm_channels: int = COMM_CHANNELS):
    """The share of the communicator's channels a collective of each size keeps busy (1 at the top)."""
    s = np.atleast_1d(np.asarray(nbytes, dtype=float))
    out = np.array([coll_channels(op, x, algo, proto, n_ranks, comm_channels) / comm_channels for x in s])
    return out if np.ndim(nbytes) else float(out[0])


def loop_bytes(op: str, n_ranks: int, comm_channels: int = COMM_CHANNELS) -> float:
    """nccl-tests bytes of one ring Simple loop (calcCollChunking's loopSize in the op's size
    convention): channels x chunks per loop x chunk. NaN for ops without a ring loop here."""
    steps = CHUNK_STEPS.get(op)
    if steps is None:
        return float("nan")
    chunks = int(n_ranks) if op in ("all_reduce", "all_gather", "reduce_scatter") else 1
    return float(comm_channels * chunks * STEP_BYTES["Simple"] * steps)


def chunk_bytes(op: str, nbytes, n_ranks: int, comm_channels: int = COMM_CHANNELS):
    """The bytes of one chunk summed over the channels (nccl-tests' size convention): the size / the
    chunks per loop, up to one loop, constant beyond (the kernel's chunkCount)."""
    s = np.asarray(nbytes, dtype=float)
    loop = loop_bytes(op, n_ranks, comm_channels)
    chunks = int(n_ranks) if op in ("all_reduce", "all_gather", "reduce_scatter") else 1
    return np.minimum(s, loop) / chunks if np.isfinite(loop) else np.zeros_like(s)


# ---------------------------------------------------------------- fitting (nccl_model section 2)
def rel_lsq(x: np.ndarray, y: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(c0, c1) minimising sum ((c0 + c1 x - y) / t)^2, c1 >= 0 (t: the measured times)."""
    w = 1.0 / t
    A = np.column_stack([w, x * w])
    (c0, c1), *_ = np.linalg.lstsq(A, y * w, rcond=None)
    if c1 <= 0:
        return float(np.sum(y * w * w) / np.sum(w * w)), 0.0
    return float(c0), float(c1)


def fit_top_simple(raw, simple, free, s, t, lat, x, y, loop) -> float:
    """Simple's bandwidth from its sizes past one ring loop (the slope of the time over NCCL's
    bandwidth time there, where the pipeline fill is constant), then its start-up and fill (phi) by
    relative least squares over all its sizes; raw["Simple"] replaced in place, phi returned. With
    fewer than two free sizes past one loop: all three together (4+ sizes); else, or with no fill
    term, left as fitted (phi 0)."""
    top = simple & free & (s >= loop) if np.isfinite(loop) else np.zeros_like(simple)
    m = simple & free
    if not (y[m] > 0).any():
        return 0.0
    if top.sum() < 2:  # one loop not passed twice: start-up, bandwidth and fill together, if 4+ sizes
        if m.sum() < 4:
            return 0.0
        w = 1.0 / t[m]
        (c0, c1, c2), *_ = np.linalg.lstsq(np.column_stack([w, x[m] * w, y[m] * w]), (t[m] - lat[m]) * w, rcond=None)
        if c1 <= 0 or c2 < 0:
            return 0.0
        raw["Simple"] = (float(c0), 1.0 / c1, raw["Simple"][2], True)
        return float(c2 / c1)
    slope = float(np.polyfit(x[top], t[top] - lat[top], 1)[0])
    if slope <= 0:
        return 0.0
    eta = 1.0 / slope
    c0, c1 = rel_lsq(y[m], t[m] - lat[m] - x[m] / eta, t[m])
    raw["Simple"] = (c0, eta, raw["Simple"][2], True)
    return c1 * eta


# ---------------------------------------------------------------- the loop's bubble (section 3)
BUBBLE_OPS = ("all_reduce", "all_gather", "reduce_scatter")  # the ring ops with a loop of n-1 or 2(n-1) steps


def bubble_efficiency(op: str, n: int, bubble: float) -> float:
    """steps / (steps + b): the share of a ring loop spent moving data (section 3); 1 for the other
    ops, one rank or no bubble."""
    if op not in BUBBLE_OPS or int(n) < 2 or not bubble > 0:
        return 1.0
    steps = 2 * (int(n) - 1) if op == "all_reduce" else int(n) - 1
    return steps / (steps + float(bubble))


def bubble_from_etas(eta_all_reduce: float, eta_gather: float, n0: int) -> float:
    """The bubble b (section 3) that makes all_reduce's Simple efficiency over all_gather's (or
    reduce_scatter's) at n0 ranks what the model's steps give: r = 2 (k + b) / (2k + b), k = n0 - 1.
    NaN where the ratio is outside (1, 2), the range a non-negative finite b can produce."""
    k = int(n0) - 1
    if k < 1 or not (eta_all_reduce > 0 and eta_gather > 0):
        return float("nan")
    r = float(eta_all_reduce) / float(eta_gather)
    if not 1.0 < r < 2.0:
        return float("nan")
    return 2.0 * k * (r - 1.0) / (2.0 - r)
