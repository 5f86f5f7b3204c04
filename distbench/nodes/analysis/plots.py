"""Figures of the node-pair rounds (from tables/nodes_pairs.csv): heat maps of every pair against the
cluster, for up to MAX_HEATMAP_NODES nodes (beyond that a cell is under a pixel; the per-node table
holds the answer).

- nodes_bandwidth: each pair's bandwidth at the largest size / the cluster median (1 = the cluster).
- nodes_latency: each pair's time at the smallest size / the cluster median.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from distbench.core.figures import ANNOTATION_PT, FIG_WIDTH_IN, new_figure, write_figures  # noqa: E402

MAX_HEATMAP_NODES = 64
FIGURES = ("nodes_bandwidth", "nodes_latency")


def matrix(pairs: pd.DataFrame, value: str) -> pd.DataFrame:
    nodes = sorted(set(pairs["node_a"]) | set(pairs["node_b"]), key=lambda s: (len(s), s))
    m = pd.DataFrame(np.nan, index=nodes, columns=nodes)
    for _, r in pairs.iterrows():
        m.loc[r["node_a"], r["node_b"]] = m.loc[r["node_b"], r["node_a"]] = r[value]
    return m


def _heatmap(pairs: pd.DataFrame, value: str, title: str, cmap: str, center: float):
    if pairs is None or pairs.empty or value not in pairs or pairs[value].isna().all():
        return None
    m = matrix(pairs, value)
    if len(m) > MAX_HEATMAP_NODES:
        return None
    side = min(FIG_WIDTH_IN - 1.5, max(4.5, 0.45 * len(m) + 2.5))
    fig, axes = new_figure(width=side + 1.5, height=side)
    ax = axes[0, 0]
    # A fixed span around the median: a healthy pair (ratio 1) keeps the middle colour even when
    # every pair is healthy (seaborn would otherwise stretch equal values to an end of the map).
    span = max(0.5, float(np.nanmax(np.abs(m.to_numpy(dtype=float) - center))))
    sns.heatmap(m, ax=ax, cmap=cmap, center=center, vmin=center - span, vmax=center + span, annot=len(m) <= 16,
                fmt=".2g", annot_kws={"fontsize": ANNOTATION_PT}, square=True, linewidths=0.5, cbar_kws={"label": "x the cluster median"})
    ax.set_title(title)
    ax.set_xlabel("node")
    ax.set_ylabel("node")
    return fig


def plot_nodes(pairs: pd.DataFrame, out_dir) -> list[Path]:
    builders = {
        "nodes_bandwidth": lambda p: _heatmap(p, "bandwidth_ratio", "Pair bandwidth (largest size) / cluster median",
                                              "RdYlGn", 1.0),
        "nodes_latency": lambda p: _heatmap(p, "latency_ratio", "Pair time (smallest size) / cluster median",
                                            "RdYlGn_r", 1.0),
    }
    return write_figures(builders, pairs, out_dir)
