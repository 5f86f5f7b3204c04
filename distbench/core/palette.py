"""One palette for every figure of a report: a backend, a world size, a timing mode always look the
same, whichever figure (comm, training, memory, pairs, predict) shows them.

Colours are fixed per value, never taken from the order a figure happens to meet its values in
(seaborn's default cycling would paint NCCL blue in one figure and orange in the next). Values
outside the fixed tables get a colour from a fallback list picked by a stable hash of the value, so
they too come out the same in every figure and every run.

Plain functions and constants, no matplotlib import: the plot modules pass the results on as
`color=`, `marker=`, `linestyle=` or as a seaborn `palette=` dict.
"""

from __future__ import annotations

import zlib

# Backends: NVIDIA green for NCCL, blue for Gloo; others fixed too.
BACKEND_COLORS = {
    "nccl": "#76b900",
    "gloo": "#3a6fb0",
    "mpi": "#8e44ad",
    "ucc": "#c0392b",
    "xccl": "#e67e22",
}
# World sizes: the common ones fixed (Okabe-Ito / Tol colours, none of them the backends' green or
# blue, so a colour never reads as a backend in one figure and a world size in the next).
WORLD_SIZE_COLORS = {
    1: "#7f7f7f", 2: "#e69f00", 3: "#999933", 4: "#882255", 6: "#cc79a7", 8: "#332288", 12: "#aa4499",
    16: "#44aa99", 24: "#8c510a", 32: "#117733", 48: "#6699cc", 64: "#000000", 128: "#661100", 256: "#ddcc77",
}
WORLD_SIZE_MARKERS = {
    1: "*", 2: "o", 3: "d", 4: "s", 6: "^", 8: "D", 12: "v", 16: "P", 24: "X", 32: "p", 48: "h", 64: "<",
    128: ">", 256: "H",
}
BACKEND_MARKERS = {"nccl": "o", "gloo": "s", "mpi": "^", "ucc": "D", "xccl": "v"}
# Timing modes differ by line style (their colour is the world size's in the timing-modes figure).
TIMING_LINESTYLES = {"events": "-", "graph": "--", "host": ":"}
# Everything else that is a hue (configs, dtypes, NCCL env, series of the predict figures): seaborn's
# "deep" colours, given out in the order of the levels the caller passes.
SERIES = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
          "#ccb974", "#64b5cd")
# Colours for values outside the tables above, chosen by a stable hash (zlib.crc32, not hash()).
FALLBACK = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666",
            "#a6cee3", "#fb9a99", "#b15928", "#6a3d9a")
FALLBACK_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "p", "h", "<", ">", "*")

# Reference lines: the link peak and the published figure.
PEAK_COLOR = "#b2182b"
PEAK_LINESTYLE = "--"
PUBLISHED_COLOR = "#525252"
PUBLISHED_LINESTYLE = ":"
NEUTRAL_COLOR = "#b8b8b8"  # the bars a figure does not highlight
IDEAL_COLOR = "#666666"  # the ideal-scaling line
IDEAL_LINESTYLE = "--"
BAND_ALPHA = 0.15  # p5-p95 bands around the median lines

HEATMAP_CMAP = "viridis"  # the GPU-pair matrix
STATUS_COLOR = "firebrick"  # a cell or point that did not run ok


def _stable_index(value, n: int) -> int:
    return zlib.crc32(str(value).encode()) % n


def backend_color(backend) -> str:
    """The colour of a backend ('nccl', 'gloo', ...; case-insensitive) in every figure."""
    b = str(backend).lower()
    return BACKEND_COLORS.get(b) or FALLBACK[_stable_index(b, len(FALLBACK))]


def backend_palette(backends) -> dict:
    """{backend: colour} for seaborn's `palette=`; keys as given."""
    return {b: backend_color(b) for b in backends}


def backend_marker(backend) -> str:
    """The marker of a backend where a figure marks backends by marker (colour being another hue)."""
    b = str(backend).lower()
    return BACKEND_MARKERS.get(b) or FALLBACK_MARKERS[_stable_index(b, len(FALLBACK_MARKERS))]


def _ws(ws) -> int:
    return int(float(ws))


def world_size_color(ws) -> str:
    """The colour of a world size (number of ranks) in every figure: fixed for 1, 2, 3, 4, 6, 8, 12,
    16, 24, 32, 48, 64, 128, 256; any other size a fallback colour picked by a stable hash."""
    n = _ws(ws)
    return WORLD_SIZE_COLORS.get(n) or FALLBACK[_stable_index(n, len(FALLBACK))]


def world_size_palette(sizes) -> dict:
    """{world size: colour} for seaborn's `palette=`; keys as given."""
    return {s: world_size_color(s) for s in sizes}


def world_size_marker(ws) -> str:
    """The marker of a world size in every figure (line plots mark world sizes by marker)."""
    n = _ws(ws)
    return WORLD_SIZE_MARKERS.get(n) or FALLBACK_MARKERS[_stable_index(n, len(FALLBACK_MARKERS))]


def timing_linestyle(timing) -> str:
    return TIMING_LINESTYLES.get(str(timing), "-.")


def series_colors(levels, fixed: dict | None = None) -> dict:
    """{level: colour} for any other hue: `fixed` levels keep their colour, the rest take SERIES in
    the order given (pass the levels in a deterministic order, e.g. sorted or a figure's hue order;
    past ten levels, stable-hash fallback colours)."""
    fixed = dict(fixed or {})
    free = [c for c in SERIES if c not in fixed.values()]
    out, i = {}, 0
    for level in levels:
        if level in out:
            continue
        if level in fixed:
            out[level] = fixed[level]
        elif i < len(free):
            out[level] = free[i]
            i += 1
        else:
            out[level] = FALLBACK[_stable_index(level, len(FALLBACK))]
    return out
# the strip that marks NCCL's algorithm/protocol ranges on bus-bandwidth figures (alternating)
NCCL_RANGE_COLORS = ("#c9d3e0", "#e6ebf2")


# Seaborn's "ticks" style at its "paper" scale (seaborn.set_theme(style="ticks", context="paper")),
# as the matplotlib settings it makes. The figures use it without importing seaborn where they draw
# with plain matplotlib: seaborn pulls in scipy.stats, about half a second per plotting process, and
# the report's rebuild has a time budget. tests/test_plots.py checks these equal seaborn's own.
HOUSE_RC = {
    "axes.axisbelow": True, "axes.edgecolor": ".15", "axes.labelcolor": ".15", "axes.labelsize": 9.6,
    "axes.linewidth": 1.0, "axes.titlesize": 9.6, "font.size": 9.6,
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "grid.color": ".8", "legend.fontsize": 8.8, "legend.title_fontsize": 9.6, "lines.linewidth": 1.2,
    "lines.markersize": 4.8, "lines.solid_capstyle": "round", "patch.edgecolor": "w", "patch.force_edgecolor": True,
    "patch.linewidth": 0.8, "text.color": ".15",
    "xtick.color": ".15", "xtick.labelsize": 8.8, "xtick.major.size": 4.8, "xtick.major.width": 1.0,
    "xtick.minor.size": 3.2, "xtick.minor.width": 0.8,
    "ytick.color": ".15", "ytick.labelsize": 8.8, "ytick.major.size": 4.8, "ytick.major.width": 1.0,
    "ytick.minor.size": 3.2, "ytick.minor.width": 0.8,
}
