"""Issue 35: figures readable at 100% in report.html. Every figure of every family, drawn from small
synthetic tables and saved as the pipeline saves it, is shown at its native size by the page (no
wider than the page's content, as wide as the house width) and all its text, legends first, is at
least the page's body text at 100% zoom.

The page's numbers are read from the template itself, so a change to its CSS that makes the figures
shrink or their text smaller than the body text fails here."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from matplotlib.text import Text
from synthetic import build_summary

from distbench.comm.analysis import plot_refs, plots as plots_comm
from distbench.comm.analysis.findings import normalise_summary
from distbench.core import figures
from distbench.core.figures import plt
from distbench.memory.analysis import plots as plots_memory
from distbench.nodes.analysis import plots as plots_nodes
from distbench.predict import plots as plots_predict
from distbench.training.analysis import plots as plots_training

TEMPLATE = Path(figures.__file__).parents[1] / "report" / "templates" / "report.html.j2"
NO_LEGEND = {"training_tuning"}  # one bar per configuration, named on the axis
MIN_WIDTH_PX = 900  # a line or bar figure at least this wide in the page (was 650 before issue 35)


def _css() -> tuple[int, int]:
    """(body max-width px, body font px) of report.html."""
    body = re.search(r"body\s*\{([^}]*)\}", TEMPLATE.read_text()).group(1)
    return int(re.search(r"max-width:\s*(\d+)px", body).group(1)), int(re.search(r"font:\s*(\d+)px", body).group(1))


def test_the_house_constants_are_the_pages():
    width, body = _css()
    assert (figures.PAGE_WIDTH_PX, figures.BODY_TEXT_PX) == (width, body)
    assert MIN_WIDTH_PX <= figures.FIG_WIDTH_IN * figures.DPI <= width
    assert figures.MIN_TEXT_PT * figures.DPI / 72 == pytest.approx(body)
    for key in ("legend.fontsize", "xtick.labelsize", "ytick.labelsize", "axes.labelsize", "axes.titlesize"):
        assert figures.palette.HOUSE_RC[key] >= figures.MIN_TEXT_PT, key
    assert figures.ANNOTATION_PT >= figures.MIN_TEXT_PT


# ---------------------------------------------------------------- every figure, from synthetic tables
def _comm():
    s = normalise_summary(build_summary(world_sizes=(2, 4, 8), dtypes=("float32", "bfloat16"),
                                        nccl_envs=("default", "NCCL_ALGO=Ring"), oom=False))
    ok = s[s["status"] == "ok"].copy()
    ok["nccl_algo"] = "Ring"
    ok["nccl_proto"] = ok["size_bytes"].map(lambda b: "LL" if b < 2**16 else ("LL128" if b < 2**22 else "Simple"))
    refs = plot_refs.reference_lines(peak={"peak_gbps": 450.0, "link": "NVLink4 x18"},
                                       published=(360.0, 370.0))
    return {name: (build, ok) for name, build in plots_comm.figure_builders(refs).items()}


def _training():
    rows = []
    for model in ("mlp", "gpt"):
        for config, eff in (("plain", (1.0, 0.95, 0.9)), ("gbv=on", (1.0, 0.97, 0.93)),
                            ("bucket=100+NCCL_MAX_CTAS=8", (1.0, 0.9, 0.8))):
            for ws, e in zip((1, 2, 4), eff):
                step = 250.0 / e
                rows.append(dict(model=model, config=config, world_size=ws, status="ok", seq_len=128,
                                 plain_1gpu_samples_per_s=100.0, samples_per_s_median=100.0 * ws * e,
                                 tokens_per_s_median=12800.0 * ws * e, efficiency_vs_plain_1gpu=e,
                                 step_time_ms_median=step, compute_only_ms_median=240.0, tail_comm_ms=5.0,
                                 compute_slowdown_ms=step - 245.0, exposed_comm_ms=step - 240.0))
    ok = pd.DataFrame(rows)
    return {name: (build, ok) for name, build in plots_training.BUILDERS.items()}


def _memory():
    rows = [dict(model=m, config=c, world_size=ws, batch_size=b, phase="measure", status="ok",
                 params_bytes=2**28, grads_bytes=2**28, optimizer_bytes=2**29, activations_bytes=b * ws * 2**22,
                 unexplained_bytes=2**25, peak_allocated_bytes=2**30 + b * 2**22, parts_bytes=2**30)
            for m in ("mlp", "gpt") for c in ("ddp", "fsdp") for ws in (1, 2) for b in (8, 16, 32)]
    ok = pd.DataFrame(rows)
    return {name: (build, ok) for name, build in plots_memory.BUILDERS.items()}


def _predict():
    validation = pd.DataFrame([dict(op=op, timing="graph", backend="nccl", check_world_size=ws, fit_world_size=2,
                                    size_bytes=s, rel_err_pct=(-1) ** k * 5.0)
                               for op in ("all_reduce", "all_gather") for ws in (4, 8)
                               for k, s in enumerate(2**i for i in range(3, 31, 3))])
    comm = pd.DataFrame([dict(op="all_reduce", backend="nccl", timing="graph", size_bytes=2**30, gpus=g,
                              busbw_gbps=400.0 / (1 + g / 512) / (1 + (a == "tree")), intra_source=src,
                              fit_world_size=8, algorithm=a, preset="nvlink4-ib400")
                         for g in (8, 16, 64, 256, 1024) for a in ("ring", "tree", "hierarchical")
                         for src in ("measured", "preset")])
    training = pd.DataFrame([dict(model=m, strategy="ddp", config="plain", gpus=g, efficiency=1 / (1 + g / 2048),
                                  preset="nvlink4-ib400") for m in ("mlp", "gpt") for g in (8, 64, 512)])
    tables = {"validation": validation, "comm": comm, "training": training}
    return {"predict_validation": (plots_predict._validation, tables),
            "predict_allreduce_busbw": (plots_predict._allreduce_busbw, tables),
            "predict_training_efficiency": (plots_predict._training_efficiency, tables)}


def _heat_maps():
    nodes = [f"node{i}" for i in range(4)]
    pairs = pd.DataFrame([dict(node_a=a, node_b=b, bandwidth_ratio=0.6 if "node3" in (a, b) else 1.0,
                               latency_ratio=1.4 if "node3" in (a, b) else 1.0)
                          for i, a in enumerate(nodes) for b in nodes[i + 1:]])
    from tests.comm.test_pairs_analysis import N, raw_pairs, table, topology

    from distbench.comm.analysis.pairs_plots import fig_pairs
    gpu_pairs = table(raw_pairs(), topology())
    return {"nodes_bandwidth": (lambda p: plots_nodes._heatmap(p, "bandwidth_ratio", "Pair bandwidth", "RdYlGn", 1.0),
                                pairs),
            "pairs_bandwidth": (lambda p: fig_pairs(p, "nccl", N), gpu_pairs)}


LINE_AND_BAR = {**_comm(), **_training(), **_memory(), **_predict()}
HEAT_MAPS = _heat_maps()


def _png_size(path: Path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])


def _texts(fig) -> list[Text]:
    fig.canvas.draw()  # tick labels exist once drawn
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


@pytest.fixture(autouse=True)
def _theme():
    with matplotlib.rc_context():
        figures.set_house_theme()  # as write_figures / make_all draw them
        yield
    plt.close("all")


def _draw(builders, name):
    build, data = builders[name]
    fig = build(data)
    assert fig is not None, name
    return fig


@pytest.mark.parametrize("name", sorted(LINE_AND_BAR))
def test_every_figure_is_shown_at_its_native_size_with_text_at_least_body_size(name, tmp_path):
    fig = _draw(LINE_AND_BAR, name)
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    assert legends or name in NO_LEGEND, f"{name}: no legend"
    small = sorted({(t.get_text(), round(t.get_fontsize(), 2)) for t in _texts(fig)
                    if t.get_fontsize() < figures.MIN_TEXT_PT - 1e-6})
    assert not small, f"{name}: text under the page's body size at 100%: {small[:5]}"
    for lg in legends:  # legends at body-text size, and wholly inside the saved image
        assert all(t.get_fontsize() >= figures.MIN_TEXT_PT for t in lg.get_texts()), name
    png = next(p for p in figures.save_figure(fig, tmp_path, name) if p.suffix == ".png")
    width, height = _png_size(png)
    assert MIN_WIDTH_PX <= width <= figures.PAGE_WIDTH_PX, (name, width)
    assert 250 <= height <= 2000, (name, height)


@pytest.mark.parametrize("name", sorted(HEAT_MAPS))
def test_heat_maps_fit_the_page_with_text_at_least_body_size(name, tmp_path):
    fig = _draw(HEAT_MAPS, name)
    small = sorted({(t.get_text(), round(t.get_fontsize(), 2)) for t in _texts(fig)
                    if t.get_fontsize() < figures.MIN_TEXT_PT - 1e-6})
    assert not small, f"{name}: text under the page's body size at 100%: {small[:5]}"
    png = next(p for p in figures.save_figure(fig, tmp_path, name) if p.suffix == ".png")
    width, _ = _png_size(png)
    assert width <= figures.PAGE_WIDTH_PX, (name, width)
