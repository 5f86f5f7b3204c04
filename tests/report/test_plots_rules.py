"""The house rules every figure follows (distbench.core.palette, distbench.comm.analysis.plots*), checked on the
matplotlib objects the builders return, from synthetic data (CPU, Agg, no files unless said):

1. a world size has one colour (and marker) in every figure, a training configuration in every
   training figure; the backend, timing mode, NCCL environment or dtype is the line style;
2. message-size axes are log base 2 with B/KiB/MiB/GiB tick labels;
3. median lines carry a p5-p95 band (fill_between) where the summary has the percentiles;
4. busbw figures draw the link peak and the published figure when given;
5. scaling figures keep their ideal line;
6. bars start at zero on a linear axis; time axes read in the unit that fits (ms, not 6x10^5 µs).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgb
from matplotlib.container import BarContainer
from synthetic import build_summary, summary_row

from distbench.comm.analysis import plot_refs, plots
from distbench.core import figures, palette
from distbench.memory.analysis import plots as plots_memory
from distbench.predict import plots as plots_predict
from distbench.training.analysis import plots as plots_training
from distbench.comm.analysis.findings import normalise_summary
from distbench.core.references import expected_for
from distbench.comm.analysis.plots import plt

SIZE_LABEL = re.compile(r"^\d+(\.\d)? (B|KiB|MiB|GiB|TiB)$")
TIME_LABEL = re.compile(r"^\d+(\.\d+)? (µs|ms|s)$")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _ok(summary):
    df = normalise_summary(summary)
    return df[df["status"] == "ok"]


@pytest.fixture(scope="module")
def ok():
    return _ok(build_summary())  # nccl (events/graph/host) + gloo (host), world sizes 2 and 4


def _rgb(c):
    return tuple(round(v, 4) for v in to_rgb(c))


def _line_rgbs(fig, prefix: str) -> set:
    return {_rgb(line.get_color()) for ax in fig.axes for line in ax.lines if line.get_label().startswith(prefix)}


def _bar_rgbs(fig, label: str) -> set:
    return {_rgb(p.get_facecolor()) for ax in fig.axes for c in ax.containers
            if isinstance(c, BarContainer) and c.get_label() == label for p in c}


def _visible_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def _tick_texts(ax, axis="x", minor=False) -> list[str]:
    ax.figure.canvas.draw()
    ticks = (ax.xaxis if axis == "x" else ax.yaxis).get_ticklabels(minor=minor)
    return [t.get_text() for t in ticks if t.get_text()]


def _legend_texts(fig) -> list[str]:
    """Every legend entry of the figure (figure and panel legends), wrapped lines joined by a space."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    return [" ".join(t.get_text().split()) for lg in legends for t in lg.get_texts()]


def _axes_by_title(fig) -> dict:
    return {ax.get_title(): ax for ax in _visible_axes(fig) if ax.get_title()}


# ---------------------------------------------------------------- 1. one palette
def test_palette_is_fixed_per_value_and_deterministic_outside_the_tables():
    assert palette.backend_color("nccl") == palette.backend_color("NCCL") != palette.backend_color("gloo")
    assert palette.backend_color("somebackend") == palette.backend_color("somebackend")  # stable fallback
    assert palette.backend_palette(["gloo", "nccl"]) == {"gloo": palette.backend_color("gloo"),
                                                         "nccl": palette.backend_color("nccl")}
    common = (1, 2, 4, 6, 8, 16, 32, 64)
    assert len({palette.world_size_color(w) for w in common}) == len(common)  # all told apart
    assert len({palette.world_size_marker(w) for w in common}) == len(common)
    assert palette.world_size_color(4) == palette.world_size_color(4.0) == palette.world_size_color("4")
    assert palette.world_size_color(20) == palette.world_size_color(20)  # outside the table: still fixed
    # no world size shares a colour with a backend (a colour never means both)
    assert not {palette.world_size_color(w) for w in common} & set(palette.BACKEND_COLORS.values())
    # other hues: in the order given, fixed ones kept and not handed out twice
    colors = palette.series_colors(["b", "a", "c"], fixed={"a": palette.SERIES[0]})
    assert colors == {"b": palette.SERIES[1], "a": palette.SERIES[0], "c": palette.SERIES[2]}


def _ws_rgbs(fig, ws: int) -> set:
    """The colours of the lines drawn for world size `ws` (labels '<ws> ranks, ...')."""
    return _line_rgbs(fig, f"{ws} ranks")


def test_world_size_is_the_colour_and_backend_the_line_style_in_the_size_figures(ok):
    """Issue 35: every world size was the backend's colour in the comm figures (one blue for all of
    a Gloo run's world sizes), told apart by the marker only. Colour and marker are the world
    size's now; the backend is the line style (NCCL solid, Gloo dash-dot)."""
    for fig in (plots.fig_vs_size(ok, plots.TIME), plots.fig_vs_size(ok, plots.BUSBW)):
        for ws in (2, 4):
            assert _ws_rgbs(fig, ws) == {_rgb(palette.world_size_color(ws))}
        styles = {line.get_label().split(", ")[1]: line.get_linestyle() for ax in fig.axes for line in ax.lines
                  if "ranks, " in line.get_label()}
        assert styles == {"NCCL": "-", "Gloo": "-."}
        legend = _legend_texts(fig)
        assert {"world size", "2 ranks", "4 ranks", "backend", "NCCL", "Gloo"} <= set(legend)
    # one backend alone: still one colour per world size, not one per backend
    alone = plots.fig_vs_size(_ok(build_summary(backends=("gloo",))), plots.BUSBW)
    assert _ws_rgbs(alone, 2) == {_rgb(palette.world_size_color(2))} != _ws_rgbs(alone, 4)
    # the bars: each bar its world size's colour, the backend a hatch
    bars = plots.fig_backend_comparison(ok)
    for c in bars.axes[0].containers:
        if isinstance(c, BarContainer):
            hatch = {p.get_hatch() or "" for p in c}
            assert hatch == {palette.backend_hatch("nccl" if c.get_label() == "NCCL" else "gloo")}
            assert [_rgb(p.get_facecolor()) for p in c] == [_rgb(palette.world_size_color(w)) for w in (2, 4)]


def test_same_world_size_same_colour_and_marker_in_every_figure():
    """Draw every figure that shows world sizes from two tables that share world size 4 only: 4 ranks
    is one colour (and marker) in all of them, whatever else the figure compares."""
    a = _ok(build_summary(world_sizes=(2, 4), dtypes=("float32", "bfloat16"), nccl_envs=("default", "NCCL_ALGO=Ring")))
    b = _ok(build_summary(world_sizes=(4, 8)))
    four = _rgb(palette.world_size_color(4))
    figs = [plots.fig_timing_modes(a), plots.fig_timing_modes(b), plots.fig_vs_size(a, plots.TIME),
            plots.fig_vs_size(b, plots.BUSBW), plots.fig_nccl_env(a), plots.fig_dtype(a)]
    assert all(f is not None for f in figs)
    assert [_ws_rgbs(f, 4) for f in figs] == [{four}] * len(figs)
    assert _ws_rgbs(figs[0], 2) == {_rgb(palette.world_size_color(2))}
    assert _ws_rgbs(figs[1], 8) == {_rgb(palette.world_size_color(8))}
    for fig in figs:  # the marker is the world size's too
        markers = {line.get_marker() for ax in fig.axes for line in ax.lines if line.get_label().startswith("4 ranks")}
        assert markers == {palette.world_size_marker(4)}
    bars = [_rgb(p.get_facecolor()) for c in plots.fig_backend_comparison(b).axes[0].containers
            if isinstance(c, BarContainer) for p in c]
    assert four in bars and _rgb(palette.world_size_color(8)) in bars
    # the memory figure: one line per job, its world size's colour
    mem = pd.DataFrame([dict(model="mlp", config="ddp", world_size=ws, batch_size=bs, activations_bytes=bs * 2**20 * ws,
                             phase="measure", status="ok", parts_bytes=2**30)
                        for ws in (2, 4) for bs in (8, 16, 32)])
    fig = plots_memory.fig_activations(mem)
    scatter = {c.get_label(): _rgb(c.get_facecolor()[0]) for c in fig.axes[0].collections}
    assert scatter == {"mlp ddp ws2": _rgb(palette.world_size_color(2)), "mlp ddp ws4": four}


def test_a_compared_level_is_the_line_style_where_colour_is_the_world_size():
    ok = _ok(build_summary(backends=("nccl",), world_sizes=(2, 4), timings={"nccl": ("events",)},
                           dtypes=("float32", "bfloat16"), nccl_envs=("default", "NCCL_ALGO=Ring")))
    env = plots.fig_nccl_env(ok)
    styles = {line.get_label().split(", ")[1]: line.get_linestyle() for ax in env.axes for line in ax.lines
              if "ranks, " in line.get_label()}
    assert styles == {"default": "-", "NCCL_ALGO=Ring": "--"}
    dtype = plots.fig_dtype(ok)
    styles = {line.get_label().split(", ")[1]: line.get_linestyle() for ax in dtype.axes for line in ax.lines
              if "ranks, " in line.get_label()}
    assert styles == {"bfloat16": "-", "float32": "--"}
    assert palette.style_levels(["a", "b", "a", "c"]) == {"a": "-", "b": "--", "c": ":"}


def _training_ok() -> pd.DataFrame:
    rows = []
    for config, eff in (("plain", (1.0, 0.95, 0.9)), ("gbv=on", (1.0, 0.97, 0.93)), ("bucket=100", (1.0, 0.9, 0.8))):
        for ws, e in zip((1, 2, 4), eff):
            step = 2500.0 / e  # ms: seconds per step, so the breakdown reads in s
            rows.append(dict(model="mlp", config=config, world_size=ws, status="ok", plain_1gpu_samples_per_s=100.0,
                             samples_per_s_median=100.0 * ws * e, efficiency_vs_plain_1gpu=e,
                             step_time_ms_median=step, compute_only_ms_median=2400.0, tail_comm_ms=50.0,
                             compute_slowdown_ms=step - 2450.0, exposed_comm_ms=step - 2400.0))
    return pd.DataFrame(rows)


def test_training_configuration_keeps_its_colour_across_training_figures():
    ok = _training_ok()
    plain = _rgb(plots_training.training_colors(ok)["plain"])
    thr = plots_training.fig_throughput(ok)
    eff = plots_training.fig_efficiency(ok)
    for fig in (thr, eff):
        line = next(line for line in fig.axes[0].lines if line.get_label() == "plain")
        assert _rgb(line.get_color()) == plain
    tuning = plots_training.fig_tuning(ok)
    ax = tuning.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    bar = ax.patches[labels.index("plain")]
    assert _rgb(bar.get_facecolor()) == plain


# ---------------------------------------------------------------- 2. message-size axes
def test_size_axes_are_log2_with_binary_unit_labels(ok):
    for fig in (plots.fig_vs_size(ok, plots.TIME), plots.fig_vs_size(ok, plots.BUSBW), plots.fig_timing_modes(ok)):
        for ax in _visible_axes(fig):
            assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
            labels = _tick_texts(ax, "x")
            assert labels and all(SIZE_LABEL.match(t) for t in labels), labels
    fmt = plots.fig_vs_size(ok, plots.BUSBW).axes[0].xaxis.get_major_formatter()
    assert (fmt(2**10, 0), fmt(2**20, 0), fmt(2**30, 0), fmt(8, 0)) == ("1 KiB", "1 MiB", "1 GiB", "8 B")
    # the same axis helper serves the prediction check
    fig, ax = plt.subplots()
    ax.plot([1024, 2**20], [1, 2])
    figures.size_axis(ax, pd.Series([1024, 2**20]))
    assert ax.xaxis.get_transform().base == 2 and {"1 KiB", "1 MiB"} <= set(_tick_texts(ax, "x"))


# ---------------------------------------------------------------- 3. p5-p95 bands
def _bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def test_p5_p95_band_around_the_median_lines(ok):
    for y in (plots.TIME, plots.BUSBW):
        fig = plots.fig_vs_size(ok, y)
        for ax in _visible_axes(fig):
            bands = _bands(ax)
            assert bands, (y, ax.get_title())
            lo = min(p.get_paths()[0].vertices[:, 1].min() for p in bands)
            hi = max(p.get_paths()[0].vertices[:, 1].max() for p in bands)
            ys = np.concatenate([line.get_ydata() for line in ax.lines if not line.get_label().startswith("_")])
            assert lo <= ys.min() and ys.max() <= hi
    # no percentiles in the summary: no band (and no error)
    bare = ok.drop(columns=["time_us_p5", "time_us_p95"])
    assert not any(_bands(ax) for ax in plots.fig_vs_size(bare, plots.BUSBW).axes)


def test_busbw_band_is_the_time_band_inverted():
    df = pd.DataFrame({"time_us_median": [100.0], "time_us_p5": [80.0], "time_us_p95": [125.0],
                       "busbw_gbps_median": [50.0]})
    lo, hi = plots.band_bounds(df, plots.BUSBW[0])
    assert lo[0] == pytest.approx(40.0) and hi[0] == pytest.approx(62.5)  # 50 x 100/125, 50 x 100/80
    lo, hi = plots.band_bounds(df, plots.TIME[0])
    assert (lo[0], hi[0]) == (80.0, 125.0)


# ---------------------------------------------------------------- 4. link peak and published figure
def _hlines(ax, prefix: str) -> set:
    return {round(float(line.get_ydata()[0]), 3) for line in ax.lines if line.get_label().lstrip("_").startswith(prefix)}


def test_busbw_figures_draw_the_link_peak_and_the_published_figure(ok):
    published = plot_refs.published_for(ok, "NVIDIA H200 141GB HBM3e")
    # H200's rows at 1 GiB for the ops and world sizes the data has: 2x all_reduce, and (measured
    # 2026-11-28) 2x all_gather and reduce_scatter, 4x all_reduce, all_gather and reduce_scatter
    assert expected_for("NVIDIA H200", 2, "all_reduce", 1 << 30) in published
    assert published and all(r["gpu"] == "H200" and r["min_bytes"] == 1 << 30 and r["kind"] == "ours" for r in published)
    refs = plot_refs.reference_lines(peak={"peak_gbps": 450.0, "link": "NVLink4 x18"}, published=published)
    axes = _axes_by_title(plots.fig_vs_size(ok, plots.BUSBW, refs=refs))
    for ax in axes.values():
        assert _hlines(ax, "link peak NVLink4 x18") == {450.0}
    # 2x H200 has no public figure: the line is our own nccl-tests measurement, labelled so
    # each world size's row: 2x H200 320-340, 4x H200 344-355
    assert _hlines(axes["all_reduce"], "nccl-tests, ours") == {320.0, 340.0, 344.0, 355.0}
    assert _hlines(axes["all_reduce"], "published") == set()
    assert _hlines(axes["broadcast"], "nccl-tests, ours") == set()  # no broadcast row: each op its own figure
    if "all_gather" in axes:
        assert {261.0, 271.0} <= _hlines(axes["all_gather"], "nccl-tests, ours") <= {261.0, 271.0, 316.0, 327.0}
    fig = plots.fig_vs_size(ok, plots.BUSBW, refs=refs)
    assert any("link peak" in t for t in _legend_texts(fig))
    # the timing-modes figure's busbw panel too; plain numbers and a (low, high) pair work as well
    tm = plots.fig_timing_modes(ok, refs=plot_refs.reference_lines(peak=450.0, published=(360.0, 370.0)))
    busbw = [ax for ax in _visible_axes(tm) if "bandwidth" in ax.get_ylabel()]
    assert busbw and all(_hlines(ax, "link peak") == {450.0} and _hlines(ax, "published") == {360.0, 370.0}
                         for ax in busbw)
    # the link peak describes GPU links: not drawn over Gloo-only data
    gloo = _ok(build_summary(backends=("gloo",)))
    assert not any(_hlines(ax, "link peak") for ax in plots.fig_vs_size(gloo, plots.BUSBW, refs=refs).axes)
    # no references given: none drawn
    assert not any(_hlines(ax, "link peak") for ax in plots.fig_vs_size(ok, plots.BUSBW).axes)


def test_make_all_passes_the_peak_and_the_published_figure_on(tmp_path):
    # (make_all without them, the old call, is test_plots.py's)
    from synthetic import make_synthetic

    small = build_summary(backends=("nccl",), world_sizes=(2,), timings={"nccl": ("events",)})
    data = make_synthetic(tmp_path, small)
    paths = plots.make_all(data["summary_csv"], tmp_path / "fig", peak=data["extra"]["peak"], gpu_name="NVIDIA H200")
    assert "busbw_vs_size.svg" in {p.name for p in paths}
    svg = (tmp_path / "fig" / "busbw_vs_size.svg").read_text()
    # (a legend entry longer than figures.LEGEND_WRAP wraps: one SVG text per line)
    assert "link peak NVLink4 x18: 450 GB/s" in svg and "nccl-tests, ours (2x H200" in svg
    assert "published (2x H200" not in svg


# ---------------------------------------------------------------- 5. ideal lines on scaling figures
def test_scaling_figures_keep_their_ideal_line():
    ok = _training_ok()
    thr = plots_training.fig_throughput(ok).axes[0]
    ideal = next(line for line in thr.lines if line.get_label().startswith("ideal"))
    assert list(ideal.get_xdata()) == [1, 2, 4] and list(ideal.get_ydata()) == [100.0, 200.0, 400.0]
    eff = plots_training.fig_efficiency(ok).axes[0]
    assert any(line.get_label().startswith("ideal") and set(line.get_ydata()) == {100} for line in eff.lines)
    assert plots_training.fig_efficiency(ok[ok["world_size"] == 1]) is None  # one GPU: no scaling to draw
    t = pd.DataFrame({"model": "mlp", "strategy": "ddp", "config": "plain", "gpus": [8, 16, 32],
                      "efficiency": [0.95, 0.9, 0.8], "preset": "h100"})
    fig = plots_predict._training_efficiency({"training": t})
    assert any(line.get_label() == "ideal" and set(line.get_ydata()) == {1.0} for line in fig.axes[0].lines)



def _one_gpu_lm(compiled: bool) -> pd.DataFrame:
    """A one-GPU node's language models (gpt and lora under DDP and FSDP2 at world size 1), eager and, where
    asked, compiled twins 8% faster."""
    rows = [dict(model=m, config=c, strategy="ddp" if c == "plain" else "fsdp", world_size=1, backend="nccl",
                 status="ok", compile=False, tokens_per_s_median=t, mfu=t / 120_000, seq_len=1024,
                 plain_1gpu_samples_per_s=np.nan, samples_per_s_median=t / 1024)
            for m, c, t in (("gpt", "plain", 53_834.0), ("gpt", "fsdp", 52_565.0), ("lora", "plain", 59_714.0),
                            ("lora", "fsdp", 55_417.0))]
    d = pd.DataFrame(rows)
    if compiled:
        d = pd.concat([d, d.assign(compile=True, tokens_per_s_median=d["tokens_per_s_median"] * 1.08)], ignore_index=True)
    return d


def test_one_world_size_draws_bars_with_their_mfu_not_points_against_a_world_size_axis():
    """A one-GPU node (1x H200, benchmarks/results/one-gpu-pycache-h200x1-2026-11-29 before this) drew each
    model's tokens/s as a single point 'vs world size' with an ideal line's legend and no line; and the MLP's
    throughput as one point against its ideal."""
    assert plots_training.fig_throughput(_training_ok()[lambda d: d["world_size"] == 1]) is None
    assert plots_training.fig_throughput(_training_ok()) is not None  # several world sizes: the scaling figure
    ax = plots_training.fig_lm_throughput(_one_gpu_lm(False)).axes[0]
    assert not ax.lines  # no line, no ideal
    bars = [p for p in ax.patches]
    assert sorted(round(b.get_height()) for b in bars) == [52_565, 53_834, 55_417, 59_714]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["gpt ddp", "gpt fsdp", "lora ddp", "lora fsdp"]
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{100 * t / 120_000:.1f}% MFU"
                                                            for t in (53_834, 52_565, 59_714, 55_417))
    assert "on 1 GPU" in ax.get_title()
    ax = plots_training.fig_lm_throughput(_one_gpu_lm(True)).axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[:2] == ["gpt ddp\neager", "gpt ddp\ncompiled"] and len(labels) == 8
    assert [bool(p.get_hatch()) for p in ax.patches] == [False, True] * 4  # compiled: hatched beside its twin
    several = pd.concat([_one_gpu_lm(False), _one_gpu_lm(False).assign(world_size=2)], ignore_index=True)
    assert plots_training.fig_lm_throughput(several).axes[0].lines  # several world sizes: lines, as before

# ---------------------------------------------------------------- 6. bars and time units
def _comparison(nccl_us: float, gloo_us: float) -> pd.DataFrame:
    rows = [summary_row(backend=b, world_size=2, size_bytes=128 << 20, time_us_median=t, timing=tm)
            for b, t, tm in (("nccl", nccl_us, "events"), ("gloo", gloo_us, "host"))]
    return _ok(pd.DataFrame(rows))


def test_backend_comparison_bars_are_linear_from_zero_in_ms():
    """248 ms against 601 ms: bars 2.4x apart on a linear ms axis from 0, not a log axis cut at 2x10^5 µs."""
    ax = plots.fig_backend_comparison(_comparison(248_000.0, 601_000.0)).axes[0]
    assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    assert "(ms" in ax.get_ylabel() and "µs" not in ax.get_ylabel()
    heights = {c.get_label(): c.patches[0].get_height() for c in ax.containers if isinstance(c, BarContainer)}
    assert heights == {"NCCL": pytest.approx(248.0), "Gloo": pytest.approx(601.0)}
    assert {t.get_text() for t in ax.texts} >= {"248 ms", "601 ms"}  # bar labels in readable units
    assert not any(re.search(r"[×e]|10\^", t) for t in _tick_texts(ax, "y"))
    small = plots.fig_backend_comparison(_comparison(120.0, 480.0)).axes[0]
    assert "(µs" in small.get_ylabel() and small.get_ylim()[0] == 0


def test_time_unit_fits_the_data():
    assert figures.time_unit([12.0, 480.0]) == ("µs", 1.0)
    assert figures.time_unit([1500.0, 601_000.0]) == ("ms", 1e3)
    assert figures.time_unit([2.5e6]) == ("s", 1e6)
    assert figures.time_unit([float("nan")]) == ("µs", 1.0)
    assert [plots.time_tick(v) for v in (5, 200, 1e4, 1.5e6)] == ["5 µs", "200 µs", "10 ms", "1.5 s"]


def test_log_time_axis_ticks_name_their_unit(ok):
    # less than a decade (0.3-0.9 s): where matplotlib would label minor ticks '6x10^5'
    narrow = _ok(pd.DataFrame([summary_row(size_bytes=s << 20, time_us_median=t)
                               for s, t in ((128, 300_000.0), (256, 450_000.0), (512, 900_000.0))]))
    figs = [plots.fig_vs_size(ok, plots.TIME), plots.fig_vs_size(narrow, plots.TIME)]
    for ax in (ax for fig in figs for ax in _visible_axes(fig)):
        labels = _tick_texts(ax, "y")
        assert labels and all(TIME_LABEL.match(t) for t in labels), labels
        assert not _tick_texts(ax, "y", minor=True)  # no '6x10^5' on minor ticks


def test_other_bar_charts_start_at_zero_on_linear_axes():
    ok = _training_ok()
    step = plots_training.fig_step_breakdown(ok).axes[0]
    assert step.get_yscale() == "linear" and step.get_ylim()[0] == 0
    assert "(s," in step.get_ylabel()  # 2.5 s steps read in s, not 2500 ms
    tuning = plots_training.fig_tuning(ok).axes[0]
    assert tuning.get_xscale() == "linear" and tuning.get_xlim()[0] == 0
    mem = pd.DataFrame([dict(phase="measure", status="ok", model="mlp", config="ddp", world_size=1, batch_size=b,
                             params_bytes=2**29, grads_bytes=2**29, optimizer_bytes=2**30, activations_bytes=b * 2**20,
                             unexplained_bytes=2**27, peak_allocated_bytes=2**31 + b * 2**20, parts_bytes=2**31)
                        for b in (128, 256)])
    split = plots_memory.fig_split(mem).axes[0]
    assert split.get_yscale() == "linear" and split.get_ylim()[0] == 0 and "GiB" in split.get_ylabel()


def test_prediction_figure_when_the_first_measured_backend_has_no_graph_timing():
    """The 4x H100 report run (2026-11-26) crashed here: Gloo (host timing) listed before NCCL (graph)."""
    import pandas as pd

    from distbench.predict.plots import _allreduce_busbw

    rows = []
    for backend, timing in (("gloo", "host"), ("nccl", "graph")):
        for gpus in (8, 16):
            rows.append(dict(op="all_reduce", backend=backend, timing=timing, size_bytes=2**30, gpus=gpus,
                             busbw_gbps=100.0, intra_source="measured", fit_world_size=4, algorithm="ring",
                             preset="nvlink4-ib400"))
    fig = _allreduce_busbw({"comm": pd.DataFrame(rows)})
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("measured (nccl, graph, 4 ranks)" in t for t in labels), labels


def test_busbw_and_latency_figures_mark_nccl_algorithm_protocol_ranges():
    """comm_summary.csv carries NCCL's choice per point (the NCCL probe's tuning table): the
    bus-bandwidth and the time figures label each run of sizes with the same algorithm/protocol."""
    import pandas as pd
    from synthetic import build_summary

    from distbench.comm.analysis.plot_refs import nccl_ranges
    from distbench.comm.analysis.plots import BUSBW, TIME, fig_vs_size

    from distbench.comm.analysis.findings import normalise_summary

    s = normalise_summary(build_summary(backends=("nccl",), world_sizes=(2, 4), oom=False))
    s = s[s["status"] == "ok"].copy()
    s["nccl_algo"] = "Ring"
    s["nccl_proto"] = s["size_bytes"].map(lambda b: "LL" if b < 2**16 else ("LL128" if b < 2**22 else "Simple"))
    one = s[(s["op"] == "all_reduce") & (s["timing"] == "events")]
    runs = nccl_ranges(one)
    assert [r[2] for r in runs] == ["Ring/LL", "Ring/LL128", "Ring/Simple"] and runs[0][0] == one["size_bytes"].min()
    for y in (BUSBW, TIME):
        fig = fig_vs_size(s, y)
        texts = {t.get_text() for ax in fig.axes for t in ax.texts}
        assert {"Ring/LL", "Ring/LL128", "Ring/Simple"} <= texts, y
        assert any(t.startswith("NCCL algorithm/protocol") for t in _legend_texts(fig)), y
    assert not nccl_ranges(s.drop(columns=["nccl_proto"]))  # a plain summary: no strip
    assert nccl_ranges(pd.DataFrame(columns=s.columns)) == []


def test_the_time_figure_shows_the_time_at_the_link_peak():
    """The latency figure's reference: each NCCL size's time at the link peak's bus bandwidth
    (size x the op's bus factor / peak), drawn where NCCL rows are and named in the legend."""
    from synthetic import build_summary

    from distbench.comm.analysis.findings import normalise_summary
    from distbench.comm.analysis.plot_refs import peak_time_us, reference_lines
    from distbench.comm.analysis.plots import TIME, fig_vs_size

    s = normalise_summary(build_summary(backends=("nccl", "gloo"), world_sizes=(2, 4), oom=False))
    s = s[s["status"] == "ok"]
    ar = s[(s["op"] == "all_reduce") & (s["timing"] == "events")]
    line = peak_time_us(ar, 450.0)
    big = line.iloc[-1]
    # all_reduce at 4 ranks: bus factor 2(n-1)/n = 1.5
    assert big["time_us"] == pytest.approx(big["size_bytes"] * 1.5 / 450e9 * 1e6, rel=1e-3)
    assert peak_time_us(ar[ar["backend"] == "gloo"], 450.0).empty  # a GPU link: NCCL rows only
    fig = fig_vs_size(s, TIME, refs=reference_lines(450.0))
    assert "time at the link peak: 450 GB/s busbw (largest NCCL world size)" in _legend_texts(fig)
    panel = next(ax for ax in fig.axes if ax.get_title() == "all_reduce")
    drawn = [ln for ln in panel.lines if ln.get_linestyle() == "--" and len(ln.get_xdata()) == len(line)]
    assert drawn and list(drawn[0].get_ydata()) == pytest.approx(list(line["time_us"]))
    assert "time at" not in " ".join(_legend_texts(fig_vs_size(s, TIME)))
