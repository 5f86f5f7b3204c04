"""Figures from comm_summary.csv: PNG (inlined in the HTML report) and SVG (for papers) of each.

Only status-ok rows are drawn; a figure whose data are empty is skipped, not an error.

House rules, shared by every plot module (the plots modules of each family's analysis/):
- colours from distbench.core.palette: colour and marker = the world size, the same in every figure;
  what a figure compares besides (backend, timing mode, NCCL environment, dtype) is the line style
  (a hatch on bars);
- one width (distbench.core.figures.new_figure) and the theme's font sizes, legends outside the panels;
- message-size axes on log base 2, ticks labelled 8 B, 4 KiB, 1 MiB (distbench.core.units.human_bytes);
- median lines with a p5-p95 band where the summary has time_us_p5/p95 (busbw's band from the time
  band: busbw is proportional to 1/time);
- busbw figures get horizontal lines for the link peak and the published figure when given
  (distbench.comm.analysis.plot_refs);
- bars start at zero on a linear axis; time axes read in the unit that fits (µs, ms, s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.comm.analysis.plot_refs import (draw_nccl_ranges, draw_peak_time, draw_refs, published_for,  # noqa: E402
                                               ref_handle, reference_lines)
from distbench.comm.analysis.findings import closest_size, pick_op, primary_rows, read_summary
from distbench.core.choices import backend_name  # noqa: E402
from distbench.core.figures import (ANNOTATION_PT, header, legend_below, legend_outside, new_figure, save_figure,  # noqa: E402
                                   set_house_theme, size_axis as _size_axis, time_tick, time_unit)
from distbench.core.units import human_bytes, human_time_us  # noqa: E402

TIME = ("time_us_median", "time per op (median)")  # log axis: each tick names its unit (µs, ms, s)
BUSBW = ("busbw_gbps_median", "bus bandwidth (GB/s, median)")
BAND_NOTE = "band: p5-p95 over trials"


# ---------------------------------------------------------------- axes
def _gbps_tick(v: float) -> str:
    return f"{v:g}" if v > 0 else ""


def _log_y(ax, tick) -> None:
    """Log y axis whose labelled ticks are 1/2/5 x 10^k (only 10^k over many decades), written by
    `tick` (never '6x10^5'); unlabelled minor ticks."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 and hi > lo else 1.0
    subs = (1.0,) if decades > 4 else (1.0, 2.0, 5.0) if decades > 1.2 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: tick(v)))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs="auto"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _y_log_axis(ax, y) -> None:
    _log_y(ax, time_tick if y[0] == TIME[0] else _gbps_tick)


def _positive(df: pd.DataFrame, y: str) -> pd.DataFrame:
    # log axes cannot show zero sizes (barrier) or missing bandwidth
    return df[(df["size_bytes"] > 0) & df[y].notna() & (df[y] > 0)]


# ---------------------------------------------------------------- p5-p95 bands
def band_bounds(df: pd.DataFrame, y: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(low, high) of the p5-p95 band of column `y` row by row, or None when the summary has no
    percentiles. Time: time_us_p5/p95. Bus bandwidth is size x factor / time, so its band is the
    time band inverted: busbw x median time / p95 time .. busbw x median time / p5 time."""
    if not {"time_us_p5", "time_us_p95"} <= set(df.columns):
        return None
    p5 = pd.to_numeric(df["time_us_p5"], errors="coerce").to_numpy(float)
    p95 = pd.to_numeric(df["time_us_p95"], errors="coerce").to_numpy(float)
    if y == TIME[0]:
        lo, hi = p5, p95
    elif y in (BUSBW[0], "algbw_gbps_median"):
        t = pd.to_numeric(df["time_us_median"], errors="coerce").to_numpy(float)
        v = pd.to_numeric(df[y], errors="coerce").to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            lo, hi = v * t / p95, v * t / p5
    else:
        return None
    if not (np.isfinite(lo) & np.isfinite(hi) & (lo > 0)).any():
        return None
    return lo, hi


def _band(ax, g: pd.DataFrame, y: str, color) -> None:
    b = band_bounds(g, y)
    if b is None:
        return
    lo, hi = b
    keep = np.isfinite(lo) & np.isfinite(hi) & (lo > 0) & (hi > 0)
    if keep.sum() >= 2:
        x = g["size_bytes"].to_numpy(float)
        ax.fill_between(x[keep], lo[keep], hi[keep], color=color, alpha=palette.BAND_ALPHA, lw=0,
                        label="_p5-p95")


# ---------------------------------------------------------------- line figures
def _ws_handles(sizes) -> list:
    """The world-size part of a legend: each world size's colour and marker, as its lines have them."""
    return [header("world size")] + [
        Line2D([], [], color=palette.world_size_color(w), marker=palette.world_size_marker(w), label=_ws_label(w))
        for w in sorted(sizes)]


def _style_handles(title: str, styles: dict, label=str) -> list:
    return [header(title)] + [Line2D([], [], color="0.35", ls=ls, lw=1.5, label=label(v)) for v, ls in styles.items()]


@dataclass(frozen=True)
class Styled:
    """What sets a line's style in a line figure: a column, each of its values' line style, and how a
    value and the column are named in the legend."""

    column: str
    styles: Mapping[Any, Any]
    label: Callable[[Any], str] = str
    title: str | None = None  # default: the column's name


@dataclass(frozen=True)
class Panels:
    """One panel per value of `column` (None: one panel), each titled title(value)."""

    column: str | None = None
    title: Callable[[Any], str] = str


def _lines(df, y, title, style: Styled, panels: Panels = Panels(), refs=()) -> plt.Figure | None:
    """Log-log lines of y vs size with p5-p95 bands, one panel per panels.column value (wrapped at
    3): colour and marker = the world size (palette.world_size_color/marker), line style = the
    style.column value (style.styles[value])."""
    col_col, label = y
    col = panels.column
    df = _positive(df, col_col)
    if df.empty:
        return None
    if col:
        facets = list(dict.fromkeys(df[col]))
        if pd.api.types.is_numeric_dtype(df[col]):
            facets = sorted(facets)
    else:
        facets = [None]
    ncols = min(3, len(facets))
    nrows = math.ceil(len(facets) / ncols)
    fig, axes = new_figure(nrows, ncols, height=3.3 * nrows + 2.0)  # + the legend below the panels
    drawn_refs: dict[str, dict] = {}
    annotated = False
    for i, (ax, f) in enumerate(zip(axes.flat, facets)):
        d = df[df[col] == f] if col else df
        for (ws, s), g in d.groupby(["world_size", style.column], sort=True):
            g = g.sort_values("size_bytes")
            color = palette.world_size_color(ws)
            ax.plot(g["size_bytes"], g[col_col], color=color, ls=style.styles[s], marker=palette.world_size_marker(ws),
                    ms=4.5, label=f"{_ws_label(ws)}, {style.label(s)}", zorder=3)
            _band(ax, g, col_col, color)
        ax.set_yscale("log")
        if col_col == BUSBW[0]:
            drawn_refs.update((r["label"], r) for r in draw_refs(ax, refs, d))
        elif col_col == TIME[0]:
            drawn_refs.update((r["label"], r) for r in draw_peak_time(ax, refs, d))
        if col_col in (BUSBW[0], TIME[0]):  # where NCCL switches algorithm/protocol, on both figures
            annotated = draw_nccl_ranges(ax, d) or annotated
        _size_axis(ax, df["size_bytes"])
        _y_log_axis(ax, y)
        ax.grid(True, which="major", alpha=0.3)
        if col:
            ax.set_title(panels.title(f))
        if i % ncols == 0:
            ax.set_ylabel(label)
        if i < len(facets) - ncols:  # the panel below names the axis
            ax.set_xlabel("")
    for ax in list(axes.flat)[len(facets):]:
        ax.set_visible(False)
    present = set(df[style.column])
    groups = [_ws_handles(df["world_size"].unique()),
              _style_handles(style.title or style.column, {s: ls for s, ls in style.styles.items() if s in present},
                             style.label)]
    if band_bounds(df, col_col) is not None:
        groups[1].append(Patch(color="0.35", alpha=palette.BAND_ALPHA * 2, label="p5-p95"))
    extra = [header("reference")] + [ref_handle(r) for r in drawn_refs.values()] if drawn_refs else []
    if annotated:
        extra = extra or [header("reference")]
        extra.append(Patch(color=palette.NCCL_RANGE_COLORS[0], label="NCCL algorithm/protocol\n(largest NCCL world size)"))
    legend_below(fig, [*groups, extra])
    fig.suptitle(title)
    return fig


def _ws_label(ws) -> str:
    return f"{int(ws)} ranks"


def _timing_note(df: pd.DataFrame) -> str:
    return ", ".join(f"{backend_name(b)}={'/'.join(sorted(set(g['timing'])))}"
                     for b, g in df.groupby("backend"))


def _backend_styles(backends) -> dict:
    return {b: palette.backend_linestyle(b) for b in sorted(backends, key=str)}


def fig_vs_size(ok: pd.DataFrame, y, *, refs=()) -> plt.Figure | None:
    """Time or busbw vs size per op: colour and marker = world size, line style = backend (NCCL
    solid, Gloo dash-dot), p5-p95 bands; on busbw the link peak / published lines in `refs`
    (reference_lines), on time the time at the link peak."""
    p = primary_rows(ok)
    if y is BUSBW or y[0] == BUSBW[0]:
        p = p[p["op"] != "barrier"]  # barrier moves no data: no bus bandwidth
    what = "Time per op" if y[0] == TIME[0] else "Bus bandwidth"
    if p.empty:
        return None
    return _lines(p, y, f"{what} vs message size (timing: {_timing_note(p)}; {BAND_NOTE})",
                  Styled("backend", _backend_styles(p["backend"].unique()), backend_name, "backend"), Panels("op"),
                  refs)


def fig_backend_comparison(ok: pd.DataFrame) -> plt.Figure | None:
    """One op at the size closest to 100 MB: a bar per (world size, backend), coloured by world size,
    hatched by backend (NCCL plain, Gloo hatched), on a LINEAR time axis from zero in the unit that fits
    (248 ms against 601 ms must look like 2.4x, not 10x), whiskers p5-p95."""
    p = primary_rows(ok)
    p = p[p["size_bytes"] > 0]
    op = pick_op(p["op"].unique())
    q = p[p["op"] == op]
    # prefer a size every backend measured, so the bars compare like with like (the requested size:
    # a split op's measured size differs between world sizes)
    per_backend = [set(g["requested_bytes"]) for _, g in q.groupby("backend")]
    common = set.intersection(*per_backend) if per_backend else set()
    size = closest_size(common or set(q["requested_bytes"]))
    if size is None:
        return None
    q = q[(q["requested_bytes"] == size) & q["time_us_median"].notna()].sort_values(["backend", "world_size"])
    if q.empty:
        return None
    unit, scale = time_unit(pd.concat([q["time_us_median"], q.get("time_us_p95", pd.Series(dtype=float))]))
    backends = sorted(q["backend"].unique())
    sizes = sorted(int(w) for w in q["world_size"].unique())
    width = 0.8 / len(backends)
    fig, axes = new_figure(height=4.6)
    ax = axes[0, 0]
    for i, b in enumerate(backends):
        g = q[q["backend"] == b].set_index(q[q["backend"] == b]["world_size"].astype(int))
        shown = [w for w in sizes if w in g.index]
        xs = [j - 0.4 + width * (i + 0.5) for j, w in enumerate(sizes) if w in g.index]
        rows = g.loc[shown]
        t = rows["time_us_median"].to_numpy(float)
        err = None
        if {"time_us_p5", "time_us_p95"} <= set(rows.columns):
            lo = rows["time_us_p5"].to_numpy(float)
            hi = rows["time_us_p95"].to_numpy(float)
            if np.isfinite(lo).all() and np.isfinite(hi).all():
                err = np.vstack([np.clip(t - lo, 0, None), np.clip(hi - t, 0, None)]) / scale
        bars = ax.bar(xs, t / scale, width, color=[palette.world_size_color(w) for w in shown],
                      hatch=palette.backend_hatch(b), edgecolor="white", label=backend_name(b),
                      yerr=err, error_kw={"elinewidth": 1.0, "capsize": 3, "ecolor": "0.25"})
        ax.bar_label(bars, labels=[human_time_us(v) for v in t], fontsize=ANNOTATION_PT, padding=2)
    ax.set_yscale("linear")  # bars compare lengths: a log axis turns 2.4x into what looks like 10x
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # headroom for the labels
    ax.set_xticks(range(len(sizes)), [_ws_label(w) for w in sizes])
    ax.set_xlabel("world size")
    ax.set_ylabel(f"time per op ({unit}, median)")
    handles = [header("world size")] + [Patch(facecolor=palette.world_size_color(w), label=_ws_label(w)) for w in sizes]
    handles += [header("backend")] + [Patch(facecolor="0.75", edgecolor="white", hatch=palette.backend_hatch(b),
                                             label=backend_name(b)) for b in backends]
    legend_outside(ax, handles)
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"{op} at {human_bytes(size)} (measured size closest to 100 MB;\ntiming: {_timing_note(q)}; "
                 "whiskers p5-p95)")
    return fig


def fig_timing_modes(ok: pd.DataFrame, *, refs=()) -> plt.Figure | None:
    """Time and busbw vs size per timing mode: colour and marker = world size, line style = timing mode
    (events solid, graph dashed, host dotted); shows what host timing adds at small sizes."""
    p = primary_rows(ok, vary=("timing",))
    p = p[p["size_bytes"] > 0]  # log axes
    op = pick_op(p["op"].unique())
    p = p[p["op"] == op]
    backends = [b for b, g in p.groupby("backend", sort=True) if g["timing"].nunique() > 1]
    if not backends:
        return None
    fig, axes = new_figure(len(backends), 2, height=4.4 * len(backends) + (0.5 if len(backends) > 1 else 0))
    for row, b in zip(axes, backends):
        g = p[p["backend"] == b]
        for ax, y in zip(row, (TIME, BUSBW)):
            col, label = y
            d = _positive(g, col)
            if d.empty:
                ax.set_visible(False)
                continue
            for (ws, timing), s in d.groupby(["world_size", "timing"], sort=True):
                s = s.sort_values("size_bytes")
                color = palette.world_size_color(ws)
                ax.plot(s["size_bytes"], s[col], color=color, ls=palette.timing_linestyle(timing),
                        marker=palette.world_size_marker(ws), ms=4.5, label=f"{_ws_label(ws)}, {timing}",
                        zorder=3)
                _band(ax, s, col, color)
            ax.set_yscale("log")
            if y is BUSBW:
                draw_refs(ax, refs, d)
            _size_axis(ax, d["size_bytes"])
            _y_log_axis(ax, y)
            ax.set_ylabel(label)
            ax.set_title(f"{backend_name(b)} {op}")
            ax.grid(True, alpha=0.3)
    present = set(p[p["backend"].isin(backends)]["timing"].astype(str))
    timings = [t for t in palette.TIMING_LINESTYLES if t in present] + sorted(present - set(palette.TIMING_LINESTYLES))
    handles = _ws_handles(p[p["backend"].isin(backends)]["world_size"].unique())
    handles += _style_handles("timing", {t: palette.timing_linestyle(t) for t in timings})
    handles.append(Patch(color="0.35", alpha=palette.BAND_ALPHA * 2, label="p5-p95"))
    # at one rank busbw is 0 ((n-1)/n), so its axis is hidden: the legend goes on the last axis drawn
    visible = [a for a in axes.flat if a.get_visible()]
    if not visible:
        plt.close(fig)
        return None
    legend_outside(visible[min(1, len(visible) - 1)], handles)
    fig.suptitle("Timing modes: events (CUDA events, solid), graph (CUDA-graph replay, dashed),\n"
                 f"host (host clock + sync, dotted); {BAND_NOTE}")
    return fig


def fig_nccl_env(ok: pd.DataFrame, *, refs=()) -> plt.Figure | None:
    """Bus bandwidth vs size per op for each NCCL environment: colour and marker = world size, line
    style = NCCL environment (default solid)."""
    p = primary_rows(ok, vary=("nccl_env",))
    p = p[(p["op"] != "barrier") & (p["backend"] == "nccl")]  # Gloo rows are all 'default': they would blend in
    ops = [o for o, g in p.groupby("op", sort=False) if g["nccl_env"].nunique() > 1]
    if not ops:
        return None
    p = p[p["op"].isin(ops)]
    envs = sorted(p["nccl_env"].unique(), key=lambda e: (e != "default", str(e)))
    return _lines(p, BUSBW, f"NCCL environment sweep: bus bandwidth vs size ({BAND_NOTE})",
                  Styled("nccl_env", palette.style_levels(envs), title="NCCL environment"), Panels("op"), refs)


def fig_dtype(ok: pd.DataFrame, *, refs=()) -> plt.Figure | None:
    """One op's bus bandwidth vs size per dtype, a panel per backend: colour and marker = world size,
    line style = dtype."""
    p = primary_rows(ok, vary=("dtype",))
    op = pick_op(p["op"].unique())
    p = p[p["op"] == op]
    if p["dtype"].nunique() < 2:
        return None
    dtypes = sorted(p["dtype"].astype(str).unique())
    p = p.assign(dtype=p["dtype"].astype(str))
    return _lines(p, BUSBW, f"{op}: bus bandwidth by dtype ({BAND_NOTE})", Styled("dtype", palette.style_levels(dtypes)),
                  Panels("backend", backend_name), refs)


def figure_builders(refs=()) -> dict:
    """name -> builder(ok rows); order is the order in the report. `refs` (reference_lines) go to
    every bus-bandwidth figure, and the link peak to the time figure (as the time at that peak)."""
    return {
        "time_vs_size": partial(fig_vs_size, y=TIME, refs=refs),
        "busbw_vs_size": partial(fig_vs_size, y=BUSBW, refs=refs),
        "backend_comparison_100mb": fig_backend_comparison,
        "timing_modes": partial(fig_timing_modes, refs=refs),
        "nccl_env": partial(fig_nccl_env, refs=refs),
        "dtype": partial(fig_dtype, refs=refs),
    }


FIGURES = figure_builders()


def make_all(comm_summary_csv, out_dir, *, peak=None, published=None, gpu_name: str | None = None,
             nvls: bool | None = None) -> list[Path]:
    """Write every figure whose data exist as out_dir/<name>.png and .svg; return the paths written.

    Optional reference lines on the bus-bandwidth figures: `peak` (GB/s, or the 'peak' dict of
    results/<label>/tables/comm_advice.json, i.e. distbench.core.references.link_peak's), `published` (see reference_lines),
    or, without `published`, `gpu_name` (env.json's gpus[0].name; `nvls` as distbench.core.references.expected_for)
    to look the published figures up for the measured NCCL world sizes and ops."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = read_summary(comm_summary_csv)
    ok = summary[summary["status"] == "ok"]
    if published is None and gpu_name:
        published = published_for(ok, gpu_name, nvls) or None
    builders = figure_builders(reference_lines(peak, published))
    written: list[Path] = []
    set_house_theme()
    for name, build in builders.items():
        fig = build(ok) if not ok.empty else None
        if fig is not None:
            written += save_figure(fig, out_dir, name)
    return written
