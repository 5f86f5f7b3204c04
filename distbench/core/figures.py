"""Figure saving and axes every family's plots share: PNG + SVG written atomically, the house theme
(distbench.core.palette), message-size and time axes read as the report writes them
(distbench.core.units)."""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from cycler import cycler  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.core.io import atomic_write_bytes  # noqa: E402
from distbench.core.units import human_bytes  # noqa: E402

DPI = 110  # small PNGs keep the self-contained HTML a few MB at most


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
    """Log x axis with power-of-two ticks labelled 8 B, 4 KiB, 1 MiB, ... (at most ~8 of them)."""
    lo, hi = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    step = max(1, math.ceil((hi - lo + 1) / 8))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([2.0 ** k for k in range(lo, hi + 1, step)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_bytes(x)))
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
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
