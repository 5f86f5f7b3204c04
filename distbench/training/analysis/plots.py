"""Figures of the training family, from the scaling summary (distbench.training.analysis.summary): PNG for the HTML
report and SVG for papers, in the house style of distbench.comm.analysis.plots. The MLP's figures (throughput,
step breakdown, tuning) use its rows only; efficiency shows every model; the language models get
their own tokens/s figure.

Only status-ok rows are drawn; a figure whose data are missing is skipped, not an error.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: cluster nodes and CI have no display

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from distbench.core import palette  # noqa: E402
from distbench.core.layout_spec import BASELINE  # noqa: E402
from distbench.core.figures import ANNOTATION_PT, legend_outside, new_figure, time_unit, write_figures  # noqa: E402
from distbench.training.analysis.layout_verdict import layout_rows as findings_layout_rows  # noqa: E402
from distbench.training.analysis.findings import mlp_ddp_rows, one_device_of  # noqa: E402
from distbench.training.analysis.summary import PLAIN, add_scaling, row_split  # noqa: E402

FIGURES = ("training_throughput", "training_lm_throughput", "training_efficiency", "training_step_breakdown",
           "training_tuning")


def ws_label(df: pd.DataFrame) -> str:
    """The world-size axis: a Gloo (CPU) run's ranks are processes, never GPUs (findings.one_device_of)."""
    labels = {"1 rank": "world size (ranks, CPU processes under Gloo)", "1 GPU": "world size (ranks, one GPU each)"}
    return labels.get(one_device_of(df), "world size (ranks, one GPU each under NCCL)")


def _mlp(ok: pd.DataFrame) -> pd.DataFrame:
    return ok[ok["model"].fillna("mlp") == "mlp"] if "model" in ok else ok


def _with_series(ok: pd.DataFrame) -> pd.DataFrame:
    """A `series` column naming model and configuration ('mlp plain', 'gpt fsdp'); the config
    alone when every row is the MLP's."""
    model = ok["model"].fillna("mlp").astype(str) if "model" in ok else pd.Series("mlp", index=ok.index)
    if (model == "mlp").all():
        return ok.assign(series=ok["config"].astype(str))
    config = ok["config"].astype(str).where(~((model != "mlp") & (ok["config"] == PLAIN)), BASELINE)
    return ok.assign(series=model + " " + config)


def _series_order(df: pd.DataFrame) -> list[str]:
    return sorted(df["series"].unique(), key=lambda x: (x.split(" ")[0] != "mlp", x.split(" ")[0],
                                                        not x.endswith((" plain", " ddp")) and x != PLAIN, x))


def _config_order(df: pd.DataFrame) -> list[str]:
    configs = sorted(df["config"].astype(str).unique())
    return ([PLAIN] if PLAIN in configs else []) + [c for c in configs if c != PLAIN]


def training_colors(ok: pd.DataFrame) -> dict:
    """{config or series: colour}, the same in every training figure of a report: each builder gets
    the same ok rows and derives the mapping from all of them, not from the rows it draws. The MLP's
    configurations take the house series colours in _config_order (plain first); 'mlp <config>'
    series share their config's colour; the other models' series take the colours left."""
    mlp = _mlp(ok)
    colors = palette.series_colors(_config_order(mlp) if len(mlp) else [])
    series = _series_order(_with_series(ok)) if len(ok) else []
    for s in series:
        model, _, config = s.partition(" ")
        if s not in colors and model == "mlp" and config in colors:
            colors[s] = colors[config]
    rest = [s for s in series if s not in colors]
    colors.update(palette.series_colors(rest, fixed=colors))  # colours the configs left free
    return colors


def _ideal(ax, x, y, label=None) -> None:
    ax.plot(x, y, ls=palette.IDEAL_LINESTYLE, color=palette.IDEAL_COLOR, lw=1, label=label or "_ideal")


def _legend_outside(ax) -> None:
    """The legend right of the axes: with a dozen tuning configurations it would hide the lines."""
    legend_outside(ax)


def _axes():
    fig, axes = new_figure(height=4.6)
    return fig, axes[0, 0]


def _ws_ticks(ax, df) -> None:
    ws = sorted(int(w) for w in df["world_size"].unique())
    ax.set_xticks(ws)
    ax.set_xlabel(ws_label(df))
    ax.grid(True, alpha=0.3)


def fig_throughput(ok: pd.DataFrame) -> plt.Figure | None:
    colors = training_colors(ok)
    ok = _mlp(ok)
    d = ok[ok["samples_per_s_median"].notna()]
    if d.empty or d["world_size"].nunique() < 2:  # one world size: no 'vs world size' to draw (the table has it)
        return None
    fig, ax = _axes()
    order = _config_order(d)
    sns.lineplot(data=d.sort_values("world_size"), x="world_size", y="samples_per_s_median", hue="config",
                 hue_order=order, palette={c: colors[c] for c in order}, marker="o", errorbar=None, ax=ax)
    base = d["plain_1gpu_samples_per_s"].dropna()
    if len(base):
        ws = np.array(sorted(int(w) for w in d["world_size"].unique()))
        _ideal(ax, ws, ws * float(base.iloc[0]), f"ideal: N × plain DDP's throughput on {one_device_of(d)}")
    _legend_outside(ax)
    ax.set_ylim(bottom=0)
    _ws_ticks(ax, d)
    ax.set_ylabel("throughput (samples/s, median, all ranks)")
    ax.set_title("MLP training throughput vs world size")
    return fig


def fig_lm_throughput(ok: pd.DataFrame) -> plt.Figure | None:
    if "tokens_per_s_median" not in ok:
        return None
    d = _with_series(ok[ok["tokens_per_s_median"].notna()])
    if d.empty:
        return None
    if d["world_size"].nunique() < 2:  # one world size (a one-GPU node): bars, not single points on a line
        return _lm_bars(d, training_colors(ok))
    colors = training_colors(ok)
    fig, ax = _axes()
    order = _series_order(d)
    sns.lineplot(data=d.sort_values("world_size"), x="world_size", y="tokens_per_s_median", hue="series",
                 hue_order=order, palette={s: colors[s] for s in order}, marker="o", errorbar=None, ax=ax)
    ws = np.array(sorted(int(w) for w in d["world_size"].unique()))
    for model, g in d.groupby("model"):  # ideal: N x the model's plain 1-rank run
        base = (g["plain_1gpu_samples_per_s"] * g["seq_len"]).dropna()
        if len(base):
            _ideal(ax, ws, ws * float(base.iloc[0]))
    _ideal(ax, [], [], f"ideal: N × plain DDP on {one_device_of(d)} (per model)")
    _legend_outside(ax)
    ax.set_ylim(bottom=0)
    _ws_ticks(ax, d)
    ax.set_ylabel("tokens/s (median, all ranks; whiskers: 5-95% steps)")
    ax.set_title("Language-model throughput vs world size")
    return fig


def _lm_bars(d: pd.DataFrame, colors: dict) -> plt.Figure:
    """The language models at one world size: tokens/s per model and layout, each bar's MFU on it (what the
    one-GPU Verdict leads with), eager and compiled side by side where the run has both."""
    modes = d["compile"].astype(str).str.lower().eq("true") if "compile" in d else pd.Series(False, index=d.index)
    both = bool(modes.any() and not modes.all())
    order = _series_order(d)
    if both:  # each series twice, eager then compiled
        d = d.assign(series=d["series"] + np.where(modes, ", compiled", ", eager"))
        order = [f"{s}, {m}" for s in order for m in ("eager", "compiled") if f"{s}, {m}" in set(d["series"])]
    d = d.drop_duplicates("series").set_index("series").loc[order].reset_index()
    fig, ax = _axes()
    base = {s: colors.get(s.rsplit(", ", 1)[0] if both else s, palette.NEUTRAL_COLOR) for s in order}
    compiled = [s.endswith(", compiled") for s in order]  # compiled: hatched, outlined, beside its eager twin
    bars = ax.bar([s.replace(", ", "\n") for s in order], d["tokens_per_s_median"], color=[base[s] for s in order],
                  edgecolor=["black" if c else "none" for c in compiled])
    for bar, c in zip(bars, compiled, strict=True):
        if c:
            bar.set_hatch("//")
    mfu = pd.to_numeric(d["mfu"], errors="coerce") if "mfu" in d else pd.Series(np.nan, index=d.index)
    for bar, m in zip(bars, mfu, strict=True):
        if pd.notna(m):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{100 * m:.1f}% MFU", ha="center",
                    va="bottom", fontsize=ANNOTATION_PT)
    ax.set_yscale("linear")  # bars compare lengths
    ax.set_ylim(0, float(d["tokens_per_s_median"].max()) * 1.12)
    ax.set_xlabel(f"model and layout, at world size {int(d['world_size'].iloc[0])}")
    ax.set_ylabel("tokens/s (median, all ranks)")
    ax.set_title(f"Language-model tokens/s on {_one_world(d)}, per model and layout")
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def _one_world(d: pd.DataFrame) -> str:
    """'1 GPU', '2 GPUs', '4 ranks' (CPU processes): the one world size a figure draws."""
    from distbench.core.units import count_noun

    ws = int(d["world_size"].iloc[0])
    return count_noun(ws, "rank") if str(d["backend"].iloc[0]) == "gloo" else count_noun(ws, "GPU")


def fig_efficiency(ok: pd.DataFrame) -> plt.Figure | None:
    d = ok[ok["efficiency_vs_plain_1gpu"].notna()].copy()
    if d.empty or d["world_size"].max() <= 1:  # one rank (a one-GPU node): no scaling to draw
        return None
    d["efficiency_pct"] = 100 * d["efficiency_vs_plain_1gpu"]
    d = _with_series(d)
    colors = training_colors(ok)
    order = _series_order(d)
    fig, ax = _axes()
    sns.lineplot(data=d.sort_values("world_size"), x="world_size", y="efficiency_pct", hue="series",
                 hue_order=order, palette={s: colors[s] for s in order}, marker="o", errorbar=None, ax=ax)
    ax.axhline(100, ls=palette.IDEAL_LINESTYLE, color=palette.IDEAL_COLOR, lw=1, label="ideal (100%)")
    _legend_outside(ax)
    _ws_ticks(ax, d)
    ax.set_ylim(0, max(105, float(d["efficiency_pct"].max()) * 1.05))
    one = one_device_of(d)
    ax.set_ylabel(f"scaling efficiency vs plain DDP on {one} (%)")
    ax.set_title(f"Scaling efficiency: throughput(N) / (N × plain DDP's throughput on {one})")
    return fig


def _primary_config(ok: pd.DataFrame) -> str:
    """The configuration measured at the most world sizes, plain first on ties."""
    counts = ok.groupby("config")["world_size"].nunique()
    return max(_config_order(ok), key=lambda c: (counts.get(c, 0), c == PLAIN))


def fig_step_breakdown(ok: pd.DataFrame) -> plt.Figure | None:
    ok = mlp_ddp_rows(ok)  # a DDP step's parts (buckets, no_sync): the MLP's FSDP rows are not drawn here
    d = ok[ok["compute_only_ms_median"].notna() & ok["step_time_ms_median"].notna()]
    if d.empty:
        return None
    config = _primary_config(d)
    d = d[d["config"] == config].sort_values("world_size")
    x = np.arange(len(d))
    # one split for the figure, the findings and the table (summary.step_split): the parts add up to the step
    splits = [row_split(r) for _, r in d.iterrows()]
    compute = np.array([p.compute for p in splits])
    known = np.array([not np.isnan(p.exposed_comm) for p in splits])
    tail = np.array([p.tail if k and not np.isnan(p.tail) else 0.0 for p, k in zip(splits, known, strict=True)])
    # without a last-bucket time the exposed communication is one segment
    buckets = np.array([(p.other_buckets if not np.isnan(p.tail) else p.exposed_comm) if k else 0.0
                        for p, k in zip(splits, known, strict=True)])
    other = np.array([max(p.other, 0.0) if k else 0.0 for p, k in zip(splits, known, strict=True)])
    # without an all-reduce time nothing tells communication from the rest: one segment, said so
    unsplit = np.array([0.0 if k else max(p.beyond_compute, 0.0) for p, k in zip(splits, known, strict=True)])
    step = np.array([p.step for p in splits])
    # the unit that fits: ms, or s once a step takes a second (never 6x10^5 on the axis)
    unit, per_unit_us = time_unit(np.concatenate([step, compute + tail + buckets + other + unsplit]) * 1e3)
    k = 1e3 / per_unit_us  # ms -> unit
    fig, ax = _axes()
    pal = palette.SERIES
    ax.bar(x, compute * k, color=pal[0], label="compute only (no_sync)")
    bottom = compute.copy()
    for values, color, label in (
            (tail, pal[3], "exposed comm: last bucket's all-reduce (tail)"),
            (buckets, pal[1], "exposed comm: other buckets' all-reduces"),
            (other, pal[2], "other: neither compute nor the collectives (host-bound or idle, DDP bookkeeping)"),
            (unsplit, pal[7], "beyond compute, unsplit (no all-reduce time)")):
        if values.any():
            ax.bar(x, values * k, bottom=bottom * k, color=color, label=label)
            bottom = bottom + values
    ax.scatter(x, step * k, marker="_", s=300, color="black", zorder=3, label="measured DDP step (median)")
    ax.set_yscale("linear")  # bars compare lengths
    ax.set_ylim(bottom=0)
    ax.set_xticks(x, [str(int(w)) for w in d["world_size"]])
    ax.set_xlabel(ws_label(d))
    ax.set_ylabel(f"step time ({unit}, median)")
    ax.set_title(f"Where an MLP DDP step's time goes ({'plain DDP' if config == PLAIN else config})")
    _legend_outside(ax)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def fig_tuning(ok: pd.DataFrame) -> plt.Figure | None:
    colors = training_colors(ok)
    ok = mlp_ddp_rows(ok)  # DDP configurations only (the MLP's FSDP is in the efficiency figure)
    d = ok[ok["efficiency_vs_plain_1gpu"].notna() & (ok["world_size"] > 1)]
    if d.empty:
        return None
    ws = int(d["world_size"].max())
    d = d[d["world_size"] == ws].copy()
    if d["config"].nunique() < 2:
        return None
    d["efficiency_pct"] = 100 * d["efficiency_vs_plain_1gpu"]
    d = d.sort_values("efficiency_pct", ascending=False)
    fig, axes = new_figure(height=max(3.2, 0.42 * len(d) + 1.4))
    ax = axes[0, 0]
    # plain DDP in its colour of the other training figures (outlined, bold label); the rest in one
    # neutral grey, so the ranking reads at a glance
    configs = d["config"].astype(str)
    ax.barh(configs, d["efficiency_pct"],
            color=[colors.get(c, palette.SERIES[0]) if c == PLAIN else palette.NEUTRAL_COLOR for c in configs],
            edgecolor=["black" if c == PLAIN else "none" for c in configs],
            linewidth=[1.2 if c == PLAIN else 0 for c in configs])
    for t in ax.get_yticklabels():
        if t.get_text() == PLAIN:
            t.set_fontweight("bold")
    ax.set_xlim(left=0)  # bars start at zero
    ax.invert_yaxis()  # best on top
    for y, v in enumerate(d["efficiency_pct"]):
        ax.text(v, y, f" {v:.1f}%", va="center", fontsize=ANNOTATION_PT)
    ax.axvline(100, ls=palette.IDEAL_LINESTYLE, color=palette.IDEAL_COLOR, lw=1)
    ax.set_xlabel(f"scaling efficiency at world size {ws} vs plain DDP on {one_device_of(d)} (%)")
    ax.set_ylabel("DDP configuration")
    ax.set_title(f"Tuning results at world size {ws} (plain DDP highlighted)")
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def fig_layouts(summary: pd.DataFrame) -> plt.Figure | None:
    """Per language model, at the world size its Verdict row judges (layout_verdict.layout_rows): tokens/s
    by layout (bars, whiskers at the steps' 5th-95th percentile) with peak memory beside it (a second
    panel; CPU runs measure none), eager and compiled side by side where the run has both. A layout
    that did not run has no bar, its status written in its place ('out of memory')."""
    from distbench.core.units import human_bytes
    from distbench.training.analysis.layout_verdict import layout_rows
    from distbench.training.analysis.layouts import FAILED_AS, layout_name

    groups = layout_rows(summary)
    if not groups:
        return None
    # eager and compiled side by side (training.lm.compile): a group of bars per model and mode
    both = any(g["compile"].any() for g in groups.values())

    def series(m, g, r) -> str:
        mode = (", compiled" if r["compile"] else ", eager") if both else ""
        return f"{m} (ws {int(g['world_size'].iloc[0])}{mode})"
    d = pd.concat([g.assign(layout=[layout_name(r) for _, r in g.iterrows()],
                            series=[series(m, g, r) for _, r in g.iterrows()]).sort_values("compile", kind="stable")
                   for m, g in groups.items()])
    d = d.assign(tokens=d["tokens_per_s_median"].where(d["status"] == "ok"),
                 peak_gib=pd.to_numeric(d["peak_mem_allocated_bytes"], errors="coerce") / 2**30)
    order = list(dict.fromkeys(d["layout"]))
    fig, axes = new_figure(ncols=2, height=4.6)
    ax, mem = axes[0, 0], axes[0, 1]
    colors = palette.series_colors(order)
    sns.barplot(data=d, x="series", y="tokens", hue="layout", hue_order=order, palette=colors, ax=ax, errorbar=None)
    series = list(dict.fromkeys(d["series"]))
    width = 0.8 / len(order)
    # each bar's spread: tokens/s at the steps' 95th and 5th percentile times (the Verdict's `level` reads
    # the same spread: layouts.level_with), so two bars whose whiskers overlap are not ranked
    step = {k: pd.to_numeric(d[k], errors="coerce") if k in d else pd.Series(np.nan, index=d.index)
            for k in ("step_time_ms_median", "step_time_ms_p5", "step_time_ms_p95")}
    d = d.assign(low=d["tokens"] * step["step_time_ms_median"] / step["step_time_ms_p95"],
                 high=d["tokens"] * step["step_time_ms_median"] / step["step_time_ms_p5"])
    for _, r in d[d["low"].notna() & d["high"].notna()].iterrows():
        x = series.index(r["series"]) - 0.4 + width * (order.index(r["layout"]) + 0.5)
        ax.errorbar(x, r["tokens"], yerr=[[r["tokens"] - r["low"]], [r["high"] - r["tokens"]]], color="black",
                    capsize=3, linewidth=1)
    top = pd.concat([d["tokens"], d["high"]]).max()
    ymax = float(top) if pd.notna(top) else 1.0
    for _, r in d[d["tokens"].isna()].iterrows():  # a layout that did not run: its status in place of its bar
        x = series.index(r["series"]) - 0.4 + width * (order.index(r["layout"]) + 0.5)
        ax.text(x, ymax * 0.02, FAILED_AS.get(str(r["status"]), str(r["status"])), rotation=90, ha="center",
                va="bottom", fontsize=ANNOTATION_PT)
    ax.set_ylim(0, ymax * 1.15)
    ax.set_xlabel("")
    ax.set_ylabel("tokens/s (median, all ranks; whiskers: 5-95% steps)")
    ax.set_title("Tokens/s by layout, same global batch")
    if d["peak_gib"].notna().any():
        sns.barplot(data=d, x="series", y="peak_gib", hue="layout", hue_order=order, palette=colors, ax=mem,
                    errorbar=None, legend=False)
        mem.set_ylabel("peak memory allocated (GiB, max over ranks)")
        top = d.loc[d["peak_gib"].idxmax()]
        mem.set_title(f"Peak memory by layout (largest: {human_bytes(int(top['peak_mem_allocated_bytes']))})")
    else:
        mem.text(0.5, 0.5, "peak memory: not measured on CPU", ha="center", va="center", transform=mem.transAxes)
        mem.set_axis_off()
    mem.set_xlabel("")
    _legend_outside(ax)
    return fig


LAYOUT_FIGURE = "training_layouts"  # drawn from every row (a layout out of memory is named): plot_training
BUILDERS = dict(zip(FIGURES, (fig_throughput, fig_lm_throughput, fig_efficiency, fig_step_breakdown, fig_tuning),
                    strict=True))


def plot_training(summary: pd.DataFrame, out_dir) -> list[Path]:
    """Write every training figure whose data exist as out_dir/<name>.png and .svg; return the
    paths. An empty summary writes nothing (not even the directory) and returns []."""
    if summary is None or len(summary) == 0:
        return []
    s = summary if "efficiency_vs_plain_1gpu" in summary else add_scaling(summary)
    ok = s[s["status"] == "ok"]
    layouts = write_figures({LAYOUT_FIGURE: fig_layouts}, s, out_dir) if len(findings_layout_rows(s)) else []
    if ok.empty:
        return layouts
    return write_figures(BUILDERS, ok, out_dir) + layouts
