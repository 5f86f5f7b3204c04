"""Figures of the GPU-pair matrix, from results/<label>/tables/pairs.csv (distbench.comm.analysis.pairs): PNG for
the HTML report and SVG for papers, in the house style of distbench.comm.analysis.plots.

pairs_bandwidth_<backend>_ws<N>: per job, a heat map of the one-way bandwidth (src rows x dst
columns, median GB/s at the largest size), each cell annotated with its value and link class, the
diagonal blank; beside it, when measured, the both-ways bandwidth of each pair (upper triangle).
A cell whose point did not run ok shows its status instead of a value. Figures without an ok
one-way row are skipped, not an error.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.core.choices import backend_name  # noqa: E402
from distbench.comm.analysis.pairs import UNKNOWN, read_pairs_table  # noqa: E402
from distbench.core.figures import ANNOTATION_PT, FIG_WIDTH_IN, new_figure, write_figures  # noqa: E402
from distbench.core.units import human_bytes  # noqa: E402

VALUE = ("algbw_gbps_median", "bandwidth (GB/s, median)")


def figure_name(backend: str, world_size: int) -> str:
    return f"pairs_bandwidth_{backend}_ws{int(world_size)}"


def _primary_job(d: pd.DataFrame) -> pd.DataFrame:
    """One job per figure: the (nodes, dtype) with the most ok one-way points, fewest nodes first
    (a figure is named by backend and world size only)."""
    ok = d[(d["mode"] == "uni") & (d["status"] == "ok")]
    if ok.empty:
        return ok
    counts = ok.groupby(["nodes", "dtype"]).size().reset_index(name="n")
    best = counts.sort_values(["n", "nodes", "dtype"], ascending=[False, True, True]).iloc[0]
    return d[(d["nodes"] == best["nodes"]) & (d["dtype"] == best["dtype"])]


def _grid(rows: pd.DataFrame, n: int) -> tuple[np.ndarray, list[list[str]]]:
    """n x n values (NaN where nothing ok) and cell labels: '365\\nNV18', or the status of a point
    that did not run ok."""
    values = np.full((n, n), np.nan)
    labels = [["" for _ in range(n)] for _ in range(n)]
    for _, r in rows.iterrows():
        i, j = int(r["src"]), int(r["dst"])
        if not (0 <= i < n and 0 <= j < n) or i == j:
            continue
        cls = "" if r["link_class"] == UNKNOWN else str(r["link_class"])
        if r["status"] == "ok" and pd.notna(r[VALUE[0]]):
            v = float(r[VALUE[0]])
            values[i, j] = v
            labels[i][j] = f"{v:.0f}" if v >= 100 else f"{v:.3g}"
            labels[i][j] += f"\n{cls}" if cls else ""
        else:
            labels[i][j] = str(r["status"])
    return values, labels


def _heatmap(ax, values, labels, title: str, vmax: float, fig) -> None:
    n = values.shape[0]
    # the diagonal and missing pairs: blank, not a colour that reads as a value
    cmap = plt.get_cmap(palette.HEATMAP_CMAP).with_extremes(bad="white")
    im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0, vmax=vmax)
    size = ANNOTATION_PT if n <= 8 else max(5.0, ANNOTATION_PT - (n - 8) / 3)  # smaller past 8 ranks
    for i in range(n):
        for j in range(n):
            if labels[i][j]:
                v = values[i, j]
                dark = np.isnan(v) or v < 0.6 * vmax  # light text on viridis' dark end
                ax.text(j, i, labels[i][j], ha="center", va="center", fontsize=size,
                        color=palette.STATUS_COLOR if np.isnan(v) else ("white" if dark else "black"))
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xlabel("dst rank")
    ax.set_ylabel("src rank")
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=VALUE[1])


def fig_pairs(summary: pd.DataFrame, backend: str, world_size: int) -> plt.Figure | None:
    """The heat map(s) of one (backend, world size); None when no one-way pair ran ok."""
    d = summary[(summary["backend"] == backend) & (summary["world_size"] == world_size)]
    d = _primary_job(d)
    if d.empty:
        return None
    n = int(world_size)
    panels = []
    for mode, what in (("uni", "one way (src sends to dst)"), ("bi", "both ways at once (src < dst)")):
        m = d[d["mode"] == mode]
        ok = m[m["status"] == "ok"]
        if ok.empty:
            continue
        size = ok["size_bytes"].max()
        panels.append((f"{what} at {human_bytes(size)}", *_grid(m[m["size_bytes"] == size], n)))
    vmax = max(np.nanmax(v) for _, v, _ in panels)  # one scale: both panels read against each other
    # the house width for two panels (one panel: as tall, half as wide plus its colour bar)
    side = min((FIG_WIDTH_IN - 1.0) / 2, max(4.0, 0.55 * n + 1.5))
    fig, axes = new_figure(1, len(panels), width=side * len(panels) + 1.0, height=side + 0.6)
    for ax, (title, values, labels) in zip(axes[0], panels):
        _heatmap(ax, values, labels, title, vmax, fig)
    first = d.iloc[0]
    nodes = int(first["nodes"])
    fig.suptitle(f"GPU-pair bandwidth: {backend_name(backend)} {first['dtype']}, {n} ranks"
                 + (f" on {nodes} nodes" if nodes > 1 else "") + " (cell: GB/s and link class)")
    return fig


def write_pairs_figures(summary_csv, out_dir) -> list[Path]:
    """Write pairs_bandwidth_<backend>_ws<N>.png and .svg for every (backend, world size) with an ok
    one-way pair; return the paths. No such data: nothing written (not even the directory), []."""
    summary = read_pairs_table(summary_csv)
    ok = summary[(summary["mode"] == "uni") & (summary["status"] == "ok")]
    if ok.empty:
        return []
    jobs = sorted({(str(b), int(w)) for b, w in zip(ok["backend"], ok["world_size"])})
    builders = {figure_name(b, w): (lambda data, b=b, w=w: fig_pairs(data, b, w)) for b, w in jobs}
    return write_figures(builders, summary, out_dir)
