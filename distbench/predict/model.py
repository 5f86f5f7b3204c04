"""Predicting larger clusters from the measured tables (issue 12): latency-bandwidth fits of the
collectives, algorithm costs at N ranks, hierarchical (multi-node) clusters, and the training step.

An analysis module: it reads `comm_summary.csv` and `training_summary.csv` and imports no harness
(only numpy, pandas, the standard library, `distbench.core.choices`, `distbench.core.sizes` and, to write its
CSVs atomically, `distbench.core.io`).

1. The fit (`fit_alpha_beta`, `fit_table`)
------------------------------------------
Per series (backend, world_size, op, dtype, nccl_env, timing, inplace[, rank_agg]) the median times
of the rows with status ok and correct True are described by the Hockney envelope

    t(S) = alpha + S / beta            t in us, S in bytes (nccl-tests' size), beta in GB/s (1e9 B/s)

fitted as two regimes, not as one line through all sizes:

- beta, the bandwidth asymptote: 1/beta = the least-squares slope of t over the largest sizes
  (those >= 64 MiB if there are at least 3, else the 3 largest: `TOP_BYTES`, `TOP_POINTS`), i.e.
  the marginal bandwidth where NCCL runs its Simple protocol;
- alpha, the latency floor: the median over the smallest sizes (<= 64 KiB, else the 3 smallest:
  `SMALL_BYTES`, `SMALL_POINTS`) of t - S/beta (in effect the median small-size time).

Why not one line: bandwidth rises through NCCL's protocol regimes (LL -> LL128 -> Simple), so a
single line through all sizes (the relative least squares used before) lands between the regimes:
on 4x H200 NVLink (benchmarks/comm-predict-h200x4-2026-11-26) it put the graph-timed all_reduce at
272 GB/s busbw where the largest sizes reach 325-350, and predictions >= 1 MiB came out 23-29% too
slow. The envelope is exact at both ends and lies *below* the measured curve in the transition
(about 512 KiB - 32 MiB on NVLink: up to ~45% too fast there).

Reported per fit: alpha_us, beta_gbps, the residuals over all sizes (rel_err_i = fit_i /
measured_i - 1; their max and median absolute value) and where the envelope holds: the longest run
of consecutive measured sizes whose |rel_err| <= `tolerance` (15% by default):
`fit_from_bytes`..`fit_to_bytes`; `alpha_to_bytes` / `beta_from_bytes`: the sizes that set them.

2. Algorithm costs (`cost_coefficients`, `predict_collective`)
--------------------------------------------------------------
For n ranks joined by identical links of latency alpha (per step) and bandwidth beta (per rank and
direction), every modelled algorithm costs t = a(n) * alpha + b(n) * S / beta:

    all_reduce, ring        2(n-1) (alpha + S/(n beta))       a = 2(n-1),    b = 2(n-1)/n
    all_reduce, tree        2 log2(n) alpha + 2(n-1)/n S/beta a = 2 log2 n,  b = 2(n-1)/n
    all_gather, ring        (n-1) (alpha + S/(n beta))        a = n-1,       b = (n-1)/n
    reduce_scatter, ring    (n-1) (alpha + S/(n beta))        a = n-1,       b = (n-1)/n
    broadcast, pipelined    (n-1) alpha + S/beta              a = n-1,       b = 1
    all_to_all, pairwise    (n-1) (alpha + S/(n beta))        a = n-1,       b = (n-1)/n
    send_recv               alpha + S/beta                    a = 1,         b = 1

S is nccl-tests' size: the whole buffer for all_reduce/broadcast/send_recv, the full output of
all_gather, the full input of reduce_scatter and the whole send buffer of all_to_all
(distbench.comm.ops). Sources: ring and pipelined costs, Thakur, Rabenseifner & Gropp, "Optimization
of collective communication operations in MPICH" (IJHPCA 2005) and Patarasuk & Yuan, "Bandwidth
optimal all-reduce algorithms for clusters of workstations" (JPDC 2009); tree all-reduce:
NCCL's double binary tree (Jeaugey, "Massively scale your deep learning training with NCCL 2.4",
NVIDIA blog 2019; Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast,
reduction and scan", Parallel Computing 2009): a reduce up and a broadcast down two trees, log2(n)
steps each way, at full bandwidth. NCCL's own cost model (src/graph/tuning.cc) writes the tree's
bandwidth term as 2 S / busBw (its algBw is busBw / 2); we keep the ring's 2(n-1)/n factor so that
beta is the same bus bandwidth for both (nccl-tests converts tree times to busbw with that factor);
the two forms agree for large n. b(n) is nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md,
`bus_factor` below, read from distbench.comm.spec), so beta is the asymptote of busbw.

Per-op fixed cost. The latency at n ranks is split into a fixed part, paid once per operation
(kernel launch, and the timing method: with events timing the host's issue rate, ~30-40 us per op
through torch here), and a per-step part:

    t(S, n) = alpha_fixed + a(n) alpha_hop + b(n) S / beta_link      (`predict_collective`,
                                                                       Link(alpha_hop, beta_link, fixed))

- beta_link = beta_fit * b(n): the bus-bandwidth asymptote, the same at every n within a node for
  the ring algorithms (nccl-tests' busbw definitions);
- alpha_fixed, alpha_hop: with fits of the same series at two or more world sizes (>= 2) in the
  table, least squares of alpha_fit(n_i) = alpha_fixed + a(n_i) alpha_hop over them, both >= 0
  (`solve_alpha_split`; alpha_source "world_sizes"); with one world size they cannot be separated,
  so alpha_hop = the preset's intra-node per-hop latency (1 us per NVLink step in nvlink4-ib400 and
  h200-ib400: NCCL tuning.cc hwLat NVLink 0.6-1.0 us LL/LL128; measured here 1.03 us for the
  graph-timed all_reduce, 12 us at 2 ranks -> 15.6 us at 4) and alpha_fixed = alpha_fit - a(n)
  alpha_hop, floored at 0 (alpha_hop capped at alpha_fit / a(n) then; `split_alpha`; alpha_source
  "preset"). Before this split the whole alpha was scaled by a(n): the ~40 us events floor at 2
  ranks became 122 us predicted for all_gather at 4 ranks (52 us measured).

The series' algorithm: tree for all_reduce under NCCL_ALGO=Tree, else ring (what NCCL picks at 2
ranks; on more ranks NCCL may pick tree for small sizes). A fit at 1 rank has no link (a = b = 0):
its link columns are empty. `link_from_fit` without alpha_hop_us gives the older all-per-step
link (alpha / a(n), beta b(n), fixed 0).

Where the model breaks (measured on 4x H200 NV18, NCCL 2.28, NVLS off, fit at 2 ranks, predicted at
4): (a) the protocol transition, ~512 KiB - 32 MiB: the envelope is too fast by up to 30-45%;
(b) all_gather and reduce_scatter: the busbw asymptote is not constant in n (264 GB/s at 2 ranks,
325 at 4; a 2-rank "ring" is a single exchange), so 4-rank predictions >= 128 MiB are ~20% too
slow; (c) send_recv (ring shift): at 4 ranks it runs at ~55% of its 2-rank bandwidth from 2 to 128
MiB and recovers at 512 MiB (NCCL's per-peer p2p channels), which no alpha-beta form with a fixed
beta follows; (d) the fixed per-op cost with events timing grows with n (host-side
synchronisation), so alpha_hop from two world sizes absorbs it (3-9 us "per hop" with events,
1-2 us with graph timing).

3. Clusters (`predict_hierarchical`, `predict_cluster`, `PRESETS`)
------------------------------------------------------------------
N GPUs in N/g nodes of g GPUs; intra-node links (alpha_i, beta_i: the measured per-link fit, or the
preset's) and inter-node links (alpha_e, beta_e: the preset's; beta_e is the NIC bandwidth per GPU,
each GPU driving its own rail, as on HGX/DGX nodes with one NIC per GPU). m = N/g nodes.

- "hierarchical" (every op; the phases run one after the other, no pipelining between them):
    all_reduce      = reduce_scatter_intra(S, g) + all_reduce_inter(S/g, m) + all_gather_intra(S, g)
    all_gather, reduce_scatter = op_inter(S/g, m) + op_intra(S, g)
    all_to_all      = (g-1)(alpha_i + S/(N beta_i)) + (N-g)(alpha_e + S/(N beta_e))
    broadcast       = (m-1) alpha_e + (g-1) alpha_i + S / min(beta_i, g beta_e)
    send_recv       = the inter link when m > 1, else the intra link
  The inter-node all-reduce of S/g over m nodes runs on g rails at once (one per local rank), each
  limited by its GPU's NIC: this is where beta_e enters.
- "ring": NCCL's flat ring through all N GPUs, its latency as NCCL's tuning model counts it
  (src/graph/tuning.cc: (steps - inter steps) x intra latency + inter steps x inter latency: for
  all_reduce 2(N-m) alpha_i + 2(m-1) alpha_e), its bandwidth that of the slowest hop:
  min(beta_i, g beta_e) (g rings, one per NIC, share each GPU's NVLink). all_reduce, all_gather,
  reduce_scatter, broadcast.
- "tree" (all_reduce): NCCL's tree: a chain inside each node and a double binary tree between nodes,
  latency 2((g-1) alpha_i + log2(m) alpha_e) (NCCL's tuning model), bandwidth as the ring.
The per-op fixed cost (the intra link's fixed_us; 0 for the inter link) is added once per operation,
not per phase. Each reduces to the flat formulas of section 2 with the intra link when N <= g (one node: the ring;
NCCL's intra-node tree is a chain) and with the inter link when g = 1 (tree: the flat tree). Not modelled: NVLS/NVLink SHARP, in-network reduction (SHARP,
CollNet), congestion, rail-unaligned topologies, and PXN.

4. Training (`predict_training`)
--------------------------------
Per training configuration (the summary's keys without world_size), from its run at the largest
measured world size n (status ok), under weak scaling (the per-rank batch stays that of the run):

    comm_ms(N)         DDP:  n_buckets x all_reduce(grad_bytes / n_buckets, N)
                       FSDP: n_buckets x (2 all_gather(param_bytes / n_buckets, N)
                                          + reduce_scatter(grad_bytes / n_buckets, N)),
                             param_bytes = params_total x (2 if dtype bfloat16 else 4): FSDP2
                             gathers each block in forward and again in backward, and
                             reduce-scatters its gradients (grad_bytes, fp32)
    window_ms          = max(0, comm_alone_ms_median - max(exposed_comm_ms, 0)): the communication
                         hidden behind backward at n, assumed the same at every N
    overhead_ms        = max(0, max(exposed_comm_ms, 0) - comm_alone_ms_median): exposed time the
                         collective alone does not explain (hooks, FSDP bookkeeping), assumed
                         constant, also at N = 1
    exposed_comm_ms(N) = max(0, comm_ms(N) - window_ms)
    step_time_ms(N)    = compute_only_ms_median + overhead_ms + exposed_comm_ms(N)
    efficiency(N)      = step_time_ms(1) / step_time_ms(N)    (weak scaling; comm_ms(1) = 0)

so step_time_ms(n) equals the measured step when comm_ms(n) equals the measured comm_alone
(`comm_model_ms_at_ref` next to `comm_alone_ms_measured` shows how far the links are from the
measured machine). A configuration without a multi-rank run gets window 0. No communication
(grad_bytes 0 or empty) gives comm_ms 0 and efficiency 1. Assumed as well: compute does not slow
down beside the collective any more than at n, the bucket layout does not change with N, and
strong-scaling rows are predicted at their measured per-rank batch (flagged in `note`).

5. Validation (`validate`)
--------------------------
Fit every series at one world size only (never the world size checked: alpha_hop is then the
preset's), turn the fit into links (section 2), predict the same series at another world size with
the same formula and compare with the measured medians, size by size: rel_err_pct = 100 (predicted
/ measured - 1). `validation_summary` gives the median and max |error| over all sizes, over the
fit's range and over the sizes >= 1 MiB (`_large`). On 4x H200 (fit at 2, predict 4, graph timing)
the median |error| >= 1 MiB is 7.5% for all_reduce, 14.5% broadcast, 16.7% all_to_all, ~21%
all_gather and reduce_scatter, 56% send_recv (the causes above).

CLI: python -m distbench.predict.model results/<label>/tables/comm_summary.csv [--training
results/<label>/tables/training_summary.csv] [--preset nvlink4-ib400] --out-dir DIR writes alpha_beta.csv,
prediction_comm.csv, prediction_training.csv and prediction_validation.csv.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from distbench.comm.spec import SPECS
from distbench.core.io import atomic_write_csv
from distbench.core.sizes import parse_size

NAN = float("nan")
TOLERANCE = 0.15  # |relative error| within which the fit "holds" at a size
MIN_POINTS = 3  # fewer sizes than this: no fit (two points always fit exactly)
SMALL_BYTES = 64 * 1024  # the latency regime: sizes up to 64 KiB (else the SMALL_POINTS smallest)
SMALL_POINTS = 3
TOP_BYTES = 64 * 2**20  # the bandwidth regime: sizes from 64 MiB if TOP_POINTS of them, else the top TOP_POINTS
TOP_POINTS = 3
LARGE_BYTES = 2**20  # validation_summary's "large" sizes (>= 1 MiB): where the envelope is meant to hold
DEFAULT_GPU_COUNTS = (8, 16, 64, 256, 1024)
DEFAULT_SIZES = tuple(2**k for k in (10, 16, 20, 24, 26, 28, 30))  # 1 KiB, 64 KiB, 1, 16, 64, 256 MiB, 1 GiB
DEFAULT_PRESET = "nvlink4-ib400"

# Not modelled: barrier moves no data (no beta to fit); all_to_all_v's cost depends on its traffic matrix.
MODELLED_OPS = tuple(name for name, s in SPECS.items() if s.modelled)


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for op at n ranks (doc/PERFORMANCE.md), read from the op's spec."""
    return SPECS[op].bus_factor(n)


ALGORITHMS = ("ring", "tree")  # flat algorithms (section 2); tree for all_reduce only
CLUSTER_ALGORITHMS = ("hierarchical", "ring", "tree")
_CLUSTER_OPS = {
    "hierarchical": MODELLED_OPS,
    "ring": ("all_reduce", "all_gather", "reduce_scatter", "broadcast"),
    "tree": ("all_reduce",),
}
# What makes one measured series; world_size last (it is the fit's, dropped when predicting others).
SERIES_KEYS = ("backend", "op", "dtype", "nccl_env", "timing", "inplace", "rank_agg", "world_size")


# ================================================================ data types
@dataclass(frozen=True)
class Link:
    """One link class: latency per algorithm step (us, alpha_hop), bandwidth per rank and direction
    (GB/s, the busbw asymptote), and a fixed cost per operation (us, alpha_fixed: launch, timing
    method), paid once whatever the number of steps."""

    alpha_us: float
    beta_gbps: float
    fixed_us: float = 0.0


@dataclass(frozen=True)
class AlphaBeta:
    """A two-regime envelope t(S) = alpha_us + S / (1e3 * beta_gbps) us, with its residuals.

    max_rel_err, median_rel_err: of |fit / measured - 1|, as fractions. holds_from_bytes ..
    holds_to_bytes: the longest run of consecutive measured sizes within the tolerance (NaN if
    none); n_within: how many sizes, in all, are within it."""

    alpha_us: float
    beta_gbps: float
    n_points: int
    max_rel_err: float
    median_rel_err: float
    holds_from_bytes: float
    holds_to_bytes: float
    n_within: int = 0
    tolerance: float = TOLERANCE
    alpha_to_bytes: float = NAN  # the largest size of the latency regime (alpha)
    beta_from_bytes: float = NAN  # the smallest size of the bandwidth regime (beta)
    sizes: tuple = field(default=(), repr=False)
    rel_errs: tuple = field(default=(), repr=False)

    def time_us(self, size_bytes):
        return _hockney(self.alpha_us, self.beta_gbps, size_bytes)


@dataclass(frozen=True)
class ClusterPreset:
    """A cluster: g GPUs per node, the intra-node and the inter-node (per GPU) link, and where the
    numbers come from."""

    name: str
    gpus_per_node: int
    intra: Link
    inter: Link
    source: str


# Bandwidths are achievable bus bandwidths (what nccl-tests' busbw reaches at large sizes), not
# link peaks; latencies (alpha_us) are per algorithm step (hop), between NCCL's per-hop figures for
# its LL and Simple protocols (src/graph/tuning.cc hwLat: NVLink ring 0.47-3.4 us, PCI 1.0-5.7 us,
# network 2.7-9.6 us). The intra link's alpha_us is also the per-hop latency fit_table/validate use
# when a table has one world size. fixed_us: a per-op cost (NCCL's base latency 3.6-8.4 us, the
# launch); 0 unless measured (h200-ib400).
PRESETS: dict[str, ClusterPreset] = {p.name: p for p in (
    ClusterPreset(
        "nvlink4-ib400", 8, Link(1.0, 360.0), Link(5.0, 45.0),
        "HGX/DGX H100: 8 GPUs per node on NVLink4 (18 links x 25 GB/s = 450 GB/s per direction per "
        "GPU; 360 GB/s = 80% of it, in line with the 330-368 GB/s busbw measured at 1 GiB on 2x H200 "
        "NV18 in benchmarks/h200x2-2026-11-26); 8x 400 Gb/s InfiniBand NDR (ConnectX-7), one per GPU: "
        "50 GB/s line rate per GPU, 45 GB/s (90%) achievable; alpha 1 us per NVLink step, 5 us per "
        "network step (NCCL tuning.cc hwLat, LL-LL128-Simple)."),
    ClusterPreset(
        "h200-ib400", 8, Link(1.0, 330.0, 9.5), Link(5.0, 45.0),
        "HGX H200: NVLink4 as nvlink4-ib400, intra figures measured here on H200 NV18 "
        "(float32, NCCL defaults): 330 GB/s = the ring all_reduce busbw at 1 GiB on 2x H200 "
        "(benchmarks/h200x2-2026-11-26: 328 events / 330 graph GB/s; 325-353 GB/s asymptote at 2-4 "
        "ranks in benchmarks/comm-predict-h200x4-2026-11-26); alpha 1 us per NVLink step and 9.5 us "
        "fixed per op = the graph-timed all_reduce at 2 and 4 ranks (11.5 and 15.6 us: fixed 9.45 + "
        "1.03 per step); inter-node 8x 400 Gb/s InfiniBand as nvlink4-ib400 (45 GB/s per GPU, 5 us)."),
    ClusterPreset(
        "pcie-eth100", 8, Link(2.0, 20.0), Link(25.0, 1.25),
        "8 PCIe GPUs per node without NVLink (PCIe Gen4 x16: 32 GB/s per direction peak, ~20 GB/s "
        "achievable ring busbw through the host bridges); one 100 GbE NIC per node shared by the 8 "
        "GPUs: 12.5 GB/s line rate, ~10 GB/s over TCP, 1.25 GB/s per GPU; alpha 2 us per PCIe step "
        "(tuning.cc PCI 1.0-5.7 us), 25 us per step over NCCL's socket transport (TCP, no RDMA)."),
)}


# ================================================================ section 1: the fit
def _hockney(alpha_us, beta_gbps, size_bytes):
    """alpha + S/beta in us (beta in GB/s = 1e3 B/us); beta inf: no bandwidth term."""
    s = np.asarray(size_bytes, dtype=float)
    t = alpha_us + (0.0 if math.isinf(beta_gbps) else s / (1e3 * beta_gbps))
    return float(t) if np.ndim(t) == 0 else t


def _top_indices(s: np.ndarray) -> np.ndarray:
    """Indices of the bandwidth regime: the sizes >= TOP_BYTES if there are at least TOP_POINTS of
    them, else the TOP_POINTS largest (all of them if fewer). s sorted ascending."""
    big = np.flatnonzero(s >= TOP_BYTES)
    if len(big) >= TOP_POINTS:
        return big
    return np.arange(max(0, len(s) - TOP_POINTS), len(s))


def _small_indices(s: np.ndarray) -> np.ndarray:
    """Indices of the latency regime: the sizes <= SMALL_BYTES if any, else the SMALL_POINTS
    smallest. s sorted ascending."""
    small = np.flatnonzero(s <= SMALL_BYTES)
    return small if len(small) else np.arange(min(len(s), SMALL_POINTS))


def _longest_run(ok: np.ndarray) -> tuple[int, int] | None:
    """First and last index of the longest run of True (the first such run on a tie)."""
    best, start = None, None
    for i, flag in enumerate(list(ok) + [False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if best is None or (i - start) > (best[1] - best[0] + 1):
                best = (start, i - 1)
            start = None
    return best


def fit_alpha_beta(sizes, times_us, tolerance: float = TOLERANCE) -> AlphaBeta:
    """Fit the two-regime envelope t = alpha + S/beta to (sizes in bytes, times in us) (module
    docstring, section 1): 1/beta = the least-squares slope over the largest sizes (the bandwidth
    asymptote), alpha = the median over the smallest sizes of t - S/beta (the latency floor).
    Sizes <= 0 and non-finite or non-positive times are dropped; fewer than 2 points left raises
    ValueError. Residuals and the range where the envelope holds are over all sizes."""
    s = np.asarray(sizes, dtype=float)
    t = np.asarray(times_us, dtype=float)
    if s.shape != t.shape:
        raise ValueError(f"sizes and times differ in length: {s.shape} vs {t.shape}")
    keep = np.isfinite(s) & np.isfinite(t) & (s > 0) & (t > 0)
    s, t = s[keep], t[keep]
    if len(s) < 2:
        raise ValueError(f"need at least 2 sizes with a positive time to fit, got {len(s)}")
    order = np.argsort(s, kind="stable")
    s, t = s[order], t[order]
    top = _top_indices(s)
    gamma = 0.0  # us per byte
    if len(np.unique(s[top])) >= 2:
        gamma = max(0.0, float(np.polyfit(s[top], t[top], 1)[0]))
    if gamma * s[-1] <= 1e-9 * float(np.median(t)):  # rounding noise, not a bandwidth term
        gamma = 0.0
    small = _small_indices(s)
    alpha = max(0.0, float(np.median(t[small] - gamma * s[small])))
    beta = math.inf if gamma == 0 else 1.0 / (1e3 * gamma)
    rel = (alpha + gamma * s) / t - 1.0
    within = np.abs(rel) <= tolerance
    run = _longest_run(within)
    return AlphaBeta(
        alpha_us=alpha, beta_gbps=beta, n_points=len(s),
        max_rel_err=float(np.max(np.abs(rel))), median_rel_err=float(np.median(np.abs(rel))),
        holds_from_bytes=float(s[run[0]]) if run else NAN, holds_to_bytes=float(s[run[1]]) if run else NAN,
        n_within=int(within.sum()), tolerance=tolerance, alpha_to_bytes=float(s[small[-1]]),
        beta_from_bytes=float(s[top[0]]), sizes=tuple(s.tolist()), rel_errs=tuple(rel.tolist()))


# ================================================================ section 2: algorithms and links
def _check_op(op: str) -> None:
    if op not in MODELLED_OPS:
        raise ValueError(f"no cost model for op {op!r} (modelled: {', '.join(MODELLED_OPS)})")


def cost_coefficients(op: str, n_ranks: int, algorithm: str = "ring") -> tuple[float, float]:
    """(a, b) with t = a * alpha + b * S / beta for `op` on n_ranks identical links (section 2).
    One rank: (0, 0), nothing crosses a link."""
    _check_op(op)
    n = int(n_ranks)
    if n < 1:
        raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r} (one of {', '.join(ALGORITHMS)})")
    if algorithm == "tree" and op != "all_reduce":
        raise ValueError(f"the tree algorithm is modelled for all_reduce only, not {op}")
    if n == 1:
        return 0.0, 0.0
    b = bus_factor(op, n)
    if op == "all_reduce":
        # ring: 2(n-1) steps of S/n each; tree: log2(n) steps up and down (NCCL double binary tree)
        a = 2 * math.log2(n) if algorithm == "tree" else 2.0 * (n - 1)
    elif op in ("all_gather", "reduce_scatter", "all_to_all"):
        a = n - 1.0  # ring (all_gather/reduce_scatter); all_to_all: n-1 pairwise exchanges of S/n
    elif op == "broadcast":
        a = n - 1.0  # pipelined chain: n-1 hops to fill, then S/beta streams through
    else:  # send_recv: one hop, whatever n
        a = 1.0
    return float(a), float(b)


def series_algorithm(op: str, nccl_env) -> str:
    """The algorithm a measured series ran: tree for all_reduce under NCCL_ALGO=Tree, else ring."""
    m = re.search(r"NCCL_ALGO=([A-Za-z_]+)", str(nccl_env or ""))
    return "tree" if op == "all_reduce" and m and m.group(1).lower() == "tree" else "ring"


def split_alpha(alpha_us: float, a: float, alpha_hop_us: float) -> tuple[float, float]:
    """(alpha_fixed, alpha_hop) from one world size: alpha_fixed = alpha - a alpha_hop, floored at 0;
    where a alpha_hop exceeds alpha, alpha_hop is capped at alpha / a (so the fit is reproduced)."""
    if a <= 0:
        return max(0.0, float(alpha_us)), float(alpha_hop_us)
    hop = min(float(alpha_hop_us), float(alpha_us) / a)
    return max(0.0, float(alpha_us) - a * hop), hop


def solve_alpha_split(a_values, alphas) -> tuple[float, float]:
    """(alpha_fixed, alpha_hop) >= 0 minimising sum (alpha_fixed + a_i alpha_hop - alpha_i)^2 over
    the fits at several world sizes (a_i = the op's hop count there). Needs two distinct a_i."""
    a = np.asarray(a_values, float)
    y = np.asarray(alphas, float)
    if len(np.unique(a)) < 2:
        raise ValueError("need fits at two world sizes with different hop counts")

    def cost(f, h):
        return float(np.sum((f + h * a - y) ** 2))

    cands = []
    h, f = np.polyfit(a, y, 1)
    if f >= 0 and h >= 0:
        cands.append((float(f), float(h)))
    cands.append((0.0, max(0.0, float(np.sum(a * y) / np.sum(a * a)))))  # no fixed part
    cands.append((max(0.0, float(np.mean(y))), 0.0))  # no per-hop part
    return min(cands, key=lambda c: cost(*c))


def link_from_fit(alpha_us: float, beta_gbps: float, op: str, n_ranks: int, algorithm: str = "ring",
                  alpha_hop_us: float | None = None) -> Link:
    """The per-link figures behind a fit at n_ranks: beta_link = beta * b(n) (the busbw asymptote);
    with alpha_hop_us (section 2) the latency splits into alpha_fixed = alpha - a(n) alpha_hop
    (`split_alpha`) and alpha_hop per step; without it all of alpha is per step (alpha / a(n),
    fixed 0). NaN at one rank."""
    a, b = cost_coefficients(op, n_ranks, algorithm)
    if a == 0 or b == 0:
        return Link(NAN, NAN)
    if alpha_hop_us is None:
        return Link(alpha_us / a, beta_gbps * b)
    fixed, hop = split_alpha(alpha_us, a, alpha_hop_us)
    return Link(hop, beta_gbps * b, fixed)


def _as_link(link) -> Link:
    if isinstance(link, Link):
        return link
    if hasattr(link, "alpha_us") and hasattr(link, "beta_gbps"):
        return Link(float(link.alpha_us), float(link.beta_gbps), float(getattr(link, "fixed_us", 0.0)))
    if len(link) == 3:
        alpha, beta, fixed = link
        return Link(float(alpha), float(beta), float(fixed))
    alpha, beta = link
    return Link(float(alpha), float(beta))


def _cost(a: float, alpha: float, b: float, size, beta: float):
    s = np.asarray(size, dtype=float)
    t = a * alpha + (0.0 if (b == 0 or math.isinf(beta)) else b * s / (1e3 * beta))
    t = t + 0.0 * s  # broadcast to the sizes' shape
    return float(t) if np.ndim(t) == 0 else t


def predict_collective(op: str, size_bytes, n_ranks: int, link, algorithm: str = "ring"):
    """Time (us) of `op` on `size_bytes` (nccl-tests' size; a number or an array) over n_ranks
    ranks joined by `link` (a Link, anything with alpha_us/beta_gbps[/fixed_us], or an (alpha_us,
    beta_gbps[, fixed_us]) tuple): fixed + a(n) alpha + b(n) S / beta (section 2); 0 at one rank."""
    ln = _as_link(link)
    a, b = cost_coefficients(op, n_ranks, algorithm)
    out = _cost(a, ln.alpha_us, b, size_bytes, ln.beta_gbps)
    return out + ln.fixed_us if (a > 0 and ln.fixed_us) else out


# ================================================================ section 3: clusters
def get_preset(preset) -> ClusterPreset:
    if isinstance(preset, ClusterPreset):
        return preset
    try:
        return PRESETS[str(preset)]
    except KeyError:
        raise ValueError(f"unknown preset {preset!r} (one of {', '.join(PRESETS)})") from None


def _nodes(n_gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(g, m): GPUs per node in use and nodes. Fewer GPUs than a node: one partly used node."""
    n, g = int(n_gpus), int(gpus_per_node)
    if n < 1 or g < 1:
        raise ValueError(f"need n_gpus >= 1 and gpus_per_node >= 1, got {n_gpus} and {gpus_per_node}")
    if n <= g:
        return n, 1
    if n % g:
        raise ValueError(f"{n} GPUs do not fill whole nodes of {g}")
    return g, n // g


def _bottleneck(intra: Link, inter: Link, g: int) -> float:
    """Bandwidth of a flat ring crossing nodes: g rings (one per NIC) share each GPU's intra link."""
    return inter.beta_gbps if g == 1 else min(intra.beta_gbps, g * inter.beta_gbps)


def predict_hierarchical(op: str, size_bytes, n_gpus: int, intra, inter, gpus_per_node: int,
                         algorithm: str = "hierarchical"):
    """Time (us) of `op` at n_gpus GPUs in nodes of gpus_per_node (section 3)."""
    _check_op(op)
    if algorithm not in CLUSTER_ALGORITHMS:
        raise ValueError(f"unknown cluster algorithm {algorithm!r} (one of {', '.join(CLUSTER_ALGORITHMS)})")
    if op not in _CLUSTER_OPS[algorithm]:
        raise ValueError(f"{algorithm} is modelled for {', '.join(_CLUSTER_OPS[algorithm])}, not {op}")
    li, le = _as_link(intra), _as_link(inter)
    g, m = _nodes(n_gpus, gpus_per_node)
    n = g * m
    s = np.asarray(size_bytes, dtype=float)
    out = None
    if m > 1:  # the per-op fixed cost (the intra link's) is added once at the end, not per phase
        fixed = li.fixed_us
        li, le = Link(li.alpha_us, li.beta_gbps), Link(le.alpha_us, le.beta_gbps)
    if m == 1:  # one node: the flat formulas on the intra link (NCCL's intra-node tree is a chain)
        out = predict_collective(op, s, n, li, "ring")
    elif algorithm == "hierarchical":
        if op == "all_reduce":
            out = (predict_collective("reduce_scatter", s, g, li) + predict_collective("all_reduce", s / g, m, le)
                   + predict_collective("all_gather", s, g, li))
        elif op in ("all_gather", "reduce_scatter"):
            out = predict_collective(op, s / g, m, le) + predict_collective(op, s, g, li)
        elif op == "all_to_all":
            out = (_cost(g - 1, li.alpha_us, (g - 1) / n, s, li.beta_gbps)
                   + _cost(n - g, le.alpha_us, (n - g) / n, s, le.beta_gbps))
        elif op == "broadcast":
            out = (m - 1) * le.alpha_us + (g - 1) * li.alpha_us + _cost(0, 0, 1.0, s, _bottleneck(li, le, g))
        else:  # send_recv: some ring neighbour sits on another node
            out = predict_collective(op, s, n, le)
    else:
        beta = _bottleneck(li, le, g)
        if algorithm == "tree":  # all_reduce
            lat = 2 * ((g - 1) * li.alpha_us + math.log2(m) * le.alpha_us)
        else:
            steps_intra, steps_inter = ((n - m), (m - 1))
            if op == "all_reduce":
                steps_intra, steps_inter = 2 * steps_intra, 2 * steps_inter
            lat = steps_intra * li.alpha_us + steps_inter * le.alpha_us
        out = lat + _cost(0, 0, bus_factor(op, n), s, beta)
    if m > 1:
        out = out + fixed
    return float(out) if np.ndim(out) == 0 else out


# ================================================================ reading the tables
def _truthy(v) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return False
    return str(v).strip().lower() in ("true", "1", "yes")


def _usable(df: pd.DataFrame) -> pd.DataFrame:
    """Rows to fit or compare: status ok, correct True, a modelled op, a size and a time > 0."""
    d = df.copy()
    if "status" in d:
        d = d[d["status"].astype(str) == "ok"]
    if "correct" in d:
        d = d[d["correct"].map(_truthy)]
    d = d[d["op"].isin(MODELLED_OPS)]
    d["size_bytes"] = pd.to_numeric(d["size_bytes"], errors="coerce")
    d["time_us_median"] = pd.to_numeric(d["time_us_median"], errors="coerce")
    return d[(d["size_bytes"] > 0) & (d["time_us_median"] > 0)]


def _keys(df: pd.DataFrame, with_world_size: bool = True) -> list[str]:
    return [k for k in SERIES_KEYS if k in df.columns and (with_world_size or k != "world_size")]


def _key_dict(keys, values) -> dict:
    values = values if isinstance(values, tuple) else (values,)
    return dict(zip(keys, values))


FIT_COLUMNS = ("algorithm", "n_points", "alpha_us", "beta_gbps", "alpha_fixed_us", "alpha_hop_us", "alpha_source",
               "link_alpha_us", "link_beta_gbps", "max_rel_err_pct", "median_rel_err_pct", "n_within",
               "tolerance_pct", "fit_from_bytes", "fit_to_bytes", "alpha_to_bytes", "beta_from_bytes",
               "measured_from_bytes", "measured_to_bytes", "busbw_gbps_max_measured")


def fit_table(comm_summary: pd.DataFrame, tolerance: float = TOLERANCE, min_bytes=None, max_bytes=None,
              preset=DEFAULT_PRESET) -> pd.DataFrame:
    """One fit per series of comm_summary (section 1), with its per-link figures (section 2).

    Columns: the series keys present (backend, op, dtype, nccl_env, timing, inplace, rank_agg,
    world_size), then FIT_COLUMNS. alpha_us, beta_gbps: the envelope at that world size;
    alpha_fixed_us + a(n) alpha_hop_us: its latency split (alpha_source "world_sizes": solved over
    the fits of the same series at two or more world sizes >= 2; "preset": alpha_hop = the
    `preset`'s intra-node per-hop latency); link_alpha_us = alpha_hop_us; link_beta_gbps = beta
    b(n), the busbw asymptote. fit_from_bytes..fit_to_bytes: where the envelope holds (the longest
    run of sizes within `tolerance`); alpha_to_bytes / beta_from_bytes: the sizes that set alpha
    (up to) and beta (from); measured_from/to_bytes: the sizes fitted. min_bytes/max_bytes
    restrict the sizes fitted (numbers or strings such as "1MiB")."""
    hop_preset = get_preset(preset).intra.alpha_us
    d = _usable(comm_summary)
    if min_bytes is not None:
        d = d[d["size_bytes"] >= parse_size(min_bytes)]
    if max_bytes is not None:
        d = d[d["size_bytes"] <= parse_size(max_bytes)]
    keys = _keys(d)
    rows = []
    if len(d):
        for kv, g in d.groupby(keys, sort=True, dropna=False):
            if g["size_bytes"].nunique() < MIN_POINTS:
                continue
            row = _key_dict(keys, kv)
            fit = fit_alpha_beta(g["size_bytes"], g["time_us_median"], tolerance)
            algo = series_algorithm(row["op"], row.get("nccl_env"))
            n = int(row.get("world_size", 1))
            a, b = cost_coefficients(row["op"], n, algo)
            busbw = pd.to_numeric(g.get("busbw_gbps_median", pd.Series(dtype=float)), errors="coerce")
            row.update(
                algorithm=algo, n_points=fit.n_points, alpha_us=fit.alpha_us, beta_gbps=fit.beta_gbps,
                link_beta_gbps=fit.beta_gbps * b if b > 0 else NAN, _a=a,
                max_rel_err_pct=100 * fit.max_rel_err, median_rel_err_pct=100 * fit.median_rel_err,
                n_within=fit.n_within, tolerance_pct=100 * tolerance,
                fit_from_bytes=fit.holds_from_bytes, fit_to_bytes=fit.holds_to_bytes,
                alpha_to_bytes=fit.alpha_to_bytes, beta_from_bytes=fit.beta_from_bytes,
                measured_from_bytes=float(g["size_bytes"].min()), measured_to_bytes=float(g["size_bytes"].max()),
                busbw_gbps_max_measured=float(busbw.max()) if busbw.notna().any() else NAN)
            rows.append(row)
    out = pd.DataFrame(rows, columns=[*keys, *FIT_COLUMNS, "_a"])
    if not len(out):
        return out.drop(columns="_a")
    # the latency split: per series (all keys but world_size), over its world sizes >= 2
    series_keys = [k for k in keys if k != "world_size"]
    groups = out.groupby(series_keys, sort=False, dropna=False).groups if series_keys else {(): out.index}
    split = {}  # index -> (alpha_fixed, alpha_hop, source)
    for idx in groups.values():
        part = out.loc[idx]
        multi = part[part["_a"] > 0]
        if multi["_a"].nunique() >= 2:
            fixed, hop = solve_alpha_split(multi["_a"], multi["alpha_us"])
            split.update({i: (fixed, hop, "world_sizes") for i in multi.index})
        else:
            split.update({i: (*split_alpha(out.at[i, "alpha_us"], out.at[i, "_a"], hop_preset), "preset")
                          for i in multi.index})
    none = (NAN, NAN, pd.NA)
    out["alpha_fixed_us"] = [split.get(i, none)[0] for i in out.index]
    out["alpha_hop_us"] = [split.get(i, none)[1] for i in out.index]
    out["alpha_source"] = [split.get(i, none)[2] for i in out.index]
    out["link_alpha_us"] = out["alpha_hop_us"]
    return out.drop(columns="_a")


def _fit_link(f) -> Link:
    """The Link of one fit_table row: (alpha_hop, busbw asymptote, alpha_fixed)."""
    fixed = _num(f.get("alpha_fixed_us", 0.0))
    return Link(_num(f["link_alpha_us"]), _num(f["link_beta_gbps"]), 0.0 if math.isnan(fixed) else fixed)


# ================================================================ section 3: cluster tables
CLUSTER_COLUMNS = ("backend", "op", "dtype", "nccl_env", "timing", "inplace", "rank_agg", "fit_world_size",
                   "intra_source", "preset", "algorithm", "gpus", "nodes", "gpus_per_node", "size_bytes", "time_us",
                   "algbw_gbps", "busbw_gbps", "intra_alpha_us", "intra_beta_gbps", "intra_fixed_us", "inter_alpha_us",
                   "inter_beta_gbps", "in_fit_range")


def _valid_link(link: Link) -> bool:
    return (math.isfinite(link.alpha_us) and link.alpha_us >= 0 and not math.isnan(link.beta_gbps)
            and link.beta_gbps > 0)


def predict_cluster(fits: pd.DataFrame | None, preset=DEFAULT_PRESET, sizes=DEFAULT_SIZES,
                    gpu_counts=DEFAULT_GPU_COUNTS, algorithms=CLUSTER_ALGORITHMS,
                    include_preset_intra: bool = True) -> pd.DataFrame:
    """Collective times at each GPU count and size (section 3).

    For every row of `fits` (fit_table) with a usable link, its measured per-link alpha/beta is the
    intra-node link (intra_source "measured"); the inter-node link and the GPUs per node are the
    preset's. With include_preset_intra (or without fits), every modelled op is also predicted
    with the preset's own intra-node link (intra_source "preset", series columns empty). Each op
    gets every algorithm in `algorithms` that models it. in_fit_range: the size lies where the
    measured fit holds (empty for preset rows)."""
    p = get_preset(preset)
    sizes = np.array([parse_size(s) for s in sizes], dtype=float)
    cases = []  # (series dict, intra link, source, fit range)
    if fits is not None and len(fits):
        for _, r in fits.iterrows():
            link = _fit_link(r)
            if not _valid_link(link):
                continue
            series = {k: r[k] for k in SERIES_KEYS if k in fits.columns and k != "world_size"}
            series["fit_world_size"] = r.get("world_size", pd.NA)
            cases.append((series, link, "measured", (r.get("fit_from_bytes", NAN), r.get("fit_to_bytes", NAN))))
    if include_preset_intra or not cases:
        cases += [({"op": op}, p.intra, "preset", None) for op in MODELLED_OPS]
    rows = []
    for series, intra, source, holds in cases:
        op = series["op"]
        for algo in algorithms:
            if op not in _CLUSTER_OPS[algo]:
                continue
            for n in gpu_counts:
                g, m = _nodes(n, p.gpus_per_node)
                t = np.atleast_1d(predict_hierarchical(op, sizes, n, intra, p.inter, p.gpus_per_node, algo))
                for s, tu in zip(sizes, t):
                    algbw = s / (1e3 * tu) if tu > 0 else NAN
                    in_range = (pd.NA if holds is None or pd.isna(holds[0]) else
                                bool(float(holds[0]) <= s <= float(holds[1])))
                    rows.append({**series, "intra_source": source, "preset": p.name, "algorithm": algo, "gpus": int(n),
                                 "nodes": m, "gpus_per_node": g, "size_bytes": int(s), "time_us": float(tu),
                                 "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(op, int(n)) if n > 1 else NAN,
                                 "intra_alpha_us": intra.alpha_us, "intra_beta_gbps": intra.beta_gbps,
                                 "intra_fixed_us": intra.fixed_us,
                                 "inter_alpha_us": p.inter.alpha_us, "inter_beta_gbps": p.inter.beta_gbps,
                                 "in_fit_range": in_range})
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)


# ================================================================ section 4: training
TRAINING_KEYS = ("backend", "model", "strategy", "hidden_dim", "num_layers", "n_heads", "seq_len", "vocab_size",
                 "lora_rank", "compile", "batch_size", "scaling", "dtype", "optimizer", "bucket_cap_mb",
                 "gradient_as_bucket_view", "static_graph", "broadcast_buffers", "comm_hook", "grad_accum",
                 "nccl_env", "config")
TRAINING_OUT = ("ref_world_size", "preset", "algorithm", "gpus", "nodes", "gpus_per_node", "intra_alpha_us",
                "intra_beta_gbps", "intra_fixed_us", "inter_alpha_us", "inter_beta_gbps", "grad_bytes", "n_buckets",
                "compute_only_ms", "comm_alone_ms_measured", "exposed_comm_ms_measured", "step_time_ms_measured",
                "overlap_window_ms", "overhead_ms", "comm_model_ms_at_ref", "comm_ms", "exposed_comm_ms",
                "step_time_ms", "step_time_ms_1gpu", "efficiency", "note")


def _num(v) -> float:
    try:
        return NAN if v is None or pd.isna(v) else float(v)
    except (TypeError, ValueError):
        return NAN


def training_comm_ms(row, n_gpus: int, intra, inter, gpus_per_node: int, algorithm: str = "hierarchical") -> float:
    """Modelled gradient communication of one optimizer step at n_gpus, in ms (section 4)."""
    n = int(n_gpus)
    grad = _num(row.get("grad_bytes"))
    if n <= 1 or math.isnan(grad) or grad <= 0:
        return 0.0
    nb = _num(row.get("n_buckets"))
    nb = int(nb) if not math.isnan(nb) and nb >= 1 else 1

    def t(op, total):
        algo = algorithm if op in _CLUSTER_OPS[algorithm] else "hierarchical"
        return nb * predict_hierarchical(op, total / nb, n, intra, inter, gpus_per_node, algo)

    if str(row.get("strategy", "ddp")) == "fsdp":
        params = _num(row.get("params_total"))
        param_bytes = params * (2 if str(row.get("dtype")) == "bfloat16" else 4) if not math.isnan(params) else grad
        us = 2 * t("all_gather", param_bytes) + t("reduce_scatter", grad)
    else:
        us = t("all_reduce", grad)
    return float(us) / 1e3


def predict_training(training_summary: pd.DataFrame, preset=DEFAULT_PRESET, gpu_counts=DEFAULT_GPU_COUNTS,
                     intra=None, algorithm: str = "hierarchical") -> pd.DataFrame:
    """Step time and weak-scaling efficiency of each training configuration at each GPU count
    (section 4). `preset`: a PRESETS name or a ClusterPreset; `intra`: a Link replacing the
    preset's intra-node link (e.g. a measured one, `pick_link`)."""
    p = get_preset(preset)
    li = _as_link(intra) if intra is not None else p.intra
    d = training_summary.copy()
    if "comm_alone_ms_median" not in d and "allreduce_alone_ms_median" in d:  # tables before the rename
        d["comm_alone_ms_median"] = d["allreduce_alone_ms_median"]
    if "status" in d:
        d = d[d["status"].astype(str) == "ok"]
    d = d[pd.to_numeric(d["compute_only_ms_median"], errors="coerce").notna()]
    keys = [k for k in TRAINING_KEYS if k in d.columns]
    rows = []
    if len(d) and keys:
        for kv, g in d.groupby(keys, sort=True, dropna=False):
            ref = g.iloc[int(np.argmax(pd.to_numeric(g["world_size"]).to_numpy()))]
            n_ref = int(ref["world_size"])
            compute = _num(ref["compute_only_ms_median"])
            step_meas = _num(ref.get("step_time_ms_median"))
            comm_alone = _num(ref.get("comm_alone_ms_median"))
            exposed = _num(ref.get("exposed_comm_ms"))
            if math.isnan(exposed):
                exposed = step_meas - compute
            exposed_pos = max(exposed, 0.0) if not math.isnan(exposed) else 0.0
            notes = []
            if n_ref < 2 or math.isnan(comm_alone):
                window = 0.0
                overhead = exposed_pos if n_ref >= 2 else 0.0
                notes.append("no multi-rank run: overlap window assumed 0" if n_ref < 2
                             else "no comm_alone time: overlap window assumed 0")
            else:
                window = max(0.0, comm_alone - exposed_pos)
                overhead = max(0.0, exposed_pos - comm_alone)
            if str(ref.get("scaling", "weak")) == "strong":
                notes.append("strong scaling: predicted at the measured per-rank batch (as weak)")
            grad_bytes, n_buckets = ref.get("grad_bytes"), ref.get("n_buckets")
            at_ref = training_comm_ms(ref, n_ref, li, p.inter, p.gpus_per_node, algorithm)
            step1 = compute + overhead
            base = _key_dict(keys, kv)
            for n in gpu_counts:
                gg, m = _nodes(n, p.gpus_per_node)
                comm = training_comm_ms(ref, n, li, p.inter, p.gpus_per_node, algorithm)
                exp_n = max(0.0, comm - window)
                step = compute + overhead + exp_n
                rows.append({**base, "ref_world_size": n_ref, "preset": p.name, "algorithm": algorithm, "gpus": int(n),
                             "nodes": m, "gpus_per_node": gg, "intra_alpha_us": li.alpha_us,
                             "intra_beta_gbps": li.beta_gbps, "intra_fixed_us": li.fixed_us, "inter_alpha_us": p.inter.alpha_us,
                             "inter_beta_gbps": p.inter.beta_gbps, "grad_bytes": grad_bytes, "n_buckets": n_buckets,
                             "compute_only_ms": compute, "comm_alone_ms_measured": comm_alone,
                             "exposed_comm_ms_measured": exposed, "step_time_ms_measured": step_meas,
                             "overlap_window_ms": window, "overhead_ms": overhead, "comm_model_ms_at_ref": at_ref,
                             "comm_ms": comm, "exposed_comm_ms": exp_n, "step_time_ms": step,
                             "step_time_ms_1gpu": step1, "efficiency": step1 / step if step > 0 else NAN,
                             "note": "; ".join(notes)})
    return pd.DataFrame(rows, columns=[*keys, *TRAINING_OUT])


def pick_link(fits: pd.DataFrame, op: str = "all_reduce", backend: str = "nccl",
              timing_preference=("graph", "events", "host")) -> Link | None:
    """The per-link figures of one fitted series: `op` on `backend` with NCCL defaults, the first
    timing of `timing_preference` present, then the most sizes within the tolerance, then the
    largest world size. None if there is none."""
    if fits is None or not len(fits):
        return None
    f = fits[(fits["op"] == op) & (fits["backend"] == backend)]
    if "nccl_env" in f:
        f = f[f["nccl_env"].astype(str) == "default"]
    f = f[f["link_beta_gbps"].notna() & (f["link_beta_gbps"] > 0)]
    if not len(f):
        return None
    rank = {t: i for i, t in enumerate(timing_preference)}
    f = f.assign(_t=f["timing"].map(lambda t: rank.get(t, len(rank))) if "timing" in f else 0)
    f = f.sort_values(["_t", "n_within", "world_size"], ascending=[True, False, False])
    return _fit_link(f.iloc[0])


# ================================================================ section 5: validation
VALIDATION_COLUMNS = ("algorithm", "fit_world_size", "check_world_size", "size_bytes", "time_us_predicted",
                      "time_us_measured", "rel_err_pct", "in_fit_range", "fit_max_rel_err_pct", "alpha_fixed_us",
                      "alpha_hop_us", "alpha_source", "link_beta_gbps")


def validate(comm_summary: pd.DataFrame, fit_ws: int, check_ws: int, tolerance: float = TOLERANCE,
             preset=DEFAULT_PRESET) -> pd.DataFrame:
    """Fit every series at world size fit_ws only (the rows at other world sizes are never seen by
    the fit, so alpha_hop is the `preset`'s intra-node per-hop latency), predict it at check_ws
    (alpha_fixed + a(check_ws) alpha_hop + b(check_ws) S / beta_link, section 2) and compare with
    the measured medians there, one row per (series, size) measured at check_ws: rel_err_pct =
    100 (predicted / measured - 1). in_fit_range: the size is where the envelope at fit_ws holds."""
    d = _usable(comm_summary)
    keys = _keys(d, with_world_size=False)
    out_cols = [*keys, *VALIDATION_COLUMNS]
    if not len(d):
        return pd.DataFrame(columns=out_cols)
    ws = pd.to_numeric(d["world_size"])
    fits = fit_table(d[ws == int(fit_ws)], tolerance, preset=preset)
    check = d[ws == int(check_ws)]
    rows = []
    for _, f in fits.iterrows():
        link = _fit_link(f)
        if not _valid_link(link):
            continue
        m = check
        for k in keys:
            m = m[m[k].isna()] if pd.isna(f[k]) else m[m[k] == f[k]]
        if not len(m):
            continue
        m = m.sort_values("size_bytes")
        pred = np.atleast_1d(predict_collective(f["op"], m["size_bytes"].to_numpy(float), int(check_ws), link,
                                                f["algorithm"]))
        for (_, r), tp in zip(m.iterrows(), pred):
            meas = float(r["time_us_median"])
            s = float(r["size_bytes"])
            in_range = (False if pd.isna(f["fit_from_bytes"]) else
                        bool(float(f["fit_from_bytes"]) <= s <= float(f["fit_to_bytes"])))
            rows.append({**{k: f[k] for k in keys}, "algorithm": f["algorithm"], "fit_world_size": int(fit_ws),
                         "check_world_size": int(check_ws), "size_bytes": int(s), "time_us_predicted": float(tp),
                         "time_us_measured": meas, "rel_err_pct": 100 * (float(tp) / meas - 1),
                         "in_fit_range": in_range, "fit_max_rel_err_pct": f["max_rel_err_pct"],
                         "alpha_fixed_us": link.fixed_us, "alpha_hop_us": link.alpha_us,
                         "alpha_source": f["alpha_source"], "link_beta_gbps": link.beta_gbps})
    return pd.DataFrame(rows, columns=out_cols)


def validation_summary(validation: pd.DataFrame, large_bytes=LARGE_BYTES) -> pd.DataFrame:
    """Per series and world-size pair: the number of sizes and the median and max |rel_err_pct|,
    over all sizes, over those in the fit's range and over the large sizes (>= large_bytes, 1 MiB:
    the `_large` columns)."""
    if not len(validation):
        return pd.DataFrame()
    keys = [c for c in validation.columns
            if c in SERIES_KEYS or c in ("algorithm", "fit_world_size", "check_world_size")]
    v = validation.assign(abs_err_pct=validation["rel_err_pct"].abs())
    large = parse_size(large_bytes)
    rows = []
    for kv, g in v.groupby(keys, sort=True, dropna=False):
        inr = g[g["in_fit_range"].map(_truthy)]
        big = g[pd.to_numeric(g["size_bytes"]) >= large]
        rows.append({**_key_dict(keys, kv), "n_sizes": len(g), "median_abs_err_pct": g["abs_err_pct"].median(),
                     "max_abs_err_pct": g["abs_err_pct"].max(), "n_in_fit_range": len(inr),
                     "median_abs_err_pct_in_range": inr["abs_err_pct"].median() if len(inr) else NAN,
                     "max_abs_err_pct_in_range": inr["abs_err_pct"].max() if len(inr) else NAN,
                     "n_large": len(big), "median_abs_err_pct_large": big["abs_err_pct"].median() if len(big) else NAN,
                     "max_abs_err_pct_large": big["abs_err_pct"].max() if len(big) else NAN})
    return pd.DataFrame(rows)


def validate_all(comm_summary: pd.DataFrame, tolerance: float = TOLERANCE, preset=DEFAULT_PRESET) -> pd.DataFrame:
    """validate() from the smallest world size >= 2 of the table to each larger one."""
    d = _usable(comm_summary)
    sizes = sorted({int(w) for w in pd.to_numeric(d["world_size"]) if w >= 2}) if len(d) else []
    parts = [validate(d, sizes[0], w, tolerance, preset) for w in sizes[1:]]
    parts = [p for p in parts if len(p)]
    if parts:
        return pd.concat(parts, ignore_index=True)
    return pd.DataFrame(columns=[*_keys(d, with_world_size=False), *VALIDATION_COLUMNS])


# ================================================================ CLI
def _int_list(text: str) -> list[int]:
    return [int(x) for x in str(text).split(",") if x.strip()]


def _size_list(text: str) -> list[int]:
    return [parse_size(x.strip()) for x in str(text).split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m distbench.predict.model",
        description="Fit alpha-beta models to comm_summary.csv and predict collectives and training at larger "
                    "GPU counts (see the module docstring for the formulas).")
    ap.add_argument("comm_summary", help="results/<label>/tables/comm_summary.csv")
    ap.add_argument("--training", help="results/<label>/tables/training_summary.csv (optional)")
    ap.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS),
                    help=f"cluster preset for the inter-node link and GPUs per node (default {DEFAULT_PRESET})")
    ap.add_argument("--out-dir", required=True, help="where to write the four CSVs")
    ap.add_argument("--gpus", default=",".join(map(str, DEFAULT_GPU_COUNTS)), type=_int_list,
                    help="GPU counts to predict (comma-separated)")
    ap.add_argument("--sizes", default="1KiB,64KiB,1MiB,16MiB,64MiB,256MiB,1GiB", type=_size_list,
                    help="message sizes for prediction_comm.csv (comma-separated, e.g. 1MiB,1GiB)")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE,
                    help=f"|relative error| within which a fit holds (default {TOLERANCE})")
    ap.add_argument("--training-intra", choices=("preset", "measured"), default="preset",
                    help="intra-node link for the training prediction: the preset's, or the measured NCCL "
                         "all_reduce fit (default preset)")
    args = ap.parse_args(argv)

    p = get_preset(args.preset)
    try:
        for n in args.gpus:
            _nodes(n, p.gpus_per_node)  # fail early on a count that does not fill whole nodes
    except ValueError as e:
        ap.error(f"--gpus: {e}")
    for path in (args.comm_summary, args.training):
        if path and not Path(path).is_file():
            ap.error(f"no such file: {path}")
    comm = pd.read_csv(args.comm_summary)
    out = Path(args.out_dir)

    fits = fit_table(comm, args.tolerance, preset=p)
    atomic_write_csv(out / "alpha_beta.csv", fits)
    atomic_write_csv(out / "prediction_comm.csv", predict_cluster(fits, p, args.sizes, args.gpus))
    if args.training:
        intra = pick_link(fits) if args.training_intra == "measured" else None
        if args.training_intra == "measured" and intra is None:
            print("distbench.predict.model: no NCCL all_reduce fit: the training prediction uses the preset's intra link",
                  file=sys.stderr)
        training = predict_training(pd.read_csv(args.training), p, args.gpus, intra)
    else:
        training = pd.DataFrame(columns=[*TRAINING_KEYS, *TRAINING_OUT])
    atomic_write_csv(out / "prediction_training.csv", training)
    validation = validate_all(comm, args.tolerance, p)
    atomic_write_csv(out / "prediction_validation.csv", validation)

    print(f"distbench.predict.model: {len(fits)} fits, {len(training)} training predictions, "
          f"{len(validation)} validation points -> {out}")
    if len(validation):
        summ = validation["rel_err_pct"].abs()
        print(f"  validation: median |error| {summ.median():.1f}%, max {summ.max():.1f}% over {len(summ)} points")
        big = validation[pd.to_numeric(validation["size_bytes"]) >= LARGE_BYTES]["rel_err_pct"].abs()
        if len(big):
            print(f"  validation >= 1 MiB: median |error| {big.median():.1f}%, max {big.max():.1f}% "
                  f"over {len(big)} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
