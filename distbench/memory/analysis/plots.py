"""Figures of the memory family, from results/<label>/tables/memory.csv (its `measure` rows): PNG for the
HTML report and SVG for papers, in the house style of distbench.comm.analysis.plots.

- memory_split: per model (its first configuration at its smallest world size), stacked bars per
  batch size: parameters, gradients, optimizer state, activations, and on GPU the allocator's
  unexplained rest up to its peak.
- memory_activations: activation bytes vs batch size for every job, with each job's fitted line;
  colour and marker = the job's world size, line style = its model and configuration.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.memory.analysis.summary import fit_line  # noqa: E402
from distbench.core.figures import header, legend_outside, new_figure, write_figures  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

FIGURES = ("memory_split", "memory_activations")
# each part in one fixed colour (distbench.core.palette's series colours: one palette for every figure)
PART_COLORS = {"params_bytes": palette.SERIES[0], "grads_bytes": palette.SERIES[1], "optimizer_bytes": palette.SERIES[2],
               "activations_bytes": palette.SERIES[3], "unexplained_bytes": palette.SERIES[4]}
PART_LABELS = (("params_bytes", "parameters"), ("grads_bytes", "gradients"), ("optimizer_bytes", "optimizer state"),
               ("activations_bytes", "activations"), ("unexplained_bytes", "allocator: rest of the peak"))


def _unit(ok: pd.DataFrame) -> tuple[str, float]:
    """GiB when the largest step holds at least 1 GiB, else MiB: axes read in the unit that fits."""
    top = pd.to_numeric(ok.get("peak_allocated_bytes"), errors="coerce").max()
    top = top if top == top else pd.to_numeric(ok["parts_bytes"], errors="coerce").max()
    return ("GiB", 2.0**30) if top >= 2**30 else ("MiB", 2.0**20)


def _ok(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["phase"] == "measure") & (df["status"] == "ok")].copy()


def _label(r) -> str:
    return f"{r['model']} {r['config']} ws{int(r['world_size'])}"


def fig_split(ok: pd.DataFrame) -> plt.Figure | None:
    if ok.empty:
        return None
    known = ("mlp", "gpt", "lora")  # the built-in workloads first, then any other in the table
    models = sorted(set(ok["model"]), key=lambda m: (known.index(m) if m in known else len(known), m))
    unit, scale = _unit(ok)
    fig, axes = new_figure(1, len(models), height=4.6)
    for ax, model in zip(axes[0], models):
        d = ok[ok["model"] == model]
        first = d.sort_values(["world_size", "config"]).iloc[0]
        d = d[(d["config"] == first["config"]) & (d["world_size"] == first["world_size"])].sort_values("batch_size")
        x = np.arange(len(d))
        bottom = np.zeros(len(d))
        for col, label in PART_LABELS:
            v = pd.to_numeric(d[col], errors="coerce").fillna(0).clip(lower=0).to_numpy(float) / scale
            if col == "unexplained_bytes" and not v.any():
                continue
            ax.bar(x, v, bottom=bottom, color=PART_COLORS[col], label=label)
            bottom += v
        ax.set_yscale("linear")  # stacked bars from zero
        ax.set_ylim(bottom=0)
        ax.set_xticks(x, [str(int(b)) for b in d["batch_size"]])
        ax.set_xlabel("batch size per rank")
        ax.set_title(_label(first))
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel(f"memory per rank ({unit})")
    legend_outside(axes[0][-1])
    fig.suptitle("What takes the memory of a training step")
    return fig


def fig_activations(ok: pd.DataFrame) -> plt.Figure | None:
    """Activation bytes vs batch size, one job per line: colour and marker = the job's world size
    (palette.world_size_color/marker), line style = its model and configuration (palette.style_levels)."""
    if ok.empty:
        return None
    unit, scale = _unit(ok)
    fig, axes = new_figure(height=4.6)
    ax = axes[0, 0]
    groups = list(ok.groupby(["model", "config", "world_size"]))  # sorted: the same job, the same look
    styles = palette.style_levels(dict.fromkeys((m, c) for (m, c, _), _ in groups))
    for (model, config, ws), g in groups:
        color = palette.world_size_color(ws)
        g = g.sort_values("batch_size")
        y = pd.to_numeric(g["activations_bytes"], errors="coerce").to_numpy(float)
        ax.scatter(g["batch_size"], y / scale, color=color, marker=palette.world_size_marker(ws), s=30,
                   label=_label(g.iloc[0]), zorder=3)
        slope, intercept, _ = fit_line(g["batch_size"], y)
        if slope == slope:
            xs = np.array([g["batch_size"].min(), g["batch_size"].max()], dtype=float)
            ax.plot(xs, (slope * xs + intercept) / scale, color=color, lw=1.5, ls=styles[(model, config)],
                    label=f"_fit {_label(g.iloc[0])}")
    ax.set_xlabel("batch size per rank")
    ax.set_ylim(bottom=0)
    ax.set_ylabel(f"activations saved for backward ({unit})")
    ax.set_title("Activation memory vs batch size (lines: least-squares fit)")
    sizes = sorted({int(ws) for (_, _, ws), _ in groups})
    handles = [header("world size")] + [
        Line2D([], [], color=palette.world_size_color(w), marker=palette.world_size_marker(w), ls="none",
               label=f"{w} rank{'s' if w != 1 else ''}") for w in sizes]
    handles += [header("model, configuration")] + [
        Line2D([], [], color="0.35", ls=ls, lw=1.5, label=f"{m} {c}") for (m, c), ls in styles.items()]
    legend_outside(ax, handles)
    ax.grid(True, alpha=0.3)
    return fig


BUILDERS = dict(zip(FIGURES, (fig_split, fig_activations), strict=True))


def plot_memory(raw: pd.DataFrame, out_dir) -> list[Path]:
    """Write every memory figure whose data exist as out_dir/<name>.png and .svg; return the paths."""
    if raw is None or len(raw) == 0:
        return []
    ok = _ok(raw)
    if ok.empty:
        return []
    return write_figures(BUILDERS, ok, out_dir)
