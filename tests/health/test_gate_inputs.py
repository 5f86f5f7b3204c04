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
    text = (tmp_path / "prom" / prom.GATE_FILE).read_text()
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
        "op,size_bytes,backend,world_size,timing,dtype,busbw_gbps_median,time_us_median,status\n"
        "all_reduce,1073741824,nccl,2,events,float32,331.5,6477.1,ok\n")
    started = time.time() - 60
    old = started - 3600
    os.utime(res / "health" / "gate.csv", (old, old))  # written by an earlier invocation
    said = prom.write_run_metrics(tmp_path / "prom", res, "n1", since=started)
    text = (tmp_path / "prom" / prom.RUN_FILE).read_text()
    assert said.startswith("distbench: metrics written to ") and "distbench_comm_busbw_gbps" in text
    assert "distbench_gate_status" not in text  # the old FAIL is not republished
    os.utime(res / "health" / "gate.csv")  # this invocation's gate
    prom.write_run_metrics(tmp_path / "prom", res, "n1", since=started)
    # nor this invocation's: the gate's verdict is its own file's (prom.GATE_FILE), never the run's
    assert "distbench_gate_status" not in (tmp_path / "prom" / prom.RUN_FILE).read_text()
    # nothing of the run written by this invocation: the file is left as it is
    for t in ("health/gate.csv", "tables/comm_summary.csv"):
        os.utime(res / t, (old, old))
    before = (tmp_path / "prom" / prom.RUN_FILE).read_text()
    said = prom.write_run_metrics(tmp_path / "prom", res, "n1", since=started)
    assert "left as they are" in said and (tmp_path / "prom" / prom.RUN_FILE).read_text() == before
    assert prom.process_started_at() <= time.time()


# ------------------------------------------------------------------ issue 55: only a judgement drains
def test_a_budget_past_what_the_timeouts_downstream_hold_is_a_usage_error(capsys, nothing_runs):
    """--budget-s 1e10 (or 1e300) overflowed the comm job's int64-nanosecond deadlines and FAILed a healthy
    node; it is refused with exit 2, naming the largest allowed, and the largest itself is accepted."""
    from distbench.gate.inputs import MAX_BUDGET_S

    for huge in ("1e10", "1e300", str(MAX_BUDGET_S * 1.001)):
        with pytest.raises(SystemExit) as e:
            cli.main(["--node", "n1", "--budget-s", huge, "--drain"])
        err = capsys.readouterr().err
        assert e.value.code == cli.EXIT_USAGE, err
        assert f"--budget-s {float(huge):g}: too large" in err and f"to {MAX_BUDGET_S:g}" in err, err
    assert cli.parse_args(["--node", "n1", "--budget-s", f"{MAX_BUDGET_S!r}"]).budget_s == MAX_BUDGET_S
    assert cli.parse_args(["--node", "n1", "--budget-s", "25"]).budget_s == 25  # the least, still accepted
    # the largest budget's time limits stay clear of int64 nanoseconds (2**63 ns: 9.2e9 s)
    params = check.comm_params("nccl", MAX_BUDGET_S)
    assert max(params["op_timeout_s"], params["job_timeout_s"]) * 1e9 * 5 < 2 ** 63
    with pytest.raises(SystemExit) as e:
        cli.main(["--node", "n1", "--load-s", "2e9"])
    assert e.value.code == 2 and "--load-s 2e+09: too large" in capsys.readouterr().err


UNREADABLE_BASELINES = [u for u in UNCOMPARABLE if u[0] not in ("another_world_size", "another_node_type")]


@pytest.mark.parametrize("make, words", [u[1:] for u in UNREADABLE_BASELINES], ids=[u[0] for u in UNREADABLE_BASELINES])
def test_a_baseline_holding_no_gate_output_is_a_usage_error(make, words, tmp_path, capsys, nothing_runs):
    """As the config check refuses it in gate_baseline: exit 2 before anything is read, never a WARN at
    every gate that is never compared (`--baseline /nonexistent` gave WARN and exit 0)."""
    good = write_run(tmp_path / "good", comm_rows())
    make(tmp_path / "base")
    with pytest.raises(SystemExit) as e:
        cli.main(["--node", "n1", "--drain", "--baseline", str(good), "--baseline", str(tmp_path / "base")])
    err = capsys.readouterr().err
    assert e.value.code == cli.EXIT_USAGE, err
    assert f"--baseline {str(tmp_path / 'base')!r}: " in err and str(good) + "'" not in err, err
    assert words[-1] in err and "allowed: a gate's --out directory" in err, err


def test_a_readable_baseline_of_another_node_type_is_no_usage_error(tmp_path):
    base = write_run(tmp_path / "a100", comm_rows(), gpu_name="NVIDIA A100-SXM4-80GB")
    assert cli.parse_args(["--node", "n1", "--baseline", str(base)]).baseline == [str(base)]


def _no_drain(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("a gate that could not judge drained or resumed the node")

    monkeypatch.setattr(cli.slurm, "drain", refuse)
    monkeypatch.setattr(cli.slurm, "resume", refuse)


def _syslog(monkeypatch) -> list:
    import syslog

    said = []
    monkeypatch.setattr(syslog, "syslog", lambda *a: said.append(a))
    return said


def test_a_busy_host_is_not_judged_exit_3_and_never_drained(tmp_path, monkeypatch, capsys):
    """--host-lock fail with the lock held by another run: nothing was read, so no verdict (it FAILed,
    exit 1, and --drain drained a healthy node)."""
    monkeypatch.setenv("DISTBENCH_HOST_LOCK", str(tmp_path / "host.lock"))
    with hold("comm job gloo-2", tmp_path / "bench"):
        FakeBudget.READINGS = check.take(tmp_path / "taken", None, 0.0, time.monotonic() + 60, "n1", "fail")
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    _no_drain(monkeypatch)
    said = _syslog(monkeypatch)
    got = cli.main(["--node", "n1", "--drain", "--resume", "--host-lock", "fail", "--out", str(tmp_path / "out"),
                    "--prom", str(tmp_path / "prom")])
    line = capsys.readouterr().out
    assert got == cli.EXIT_ERROR, line
    assert line.startswith("distbench gate: ERROR n1: not judged: nothing was read: the host is busy: held by "), line
    assert "job comm job gloo-2" in line
    assert not list((tmp_path / "prom").glob("*.prom"))  # no verdict published
    assert said and "not judged" in said[-1][-1]


def test_a_budget_spent_waiting_for_the_host_lock_is_not_judged(tmp_path, monkeypatch, capsys):
    class WaitedOut(FakeBudget):
        def run(self, cmd, env, log_path):
            super().run(cmd, env, log_path)
            return "over budget", 1

    FakeBudget.READINGS = {"step": "waiting for the host lock /tmp/h.lock, held by /r (pid 7, job comm job)",
                           "steps": []}
    monkeypatch.setattr(cli, "Budget", WaitedOut)
    _no_drain(monkeypatch)
    _syslog(monkeypatch)
    assert cli.main(["--node", "n1", "--drain", "--budget-s", "30"]) == cli.EXIT_ERROR
    line = capsys.readouterr().out
    assert line.startswith("distbench gate: ERROR n1: not judged: nothing was read: over budget (30 s) in step "
                           "'waiting for the host lock /tmp/h.lock, held by /r"), line


def test_a_budget_spent_reading_the_node_still_fails(tmp_path, monkeypatch, capsys):
    """Only the lock's steps are 'nothing read': a health reading that hangs past the budget is the node's."""
    class Hung(FakeBudget):
        def run(self, cmd, env, log_path):
            super().run(cmd, env, log_path)
            return "over budget", 3

    FakeBudget.READINGS = {"step": "health reading", "steps": []}
    monkeypatch.setattr(cli, "Budget", Hung)
    drained = []
    monkeypatch.setattr(cli.slurm, "drain", lambda node, why: drained.append(node) or cli.slurm.Action(True, "drained"))
    assert cli.main(["--node", "n1", "--drain", "--budget-s", "30"]) == cli.EXIT_FAIL
    assert "in step 'health reading'" in capsys.readouterr().out and drained == ["n1"]


def test_a_baseline_gone_by_the_time_it_is_judged_is_not_judged(tmp_path, monkeypatch, capsys):
    base = write_run(tmp_path / "base", comm_rows())

    class RemovesIt(FakeBudget):
        def run(self, cmd, env, log_path):
            (base / "gate_comm.csv").unlink()
            return super().run(cmd, env, log_path)

    FakeBudget.READINGS = this_run(tmp_path)
    monkeypatch.setattr(cli, "Budget", RemovesIt)
    _no_drain(monkeypatch)
    _syslog(monkeypatch)
    assert cli.main(["--node", "n1", "--drain", "--baseline", str(base)]) == cli.EXIT_ERROR
    line = capsys.readouterr().out
    assert line.startswith(f"distbench gate: ERROR n1: not judged: its baseline could not be read when judged: "
                           f"--baseline {str(base)!r}: baseline {base}: no gate_comm.csv"), line


# ------------------------------------------------------------------- issue 55: --out is the gate's own
def _gate_into(out: Path, monkeypatch, readings=None) -> int:
    FakeBudget.READINGS = readings if readings is not None else _skipped([])
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    return cli.main(["--node", "n1", "--out", str(out)])


def test_out_refuses_a_directory_holding_another_runs_results(tmp_path, capsys, nothing_runs):
    """A comm job's directory holds pairs.csv (a name the gate writes too): it was deleted; now refused."""
    job = tmp_path / "comm-job"
    job.mkdir()
    for name, text in (("pairs.csv", "a,b\n1,2\n"), ("comm.csv", HEADER + "\n")):
        (job / name).write_text(text)
    only_pairs = tmp_path / "only-pairs"
    only_pairs.mkdir()
    (only_pairs / "pairs.csv").write_text("a,b\n")
    for d in (job, only_pairs):
        with pytest.raises(SystemExit) as e:
            cli.main(["--node", "n1", "--out", str(d)])
        err = capsys.readouterr().err
        assert e.value.code == cli.EXIT_USAGE, err
        assert f"--out {str(d)!r}: holds files this gate did not write (" in err and "pairs.csv" in err, err
    assert (job / "pairs.csv").read_text() == "a,b\n1,2\n" and (only_pairs / "pairs.csv").exists()


def test_out_keeps_the_gates_list_and_removes_only_what_is_on_it(tmp_path, monkeypatch, capsys):
    from distbench.gate.inputs import OUT_MANIFEST

    out = tmp_path / "out"
    assert _gate_into(out, monkeypatch) == 0
    listed = json.loads((out / OUT_MANIFEST).read_text())["files"]
    assert {"readings.json", "gate.csv", "gate_check.log"} <= set(listed)
    assert set(listed) == {p.name for p in out.iterdir()} - {OUT_MANIFEST}  # exactly what it wrote
    # an earlier gate's own files go (gate_comm.csv of an earlier run, on its list), the list is rewritten
    (out / "gate_comm.csv").write_text(HEADER + "\n")
    from distbench.gate.inputs import record_gate_files

    record_gate_files(out, [*listed, "gate_comm.csv"])
    assert _gate_into(out, monkeypatch) == 0
    assert not (out / "gate_comm.csv").exists()
    assert "gate_comm.csv" not in json.loads((out / OUT_MANIFEST).read_text())["files"]
    # someone else's file there (even under a gate's name, if not on its list) refuses the directory
    (out / "pairs.csv").write_text("theirs\n")
    (out / "notes.txt").write_text("theirs\n")
    with pytest.raises(SystemExit) as e:
        _gate_into(out, monkeypatch)
    assert e.value.code == 2 and "notes.txt, pairs.csv" in capsys.readouterr().err
    assert (out / "pairs.csv").read_text() == "theirs\n" and (out / "notes.txt").exists()


def test_out_removes_nothing_it_did_not_list_even_under_its_names(tmp_path, monkeypatch):
    """The list, not the names, says what is the gate's: a gate_comm.csv put there after it ran stays (and refuses)."""
    from distbench.gate.inputs import clear_earlier_gate, earlier_gate_files

    out = tmp_path / "out"
    assert _gate_into(out, monkeypatch) == 0
    (out / "gate_comm.csv").write_text("theirs\n")
    ours, other = earlier_gate_files(out)
    assert other == ["gate_comm.csv"] and "gate.csv" in ours
    clear_earlier_gate(out)
    assert (out / "gate_comm.csv").read_text() == "theirs\n" and not (out / "gate.csv").exists()


def test_a_gate_killed_mid_way_leaves_its_list(tmp_path, monkeypatch):
    from distbench.gate.inputs import OUT_MANIFEST, out_dir_problem

    class Killed(FakeBudget):
        def run(self, cmd, env, log_path):
            out = Path(cmd[cmd.index("--out-dir") + 1])
            listed = json.loads((out / OUT_MANIFEST).read_text())["files"]
            assert set(cli.GATE_FILES) <= set(listed)  # written before the readings start
            (out / "gate_comm.csv.partial").write_text("half\n")
            raise KeyboardInterrupt  # as a SIGKILL would end it: no record afterwards but the first

    out = tmp_path / "out"
    FakeBudget.READINGS = {}
    monkeypatch.setattr(cli, "Budget", Killed)
    from distbench.gate import inputs

    def first_record_only(path, names=None):  # a SIGKILL leaves no record after the run: only the first
        if names is not None:
            inputs.record_gate_files(path, names)

    monkeypatch.setattr(cli, "record_gate_files", first_record_only)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["--node", "n1", "--out", str(out)])
    assert out_dir_problem(out) is None  # the next gate may clear it


def test_a_gate_directory_from_before_the_list_is_still_cleared(tmp_path, monkeypatch):
    out = write_run(tmp_path / "old", comm_rows(busbw=123.0))  # gate_comm.csv and readings.json, no list
    assert _gate_into(out, monkeypatch) == 0
    assert not (out / "gate_comm.csv").exists()
