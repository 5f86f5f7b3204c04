"""Figures from comm_summary.csv: PNG (inlined in the HTML report) and SVG (for papers) of each.

Only status-ok rows are drawn; a figure whose data are empty is skipped, not an error.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from distbench.findings import (  # noqa: E402
    backend_name, closest_size, human_bytes, human_time_us, pick_op, primary_rows, read_summary,
)
from distbench.io import atomic_write_bytes  # noqa: E402

DPI = 110  # small PNGs keep the self-contained HTML a few MB at most
TIME = ("time_us_median", "time per op (µs, median)")
BUSBW = ("busbw_gbps_median", "bus bandwidth (GB/s, median)")


def save_figure(fig, out_dir: Path, name: str) -> list[Path]:
    """PNG + SVG (reproducible SVG bytes), written atomically; closes the figure."""
    paths = []
    for ext in ("png", "svg"):
        buf = io.BytesIO()
        fig.savefig(buf, format=ext, dpi=DPI, bbox_inches="tight",
                    metadata={"Date": None} if ext == "svg" else None)  # reproducible SVG bytes
        path = out_dir / f"{name}.{ext}"
        atomic_write_bytes(path, buf.getvalue())
        paths.append(path)
    plt.close(fig)
    return paths


def write_figures(builders: dict, data, out_dir) -> list[Path]:
    """Each builder(data) -> a figure or None (no data for it); write the figures under their names
    as PNG + SVG in out_dir (created), in the house theme; return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sns.set_theme(style="ticks", context="paper")
    written: list[Path] = []
    for name, build in builders.items():
        fig = build(data)
        if fig is not None:
            written += save_figure(fig, out_dir, name)
    return written


def _size_axis(ax, sizes) -> None:
    """Log x axis with power-of-two ticks labelled 8 B, 4 KiB, 1 MiB, ... (at most ~8 of them)."""
    lo, hi = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    step = max(1, math.ceil((hi - lo + 1) / 8))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_bytes(x)))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_xlabel("message size")


def _positive(df: pd.DataFrame, y: str) -> pd.DataFrame:
    # log axes cannot show zero sizes (barrier) or missing bandwidth
    return df[(df["size_bytes"] > 0) & df[y].notna() & (df[y] > 0)]


def _lines(df, y, title, *, hue, style=None, col=None, col_title="{col_name}") -> plt.Figure | None:
    """Log-log line plot of y vs size, faceted by `col` (wrapped), one line per hue/style."""
    col_col, label = y
    df = _positive(df, col_col)
    if df.empty:
        return None
    ncol = df[col].nunique() if col else 1
    g = sns.relplot(data=df.sort_values("size_bytes"), x="size_bytes", y=col_col, hue=hue, style=style,
                    col=col, col_wrap=min(3, ncol) if col and ncol > 1 else None, kind="line",
                    markers=True, dashes=False, height=2.6, aspect=1.35, errorbar=None,
                    facet_kws={"sharey": False, "sharex": True})
    for ax in g.axes.flat:
        _size_axis(ax, df["size_bytes"])
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
    g.set_ylabels(label)
    if col:
        g.set_titles(col_title)
    g.figure.suptitle(title, fontsize=9, y=1.03)
    return g.figure


def _timing_note(df: pd.DataFrame) -> str:
    return ", ".join(f"{backend_name(b)}={'/'.join(sorted(set(g['timing'])))}"
                     for b, g in df.groupby("backend"))


def fig_vs_size(ok: pd.DataFrame, y) -> plt.Figure | None:
    p = primary_rows(ok)
    if y is BUSBW:
        p = p[p["op"] != "barrier"]  # barrier moves no data: no bus bandwidth
    what = "Time per op" if y is TIME else "Bus bandwidth"
    return _lines(p, y, f"{what} vs message size (timing: {_timing_note(p)})",
                  hue="backend", style="world_size", col="op")


def fig_backend_comparison(ok: pd.DataFrame) -> plt.Figure | None:
    p = primary_rows(ok)
    p = p[p["size_bytes"] > 0]
    op = pick_op(p["op"].unique())
    q = p[p["op"] == op]
    # prefer a size every backend measured, so the bars compare like with like
    per_backend = [set(g["size_bytes"]) for _, g in q.groupby("backend")]
    common = set.intersection(*per_backend) if per_backend else set()
    size = closest_size(common or set(q["size_bytes"]))
    if size is None:
        return None
    q = q[q["size_bytes"] == size].sort_values(["backend", "world_size"])
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    sns.barplot(data=q, x="world_size", y="time_us_median", hue="backend", ax=ax)
    ax.set_yscale("log")  # NCCL and Gloo differ by orders of magnitude
    for bars in ax.containers:
        ax.bar_label(bars, labels=[human_time_us(b.get_height()) if b.get_height() > 0 else ""
                                   for b in bars], fontsize=7)
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel(TIME[1])
    ax.set_title(f"{op} at {human_bytes(size)} (measured size closest to 100 MB; timing: {_timing_note(q)})",
                 fontsize=9)
    return fig


def fig_timing_modes(ok: pd.DataFrame) -> plt.Figure | None:
    """Time and busbw vs size with hue = timing: shows what host timing adds at small sizes."""
    p = primary_rows(ok, vary=("timing",))
    p = p[p["size_bytes"] > 0]  # log axes
    op = pick_op(p["op"].unique())
    p = p[p["op"] == op]
    backends = [b for b, g in p.groupby("backend", sort=True) if g["timing"].nunique() > 1]
    if not backends:
        return None
    fig, axes = plt.subplots(len(backends), 2, figsize=(8, 3 * len(backends)), squeeze=False)
    for row, b in zip(axes, backends):
        g = p[p["backend"] == b]
        for ax, (col, label) in zip(row, (TIME, BUSBW)):
            d = _positive(g, col)
            if d.empty:
                ax.set_visible(False)
                continue
            sns.lineplot(data=d.sort_values("size_bytes"), x="size_bytes", y=col, hue="timing",
                         style="world_size", markers=True, dashes=False, errorbar=None, ax=ax)
            _size_axis(ax, d["size_bytes"])
            ax.set_yscale("log")
            ax.set_ylabel(label)
            ax.set_title(f"{backend_name(b)} {op}", fontsize=9)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=6)
    fig.suptitle("Timing modes: events (CUDA events), graph (CUDA-graph replay), host (host clock + sync)",
                 fontsize=9)
    fig.tight_layout()
    return fig


def fig_nccl_env(ok: pd.DataFrame) -> plt.Figure | None:
    p = primary_rows(ok, vary=("nccl_env",))
    p = p[(p["op"] != "barrier") & (p["backend"] == "nccl")]  # Gloo rows are all 'default': they would blend in
    ops = [o for o, g in p.groupby("op", sort=False) if g["nccl_env"].nunique() > 1]
    if not ops:
        return None
    return _lines(p[p["op"].isin(ops)], BUSBW, "NCCL environment sweep: bus bandwidth vs size",
                  hue="nccl_env", style="world_size", col="op")


def fig_dtype(ok: pd.DataFrame) -> plt.Figure | None:
    p = primary_rows(ok, vary=("dtype",))
    op = pick_op(p["op"].unique())
    p = p[p["op"] == op]
    if p["dtype"].nunique() < 2:
        return None
    return _lines(p, BUSBW, f"{op}: bus bandwidth by dtype", hue="dtype", style="backend", col="world_size",
                  col_title="world size {col_name}")


FIGURES = {  # name -> builder; order is the order in the report
    "time_vs_size": lambda ok: fig_vs_size(ok, TIME),
    "busbw_vs_size": lambda ok: fig_vs_size(ok, BUSBW),
    "backend_comparison_100mb": fig_backend_comparison,
    "timing_modes": fig_timing_modes,
    "nccl_env": fig_nccl_env,
    "dtype": fig_dtype,
}


def make_all(comm_summary_csv, out_dir) -> list[Path]:
    """Write every figure whose data exist as out_dir/<name>.png and .svg; return the paths written."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = read_summary(comm_summary_csv)
    ok = summary[summary["status"] == "ok"]
    written: list[Path] = []
    sns.set_theme(style="ticks", context="paper")
    for name, build in FIGURES.items():
        fig = build(ok) if not ok.empty else None
        if fig is not None:
            written += save_figure(fig, out_dir, name)
    return written
