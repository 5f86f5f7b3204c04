"""Standalone comm runs read like nccl-tests: placement lines first, then a table in nccl-tests'
column order, one line per point as it completes, with the numbers the CSV holds."""

import re

import pandas as pd

from distbench.comm.main import table_line
from tests.conftest import torchrun


def test_the_live_table_follows_nccl_tests_columns_and_the_csv(tmp_path):
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "all_reduce,broadcast", "--sizes", "1KiB,64KiB", "--out", str(out)])
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    # every rank's placement comes first (on stderr, with the progress lines); the table is stdout
    assert "placement: rank 0" in r.stderr and "placement: rank 1" in r.stderr and "placement" not in r.stdout
    header = next(line for line in lines if "size" in line and "busbw" in line)
    assert re.findall(r"[a-z#]+", header)[:9] == ["#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw"]
    rows = [line.split() for line in lines if re.match(r"\s+\d", line)]
    assert [(x[0], x[2], x[3], x[4]) for x in rows] == [("1024", "float", "sum", "-1"), ("65536", "float", "sum", "-1"),
                                                        ("1024", "float", "none", "0"), ("65536", "float", "none", "0")]
    df = pd.read_csv(out)
    med = df.groupby(["op", "size_bytes"], sort=False)["time_us"].median().tolist()
    # the median over trials, as printed to 2 decimals (the CSV keeps 6 significant digits, so a
    # value on a rounding boundary may print one unit of the last place apart, and a time of 10 ms
    # or more, on a busy host, keeps one decimal: half a unit of its 6th digit more)
    printed = [float(x[5]) for x in rows]
    assert len(printed) == len(med) and all(abs(p - m) <= 0.0051 + 5e-6 * abs(m) + 1e-9 for p, m in zip(printed, med))
    assert all(x[8] == "0" and x[-1] == "ok" for x in rows)  # checked exactly: no wrong elements
    # Gloo times with the host clock: there is no separate issue time, so nothing is host-bound
    assert "host_issue_us" in df and df["host_issue_us"].isna().all() and "host-bound" not in r.stdout


def test_a_point_that_did_not_run_says_why_in_its_line():
    row = dict(size_bytes=8, count=2, dtype="float32", op="send_recv", timing="host", inplace=False,
               status="skipped", message="send_recv needs at least 2 ranks", correct=None)
    line = table_line([row])
    assert line.split()[:5] == ["8", "2", "float", "none", "-1"]
    assert line.endswith("skipped: send_recv needs at least 2 ranks") and " N/A " in line


def test_the_line_writes_size_and_time_as_the_report_does():
    from distbench.core.units import human_bytes, human_time_us

    rows = [dict(size_bytes=2**20, count=2**18, dtype="float32", op="all_reduce", timing="host", inplace=True,
                 status="ok", message="", correct=True, time_us=t, algbw_gbps=1.0, busbw_gbps=1.0)
            for t in (15321.0, 15400.0, 15100.0)]
    line = table_line(rows)
    assert line.endswith(f"{human_bytes(2**20)}   {human_time_us(15321.0)}  ok")  # "1 MiB   15.3 ms  ok"
    assert "1 MiB" in line and "15.3 ms" in line


def test_a_comm_job_json_that_is_not_one_is_a_usage_error(tmp_path, capsys):
    """`--params` names a file that is not a job's job.json (no JSON, or JSON without the job's
    values): exit 2 naming the file, before any rank starts measuring."""
    import pytest

    from distbench.comm.main import parse_args

    for text, said in (("{not json", "not a job's job.json"),
                       ('{"rule": "comm_job", "wildcards": {}, "params": {}, "output": {}, "log": ""}',
                        "params.job: missing")):
        (tmp_path / "job.json").write_text(text)
        with pytest.raises(SystemExit) as e:
            parse_args(["--params", str(tmp_path / "job.json"), "--out", str(tmp_path / "c.csv")])
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"distbench error: {tmp_path / 'job.json'}: " in err and said in err
