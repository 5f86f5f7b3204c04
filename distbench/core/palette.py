"""One palette for every figure of a report: a backend, a world size, a timing mode always look the
same, whichever family's figure shows them.

Colour is the world size's wherever a figure draws one line, band or bar per world size (the
bandwidth-by-size figures, the activation-memory figure): the same world size is the same colour in every figure, and
a line also carries its world size's marker. What a figure compares besides (the backend, the timing
mode, an NCCL environment, a dtype, a job's model and configuration) is the line style
(BACKEND_LINESTYLES, TIMING_LINESTYLES, style_levels), or a bar's hatch (BACKEND_HATCHES). Where the
world size is the x axis (the scaling figures) the position names it and colour is the
configuration's (the family's own plots pick those colours).

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
# Where colour is the world size, a backend is a line style (lines) or a hatch (bars).
# (not "--" nor ":": the link peak and the published figure are dashed and dotted)
BACKEND_LINESTYLES = {"nccl": "-", "gloo": "-.", "mpi": (0, (5, 1, 1, 1, 1, 1)), "ucc": (0, (8, 2)),
                      "xccl": (0, (3, 1, 1, 1))}
BACKEND_HATCHES = {"nccl": "", "gloo": "//", "mpi": "..", "ucc": "xx", "xccl": "\\\\"}
# Any other compared level where colour is the world size (NCCL environments, dtypes, models and configurations):
# line styles in the order of the levels the caller passes, then a stable hash.
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2)), (0, (3, 1, 1, 1)))
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


def backend_linestyle(backend) -> str | tuple:
    """The line style of a backend where colour is the world size: NCCL solid, Gloo dash-dot."""
    b = str(backend).lower()
    return BACKEND_LINESTYLES.get(b) or LINESTYLES[1 + _stable_index(b, len(LINESTYLES) - 1)]


def backend_hatch(backend) -> str:
    """The hatch of a backend's bars where colour is the world size: NCCL plain, Gloo hatched."""
    b = str(backend).lower()
    return BACKEND_HATCHES.get(b, "oo")


def style_levels(levels) -> dict:
    """{level: line style} for a compared level where colour is the world size: LINESTYLES in the
    order given (pass a deterministic order), past those a stable-hash pick."""
    out: dict = {}
    for level in levels:
        if level not in out:
            i = len(out)
            out[level] = LINESTYLES[i] if i < len(LINESTYLES) else LINESTYLES[_stable_index(level, len(LINESTYLES))]
    return out


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


# Seaborn's "ticks" style at its "notebook" scale with font_scale 0.9
# (seaborn.set_theme(style="ticks", context="notebook", font_scale=0.9)), as the matplotlib settings
# it makes: legends and tick labels 9.9 pt, axis labels and titles 10.8 pt, which distbench.core.figures'
# DPI (110) draws at 15-16.5 px, at least report.html's 14 px body text when the page shows a figure at
# its native size (distbench.core.figures.FIG_WIDTH_IN). The figures use it without importing seaborn
# where they draw with plain matplotlib: seaborn pulls in scipy.stats, about half a second per plotting
# process, and the report's rebuild has a time budget. tests/report/test_plots.py checks these equal seaborn's own.
HOUSE_RC = {
    "axes.axisbelow": True, "axes.edgecolor": ".15", "axes.labelcolor": ".15", "axes.labelsize": 10.8,
    "axes.linewidth": 1.25, "axes.titlesize": 10.8, "font.size": 10.8,
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "grid.color": ".8", "legend.fontsize": 9.9, "legend.title_fontsize": 10.8, "lines.linewidth": 1.5,
    "lines.markersize": 6.0, "lines.solid_capstyle": "round", "patch.edgecolor": "w", "patch.force_edgecolor": True,
    "patch.linewidth": 1.0, "text.color": ".15",
    "xtick.color": ".15", "xtick.labelsize": 9.9, "xtick.major.size": 6.0, "xtick.major.width": 1.25,
    "xtick.minor.size": 4.0, "xtick.minor.width": 1.0,
    "ytick.color": ".15", "ytick.labelsize": 9.9, "ytick.major.size": 6.0, "ytick.major.width": 1.25,
    "ytick.minor.size": 4.0, "ytick.minor.width": 1.0,
}
