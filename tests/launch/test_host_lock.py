"""One benchmark measurement at a time per host (distbench.launch.hostlock, issue 36): the lock itself
with real flocks held by other processes (a second taker waits or refuses naming the holder, a dead
holder's lock is taken over and its record not believed), the rule scripts' side (host_lock=fail,
the wait in the job's log and provenance), the health load, the after-the-fact overlap check, and two
real Snakemake runs started together in two copies of the workflow, whose jobs never overlap.

Every test has its own lock file (DISTBENCH_HOST_LOCK), so none waits for a real run on this host.
The hostile inputs (the status command's arguments, lock paths that are no lock file, a bad mode)
are a table in test_host_lock_status.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from distbench.core.intervals import intervals, overlaps
from distbench.launch import hostlock, hostlock_status, joblock
from distbench.launch.hostlock import LOCK_ENV, MODE_ENV, HostBusy, hold, read_holder
from distbench.launch.joblock import held
from distbench.pipeline.config import ConfigError, check_config
from tests.conftest import REPO, RUN, copy_workflow

JOB = "comm/gloo/float32/ws2/default"
# Holds the lock in its own process until a line arrives on stdin (or it is killed).
HOLDER = ("import sys\nfrom distbench.launch.hostlock import hold\n"
          "with hold(sys.argv[1], sys.argv[2]):\n    print('held', flush=True)\n    sys.stdin.readline()\n")
# Holds the lock with a bare flock and writes no record of itself (e.g. the moment before a holder
# writes its record).
BARE = ("import fcntl, os, sys\nfd = os.open(os.environ['DISTBENCH_HOST_LOCK'], os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.readline()\n")


@pytest.fixture(autouse=True)
def own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "lock" / "host.lock"))
    monkeypatch.delenv(MODE_ENV, raising=False)


def _holder(results: Path, job: str = JOB, code: str = HOLDER) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, job, str(results)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def _release_after(p: subprocess.Popen, seconds: float) -> threading.Thread:
    def go():
        time.sleep(seconds)
        p.stdin.write("\n")
        p.stdin.flush()
    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t


def test_a_second_taker_refuses_or_waits_naming_the_holder(tmp_path, capsys):
    other = tmp_path / "other/results/lab"
    holder = _holder(other)
    try:
        with pytest.raises(HostBusy) as busy, hold("comm/mine", mode="fail"):
            pass
        assert f"held by {other} (pid {holder.pid}, since " in busy.value.why and f"job {JOB})" in busy.value.why
        assert "host_lock=fail" in busy.value.why
        _release_after(holder, 1.0)
        t0 = time.monotonic()
        with hold("comm/mine", tmp_path / "mine") as lock:
            assert time.monotonic() - t0 > 0.8  # it waited for the holder
            assert read_holder()["pid"] == os.getpid() and read_holder()["results"] == str(tmp_path / "mine")
        assert len(lock.waited_for) == 1 and f"pid {holder.pid}" in lock.waited_for[0] and lock.waited_s > 0.8
        err = capsys.readouterr().err
        assert f"distbench: waiting for the host: held by {other} (pid {holder.pid}" in err
        assert "got the host after" in err
        assert read_holder() is None  # released: no record of a holder is left
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holders_lock_is_taken_over_and_its_record_not_believed(tmp_path):
    dead = _holder(tmp_path / "dead-run")
    dead.send_signal(signal.SIGKILL)
    dead.wait()
    assert "dead-run" in Path(os.environ[LOCK_ENV]).read_text()  # its record is still in the file ...
    assert read_holder() is None  # ... but its process is gone: not believed
    t0 = time.monotonic()
    with hold("comm/mine", mode="fail"):  # the kernel released its flock: taken at once
        assert time.monotonic() - t0 < 0.5
    # a live holder that wrote no record, over a dead one's record: the dead run is not named
    Path(os.environ[LOCK_ENV]).write_text(json.dumps({**_record_of_dead(tmp_path), "results": "dead-run"}))
    bare = _holder(tmp_path, code=BARE)
    try:
        with pytest.raises(HostBusy) as busy, hold("comm/mine", mode="fail"):
            pass
        assert "held by another process" in busy.value.why and "dead-run" not in busy.value.why
    finally:
        bare.kill()
        bare.wait()


def _record_of_dead(tmp_path) -> dict:
    p = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = hostlock.HostLock("x", tmp_path)
    return {**lock.record(), "pid": int(p.stdout)}  # this host, this boot, a pid that has ended


def test_a_nested_hold_in_one_process_holds_nothing_more():
    with hold("training/outer") as outer, hold("training/inner", mode="fail") as inner:
        assert inner is outer and read_holder()["job"] == "training/outer"


def _rule(tmp_path: Path, mode: str) -> SimpleNamespace:
    """What a benchmark rule's script gets from Snakemake, as far as `held` reads it."""
    log = tmp_path / "results/lab/logs/comm/gloo/float32/ws2/default.log"
    return SimpleNamespace(config={"host_lock": mode}, log=[str(log)], params={"launch": {"nodes": 1}},
                           output={"placement": str(tmp_path / "results/lab/comm/placement.json")})


def _job(sm, ran: list):
    def run():
        ran.append(time.monotonic())
        Path(sm.log[0]).parent.mkdir(parents=True, exist_ok=True)
        Path(sm.log[0]).write_text("the job's own output\n")
        Path(sm.output["placement"]).parent.mkdir(parents=True, exist_ok=True)
        Path(sm.output["placement"]).write_text(json.dumps({"ranks": [], "provenance": {"outcome": "ok"}}))
        return "ok"
    return run


def test_a_rule_script_refuses_under_fail_and_records_its_wait(tmp_path):
    other = tmp_path / "other/results/lab"
    holder = _holder(other)
    try:
        sm, ran = _rule(tmp_path, "fail"), []
        with pytest.raises(SystemExit) as refused:
            held(sm, "comm job x", _job(sm, ran))()
        assert str(refused.value.code).startswith(f"distbench error: comm job x: the host is busy: held by {other}")
        assert not ran  # nothing ran
        sm = _rule(tmp_path, "wait")
        _release_after(holder, 1.0)
        assert held(sm, "comm job x", _job(sm, ran))() == "ok"
    finally:
        holder.kill()
        holder.wait()
    log = Path(sm.log[0]).read_text()
    assert log.startswith("the job's own output") and "waited 1." in log and f"held by {other} (pid {holder.pid}" in log
    lock = json.loads(Path(sm.output["placement"]).read_text())["provenance"]["host_lock"]
    assert lock["waited_s"] > 0.8 and lock["path"] == os.environ[LOCK_ENV] and lock["scope"].startswith("this host")
    assert datetime.fromisoformat(lock["acquired"]).timestamp() <= time.time()


def test_host_lock_takes_wait_or_fail_and_names_a_bad_value():
    assert check_config({})["host_lock"] == "wait"
    assert yaml.safe_load((REPO / "config.yaml").read_text())["host_lock"] == "wait"
    assert check_config({"host_lock": "fail"})["host_lock"] == "fail"
    for bad in ("sometimes", 1, True):
        with pytest.raises(ConfigError, match=r"config key host_lock: .* \(allowed: wait, fail\)"):
            check_config({"host_lock": bad})


def test_a_health_load_holds_the_host_and_idle_sampling_does_not(tmp_path, monkeypatch):
    from distbench.health import load as health_load

    holder = _holder(tmp_path / "other")
    try:
        assert health_load.sample(None, {}, 0.0)[1].startswith("idle: no load ran")  # a probe: runs beside
        monkeypatch.setenv(MODE_ENV, "fail")
        with pytest.raises(SystemExit, match=r"^distbench error: health load: the host is busy: held by .*other"):
            health_load.sample(None, {}, 1.0)
    finally:
        holder.kill()
        holder.wait()


def _placement(path: Path, start: str, end: str, host: str = "h", **extra) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "placement.json").write_text(json.dumps({"ranks": [], "provenance": {
        "started": f"2026-11-27T10:00:{start}+00:00", "ended": f"2026-11-27T10:00:{end}+00:00", "host": host, **extra}}))


def test_overlapping_measurements_of_a_run_are_found_from_their_provenance(tmp_path):
    _placement(tmp_path / "comm/a", "00.0", "05.0")
    _placement(tmp_path / "comm/b", "04.5", "06.0")  # inside a's interval
    _placement(tmp_path / "comm/c", "01.0", "02.0", host="elsewhere")  # another host (a cluster executor)
    _placement(tmp_path / "logs/batch/launches/x", "06.0", "09.0")  # a shared launch, right after b
    _placement(tmp_path / "training/adopted", "06.0", "30.0", batch={"launched_by": "x"})  # measured in x
    _placement(tmp_path / "staged/training_job/d", "00.0", "30.0")  # not yet a job's result
    assert [i["name"] for i in intervals(tmp_path)] == ["comm/a", "comm/c", "comm/b", "logs/batch/launches/x"]
    found = overlaps(tmp_path)
    assert len(found) == 1 and found[0].startswith("comm/a (10:00:00.000000-10:00:05.000000) and comm/b")
    assert hostlock_status.main([str(tmp_path)]) == 1
    shutil.rmtree(tmp_path / "comm/b")
    assert overlaps(tmp_path) == [] and hostlock_status.main([str(tmp_path)]) == 0


def test_the_report_names_the_lock_held_and_any_overlap(tmp_path, monkeypatch):
    from distbench.report.appendix import _cache_state

    monkeypatch.chdir(tmp_path)
    run = Path("results/vm")
    lock = {"path": "/tmp/distbench-host.lock", "host": "vm", "scope": "this host", "waited_s": 2.5}
    _placement(run / "comm/a", "00.0", "05.0", host_lock=lock)
    _placement(run / "comm/b", "04.5", "06.0", host_lock=lock)
    placements = [str(run / "comm/a/placement.json"), str(run / "comm/b/placement.json")]
    note = _cache_state(placements, None)["note"]
    assert "Host lock held by every benchmark job: /tmp/distbench-host.lock on vm (this host)" in note
    assert "1 overlap(s) of benchmark measurements on one host" in note and "comm/a (10:00:00" in note
    shutil.rmtree(run / "comm/b")
    note = _cache_state(placements[:1], None)["note"]
    assert "No two benchmark measurements of this run overlapped" in note


TINY = {"backends": ["gloo"], "world_sizes": [1, 2],
        "comm": {"ops": ["all_reduce"], "sizes": ["8"], "gloo": {"warmup": 1, "iters": 2, "trials": 1}},
        "training": {"enabled": False}, "memory": {"enabled": False}, "health": {"enabled": False},
        "predict": {"enabled": False}}
TARGETS = [f"{RUN}/comm/gloo/float32/ws{ws}/default/comm.csv" for ws in (1, 2)]


def _copy(d: Path) -> Path:
    assert not d.exists()
    (copy_workflow(d) / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return d


def _said(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


@pytest.mark.heavy
@pytest.mark.e2e
def test_two_runs_started_together_never_measure_at_once(tmp_path):
    """Two copies of the workflow (two results directories), started together while the test holds
    the host: both wait for it, then each job of one waits for the other's, never beside it."""
    a, b = _copy(tmp_path / "a"), _copy(tmp_path / "b")
    procs = []
    with hold("test holder", tmp_path / "test-holder") as mine:
        for d in (a, b):
            with open(d / "out.txt", "w") as out, open(d / "err.txt", "w") as err:
                procs.append(subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", *TARGETS,
                                               "--configfile", "tiny.yaml"], cwd=d, stdout=out, stderr=err))
        deadline = time.monotonic() + 90
        while not all(_said(d / "err.txt", "waiting for the host: held by") for d in (a, b)):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), "no run waited for the host"
            time.sleep(0.2)
    for p in procs:
        assert p.wait(timeout=300) == 0, (a / "err.txt").read_text()[-3000:] + (b / "err.txt").read_text()[-3000:]
    jobs = []
    for d in (a, b):
        for i in intervals(d / RUN):
            prov = json.loads((d / RUN / i["name"] / "placement.json").read_text())["provenance"]
            # the lock was taken before the job's clock started: its wait is outside its measured time
            assert datetime.fromisoformat(prov["host_lock"]["acquired"]) <= i["start"]
            jobs.append((d.name, i))
    assert len(jobs) == 4
    jobs.sort(key=lambda j: j[1]["start"])
    for (_, first), (_, then) in zip(jobs, jobs[1:]):
        assert then["start"] >= first["end"], f"{first} and {then} overlapped"
    # both runs' first jobs waited for the test; the one that lost the host to the other run said so
    logs = {d: [p.read_text() for p in (d / RUN / "logs/comm").rglob("*.log")] for d in (a, b)}
    assert any(f"held by {tmp_path / 'test-holder'} (pid {os.getpid()}" in text for d in (a, b) for text in logs[d])
    assert any(f"held by {other / RUN}" in text for d, other in ((a, b), (b, a)) for text in logs[d]), logs
    assert mine.waited_for == []


def test_every_launcher_takes_the_nodes_locks_in_one_order_each_once():
    def node(host, path="/tmp/distbench-host.lock", boot="b-" + "x", name=None):
        return {"host": host, "boot_id": boot + host, "path": path, "node": name or host}
    # launched from gpu2 over gpu1, gpu2 and gpu3; and from gpu3 over the same nodes, named otherwise
    from_gpu2 = joblock.lock_order([node("gpu2", name="here"), node("gpu3", name="u@gpu3"), node("gpu1"),
                                     node("gpu2", name="gpu2.lan")])
    from_gpu3 = joblock.lock_order([node("gpu3", name="here"), node("gpu2"), node("gpu1", name="10.0.0.1"),
                                     node("gpu3")])
    assert [n["host"] for n in from_gpu2] == [n["host"] for n in from_gpu3] == ["gpu1", "gpu2", "gpu3"]
    assert [n["node"] for n in from_gpu2] == ["gpu1", "here", "u@gpu3"]  # one machine's lock once, as named first
    # another lock file on one host, or another machine of the same name, is another lock
    assert len(joblock.lock_order([node("a"), node("a", path="/x.lock"), node("a", boot="other")])) == 3


def test_the_scope_of_an_ssh_job_is_every_node_and_slurm_keeps_its_own():
    ssh = {"nodes": 3, "launcher": "ssh", "hosts": ["a", "u@b", "c"]}
    assert joblock.scope_of(ssh, {}).startswith("every node of the job (3 hosts over ssh)")
    assert joblock.ssh_nodes(ssh, {}) == ["a", "u@b", "c"] and joblock.ssh_nodes({**ssh, "nodes": 1}, {}) == []
    assert joblock.scope_of({"nodes": 2, "launcher": "auto"}, {"SLURM_JOB_ID": "7"}).startswith("this node, inside SLURM job 7")
    assert joblock.ssh_nodes({"nodes": 2, "launcher": "auto", "hosts": ["a", "b"]}, {"SLURM_JOB_ID": "7"}) == []
    cmd = joblock.hold_command("u@b", "comm/x y", "/r/a b", "fail", {"DISTBENCH_HOST_LOCK": "/l k", "HOME": "/h"},
                                "/w d", "/py")
    assert cmd[:5] == ["ssh", "-T", "-o", "BatchMode=yes", "u@b"]  # the host as the launcher passes it
    assert cmd[5] == ("cd '/w d' && env 'DISTBENCH_HOST_LOCK=/l k' /py -m distbench.launch.joblock --hold "
                      "'comm/x y' '/r/a b' fail")  # every value quoted for the remote shell


def test_a_node_holder_started_in_a_thread_outlives_that_thread():
    """A node's holder (its ssh client) is tied to the launcher's process, not to the thread that
    started it: PR_SET_PDEATHSIG fires when the forking *thread* ends, so holders started from a
    waiter thread were sent SIGTERM, and their nodes' locks let go, when it returned. The plain
    Popen beside it shows the kernel's rule this guards against."""
    from distbench.launch.processes import die_with_parent, popen_for_life

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    procs = {}

    def start(kind):
        procs[kind] = (popen_for_life(sleeper) if kind == "for_life"
                       else subprocess.Popen(sleeper, preexec_fn=die_with_parent))

    try:
        for kind in ("for_life", "plain"):
            t = threading.Thread(target=start, args=(kind,))
            t.start()
            t.join()
        assert procs["plain"].wait(timeout=10) == -signal.SIGTERM  # its thread ended: killed
        time.sleep(0.5)
        assert procs["for_life"].poll() is None  # still running, as the holder must
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
