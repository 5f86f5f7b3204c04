"""A damaged table stops every reader of it, naming the file, and the last good report stays whole (issue 47).

Hostile inputs found on the landed main: a 0-byte comm_summary.csv (the communication section and its
Verdict row vanished, summary.json said "communication": {}), a header-only training_summary.csv (the
training section dropped), a torn or binary comm.csv (shipped as report/tables/comm.csv), a 0-byte
training_summary.csv or a comm_summary.csv without `status` (tracebacks from the plot rules), and a
failed report that kept its page but lost the figures and tables it links.

Each damage of CASES is put on a results tree made of a real run's tables (the committed 4x H100 run)
and read by each of the three readers (the report, summary.json, and every step that reads the table
by name: the plots, the prediction), which must all refuse it with the file, what is wrong and the
fix. One real workflow run (the session's shared run, copied) checks that Snakemake gives the last
good report back whole, figures and tables included.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from synthetic import ENV, PLAN, largest_of

from distbench.core.manifest import TableRef
from distbench.core.readers import UnreadableFile
from distbench.core.section import ReportInputs
from distbench.pipeline import run_rules
from distbench.pipeline.config import check_config
from distbench.pipeline.families import manifests
from distbench.report import publish
from distbench.report.render import render_report
from distbench.report.summary_json import summary_document
from tests.conftest import REPO, RUN, snakemake

REAL_RUN = REPO / "benchmarks/results/report-h100x4-2026-11-26/run-h100x4/tables"
# what the plan says ran: a table of a family with jobs here must hold rows
JOBS = {"comm": [{"backend": "nccl"}], "training": [{"backend": "nccl"}], "memory": [{"backend": "nccl"}]}
RAW_COMM = (  # a job's rows as tables/comm.csv holds them (the full table copied beside the report)
    "backend,world_size,nodes,op,traffic,dtype,nccl_env,timing,inplace,size_bytes,requested_bytes,count,trial,iters,"
    "rank_agg,time_us,status,message\n"
    "nccl,2,1,all_reduce,none,float32,default,events,True,8,8,2,0,20,max,12.5,ok,\n"
    "nccl,2,1,all_reduce,none,float32,default,events,True,8,8,2,1,20,max,12.7,ok,\n")
SUMMARY_PARTS = {"comm_summary", "training_summary", "memory_summary"}


def _zero(p: Path):
    p.write_bytes(b"")


def _header_only(p: Path):
    p.write_text(p.read_text().splitlines(keepends=True)[0])


def _cut_mid_row(p: Path):
    p.write_text(p.read_text()[:-25])


def _short_last_row(p: Path):  # a whole line, with fewer fields than the header
    lines = p.read_text().splitlines(keepends=True)
    p.write_text("".join(lines[:-1]) + ",".join(lines[-1].split(",")[:3]) + "\n")


def _binary(p: Path):
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff" * 40)


def _drop(column: str):
    def drop(p: Path):
        pd.read_csv(p).drop(columns=[column]).to_csv(p, index=False)
    return drop


# (table, damage, words the message must hold): each reader of that table stops with them
CASES = [
    ("comm_summary", _zero, "the file is empty (0 bytes"),
    ("comm_summary", _header_only, "holds a header and no row, but its family ran"),
    ("comm_summary", _cut_mid_row, "the file was truncated"),
    ("comm_summary", _short_last_row, "fields where the header has"),
    ("comm_summary", _binary, "not UTF-8 text"),
    ("comm_summary", _drop("status"), "lacks the column(s) ['status']"),
    ("comm_largest", _zero, "the file is empty (0 bytes"),
    ("training_summary", _zero, "the file is empty (0 bytes"),
    ("training_summary", _header_only, "holds a header and no row, but its family ran"),
    ("training_summary", _cut_mid_row, "the file was truncated"),
    ("memory_summary", _header_only, "holds a header and no row, but its family ran"),
    ("comm", _cut_mid_row, "the file was truncated"),
    ("comm", _binary, "not UTF-8 text"),
    ("comm", _zero, "the file is empty (0 bytes"),
]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    """A results tree of a real run's tables, and its report rendered whole (figures and tables beside it)."""
    root = tmp_path_factory.mktemp("good")
    tables = root / "results/now/tables"
    tables.mkdir(parents=True)
    for name in SUMMARY_PARTS:
        shutil.copy(REAL_RUN / f"{name}.csv", tables / f"{name}.csv")
    largest_of(pd.read_csv(tables / "comm_summary.csv")).to_csv(tables / "comm_largest.csv", index=False)
    (tables / "comm.csv").write_text(RAW_COMM)
    (root / "env.json").write_text(json.dumps(ENV))
    (root / "figures").mkdir()
    (root / "figures/busbw_vs_size.png").write_bytes(b"\x89PNG good figure")
    render_report(_inputs(root), root / "report/report.md", root / "report/report.html")
    return root


def _inputs(root: Path, plan_jobs=JOBS) -> ReportInputs:
    tables = root / "results/now/tables"
    paths = {name: tables / f"{name}.csv" for name in ("comm_summary", "comm_largest", "training_summary",
                                                        "memory_summary", "comm")}
    return ReportInputs(paths, root / "env.json", [root / "figures/busbw_vs_size.png"], check_config({}),
                        {**PLAN, "jobs": plan_jobs}, full_tables=[paths["comm"], paths["comm_summary"],
                                                                 paths["comm_largest"]])


def _report_files(root: Path) -> dict[str, bytes]:
    report = root / "report"
    return {str(p.relative_to(report)): p.read_bytes() for p in sorted(report.rglob("*")) if p.is_file()}


def _steps_reading(table: str):
    """Every step of every family that reads `table` by name (a plot, the prediction, the nccl-tests documents)."""
    return [(m, s, name) for m in manifests() for s in m.steps for name, ref in s.inputs.items()
            if isinstance(ref, TableRef) and ref.name == table]


@pytest.mark.parametrize("table,damage,words", CASES, ids=[f"{t}-{d.__name__}" for t, d, _ in CASES])
def test_every_reader_refuses_a_damaged_table_and_the_last_good_report_stays(good, tmp_path, monkeypatch,
                                                                             table, damage, words):
    root = shutil.copytree(good, tmp_path / "run", symlinks=True)
    before = _report_files(root)
    path = root / f"results/now/tables/{table}.csv"
    damage(path)

    # the report: stopped before anything is written, naming the file, what is wrong and the fix
    with pytest.raises(UnreadableFile) as e:
        render_report(_inputs(root), root / "report/report.md", root / "report/report.html")
    text = str(e.value)
    assert text.startswith(f"{path} cannot be read: ") and words in text and f"rm {path}" in text, text
    assert _report_files(root) == before  # page, figures and tables: the last good ones, whole
    assert not [p for p in (root / "report").iterdir() if p.name.startswith(".")]  # no stage left behind

    # summary.json: a part of a family that ran is never left empty for a damaged table
    if table in SUMMARY_PARTS:
        with pytest.raises(UnreadableFile) as e:
            summary_document(_inputs(root), check_config({}))
        assert str(e.value) == text

    # every step reading it by name stops before its own code runs, with the message and no traceback
    reached = []
    monkeypatch.setattr(run_rules, "resolve", lambda entry: reached.append)
    for m, step, name in _steps_reading(table):
        log = tmp_path / f"{step.rule}.log"
        sm = SimpleNamespace(input={name: str(path)}, log=[str(log)],
                             params=SimpleNamespace(read_tables=run_rules.step_tables(step, {"jobs": JOBS}),
                                                    entry=step.entry))
        with pytest.raises(SystemExit) as e:
            run_rules.run_step(sm)
        assert str(e.value.code) == f"distbench error: {text}", step.rule
        assert "Traceback" not in log.read_text()
    assert not reached


def test_the_undamaged_tree_and_a_header_only_table_where_it_may_be_one_are_read(good, tmp_path, monkeypatch):
    """The control: the same readers on the whole tree go through; a header alone is whole where no job
    of its family ran (the plan has none: comm with every NCCL job skipped, issue 37) or where the
    table holds only some rows (comm_largest: the ok series, none when every job failed)."""
    root = shutil.copytree(good, tmp_path / "run", symlinks=True)
    assert summary_document(_inputs(root), check_config({}))["results"]["communication"]
    reached = []
    monkeypatch.setattr(run_rules, "resolve", lambda entry: reached.append)
    steps = _steps_reading("comm_summary") + _steps_reading("training_summary")
    for m, step, name in steps:
        table = step.inputs[name].name
        sm = SimpleNamespace(input={name: str(root / f"results/now/tables/{table}.csv")}, log=[str(tmp_path / "s.log")],
                             params=SimpleNamespace(read_tables=run_rules.step_tables(step, {"jobs": JOBS}),
                                                    entry=step.entry))
        run_rules.run_step(sm)
    assert len(reached) == len(steps) >= 3

    _header_only(root / "results/now/tables/comm_largest.csv")
    _header_only(root / "results/now/tables/comm_summary.csv")
    with pytest.raises(UnreadableFile, match="comm_summary.csv cannot be read: it holds a header and no row"):
        render_report(_inputs(root), root / "report/report.md", root / "report/report.html")
    render_report(_inputs(root, {**JOBS, "comm": []}), root / "report/report.md", root / "report/report.html")
    # published: no comm job ran, so no row is owed
    assert (root / "report/tables/comm_summary.csv").read_text().count("\n") == 1


def test_a_report_that_fails_while_it_is_staged_leaves_the_last_good_one_whole(good, tmp_path, monkeypatch):
    """The figures, the tables and both pages are staged, then swapped in together: a failure while
    copying the tables (after the figures were copied) leaves the last good figures in place, not the
    new ones beside the old page."""
    root = shutil.copytree(good, tmp_path / "run", symlinks=True)
    before = _report_files(root)
    (root / "figures/busbw_vs_size.png").write_bytes(b"\x89PNG a new figure")
    real = shutil.copyfile

    def copyfile(src, dst, *a, **kw):
        if str(src).endswith(".csv"):
            raise OSError(28, "No space left on device")
        return real(src, dst, *a, **kw)

    monkeypatch.setattr(publish.shutil, "copyfile", copyfile)
    with pytest.raises(OSError, match="No space left"):
        render_report(_inputs(root), root / "report/report.md", root / "report/report.html")
    assert _report_files(root) == before
    assert sorted(p.name for p in (root / "report").iterdir()) == ["figures", "report.html", "report.md", "tables"]


@pytest.mark.e2e
def test_the_workflow_gives_back_the_last_good_report_whole_and_says_so_again(shared_run, tmp_path):
    """The session's shared run, copied; its tables/comm.csv (copied beside the report, read by no
    text of it) cut mid-row. The run stops in the report rule naming the file, and Snakemake puts back
    the page, summary.json and the figures and tables it links, byte for byte; `snakemake report`
    after it says the same again (the damage is never taken for a good report)."""
    assert shared_run.returncode == 0, shared_run.stderr[-3000:]
    wf = shared_run.copy_to(tmp_path / "wf")
    before = _report_files(wf)
    assert {"figures", "tables"} <= {k.split("/")[0] for k in before}
    assert (wf / RUN / "logs/report/report.done").is_file()
    raw = f"{RUN}/tables/comm.csv"
    _cut_mid_row(wf / raw)
    for target in ([], ["report"]):
        r = snakemake(wf, *target, "--configfile", "tiny.yaml", timeout=300)
        text = r.stdout + r.stderr
        assert r.returncode != 0, text[-3000:]
        assert f"distbench error: {raw} cannot be read: " in text and "the file was truncated" in text, text[-3000:]
        assert f"rm {raw}" in text and "Traceback" not in text
        assert "Restored previous version of report/figures" in text
        assert _report_files(wf) == before
        assert not (wf / RUN / "logs/report/report.done").exists()  # what makes the next run render again
