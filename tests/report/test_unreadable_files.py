"""No cached or baseline file can crash the report or cost the user the last good one (issue 36).

Every file the report, the regressions and diagnose read goes through one reader
(distbench.core.readers): a file that is truncated, binary, of the wrong shape or holds text where a
number should be is named, with what is wrong and the fix, and no traceback. A baseline (or another
run under results/) that cannot be read is named in its section and the rest of the report renders;
this run's own file that cannot be read stops the report rule, and the last good report stays
(update() outputs, rules/report.smk). Non-finite values on ok rows are refused when a job's CSV is read.

Most cases call the entry points on a synthetic results tree; one real workflow run checks that
Snakemake puts the last good report back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from synthetic import make_synthetic

from distbench.comm.analysis.diagnose import diagnose
from distbench.core.io import atomic_write_csv
from distbench.comm.contract import COMM
from distbench.core.readers import UnreadableFile
from distbench.core.section import ReportInputs
from distbench.core.tables import JobCsvError, read_job_csv
from distbench.launch.in_rule import run_in_rule
from distbench.report.render import render_report
from tests.conftest import RUN, snakemake


# ---------------------------------------------------------------- a baseline that cannot be read
def _results(tmp):
    """results/now (this run) and results/base (the baseline, a copy), each with its tables and run.json."""
    for label in ("base", "now"):
        data = make_synthetic(tmp / "results" / label / "tables")
        (tmp / "results" / label / "run.json").write_text(json.dumps({"label": label, "host": f"host-{label}"}))
    return data


def _render(tmp, data) -> tuple[str, str]:
    inputs = ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, data["env_json"], [],
                          {"report": {"baseline": "base"}}, data["plan"], results_dir=Path("results"),
                          run_label="now")  # relative, as the report rule passes it (cwd: tmp)
    out = tmp / "report"
    render_report(inputs, out / "report.md", out / "report.html")
    return (out / "report.md").read_text(), (out / "report.html").read_text()


def _section(md: str, title: str) -> str:
    return md.split(f"\n## {title}\n")[1].split("\n## ")[0]


def _drop_median(p):
    pd.read_csv(p).drop(columns=["time_us_median"]).to_csv(p, index=False)


def _set_median(value):
    def corrupt(p):
        df = pd.read_csv(p, dtype={"time_us_median": "string"})
        df.loc[df.index[df["status"] == "ok"][0], "time_us_median"] = value
        df.to_csv(p, index=False)
    return corrupt


TABLE_CASES = {  # how the baseline's comm_summary.csv is damaged -> what the report must say is wrong
    "truncated": (lambda p: p.write_text(p.read_text()[:-15]), "the file was truncated"),
    "binary": (lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff" * 40), "not UTF-8 text"),
    "missing_column": (_drop_median, "lacks the column(s) ['time_us_median']"),
    "not_a_number": (_set_median("fast"), "'fast' is not a number"),
    "inf_on_ok_row": (_set_median("inf"), "a measurement must be a finite number"),
}


@pytest.mark.parametrize("case", [None, *TABLE_CASES])
def test_a_baseline_table_that_cannot_be_read_is_named_and_the_rest_renders(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)  # report.baseline "base" is a run label under ./results/
    data = _results(tmp_path)
    bad = "results/base/tables/comm_summary.csv"
    if case:
        TABLE_CASES[case][0](tmp_path / bad)
    md, html = _render(tmp_path, data)
    regressions, several = _section(md, "Regressions against the baseline"), _section(md, "Several runs side by side")
    for title in ("Verdict", "Findings", "Communication", "Appendix"):  # the rest of the report is there
        assert f"\n## {title}\n" in md
    assert "Traceback" not in md + html
    if case is None:  # the control: the same baseline, whole, is compared and set side by side
        compared = int(re.search(r"(\d+) figure\(s\) present in both runs compared", regressions).group(1))
        assert compared > 50 and "cannot be read" not in md and "| base | host-base |" in several
        return
    what = TABLE_CASES[case][1]
    # the regressions section names the file, what is wrong and the fix; nothing of it is compared
    line = next(ln for ln in regressions.splitlines() if bad in ln)
    assert what in line and "report.baseline" in line, line
    assert "0 figure(s) present in both runs compared" in regressions
    # the runs side by side leave that run out, and say so with the fix for a copied run
    line = next(ln for ln in several.splitlines() if bad in ln)
    assert what in line and "rm -r results/base" in line, line
    assert "| base |" not in several
    assert bad in html and "report.baseline" in html


@pytest.mark.parametrize("text,what", [
    ('{"label": "base", "ho', "not valid JSON at line 1 column 19"),
    ('["base", "host-base"]', "its JSON is a list where an object was expected"),
])
def test_a_run_json_that_cannot_be_read_leaves_that_run_out_and_is_named(tmp_path, monkeypatch, text, what):
    monkeypatch.chdir(tmp_path)
    data = _results(tmp_path)
    (tmp_path / "results/base/run.json").write_text(text)
    md, _ = _render(tmp_path, data)
    several = _section(md, "Several runs side by side")
    line = next(ln for ln in several.splitlines() if "results/base/run.json" in ln)
    assert what in line and "rm -r results/base" in line, line
    if text.startswith("{"):
        assert "the file was truncated" in line
    # the baseline's tables are whole: the regressions are still compared
    assert not re.search(r"\b0 figure\(s\) present", _section(md, "Regressions against the baseline"))


# ---------------------------------------------------------------- this run's own file: the last good report stays
def test_this_runs_own_file_that_cannot_be_read_stops_the_report_and_leaves_the_last_good_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = _results(tmp_path)
    md, html = _render(tmp_path, data)
    env = data["env_json"]
    env.write_text(env.read_text()[:40])  # probe/env.json cut short
    with pytest.raises(UnreadableFile) as e:
        _render(tmp_path, data)
    assert str(env) in str(e.value) and "truncated" in str(e.value) and f"rm {env}" in str(e.value)
    # both texts are rendered before either is written: the last good ones are untouched
    assert (tmp_path / "report/report.md").read_text() == md and (tmp_path / "report/report.html").read_text() == html


# ---------------------------------------------------------------- diagnose
def _diagnose_inputs(tmp):
    data = make_synthetic(tmp)
    (tmp / "topo.json").write_text(json.dumps({"available": False, "reason": "no nvidia-smi"}))
    (tmp / "nccl.json").write_text(json.dumps({"available": False, "reason": "no GPU"}))
    (tmp / "placement.json").write_text(json.dumps({"ranks": [{"rank": 0, "uuid": "GPU-0"}], "error": None}))
    return data


@pytest.mark.parametrize("name,text,what", [
    ("placement.json", '{"ranks": [{"rank": 0, "uu', "the file was truncated"),
    ("env.json", '{"gpu_count": 2, "gpus": [', "the file was truncated"),
    ("env.json", "[1, 2]", "its JSON is a list where an object was expected"),
])
def test_diagnose_names_a_json_file_that_cannot_be_read_without_a_traceback(tmp_path, capsys, name, text, what):
    data = _diagnose_inputs(tmp_path)
    (tmp_path / name).write_text(text)
    log, out_csv = tmp_path / "diagnose.log", tmp_path / "out.csv"
    summary = pd.read_csv(data["summary_csv"])
    with pytest.raises(SystemExit) as e:  # workflow/scripts/aggregate_comm.py's way of running it
        run_in_rule(log, lambda: atomic_write_csv(out_csv, diagnose(
            summary, data["env_json"], tmp_path / "topo.json", tmp_path / "nccl.json", [tmp_path / "placement.json"],
            tmp_path / "advice.json")))
    message = str(e.value.code)
    path = tmp_path / name
    assert message.startswith(f"distbench error: {path} cannot be read: ") and what in message, message
    assert f"rm {path}" in message
    assert "Traceback" not in log.read_text() and message in log.read_text()
    assert not out_csv.exists()


# ---------------------------------------------------------------- non-finite values in a job's CSV
COMM_CSV = (
    "backend,world_size,op,dtype,nccl_env,timing,inplace,size_bytes,count,trial,iters,rank_agg,time_us,"
    "time_us_rank_min,time_us_rank_max,slowest_rank,algbw_gbps,busbw_gbps,correct,status,message\n"
    "gloo,2,all_reduce,float32,default,host,True,8,2,0,2,max,5333.3,5178.41,5333.3,1,1.5e-06,1.5e-06,True,ok,\n"
    "gloo,2,all_reduce,float32,default,host,True,8,2,1,2,max,{time},294.174,420.457,1,{bw},1.9e-05,True,{status},\n")


@pytest.mark.parametrize("time,bw,status,column", [
    ("inf", "1.9e-05", "ok", "time_us"),
    ("420.457", "-inf", "ok", "algbw_gbps"),
    ("inf", "1.9e-05", "failed", None),  # not a measurement: a failed row's numbers are not held to it
])
def test_a_non_finite_value_on_an_ok_row_of_a_job_csv_is_refused(tmp_path, time, bw, status, column):
    p = tmp_path / "comm.csv"
    p.write_text(COMM_CSV.format(time=time, bw=bw, status=status))
    if column is None:
        assert len(read_job_csv(p, COMM)) == 2
        return
    with pytest.raises(JobCsvError) as e:
        read_job_csv(p, COMM)
    text = str(e.value)
    assert f"{p}: comm: column {column}, row 2: " in text and "finite number" in text
    assert f"rm {p}" in text and "snakemake -R comm_job" in text


# ---------------------------------------------------------------- the real workflow
TINY = {
    "backends": ["gloo"], "world_sizes": [2],
    "comm": {"ops": ["all_reduce"], "sizes": ["8"], "gloo": {"max_bytes": "1KiB", "warmup": 1, "iters": 2, "trials": 2}},
    "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False},
    "health": {"enabled": False},
}


@pytest.mark.heavy
@pytest.mark.e2e
def test_the_workflow_keeps_the_last_good_report_when_a_file_cannot_be_read(workflow_dir):
    """One tiny run (one Gloo job), then two files damaged one after the other: a table only the report
    reads (the report rule fails with its message, and Snakemake puts the last good report back) and
    the job's CSV with an infinite time on an ok row (its aggregation refuses it; the report is not
    remade). Both reports stay byte for byte the last good ones."""
    (workflow_dir / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    cfg = ("--configfile", "tiny.yaml")
    first = snakemake(workflow_dir, *cfg, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    reports = [workflow_dir / "report/report.md", workflow_dir / "report/report.html"]
    good = [p.read_bytes() for p in reports]

    largest = workflow_dir / RUN / "tables/comm_largest.csv"
    largest.write_text(largest.read_text()[:-10])
    r = snakemake(workflow_dir, *cfg, timeout=120)
    text = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in text, text[-3000:]
    rel = f"{RUN}/tables/comm_largest.csv"
    assert f"distbench error: {rel} cannot be read: " in text and "truncated" in text and f"rm {rel}" in text
    assert "Restored previous version of report/report.md" in text
    assert [p.read_bytes() for p in reports] == good

    job_csv = f"{RUN}/comm/gloo/float32/ws2/default/comm.csv"
    path = workflow_dir / job_csv
    lines = path.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\r\n").split(",")
    row = lines[1].rstrip("\r\n").split(",")
    assert row[header.index("status")] == "ok"
    row[header.index("time_us")] = "inf"
    path.write_text("".join([lines[0], ",".join(row) + "\r\n", *lines[2:]]))
    r = snakemake(workflow_dir, *cfg, timeout=120)
    text = r.stdout + r.stderr
    assert r.returncode != 0 and "Traceback" not in text, text[-3000:]
    assert f"{job_csv}: comm: column time_us, row 1: inf on a row whose status is ok" in text, text[-3000:]
    assert f"rm {job_csv}" in text
    assert [p.read_bytes() for p in reports] == good
