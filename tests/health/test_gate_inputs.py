"""The gate's hostile inputs (issue 47), in process and without a real collective: flags that cannot be
used are usage errors (exit 2) before anything is read; a node that lost its GPUs fails; the host lock
is held (or refused) around the readings; only this run's figures reach gate.csv and the .prom file;
a baseline that cannot be compared warns, saying why, and is never reported as judged.

The judged cases run distbench.gate.cli.main in this process with its readings process replaced by
one that writes readings.json as distbench.gate.check would (FakeBudget): the flags, the judging and
the outputs are the real code; the real readings (health, Gloo collective) are tests/health/
test_gate_workflow.py's."""

import json
import os
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from distbench.gate import check, cli, prom, rules
from distbench.gate.inputs import config_check, min_budget_s
from distbench.health.readings import read_health
from distbench.launch.hostlock import HostLock, hold
from tests.fake_nvml import fake_pynvml, healthy_state

GiB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"
NVLINK4 = {"peak_gbps": 450.0, "link": "NVLink4 x18"}
HEADER = "backend,world_size,op,size_bytes,timing,nccl_env,inplace,trial,time_us,busbw_gbps,status,message"
MIX = "NCCL_GRAPH_MIXING_SUPPORT=0"


def comm_rows(busbw=360.0, lat=5.2, ws=2, status="ok", message="", trials=3, bw_values=None, t_values=None):
    """A gate comm CSV's rows: all_reduce at 1 GiB (events) and 8 B (graph), `trials` each."""
    bws = bw_values or [busbw * (1 + 0.002 * (t - 1)) for t in range(trials)]
    ts = t_values or [lat * (1 + 0.01 * (t - 1)) for t in range(trials)]
    rows = [f"nccl,{ws},all_reduce,{GiB},events,{MIX},False,{t},{2 * GiB / (b * 1e3) if b == b and b else 'nan'},"
            f"{b},{status},{message}" for t, b in enumerate(bws)]
    rows += [f"nccl,{ws},all_reduce,8,graph,{MIX},False,{t},{v},0.0,ok," for t, v in enumerate(ts)]
    return rows


def write_run(d: Path, rows, gpu_name=H100) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "gate_comm.csv").write_text("\n".join([HEADER, *rows]) + "\n")
    if gpu_name:
        (d / "readings.json").write_text(json.dumps({"gpu_name": gpu_name}))
    return d


def this_run(tmp_path, **kw) -> dict:
    """Readings of a healthy 2x H100 node whose collective ran (no health rows: not what is tested)."""
    cur = write_run(tmp_path / "now", comm_rows(**kw))
    return {"comm_csv": str(cur / "gate_comm.csv"), "comm_status": "ok", "backend": "nccl", "gpu_name": H100,
            "peak": NVLINK4, "nvls": False, "gpus": 2, "gpus_source": "detected 2 via /proc/driver/nvidia"}


# ------------------------------------------------------------------------------ usage errors (exit 2)
@pytest.fixture
def nothing_runs(monkeypatch):
    """A usage error must come before any reading and before any drain."""
    def refuse(*_a, **_k):
        raise AssertionError("the gate started its readings or drained after a usage error")

    monkeypatch.setattr(cli, "Budget", refuse)
    monkeypatch.setattr(cli.slurm, "drain", refuse)


USAGE = [  # (name, argv, exit code, words the message must hold)
    ("budget_nan", ["--budget-s", "nan"], 2, ["--budget-s nan", "not a finite number", ">= 25"]),
    ("budget_inf", ["--budget-s", "inf"], 2, ["--budget-s inf", "not a finite number"]),
    ("budget_overflow", ["--budget-s", "1e309"], 2, ["--budget-s inf", "not a finite number"]),
    ("budget_below_minimum_with_drain", ["--budget-s", "0.5", "--drain"], 2,
     ["--budget-s 0.5", "too small", ">= 25", "--load-s 3", "12 s kept for its teardown", "5 s for the collective"]),
    ("budget_minimum_follows_load", ["--budget-s", "21", "--load-s", "0"], 2, ["--budget-s 21", ">= 22"]),
    ("budget_negative", ["--budget-s", "-60"], 2, ["--budget-s -60", "too small"]),
    ("load_nan", ["--load-s", "nan"], 2, ["--load-s nan", "not a finite number", ">= 0"]),
    ("load_negative", ["--load-s", "-5"], 2, ["--load-s -5", "below 0"]),
    ("load_inf", ["--load-s", "inf"], 2, ["--load-s inf", "not a finite number"]),
    ("gpus_negative", ["--gpus", "-1"], 2, ["--gpus -1", "negative", "0 or none: those detected"]),
    ("gpus_not_a_count", ["--gpus", "eight"], 2, ["--gpus", "invalid int value"]),
    ("prom_a_file", ["--prom", "{file}"], 2, ["--prom", "is not a directory", "allowed: a directory"]),
    ("prom_dangling_link", ["--prom", "{link}"], 2, ["--prom", "dangling symbolic link"]),
    ("prom_unwritable", ["--prom", "/proc"], 2, ["--prom '/proc'", "not writable by this user"]),
    ("prom_cannot_be_made", ["--prom", "/proc/distbench-gate"], 2, ["cannot be made: /proc is not writable"]),
    ("prom_under_a_file", ["--prom", "{file}/sub"], 2, ["cannot be made", "is not a directory"]),
    ("out_a_file", ["--out", "{file}"], 2, ["--out", "is not a directory"]),
    ("csv_a_directory", ["--csv", "{dir}"], 2, ["--csv", "is a directory"]),
    ("node_newline", ["--node", "a\nb"], 2, ["--node 'a\\nb'", "control character", "split the verdict line"]),
    ("node_line_separator", ["--node", "a\u2028b"], 2, ["--node 'a\\u2028b'", "split the verdict line"]),
    ("node_space", ["--node", "a b"], 2, ["--node 'a b'", "whitespace"]),
    ("node_empty", ["--node", ""], 2, ["--node ''", "is empty"]),
    ("node_not_utf8", ["--node", os.fsdecode(b"n\xff")], 2, ["--node 'n\\udcff'", "not valid UTF-8"]),
    ("every_problem_at_once", ["--budget-s", "nan", "--gpus", "-2"], 2, ["--budget-s nan", "--gpus -2"]),
]


@pytest.mark.parametrize("argv, code, words", [u[1:] for u in USAGE], ids=[u[0] for u in USAGE])
def test_a_flag_that_cannot_be_used_is_a_usage_error_before_any_reading(argv, code, words, tmp_path, capsys,
                                                                        nothing_runs):
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "missing")
    argv = [a.format(file=tmp_path / "file", link=tmp_path / "link", dir=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == code, err
    for w in words:
        assert w in err, (w, err)


def test_a_node_name_from_the_environment_is_checked_too(monkeypatch, capsys, nothing_runs):
    monkeypatch.delenv("DISTBENCH_NODE_NAME", raising=False)
    monkeypatch.setenv("SLURMD_NODENAME", "node1\nFAIL")
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2 and "SLURMD_NODENAME 'node1\\nFAIL'" in capsys.readouterr().err


@pytest.mark.parametrize("var, value, words", [
    ("DISTBENCH_HOST_LOCK_MODE", "maybe", ["DISTBENCH_HOST_LOCK_MODE='maybe'", "allowed wait, fail"]),
    ("DISTBENCH_HOST_LOCK", "{dir}", ["is a directory", "set DISTBENCH_HOST_LOCK to another path"]),
], ids=["lock_mode", "lock_file_a_directory"])
def test_a_host_lock_setting_that_cannot_serve_is_a_usage_error(var, value, words, tmp_path, monkeypatch, capsys,
                                                               nothing_runs):
    monkeypatch.setenv(var, value.format(dir=tmp_path))
    with pytest.raises(SystemExit) as e:
        cli.main(["--node", "n1"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and all(w in err for w in words), err


def test_the_least_budget_leaves_the_collective_its_time():
    for load in (0.0, 3.0, 5.0, 30.0):
        floor = min_budget_s(load)
        left = floor - cli.reserve_s(floor) - load  # what the readings have once the load is done
        assert left >= check.TEARDOWN_S + check.MIN_COLLECTIVE_S
        assert floor - 1 - cli.reserve_s(floor - 1) - load < check.TEARDOWN_S + check.MIN_COLLECTIVE_S + 2


# ---------------------------------------------------------------------------- judged, in process
class FakeBudget:
    """distbench.gate.supervise.Budget whose readings process writes `READINGS` (or raises)."""
    READINGS: dict = {}

    def __init__(self, limit_s):
        self.limit_s = limit_s

    def run(self, cmd, env, log_path):
        if isinstance(self.READINGS, Exception):
            raise self.READINGS
        out = Path(cmd[cmd.index("--out-dir") + 1])
        (out / "readings.json").write_text(json.dumps(self.READINGS))
        Path(log_path).write_text("")
        return "done", 0


def no_nvml(monkeypatch, expected):
    """The health rows of a host whose NVML cannot start, as the readings process records them."""
    class NVMLError(Exception):
        pass

    def init():
        raise NVMLError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", type(sys)("pynvml"))
    sys.modules["pynvml"].nvmlInit = init
    from dataclasses import asdict

    return [asdict(r) for r in read_health(expected, 0.0, host="n1")]


def nvml_with(monkeypatch, count, expected):
    from dataclasses import asdict

    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(healthy_state(count)))
    return [asdict(r) for r in read_health(expected, 0.0, host="n1")]


def _skipped(health):
    return {"health": health, "comm_status": "skipped: one GPU, no collective between GPUs to check",
            "backend": "nccl", "gpus": 0, "gpus_source": "detected 0 via no NVIDIA driver on this host"}


JUDGED = [  # (name, argv, readings maker, exit code, words of the one line)
    ("lost_gpus_no_nvml", ["--gpus", "8"], lambda mp: _skipped(no_nvml(mp, 8)), 1,
     ["FAIL n1: node gpu_count: 8 GPU(s) expected (--gpus 8), none readable: NVML init failed: NVML Shared "
      "Library Not Found; detected 0 via no NVIDIA driver"]),
    ("a_thousand_gpus_no_nvml", ["--gpus", "1000"], lambda mp: _skipped(no_nvml(mp, 1000)), 1,
     ["FAIL n1: node gpu_count: 1000 GPU(s) expected"]),
    ("fewer_gpus_than_asked", ["--gpus", "8"], lambda mp: _skipped(nvml_with(mp, 2, 8)), 1,
     ["FAIL n1: node gpu_count: 6 GPU(s) of the plan's 8 missing"]),
    ("cpu_host_without_gpus_flag", [], lambda mp: _skipped(no_nvml(mp, None)), 0,
     ["PASS n1: health not read here (NVML init failed"]),
]


@pytest.mark.parametrize("argv, make, code, words", [j[1:] for j in JUDGED], ids=[j[0] for j in JUDGED])
def test_judged_in_process(argv, make, code, words, tmp_path, monkeypatch, capsys):
    FakeBudget.READINGS = make(monkeypatch)
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    got = cli.main(["--node", "n1", "--out", str(tmp_path / "out"), *argv])
    line = capsys.readouterr().out
    assert got == code, line
    for w in words:
        assert w in line, (w, line)


def test_a_reused_out_never_reports_an_earlier_runs_figures(tmp_path, monkeypatch, capsys):
    """This run's collective did not run (one GPU): the earlier gate_comm.csv in --out is removed
    before it starts, and neither gate.csv nor the .prom file holds a figure."""
    out = write_run(tmp_path / "out", comm_rows(busbw=123.0))
    (out / "gate.csv").write_text("old\n")
    FakeBudget.READINGS = _skipped([])
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    assert cli.main(["--node", "n1", "--out", str(out), "--prom", str(tmp_path / "prom")]) == 0
    assert not (out / "gate_comm.csv").exists()
    table = pd.read_csv(out / "gate.csv")
    assert table.query("check == 'collective'")["value"].isna().all(), table
    assert "123" not in (out / "gate.csv").read_text()
    text = (tmp_path / "prom" / "distbench.prom").read_text()
    assert "distbench_comm_busbw_gbps" not in text and "distbench_comm_latency_us" not in text


def test_the_gates_own_failure_is_exit_3_never_a_fail(tmp_path, monkeypatch, capsys):
    FakeBudget.READINGS = RuntimeError("boom")
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    assert cli.main(["--node", "n1", "--out", str(tmp_path / "out")]) == cli.EXIT_ERROR
    assert capsys.readouterr().out.startswith("distbench gate: ERROR n1: the gate itself failed, the node was "
                                              "not judged: RuntimeError: boom")
    # a verdict it could not write: said, exit 3 on a pass (a FAIL still exits 1)
    FakeBudget.READINGS = _skipped([])

    def full_disk(*_a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(prom, "write", full_disk)
    assert cli.main(["--node", "n1", "--prom", str(tmp_path / "prom")]) == cli.EXIT_ERROR
    said = capsys.readouterr()
    assert said.out.startswith("distbench gate: PASS n1") and "No space left on device" in said.err


# ----------------------------------------------------------------------------------------- host lock
def test_a_busy_host_under_mode_fail_is_read_nothing_and_fails_naming_the_holder(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    with hold("comm job gloo-2", tmp_path / "bench"):
        readings = check.take(tmp_path / "out", None, 0.0, time.monotonic() + 60, "n1", "fail")
    assert "health" not in readings and "comm_csv" not in readings
    state, why, _, _ = cli.judge(readings, [], "done", 0, 60)
    assert state == rules.FAIL
    assert why.startswith("host lock: not read: the host is busy: held by "), why
    assert "job comm job gloo-2" in why and "host_lock=fail refuses to wait" in why


def test_a_busy_host_is_waited_for_named_and_recorded(tmp_path, monkeypatch):
    """Mode wait: the step names the holder while the gate waits; once it is released the readings run
    with the lock held, and the comm job's placement file records the lock and the wait."""
    monkeypatch.setenv("DISTBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    out = tmp_path / "out"
    out.mkdir()
    held_during = []

    def readings_stub(readings, out_dir, *_a):
        # the health load's own hold (distbench.health.load.sample) is the gate's, not a wait for itself
        with hold("health load (3 s)", mode="fail") as inner:
            held_during.append(inner.job)
        (out_dir / "gate_placement.json").write_text(json.dumps({"provenance": {"outcome": "ok"}}))
        readings["comm_status"] = "ok"

    monkeypatch.setattr(check, "_readings", readings_stub)
    holder = HostLock("comm job nccl-8", tmp_path / "bench").acquire()
    waiting = threading.Event()

    def release_once_waited_for():
        while not waiting.is_set():
            try:
                step = json.loads((out / "readings.json").read_text()).get("step", "")
            except (OSError, ValueError):
                step = ""
            if step.startswith("waiting for the host lock"):
                waiting.set()
                holder.release()
            time.sleep(0.05)

    t = threading.Thread(target=release_once_waited_for, daemon=True)
    t.start()
    readings = check.take(out, None, 0.0, time.monotonic() + 600, "n1", "wait")
    t.join(timeout=5)
    assert waiting.is_set()
    steps = [s["step"] for s in readings["steps"]]
    assert any("held by " in s and "job comm job nccl-8" in s for s in steps), steps
    lock = json.loads((out / "gate_placement.json").read_text())["provenance"]["host_lock"]
    assert lock["path"] == str(tmp_path / "host.lock") and lock["mode"] == "wait"
    assert any("comm job nccl-8" in w for w in lock["waited_for"]), lock
    assert readings["host_lock"]["acquired"] and held_during == ["node gate (n1)"]


# --------------------------------------------------------------------------------------------- baseline
def _bad_csv(text):
    return lambda d: (d.mkdir(parents=True), (d / "gate_comm.csv").write_text(text))


UNCOMPARABLE = [  # (name, make the baseline run's directory, words of the warning)
    ("header_only", _bad_csv(HEADER + "\n"), ["no measured point"]),
    ("truncated", _bad_csv(HEADER + "\nnccl,2,all_re\n"), ["1 truncated row(s) left out", "no measured point"]),
    ("nan_figures", lambda d: write_run(d, comm_rows(bw_values=[float("nan")] * 3, t_values=[float("nan")] * 3)),
     ["no finite positive figure"]),
    ("negative_figures", lambda d: write_run(d, comm_rows(bw_values=[-360.0] * 3, t_values=[-5.0] * 3)),
     ["no finite positive figure"]),
    ("zero_figures", lambda d: write_run(d, comm_rows(bw_values=[0.0] * 3, t_values=[0.0] * 3)),
     ["no finite positive figure"]),
    ("inf_figures", lambda d: write_run(d, comm_rows(bw_values=[float("inf")] * 3, t_values=[float("inf")] * 3)),
     ["no finite positive figure"]),
    ("another_world_size", lambda d: write_run(d, comm_rows(ws=8)),
     ["the baseline has no such point", "the baseline has nccl 8 ranks; this run nccl 2 ranks"]),
    ("another_node_type", lambda d: write_run(d, comm_rows(), gpu_name="NVIDIA A100-SXM4-80GB"),
     ["another node type: its GPUs are NVIDIA A100-SXM4-80GB, this node's " + H100]),
    ("not_a_comm_table", _bad_csv("root:x:0:0:root:/root:/bin/bash\n"), ["not a readable comm table"]),
    ("missing", lambda d: None, ["no gate_comm.csv"]),
]


@pytest.mark.parametrize("make, words", [u[1:] for u in UNCOMPARABLE], ids=[u[0] for u in UNCOMPARABLE])
def test_a_baseline_that_cannot_be_compared_warns_saying_why(make, words, tmp_path):
    make(tmp_path / "base")
    state, why, checks, _ = cli.judge(this_run(tmp_path), [str(tmp_path / "base")], "done", 0, 60)
    assert state == rules.WARN, why
    assert "cannot be compared, not judged against it" in why
    text = why + " ".join(c.reason for c in checks)
    for w in words:
        assert w in text, (w, text)
    assert not [c for c in checks if c.check == "baseline" and c.value]  # nothing compared
    assert "against the baseline" not in text


def test_one_failed_point_among_three_runs_leaves_out_that_run_only(tmp_path):
    runs = [write_run(tmp_path / "r0", comm_rows(busbw=358)), write_run(tmp_path / "r1", comm_rows(busbw=362)),
            write_run(tmp_path / "r2", comm_rows(status="failed", message="rank 1 exited with code 1"))]
    state, why, checks, _ = cli.judge(this_run(tmp_path, busbw=360), [str(r) for r in runs], "done", 0, 60)
    assert state == rules.PASS, why
    big = next(c for c in checks if c.check == "baseline" and c.subject.endswith("busbw_gbps"))
    assert big.state == rules.PASS and "its 2 runs'" in big.reason, big
    assert "against the baseline" in why and "r2/gate_comm.csv: all_reduce 1 GiB" in why and "failed" in why


def test_an_inf_trial_is_left_out_never_nan_percent(tmp_path):
    base = write_run(tmp_path / "r0", comm_rows(bw_values=[360.0, float("inf"), 361.0]))
    state, why, checks, _ = cli.judge(this_run(tmp_path, busbw=300), [str(base)], "done", 0, 60)
    big = next(c for c in checks if c.check == "baseline" and c.subject.endswith("busbw_gbps"))
    assert "nan" not in big.reason and "inf" not in big.reason, big
    assert big.state == rules.FAIL and "16.8% worse than the baseline's 360 GB/s" in big.reason, big


def test_a_collective_that_did_not_run_compares_nothing_and_says_so(tmp_path):
    base = write_run(tmp_path / "r0", comm_rows())
    state, why, checks, points = cli.judge(_skipped([]), [str(base)], "done", 0, 60)
    assert state == rules.PASS and points == [] and "against the baseline" not in why
    assert not [c for c in checks if c.check == "baseline" and c.state == rules.WARN]


# ------------------------------------------------------------------------------------------ config
def test_the_config_check_reads_the_baselines_and_the_prometheus_dir(tmp_path):
    good = write_run(tmp_path / "good", comm_rows())
    (tmp_path / "file").write_text("")
    assert config_check({"gate_baseline": [str(good)], "prometheus_dir": str(tmp_path / "prom")}) == []
    problems = config_check({"gate_baseline": [str(good), "/etc/passwd"], "prometheus_dir": str(tmp_path / "file")})
    assert len(problems) == 2, problems
    assert problems[0].startswith("config key gate_baseline[1]: '/etc/passwd': baseline /etc/passwd: not a "
                                  "readable comm table"), problems
    assert problems[1] == (f"config key prometheus_dir: {str(tmp_path / 'file')!r} is not a directory (allowed: "
                           "a directory this user can write, or make; empty: none)")
    assert not (tmp_path / "prom").exists()  # checked, not made


# -------------------------------------------------------------------------------------- prometheus
def test_a_full_run_publishes_only_the_tables_this_invocation_wrote(tmp_path):
    res = tmp_path / "res"
    (res / "health").mkdir(parents=True)
    (res / "tables").mkdir()
    (res / "health" / "gate.csv").write_text("host,check,subject,value,expected,state,reason\n"
                                             "n1,verdict,gate,FAIL,,FAIL,an old failure\n")
    (res / "tables" / "comm_summary.csv").write_text(
        "op,size_bytes,backend,world_size,timing,busbw_gbps_median,time_us_median,status\n"
        "all_reduce,1073741824,nccl,2,events,331.5,6477.1,ok\n")
    started = time.time() - 60
    old = started - 3600
    os.utime(res / "health" / "gate.csv", (old, old))  # written by an earlier invocation
    said = prom.write_run_metrics(tmp_path / "prom", res, "n1", since=started)
    text = (tmp_path / "prom" / "distbench.prom").read_text()
    assert said.startswith("distbench: metrics written to ") and "distbench_comm_busbw_gbps" in text
    assert "distbench_gate_status" not in text  # the old FAIL is not republished
    os.utime(res / "health" / "gate.csv")  # this invocation's gate
    prom.write_run_metrics(tmp_path / "prom", res, "n1", since=started)
    assert 'distbench_gate_status{node="n1"} 2' in (tmp_path / "prom" / "distbench.prom").read_text()
    # nothing of the run written by this invocation: the file is left as it is
    for t in ("health/gate.csv", "tables/comm_summary.csv"):
        os.utime(res / t, (old, old))
    before = (tmp_path / "prom" / "distbench.prom").read_text()
    said = prom.write_run_metrics(tmp_path / "prom", res, "n1", since=started)
    assert "left as they are" in said and (tmp_path / "prom" / "distbench.prom").read_text() == before
    assert prom.process_started_at() <= time.time()
