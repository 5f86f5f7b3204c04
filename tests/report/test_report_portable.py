"""The Markdown report is portable: the figures it links are copies in figures/ beside it, so the report
directory can be copied anywhere; figures/ is replaced whole or not at all."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from synthetic import make_synthetic, render_synthetic_report

import distbench.report.publish as report_mod
from distbench.core.section import ReportInputs
from distbench.report.render import render_report

REPO = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # ![alt](src) and [SVG](src)


def _links(md: str) -> list[str]:
    return [s for s in LINK.findall(md) if not s.startswith(("http:", "https:", "#"))]


def test_copied_report_directory_keeps_every_figure(tmp_path):
    r = render_synthetic_report(tmp_path / "run")
    assert r["out_md"].parent == tmp_path / "run" / "report"
    copy = tmp_path / "elsewhere" / "report-copy"
    shutil.copytree(r["out_md"].parent, copy)
    shutil.rmtree(tmp_path / "run")  # nothing may point back at the run

    md = (copy / "report.md").read_text()
    assert "](tables/comm_largest.csv)" in md and (copy / "tables/comm_largest.csv").is_file()  # the full tables too
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", md)
    pngs = sorted(p.name for p in r["figures"] if p.suffix == ".png")
    assert sorted(Path(s).name for s in images) == pngs and pngs
    for src in _links(md):
        assert not Path(src).is_absolute() and ".." not in Path(src).parts, src
        assert (copy / src).is_file(), src
        assert (copy / src).resolve().is_relative_to(copy.resolve())
    html = (copy / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == len(pngs)  # the HTML stays self-contained


def _render(data, figures, out_dir: Path):
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, data["env_json"], figures, data["config"],
                               data["plan"], extra=data["extra"]),
                  out_dir / "report.md", out_dir / "report.html")


def _pngs(tmp_path, names):
    d = tmp_path / "results" / "figures"
    d.mkdir(parents=True, exist_ok=True)
    src = REPO / "benchmarks/results/comm-fidelity-h200x2-2026-11-26/figures/busbw_vs_size.png"  # any real PNG (read only)
    out = []
    for n in names:
        shutil.copy(src, d / f"{n}.png")
        out.append(d / f"{n}.png")
    return out


def _leftovers(report_dir: Path) -> list[str]:
    return sorted(p.name for p in report_dir.iterdir() if p.name.startswith("."))


def test_rerender_replaces_figures_whole(tmp_path):
    data = make_synthetic(tmp_path / "tables")
    out = tmp_path / "report"
    _render(data, _pngs(tmp_path, ["time_vs_size", "dtype"]), out)
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["dtype.png", "time_vs_size.png"]
    _render(data, _pngs(tmp_path, ["busbw_vs_size"]), out)
    assert [p.name for p in (out / "figures").iterdir()] == ["busbw_vs_size.png"]  # stale copies gone
    assert _leftovers(out) == []
    assert "](figures/busbw_vs_size.png)" in (out / "report.md").read_text()


def test_failed_render_leaves_previous_report_and_figures(tmp_path, monkeypatch):
    data = make_synthetic(tmp_path / "tables")
    out = tmp_path / "report"
    _render(data, _pngs(tmp_path, ["time_vs_size"]), out)
    before = {p: p.read_bytes() for p in [out / "report.md", out / "report.html", out / "figures/time_vs_size.png"]}

    real_copy, copied = shutil.copyfile, []

    def failing_copy(src, dst, *a, **kw):
        if copied:
            raise OSError("disk full")
        copied.append(dst)
        return real_copy(src, dst, *a, **kw)

    figures = _pngs(tmp_path, ["time_vs_size", "dtype", "nccl_env"])
    monkeypatch.setattr(report_mod.shutil, "copyfile", failing_copy)
    with pytest.raises(OSError, match="disk full"):
        _render(data, figures, out)
    assert copied  # it failed half-way through the figures
    assert {p: p.read_bytes() for p in before} == before
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["time_vs_size.png"]
    assert _leftovers(out) == []  # no temporary directory or file left beside the report


def test_failed_swap_puts_the_previous_figures_back(tmp_path, monkeypatch):
    data = make_synthetic(tmp_path / "tables")
    out = tmp_path / "report"
    _render(data, _pngs(tmp_path, ["time_vs_size"]), out)
    figures = _pngs(tmp_path, ["dtype"])
    real_replace = report_mod.os.replace

    def failing_replace(src, dst, *a, **kw):
        if Path(dst) == out / "figures" and Path(src).name.endswith(".tmp"):  # the staged copy moving in
            raise OSError("rename failed")
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(report_mod.os, "replace", failing_replace)
    with pytest.raises(OSError, match="rename failed"):
        _render(data, figures, out)
    monkeypatch.undo()
    assert [p.name for p in (out / "figures").iterdir()] == ["time_vs_size.png"]
    assert "](figures/time_vs_size.png)" in (out / "report.md").read_text() and _leftovers(out) == []


def test_failed_first_render_leaves_no_figures_dir(tmp_path, monkeypatch):
    data = make_synthetic(tmp_path / "tables")
    out, figures = tmp_path / "report", _pngs(tmp_path, ["dtype"])

    def boom(*a, **kw):
        raise OSError("disk full")

    monkeypatch.setattr(report_mod.shutil, "copyfile", boom)
    with pytest.raises(OSError, match="disk full"):
        _render(data, figures, out)
    assert not (out / "figures").exists() and not (out / "report.md").exists() and _leftovers(out) == []


def test_no_figures_still_makes_the_directory(tmp_path):
    """Snakemake's directory() output must exist after the job even when there is nothing to link."""
    data = make_synthetic(tmp_path / "tables")
    _render(data, [], tmp_path / "report")
    assert (tmp_path / "report/figures").is_dir() and not any((tmp_path / "report/figures").iterdir())


def test_rendering_beside_its_own_figures_keeps_them(tmp_path):
    """tools/publish_run.py renders report.md next to the figures/ it copied: link them in place."""
    data = make_synthetic(tmp_path / "tables")
    out = tmp_path / "published"
    figures = _pngs(tmp_path, ["dtype", "nccl_env"])
    (out / "figures").mkdir(parents=True)
    for f in figures:
        shutil.copy(f, out / "figures")
    (out / "figures/unlisted.svg").write_text("<svg/>")
    _render(data, sorted((out / "figures").glob("*.png")), out)
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["dtype.png", "nccl_env.png", "unlisted.svg"]
    md = (out / "report.md").read_text()
    assert "](figures/dtype.png)" in md and "](figures/nccl_env.png)" in md


def test_rule_declares_the_figures_directory():
    rule = (REPO / "rules/report.smk").read_text()
    outputs = rule.split("output:", 1)[1].split("log:", 1)[0]
    # update(): a failed report gets its last good figures and tables back with its page (issue 47)
    assert 'figures=update(directory("report/figures")),' in outputs
    assert 'tables=update(directory("report/tables")),' in outputs
    script = (REPO / "workflow/scripts/render_report.py").read_text()
    assert "figures_dir=sm.output.figures" in script and "tables_dir=sm.output.tables" in script
    if shutil.which("snakefmt"):
        import subprocess

        res = subprocess.run(["snakefmt", "--check", str(REPO / "rules/report.smk")], capture_output=True, text=True)
        assert res.returncode == 0, res.stderr


def test_publish_run_carries_the_health_readings_into_the_verdict(tmp_path):
    """tools/publish_run.py on a run's results/<label>/ (rebuilt from the committed 1x H200 run): the
    health readings travel with the tables, so the re-rendered Verdict keeps its hardware row."""
    import subprocess
    import sys

    committed = REPO / "benchmarks/results/one-gpu-h200x1-2026-11-29/run"
    run = tmp_path / "work/results/vm"
    for sub in ("tables", "probe", "health"):
        shutil.copytree(committed / sub, run / sub)
    out = tmp_path / "published"
    res = subprocess.run([sys.executable, str(REPO / "tools/publish_run.py"), str(tmp_path / "work"),
                          str(REPO / "config.yaml"), str(out), "--gpus", "1"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr[-3000:]
    assert (out / "health" / "health_before.csv").exists()
    md = (out / "report.md").read_text()
    verdict = md[md.index("## Verdict"): md.index("\n## ", md.index("## Verdict") + 1)]
    assert "| hardware health | 1 GPU(s): every item ok |" in verdict
