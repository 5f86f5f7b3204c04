"""Figure saving and axes every family's plots share: PNG + SVG written atomically, the house theme
(distbench.core.palette), one figure width, message-size and time axes read as the report writes them
(distbench.core.units).

Every figure is FIG_WIDTH_IN wide at DPI (1100 px), under the HTML report's content width
(PAGE_WIDTH_PX, report.html's `body { max-width }`), so the page shows it at its native size, and its
text (palette.HOUSE_RC) is at least the page's body text (BODY_TEXT_PX) at 100% zoom. Builders make
their figures with new_figure (constrained layout: a legend outside the panels takes its room from
the panels, never widens the figure) and leave font sizes to the theme; text drawn inside a panel
uses ANNOTATION_PT."""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from cycler import cycler  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.core.io import atomic_write_bytes  # noqa: E402
from distbench.core.units import human_bytes  # noqa: E402

DPI = 110  # small PNGs keep the self-contained HTML a few MB at most
PAGE_WIDTH_PX = 1150  # report.html: body { max-width: 1150px }; a wider image is shown scaled down
BODY_TEXT_PX = 14  # report.html: body { font: 14px ... }
FIG_WIDTH_IN = 10.0  # 1100 px at DPI: every figure, shown at its native size in the page
MIN_TEXT_PT = BODY_TEXT_PX * 72 / DPI  # 9.16 pt: a text this size is the body text's 14 px at 100%
ANNOTATION_PT = 9.5  # text inside a panel (bar values, NCCL's algorithm ranges, heat-map cells)
LEGEND_WRAP = 32  # characters per legend line: a long entry wraps rather than narrowing the panels


def new_figure(nrows: int = 1, ncols: int = 1, *, height: float | None = None, width: float = FIG_WIDTH_IN,
               **kw):
    """(fig, axes) at the house width (axes a 2-D array, squeeze=False) with constrained layout;
    `height` in inches, by default 3.6 per row of panels (5.2 for a single row)."""
    if height is None:
        height = 5.2 if nrows == 1 else 3.6 * nrows
    return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False, layout="constrained", **kw)


def legend_outside(ax, handles=None, **kw):
    """The legend right of `ax` (a figure's top-right panel), at the theme's legend size; constrained
    layout gives it its room inside the figure's width (narrowing that column's panels), below any
    suptitle."""
    if handles is not None:
        kw["handles"] = handles
    leg = ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False, **kw)
    for text, handle in zip(leg.get_texts(), handles or [None] * len(leg.get_texts())):
        text.set_text("\n".join(textwrap.fill(line, LEGEND_WRAP, break_long_words=False, break_on_hyphens=False)
                                for line in text.get_text().split("\n")))
        if is_header(handle):
            text.set_fontweight("bold")
    return leg


def legend_below(fig, groups: list[list]):
    """A figure legend under the panels, one column per group of entries (each group a header() and
    its entries), so a grid of panels keeps the figure's whole width; constrained layout makes its
    room."""
    groups = [g for g in groups if g]
    rows = max(len(g) for g in groups)
    blank = Line2D([], [], ls="none", marker="", label=" ")
    handles = [h for g in groups for h in g + [blank] * (rows - len(g))]  # columns fill top to bottom
    leg = fig.legend(handles=handles, loc="outside lower center", ncols=len(groups), frameon=False)
    for text, handle in zip(leg.get_texts(), handles):
        if is_header(handle):
            text.set_fontweight("bold")
    return leg


def header(text: str) -> Line2D:
    """A legend entry that heads the entries below it ('world size', 'backend'), drawn bold."""
    return Line2D([], [], ls="none", marker="", label=text, gid="legend-header")


def is_header(handle) -> bool:
    return handle is not None and handle.get_gid() == "legend-header"


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


def set_house_theme() -> None:
    """Seaborn's ticks/paper theme (palette.HOUSE_RC) with the house colour cycle (palette.SERIES), so
    even a colour a figure does not choose comes out the same in every figure."""
    matplotlib.rcParams.update(palette.HOUSE_RC)
    matplotlib.rcParams["axes.prop_cycle"] = cycler(color=list(palette.SERIES))


def write_figures(builders: dict, data, out_dir) -> list[Path]:
    """Each builder(data) -> a figure or None (no data for it); write the figures under their names
    as PNG + SVG in out_dir (created), in the house theme; return the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    set_house_theme()
    written: list[Path] = []
    for name, build in builders.items():
        fig = build(data)
        if fig is not None:
            written += save_figure(fig, out_dir, name)
    return written


def size_axis(ax, sizes) -> None:
    """Log x axis with power-of-two ticks labelled 8 B, 4 KiB, 1 MiB, ... (at most 8 of them, fewer in a
    narrow panel)."""
    lo, hi = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    # as many ticks as the panel's width holds at the theme's size (rotated labels ~0.36 in apart)
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    step = max(1, math.ceil((hi - lo + 1) / max(3, min(8, int(width_in * 2.8)))))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_bytes(x)))
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_xlabel("message size")



def time_unit(values_us) -> tuple[str, float]:
    """(unit, µs per unit) that fits the largest of `values_us`, as distbench.core.units.human_time_us
    writes it: ('µs', 1) below 1 ms, ('ms', 1e3) below 1 s, else ('s', 1e6)."""
    v = pd.to_numeric(pd.Series(list(np.ravel(values_us)), dtype="float64"), errors="coerce").abs()
    top = v[np.isfinite(v)].max() if len(v) else float("nan")
    if math.isnan(top) or top < 999.5:  # NaN (no finite value) or below 1 ms
        return "µs", 1.0
    return ("ms", 1e3) if top < 999.5e3 else ("s", 1e6)


def time_tick(us: float) -> str:
    """A log-axis tick given in µs, in its own unit: '5 µs', '200 µs', '10 ms', '1.5 s'."""
    if not us > 0:
        return ""
    unit, scale = time_unit([us])
    return f"{us / scale:.3g} {unit}"
