"""Snakemake's own report (`snakemake --report report.zip`): the figures and tables flagged with
report() in rules/*.smk, with their captions (workflow/report/*.rst) and categories, next to
distbench's Jinja report. The session's shared tiny run on CPU (tests/conftest.py: shared_run), then the report from it."""

import json
import re
import zipfile

import pytest

from tests.conftest import RUN, REPO, snakemake


def _js_object(html: str, var: str) -> dict:
    """The JSON literal the report's HTML assigns to `var` (one line: `var name = {...};`)."""
    m = re.search(rf"var {var} = (\{{.*\}});\s*$", html, flags=re.M)
    assert m, f"no `var {var}` in the report's HTML"
    return json.loads(m.group(1))


def test_every_report_caption_exists():
    """Each caption a report() flag or the Snakefile's `report:` names is a file (cheap: no run)."""
    rules = sorted((REPO / "rules").glob("*.smk"))
    captions = [(smk, c) for smk in rules for c in re.findall(r'caption="([^"]+)"', smk.read_text())]
    for smk, caption in captions:
        assert (smk.parent / caption).resolve().is_file(), f"{smk.name}: caption {caption} is missing"
    # the families' tables and figures: each caption a file of the family's own folder
    from distbench.pipeline.families import manifests

    named = [(m.name, x.caption) for m in manifests() for x in (*m.tables, *m.figures) if x.caption]
    assert len(captions) + len(named) >= 10
    for family, caption in named:
        assert (REPO / "distbench" / family / caption).is_file(), f"{family}: caption {caption} is missing"
    top = re.findall(r'^report: "([^"]+)"', (REPO / "Snakefile").read_text(), flags=re.M)
    assert top and all((REPO / t).is_file() for t in top)


@pytest.mark.e2e
def test_snakemake_report_zip_has_our_figures_tables_and_categories(shared_run, tmp_path):
    # the session's shared run (tests/conftest.py: every family, with the GPU-pair matrix at 2 ranks),
    # in a copy: the report is written beside it
    assert shared_run.returncode == 0, shared_run.stderr[-3000:]
    workflow_dir = shared_run.copy_to(tmp_path / "wf")
    cfg = ["--configfile", "tiny.yaml"]

    rep = snakemake(workflow_dir, *cfg, "--report", "report.zip", timeout=120)
    assert rep.returncode == 0, rep.stderr[-3000:]
    assert "Report created." in rep.stderr
    assert "No files found for patterns" not in rep.stderr  # each figure directory held PNGs
    zpath = workflow_dir / "report.zip"
    assert zpath.is_file()

    with zipfile.ZipFile(zpath) as z:
        names = z.namelist()
        html = z.read("report/report.html").decode("utf-8")
    files = {n.rsplit("/", 1)[-1] for n in names}
    # the comm figures (PNG only: the SVG twins stay in results/), the tables, the other families
    assert {"time_vs_size.png", "busbw_vs_size.png"} <= files
    assert not any(n.endswith(".svg") for n in names)
    assert {"comm_summary.csv", "comm_largest.csv", "comm_stragglers.csv", "comm_pairs.csv",
            "memory_summary.csv", "alpha_beta.csv", "prediction_comm.csv"} <= files
    assert {"memory_split.png", "pairs_bandwidth_gloo_ws2.png"} <= files
    assert "predict_allreduce_busbw.png" not in files  # a CPU run predicts no GPU cluster (issue 34)
    assert all(n.startswith("report/data/raw/") for n in names if n != "report/report.html")

    # categories and subcategories, as the report's page sorts them
    categories = _js_object(html, "categories")
    # no "Prediction" figures: a CPU run predicts no GPU cluster, and one world size checks no fit
    assert {"Communication", "Training", "Tables", "Memory", "GPU pairs"} <= set(categories)
    assert {"Communication", "Training", "Memory", "GPU pairs", "Prediction"} <= set(categories["Tables"])
    assert f"{RUN}/tables/comm_summary.csv" in categories["Tables"]["Communication"]
    comm_figs = [p for sub in categories["Communication"].values() for p in sub]
    assert f"{RUN}/figures_comm/time_vs_size.png" in comm_figs

    # captions: rendered per figure (the figure's own text, with units), no reStructuredText errors
    results = _js_object(html, "results")
    fig = results[f"{RUN}/figures_comm/time_vs_size.png"]
    assert fig["labels"] == {"figure": "time_vs_size"}
    assert "Time per op (median over trials, each tick in the unit that fits" in fig["caption"]
    assert "GB/s" in results[f"{RUN}/figures_comm/busbw_vs_size.png"]["caption"]
    assert "GB/s" in results[f"{RUN}/tables/comm_summary.csv"]["caption"]
    assert all(r["caption"].strip() for r in results.values())
    assert "system-message" not in html and "Unknown target name" not in html
    # the workflow-level description (Snakefile `report:`), rendered with this run's config
    assert "Backends measured: nccl, gloo" in html
