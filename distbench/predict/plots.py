"""Figures of the cluster prediction (distbench.predict.model), in the house style of distbench.comm.analysis.plots:
the check of the model (predicted against measured time at the larger measured world size, per op
and size), predicted all_reduce bus bandwidth against the GPU count, and predicted training
scaling efficiency against the GPU count. A figure whose data are missing is skipped."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.core.figures import legend_outside, new_figure, size_axis as _size_axis, write_figures  # noqa: E402
from distbench.predict.tables import measured_on_gpus  # noqa: E402

FIGURES = ("predict_validation", "predict_allreduce_busbw", "predict_training_efficiency")


def _validation(tables: dict):
    v = tables["validation"]
    # a GPU run's figures rest on NCCL only (as the section's check does): a Gloo check is CPU processes and
    # is no check of a GPU prediction, so on a one-GPU node (no NCCL collective) there is no figure
    if measured_on_gpus(tables.get("comm"), tables.get("training")) and "backend" in v:
        v = v[v["backend"].astype(str) == "nccl"]
    if v.empty:
        return None
    v = v.assign(series=v["op"] + " " + v["timing"].astype(str) + " (" + v["backend"] + ")")
    colors = palette.series_colors(sorted(v["series"].unique()))  # one colour per series in every panel
    checks = sorted(v["check_world_size"].unique())
    fig, axes = new_figure(1, len(checks), height=4.8)
    for ax, ws in zip(axes[0], checks):
        g = v[v["check_world_size"] == ws]
        sns.lineplot(data=g, x="size_bytes", y="rel_err_pct", hue="series", hue_order=sorted(g["series"].unique()),
                     palette=colors, marker="o", errorbar=None, ax=ax)
        ax.axhspan(-15, 15, color="tab:green", alpha=0.12, label="±15%")
        ax.axhline(0, color="k", lw=0.8)
        _size_axis(ax, g["size_bytes"])
        fit = int(g["fit_world_size"].iloc[0])
        ax.set_ylabel("predicted / measured time - 1 (%)")
        ax.set_title(f"fitted on {fit} ranks, predicted {int(ws)} ranks,\nagainst the measured {int(ws)}-rank run")
        if ax is axes[0][-1]:
            legend_outside(ax)
        else:
            ax.get_legend().remove()
        ax.grid(True, alpha=0.3)
    return fig


def _allreduce_busbw(tables: dict):
    """all_reduce at the largest predicted size: each algorithm (flat ring, tree, hierarchical),
    from the measured intra-node link (the largest world size fitted, graph timing where measured)
    and from the preset's."""
    c = tables["comm"]
    if c.empty:
        return None
    c = c[(c["op"] == "all_reduce") & c["busbw_gbps"].notna()]
    c = c[c["size_bytes"] == c["size_bytes"].max()] if len(c) else c
    if c.empty:
        return None
    measured = c[c["intra_source"] == "measured"]
    if len(measured):
        measured = measured[measured["fit_world_size"] == measured["fit_world_size"].max()]
        timing = "graph" if (measured["timing"] == "graph").any() else measured["timing"].iloc[0]
        measured = measured[measured["timing"] == timing]  # then one backend: the first with that timing
        measured = measured[measured["backend"] == measured["backend"].iloc[0]]
        measured = measured.assign(link=f"measured ({measured['backend'].iloc[0]}, {timing}, "
                                        f"{int(measured['fit_world_size'].iloc[0])} ranks)")
    preset = c[c["intra_source"] == "preset"].assign(link="preset")
    c = pd.concat([measured, preset])
    fig, axes = new_figure(height=4.8)
    ax = axes[0, 0]
    algorithms = sorted(c["algorithm"].astype(str).unique())
    sns.lineplot(data=c, x="gpus", y="busbw_gbps", hue="algorithm", hue_order=algorithms,
                 palette=palette.series_colors(algorithms), style="link", marker="o", errorbar=None, ax=ax)
    _gpu_axis(ax, c["gpus"])
    ax.set_ylabel("predicted all_reduce bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"all_reduce of {int(c['size_bytes'].iloc[0]) / 2**20:g} MiB at scale, preset {c['preset'].iloc[0]}",
)
    legend_outside(ax)
    ax.grid(True, alpha=0.3)
    return fig


def _gpu_axis(ax, gpus) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(int(g) for g in gpus.unique()))
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{int(x)}"))
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlabel("GPUs")


def _training_efficiency(tables: dict):
    t = tables["training"]
    if t.empty or "efficiency" not in t:
        return None
    t = t[t["efficiency"].notna()]
    if t.empty:
        return None
    t = t.assign(series=t["model"].astype(str) + " " + t["strategy"].astype(str) + " " + t["config"].astype(str))
    fig, axes = new_figure(height=4.8)
    ax = axes[0, 0]
    order = sorted(t["series"].unique())
    sns.lineplot(data=t, x="gpus", y="efficiency", hue="series", hue_order=order, palette=palette.series_colors(order),
                 marker="o", errorbar=None, ax=ax)
    ax.axhline(1.0, color=palette.IDEAL_COLOR, lw=1, ls=palette.IDEAL_LINESTYLE, label="ideal")
    _gpu_axis(ax, t["gpus"])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("predicted scaling efficiency (weak)")
    ax.set_title(f"training at scale, preset {t['preset'].iloc[0]}: step = compute + exposed comm")
    legend_outside(ax)
    ax.grid(True, alpha=0.3)
    return fig


def write_predict_figures(validation_csv, comm_csv, training_csv, out_dir) -> list[Path]:
    tables = {"validation": pd.read_csv(validation_csv), "comm": pd.read_csv(comm_csv),
              "training": pd.read_csv(training_csv)}
    return write_figures({"predict_validation": _validation, "predict_allreduce_busbw": _allreduce_busbw,
                          "predict_training_efficiency": _training_efficiency}, tables, out_dir)
