"""Predicting larger clusters from the measured tables: latency-bandwidth fits of the
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
on 4x H200 NVLink (benchmarks/results/comm-predict-h200x4-2026-11-26) it put the graph-timed all_reduce at
272 GB/s busbw where the largest sizes reach 325-350, and predictions >= 1 MiB came out 23-29% too
slow. The envelope is exact at both ends and lies *below* the measured curve in the transition
(about 512 KiB - 32 MiB on NVLink: up to ~45% too fast there). So NCCL series are no longer
predicted with it: distbench.predict.tables (`validate`, and `predict_cluster` on one node)
calibrates NCCL's own per-protocol model (distbench.predict.nccl_model) on the node's sweep and
follows NCCL's LL / LL128 / Simple choice per size (columns model, nccl_algo, nccl_proto). Measured
by the self-check (benchmarks/results/predict-selfcheck-cpu-2core-2026-11-29, fit at 2 ranks, checked at 4 on
H200 NV18, graph timing): all_reduce at 2 MiB -31.1% (envelope) -> +4.9%, broadcast max at >= 1 MiB
46.5% -> 3.0%, the median |error| at >= 1 MiB over all ops 18.9% -> 6.0% (with the ring loop's bubble
fitted across the node's ops and send_recv on NCCL's p2p split, nccl_model sections 3-4;
10.9% without them). The envelope remains the model of Gloo series (no protocols), of the
multi-node and preset predictions, and the comparison column (time_us_envelope).

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
`bus_factor` below, read from distbench.core.ops_spec), so beta is the asymptote of busbw.

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

Where the envelope breaks (measured on 4x H200 NV18, NCCL 2.28, NVLS off, fit at 2 ranks, predicted at
4): (a) the protocol transition, ~512 KiB - 32 MiB: the envelope is too fast by up to 30-45% (NCCL
series now take NCCL's per-protocol model there, nccl_model section 2: NCCL's protocol regimes, its
channel ramp below 1 MiB, and Simple's bandwidth from the sizes past one ring loop with a pipeline
fill that grows with the chunk up to one loop, which is what keeps 2-128 MiB below the asymptote);
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
the envelope's median |error| >= 1 MiB is 7.5% for all_reduce, 14.5% broadcast, 16.7% all_to_all,
~21% all_gather and reduce_scatter, 56% send_recv (the causes above); NCCL's per-protocol model,
which validate uses for NCCL series, 13.9%, 1.4%, 3.3%, 19.5%, 23.0% and 44.8% (rel_err_pct_envelope
keeps the envelope's).

Where the code is: this module holds the constants, the types and presets, the fit (section 1)
and the algorithm costs and links (section 2); distbench.predict.cluster the hierarchical cluster
(section 3); distbench.predict.tables the tables built from the measured CSVs (fit_table,
predict_cluster, predict_training, validate: sections 1-5 applied) and the CLI:
python -m distbench.predict.tables results/<label>/tables/comm_summary.csv [--training
results/<label>/tables/training_summary.csv] [--preset nvlink4-ib400] --out-dir DIR writes alpha_beta.csv,
prediction_comm.csv, prediction_training.csv and prediction_validation.csv.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from distbench.core.ops_spec import SPECS

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
# The ops with a hierarchical (multi-node) form of their own in distbench.predict.cluster; another
# modelled op is predicted on a flat ring across nodes only.
HIERARCHICAL_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
_CLUSTER_OPS = {
    "hierarchical": tuple(op for op in MODELLED_OPS if op in HIERARCHICAL_OPS),
    "ring": tuple(op for op in MODELLED_OPS if op not in ("all_to_all", "send_recv")),
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
        "NV18 in benchmarks/results/comm-fidelity-h200x2-2026-11-26); 8x 400 Gb/s InfiniBand NDR (ConnectX-7), one per GPU: "
        "50 GB/s line rate per GPU, 45 GB/s (90%) achievable; alpha 1 us per NVLink step, 5 us per "
        "network step (NCCL tuning.cc hwLat, LL-LL128-Simple)."),
    ClusterPreset(
        "h200-ib400", 8, Link(1.0, 330.0, 9.5), Link(5.0, 45.0),
        "HGX H200: NVLink4 as nvlink4-ib400, intra figures measured here on H200 NV18 "
        "(float32, NCCL defaults): 330 GB/s = the ring all_reduce busbw at 1 GiB on 2x H200 "
        "(benchmarks/results/comm-fidelity-h200x2-2026-11-26: 328 events / 330 graph GB/s; 325-353 GB/s asymptote at 2-4 "
        "ranks in benchmarks/results/comm-predict-h200x4-2026-11-26); alpha 1 us per NVLink step and 9.5 us "
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
    # tree all_reduce: log2(n) steps up and down (NCCL double binary tree); else the spec's ring hops
    a = 2 * math.log2(n) if algorithm == "tree" else SPECS[op].ring_hops(n)
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


def get_preset(preset) -> ClusterPreset:
    if isinstance(preset, ClusterPreset):
        return preset
    try:
        return PRESETS[str(preset)]
    except KeyError:
        raise ValueError(f"unknown preset {preset!r} (one of {', '.join(PRESETS)})") from None
