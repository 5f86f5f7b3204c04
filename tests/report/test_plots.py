"""Figures: the expected files exist, are real PNG/SVG, and optional figures appear only with data."""

from __future__ import annotations

import pandas as pd
import pytest
from synthetic import build_summary, make_synthetic, summary_row

from distbench.comm.analysis import plots
from distbench.comm.analysis.plots import plt
from distbench.comm.analysis.findings import normalise_summary

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALWAYS = ("time_vs_size", "busbw_vs_size", "backend_comparison_100mb")


def _names(paths):
    return {p.name for p in paths}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plots")
    data = make_synthetic(tmp)
    return plots.make_all(data["summary_csv"], tmp / "figures"), tmp / "figures"


def test_expected_files_valid_png_and_svg(written):
    paths, out_dir = written
    expected = {f"{n}.{ext}" for n in ALWAYS + ("timing_modes",) for ext in ("png", "svg")}
    assert _names(paths) == expected
    assert {p.name for p in out_dir.iterdir()} == expected  # nothing else, no leftover temp files
    for p in paths:
        data = p.read_bytes()
        if p.suffix == ".png":
            assert data.startswith(PNG_MAGIC)
            assert len(data) < 1_000_000  # small enough to inline in the HTML
        else:
            head = data[:400].decode()
            assert head.startswith("<?xml") and "<svg" in head


def _ok(summary):
    # the builders take the ok rows make_all passes them; calling them directly keeps the tests fast
    df = normalise_summary(summary)
    return df[df["status"] == "ok"]


def test_single_timing_skips_timing_modes():
    ok = _ok(build_summary(timings={"nccl": ("events",), "gloo": ("host",)}))
    assert plots.fig_timing_modes(ok) is None
    assert plots.fig_vs_size(ok, plots.TIME) is not None
    plt.close("all")


def test_one_rank_of_nccl_draws_every_figure(tmp_path):
    # a one-GPU run of comm at world size 1 (1x H200, 2026-11-29): busbw is 0 at one rank, so the timing
    # modes' busbw axis is hidden, and the legend was placed on an axis that was not there (IndexError)
    summary = build_summary(backends=("nccl",), world_sizes=(1,))
    ar = summary[summary["op"] == "all_reduce"]
    assert len(ar) and (ar["busbw_gbps_median"].fillna(0) == 0).all()
    fig = plots.fig_timing_modes(_ok(summary))
    assert fig is not None and [a for a in fig.axes if a.get_visible() and a.get_legend()]
    plt.close("all")
    path = tmp_path / "summary.csv"
    summary.to_csv(path, index=False)
    assert "timing_modes.png" in _names(plots.make_all(path, tmp_path / "figures"))
    plt.close("all")


def test_env_and_dtype_figures_only_when_swept():
    ok = _ok(build_summary(backends=("nccl",), world_sizes=(2,), timings={"nccl": ("events",)},
                           dtypes=("float32", "bfloat16"), nccl_envs=("default", "NCCL_ALGO=Ring")))
    assert plots.fig_nccl_env(ok) is not None and plots.fig_dtype(ok) is not None
    plain = _ok(build_summary(backends=("nccl",), world_sizes=(2,), timings={"nccl": ("events",)}))
    assert plots.fig_nccl_env(plain) is None and plots.fig_dtype(plain) is None
    plt.close("all")


def test_barrier_in_time_plot_not_in_busbw_plot():
    rows = [summary_row(op=op, size_bytes=s, time_us_median=10.0 + s / 1e4) for op in ("all_reduce", "barrier")
            for s in (8, 1024, 1 << 20)]
    ok = normalise_summary(pd.DataFrame(rows))
    ok.loc[ok["op"] == "barrier", "busbw_gbps_median"] = float("nan")
    titles = lambda fig: {ax.get_title() for ax in fig.axes}  # noqa: E731
    assert "barrier" in titles(plots.fig_vs_size(ok, plots.TIME))
    assert "barrier" not in titles(plots.fig_vs_size(ok, plots.BUSBW))
    plt.close("all")


def test_only_ok_rows_plotted_and_empty_data_skipped(tmp_path):
    summary = build_summary(backends=("gloo",), world_sizes=(2,))
    summary["status"] = "failed"
    data = make_synthetic(tmp_path, summary)
    assert plots.make_all(data["summary_csv"], tmp_path / "figures") == []


def test_the_house_theme_is_seaborns_ticks_notebook_theme_without_importing_seaborn():
    """palette.HOUSE_RC is what seaborn.set_theme(style="ticks", context="notebook", font_scale=0.9)
    sets (checked here against seaborn itself), so the comm and memory figures match the seaborn ones
    without seaborn's import."""
    import subprocess
    import sys

    import matplotlib as mpl
    import seaborn as sns

    from distbench.core import palette
    from distbench.core.figures import set_house_theme

    with mpl.rc_context():
        sns.set_theme(style="ticks", context="notebook", font_scale=0.9, palette=list(palette.SERIES))
        theirs = {k: mpl.rcParams[k] for k in [*palette.HOUSE_RC, "axes.prop_cycle"]}
    with mpl.rc_context():
        set_house_theme()
        ours = {k: mpl.rcParams[k] for k in theirs}
    for k in palette.HOUSE_RC:
        assert ours[k] == pytest.approx(theirs[k]) if isinstance(theirs[k], float) else ours[k] == theirs[k], k
    assert [mpl.colors.to_hex(c["color"]) for c in ours["axes.prop_cycle"]] == \
        [mpl.colors.to_hex(c["color"]) for c in theirs["axes.prop_cycle"]]
    code = "import sys, distbench.comm.analysis.plots, distbench.memory.analysis.plots; print('seaborn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
