"""Hang forensics (issue 26): a job past its time limit has every rank dump torch's Flight Recorder
buffer before it is killed; the dumps name the collective where the ranks parted and the rank that
never joined it; the job's CSV says `hung`, and the report names that rank and collective.

A rank is made to hang by DISTBENCH_TEST_HANG_RANK=<rank>:<point> (distbench.comm.harness): it
skips the first collective of that measured point and waits in host code."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys

import pytest
import yaml

from distbench.core.section import ReportInputs
from distbench.launch import hang
from distbench.launch.torchrun import job_environment
from distbench.report.hangs import build, headlines
from tests.conftest import RUN

# `pytest -m heavy` (README: the second test command): real jobs left to reach their time limits.
pytestmark = pytest.mark.heavy


def _entry(seq, op="gloo:all_reduce", size=256, retired=True, pg=("0", "default_pg")):
    return {"collective_seq_id": seq, "pg_id": 0, "process_group": pg, "profiling_name": op, "input_sizes": [[size]],
            "input_dtypes": ["Float"], "retired": retired, "is_p2p": False, "state": "scheduled",
            "frames": [{"name": "measure", "filename": "/x/distbench/comm/harness.py", "line": 208}]}


def _dump(directory, rank, entries, enqueued, completed, prefix="rank_"):
    d = {"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1, 2]"}},
         "pg_status": {"0": {"last_enqueued_collective": enqueued, "last_started_collective": -1,
                             "last_completed_collective": completed}}, "entries": entries}
    (directory / f"{prefix}{rank}").write_bytes(pickle.dumps(d))


def test_the_dumps_name_the_rank_that_never_joined_and_the_collective(tmp_path):
    done = [_entry(s) for s in range(1, 7)]
    _dump(tmp_path, 0, done + [_entry(7, size=1000, retired=False)], 7, 6)
    _dump(tmp_path, 1, done, 6, 6)  # rank 1 never entered #7
    _dump(tmp_path, 2, done + [_entry(7, size=1000, retired=False)], 7, 6)
    (tmp_path / "stack_1.txt").write_text('Thread 0x1 (most recent call first):\n  File "x.py", line 3 in wait\n')
    a = hang.analyse(tmp_path, 3)
    g = hang.stuck(a)
    assert (g["seq"], g["op"], g["never_joined"], g["waiting"]) == (7, "gloo:all_reduce", [1], [0, 2])
    assert g["input_sizes"] == [[1000]] and g["called_from"] == ["/x/distbench/comm/harness.py:208 in measure"]
    msg = hang.hang_message(a)
    assert msg.startswith("rank 1 never joined collective #7 (gloo:all_reduce of [[1000]] Float)") and "ranks 0, 2 waited" in msg
    assert "line 3 in wait" in a["stacks"]["1"]["python"] and a["missing_dumps"] == []


def test_a_completion_the_recorder_has_not_yet_written_does_not_hide_the_rank_that_stopped(tmp_path):
    # rank 1 completed #6 (its agree) and stopped in host code, but Gloo's recorder still holds #6 open
    # in its dump; rank 0 went on into #7 and #8: the hang is #7, which rank 1 never joined
    done = [_entry(s) for s in range(1, 6)]
    _dump(tmp_path, 0, done + [_entry(6), _entry(7, size=1000, retired=False), _entry(8, retired=False)], 8, 6)
    _dump(tmp_path, 1, done + [_entry(6, retired=False)], 6, 5)
    g = hang.stuck(hang.analyse(tmp_path, 2))
    assert (g["seq"], g["never_joined"], g["waiting"], g["input_sizes"]) == (7, [1], [0], [[1000]])


def test_a_desync_and_a_missing_dump_are_said_as_such(tmp_path):
    done = [_entry(s) for s in range(1, 4)]
    _dump(tmp_path, 0, done + [_entry(4, retired=False)], 4, 3)
    _dump(tmp_path, 1, done + [_entry(4, op="gloo:broadcast", retired=False)], 4, 3)
    a = hang.analyse(tmp_path, 3)
    msg = hang.hang_message(a)
    assert "ranks disagree on collective #4" in msg and "gloo:broadcast" in msg
    assert a["missing_dumps"] == [2] and msg.endswith("no Flight Recorder dump from rank 2")


def test_an_nccl_job_reads_both_recorders_and_names_the_nccl_collective(tmp_path):
    """torch keeps NCCL's recorder apart from the CPU one Gloo records into: an NCCL job's rank_<r>
    is NCCL's, its Gloo bookkeeping group's is cpu_trace_<r> (distbench.launch.fr_watch)."""
    nccl = [_entry(s, op="nccl:all_reduce") for s in range(1, 5)]
    _dump(tmp_path, 0, nccl + [_entry(5, op="nccl:all_reduce", retired=False)], 5, 4)
    _dump(tmp_path, 1, nccl, 4, 4)
    ctrl = [_entry(s, pg=("1", "ctrl")) for s in range(1, 3)]
    for r in range(2):  # the bookkeeping group: rank 0 waits in its vote too, but rank 1 finished it
        _dump(tmp_path, r, ctrl + ([_entry(3, pg=("1", "ctrl"), retired=False)] if r == 0 else []), 3 - r, 2,
              prefix=hang.CPU_PREFIX)
    a = hang.analyse(tmp_path, 2)
    assert [(g["recorder"], g["op"], g["never_joined"]) for g in a["groups"]] == [
        ("job", "nccl:all_reduce", [1]), ("cpu", "gloo:all_reduce", [1])]
    assert hang.hang_message(a).startswith("rank 1 never joined collective #5 (nccl:all_reduce")


def test_ranks_that_all_finished_name_nothing(tmp_path):
    done = [_entry(s) for s in range(1, 4)]
    for r in range(3):
        _dump(tmp_path, r, done, 3, 3)
    assert hang.hang_message(hang.analyse(tmp_path, 3)) is None


def test_every_job_has_the_flight_recorder_unless_switched_off():
    env = job_environment({}, {}, base={"NCCL_NVLS_ENABLE": "0"})
    assert env["TORCH_FR_BUFFER_SIZE"] == str(hang.BUFFER_ENTRIES) and env["NCCL_NVLS_ENABLE"] == "0"
    off = job_environment({}, {}, base={hang.FLIGHT_RECORDER_ENV: "0"})
    assert "TORCH_FR_BUFFER_SIZE" not in off
    assert job_environment({}, {}, base={"TORCH_FR_BUFFER_SIZE": "64"})["TORCH_FR_BUFFER_SIZE"] == "64"
    # the comm family's default is off (5-20 us of host time per eager collective, measured on 2x H200);
    # the launcher's DISTBENCH_FLIGHT_RECORDER=1 turns it on there too
    comm = job_environment({}, {}, base={}, flight_recorder=False)
    assert comm[hang.FLIGHT_RECORDER_ENV] == "0" and "TORCH_FR_BUFFER_SIZE" not in comm
    forced = job_environment({}, {}, base={hang.FLIGHT_RECORDER_ENV: "1"}, flight_recorder=False)
    assert forced["TORCH_FR_BUFFER_SIZE"] == str(hang.BUFFER_ENTRIES)


def test_the_report_names_the_hung_rank_and_fails_the_verdict(tmp_path):
    place = tmp_path / "results" / "run" / "comm" / "gloo" / "float32" / "ws2" / "default" / "placement.json"
    place.parent.mkdir(parents=True)
    group = {"process_group": "0", "name": "default_pg", "seq": 16, "op": "gloo:all_reduce", "input_sizes": [[256]],
             "dtypes": ["Float"], "never_joined": [1], "waiting": [0], "called_from": ["harness.py:208 in measure"]}
    place.write_text(json.dumps({"ranks": [], "hang": {"message": "hung: rank 1 never joined collective #16", "group": group,
                                                        "stacks": {"1": {"python": "File harness.py, line 204 in measure"}}}}))
    ctx = build(ReportInputs(placements=[place]))
    row = ctx["table"]["rows"][0]
    assert row[1] == "1" and row[4] == "16" and row[5] == "gloo:all_reduce"
    assert "line 204 in measure" in ctx["jobs"][0]["stacks"][0]["python"]
    (h,) = headlines(ReportInputs(placements=[place]))
    assert h.verdict == "failing" and "rank 1" in h.headline and h.headline.startswith("comm/gloo/float32/ws2/default:")
    assert build(ReportInputs(placements=[])) is None


# ------------------------------------------------------------------- the real workflow
HANG = {
    "backends": ["gloo"], "world_sizes": [2],
    # 25 s: the ranks' start and the 8 B point must fit before the limit on a busy 2-core host
    "comm": {"ops": ["all_reduce"], "sizes": ["8", "1KiB"], "job_timeout_s": 25,
             "gloo": {"max_bytes": "1MiB", "warmup": 1, "iters": 2, "trials": 2}},
    "training": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False},
}


@pytest.mark.e2e
def test_a_rank_that_skips_a_collective_is_named_in_the_csv_and_the_report(workflow_dir):
    from tests.launch.test_interrupts import _cmdline, _no_job_processes_left

    (workflow_dir / "hang.yaml").write_text(yaml.safe_dump(HANG))
    run = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "hang.yaml"]
    # rank 1 skips the all_reduce of the 1 KiB point; the comm family's recorder is off by default
    # (its per-call host cost), on here as a user hunting a hang would set it
    env = {"DISTBENCH_TEST_HANG_RANK": "1:1", "DISTBENCH_FLIGHT_RECORDER": "1"}
    out = subprocess.run(run, cwd=workflow_dir, capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    left = _no_job_processes_left(workflow_dir, within_s=10)
    assert not left, [(p, _cmdline(p)) for p in left]  # nothing orphaned

    job_dir = workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default"
    csv = (job_dir / "comm.csv").read_text().splitlines()
    ok = [ln for ln in csv if ",8,8," in ln]
    hung = [ln for ln in csv if ",1024,1024," in ln]
    assert ok and all(ln.endswith(",ok,") for ln in ok)  # the finished point is kept
    assert hung and all(",hung," in ln for ln in hung)
    # the Flight Recorder's collective follows; which one it names depends on when Gloo's CPU recorder
    # marks a collective completed (under load it can lag), so only that it names one is asserted
    assert re.search(r"; Flight Recorder: .*collective #\d+ \(gloo:all_reduce", hung[0]), hung[0]
    analysis = json.loads((job_dir / "comm.hang.json").read_text())
    assert analysis["culprits"] == [1] and analysis["dumps"] == [0, 1]

    report = (workflow_dir / "report/report.md").read_text()
    assert "## Hung jobs" in report and "harness.py" in report  # the stuck rank's stack
    verdict = report.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"rank 1 stopped responding in gloo:all_reduce #\d+ \| \*\*failing\*\*", verdict), verdict
    # the launcher's own reading leads: rank 1's process runs but is behind (it waits in host code)
    assert "rank 1 stopped responding (its process runs, but it is behind the others)" in hung[0]

    # cached as today's failed jobs are: its finished point kept, not rerun
    again = subprocess.run([*run, "-n"], cwd=workflow_dir, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "comm_job" not in again.stdout + again.stderr, again.stdout[-2000:]


def test_a_collective_past_the_group_timeout_has_every_rank_dump_at_once(tmp_path, monkeypatch):
    """op_timeout_s (300 s) fires long before job_timeout_s (1800 s): the rank whose collective timed
    out pulls the same trigger the launcher pulls at the job's limit, so the dumps show where the
    ranks parted, not what happened after; any other error leaves the ranks alone."""
    from distbench.launch import fr_watch

    monkeypatch.setenv(hang.DUMP_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(hang.FLIGHT_RECORDER_ENV, "1")
    assert not fr_watch.dump_on_timeout(RuntimeError("CUDA error: an illegal memory access"), 2, wait_s=0.1)
    assert not (tmp_path / hang.TRIGGER).exists()
    gloo = RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation")
    (tmp_path / f"{hang.DUMP_PREFIX}0").write_bytes(b"x")
    (tmp_path / f"{hang.DUMP_PREFIX}1").write_bytes(b"x")
    assert fr_watch.dump_on_timeout(gloo, 2, wait_s=5)
    assert (tmp_path / hang.TRIGGER).exists()
    monkeypatch.setenv(hang.FLIGHT_RECORDER_ENV, "0")  # recorder off: nothing to ask for
    (tmp_path / hang.TRIGGER).unlink()
    assert not fr_watch.dump_on_timeout(gloo, 2, wait_s=0.1) and not (tmp_path / hang.TRIGGER).exists()


@pytest.mark.e2e
def test_a_hang_is_named_when_the_group_times_out_before_the_jobs_limit(workflow_dir):
    """The defaults put op_timeout_s (300 s) far below job_timeout_s (1800 s): the waiting rank's
    collective times out first and the job ends on that error. The rank pulls the dump trigger
    before it fails, so the job is `hung` with the rank named, at the group's timeout."""
    cfg = {**HANG, "comm": {**HANG["comm"], "job_timeout_s": 120}, "op_timeout_s": 10, "health": {"enabled": False}}
    (workflow_dir / "hang.yaml").write_text(yaml.safe_dump(cfg))
    job_dir = workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default"
    target = str(job_dir.relative_to(workflow_dir) / "comm.csv")
    run = [sys.executable, "-m", "snakemake", "--cores", "1", target, "--configfile", "hang.yaml"]
    env = {"DISTBENCH_TEST_HANG_RANK": "1:1", "DISTBENCH_FLIGHT_RECORDER": "1"}
    t0 = __import__("time").monotonic()
    out = subprocess.run(run, cwd=workflow_dir, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, **env})
    assert out.returncode == 0, out.stderr[-3000:]
    assert __import__("time").monotonic() - t0 < 110  # well before the job's 120 s limit
    hung = [ln for ln in (job_dir / "comm.csv").read_text().splitlines() if ",1024,1024," in ln]
    assert hung and all(",hung," in ln for ln in hung), hung
    assert re.search(r"rank 1 never joined collective #\d+ \(gloo:all_reduce", hung[0])


def test_a_hostile_stack_key_never_becomes_markup_in_either_report(tmp_path):
    """Issue 37: a hang-stack key in placement.json such as `<img src=x onerror=alert(1)>` reached
    report.md raw (Markdown viewers render HTML). Every expression of a Markdown template is escaped
    now (render._md_finalize), fenced text shown as is, and the HTML is escaped as before."""
    from distbench.report.render import render_report

    evil = "<img src=x onerror=alert(1)>"
    place = tmp_path / "results" / "run" / "comm" / "gloo" / "float32" / "ws2" / "default" / "placement.json"
    place.parent.mkdir(parents=True)
    place.write_text(json.dumps({"ranks": [], "hang": {
        "message": f"hung: rank {evil} stopped", "stacks": {evil: {"python": "if a < b and c > d: wait() & more"}}}}))
    from synthetic import build_summary, make_synthetic

    data = make_synthetic(tmp_path, build_summary(backends=("gloo",), oom=False))
    md, html = tmp_path / "report.md", tmp_path / "report.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, tmp_path / "missing.json", [], {},
                               placements=[place]), md, html)
    text = md.read_text()
    assert "Rank &lt;img src=x onerror=alert(1)&gt;:" in text and "<img src=x" not in text
    assert "if a < b and c > d: wait() & more" in text  # inside its code fence: as written
    assert "onerror=alert(1)" in html.read_text() and "<img src=x" not in html.read_text()
