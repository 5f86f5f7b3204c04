"""Section 3 of distbench.predict.model (its docstring has the formulas): a collective over a
hierarchical cluster of nodes, from an intra-node and an inter-node link."""

from __future__ import annotations

import math

import numpy as np

from distbench.core.ops_spec import SPECS
from distbench.predict.model import (
    _CLUSTER_OPS, CLUSTER_ALGORITHMS, Link, _as_link, _check_op, _cost, bus_factor, predict_collective,
)


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
        elif op == "send_recv":  # some ring neighbour sits on another node
            out = predict_collective(op, s, n, le)
        else:
            raise ValueError(f"no hierarchical form for {op!r} in predict_hierarchical (distbench/predict/cluster.py)")
    else:
        beta = _bottleneck(li, le, g)
        if algorithm == "tree":  # all_reduce
            lat = 2 * ((g - 1) * li.alpha_us + math.log2(m) * le.alpha_us)
        else:
            # the ring's n-1 links: n-m inside nodes, m-1 between them, each crossed as often as the
            # op's ring_hops say per link (all_reduce: twice, reduce-scatter then all-gather)
            per_link = SPECS[op].ring_hops(n) / (n - 1)
            lat = per_link * ((n - m) * li.alpha_us + (m - 1) * le.alpha_us)
        out = lat + _cost(0, 0, bus_factor(op, n), s, beta)
    if m > 1:
        out = out + fixed
    return float(out) if np.ndim(out) == 0 else out
