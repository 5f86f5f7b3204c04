"""The ssh launcher against a real sshd: tools/ssh-test-server.sh starts one on 127.0.0.1 with its
own keys and config; the "nodes" are 127.0.0.1 and localhost (both this machine), reached with the
real ssh client (a wrapper on PATH adds the test's client config, so no ~/.ssh is read or changed).
A two-node Gloo comm job runs with one torchrun agent per node started over ssh; a job that hangs
ends at its limit and leaves no process on any node; the health check reads both nodes over ssh
(and says they are one machine); every node's host lock is held over ssh (distbench.launch.hostlock:
a second holder waits or refuses naming the first, no holder outlives its release or its launcher).

CI installs openssh-server and sets DISTBENCH_REQUIRE_SSH=1: there a server that cannot start is a
failure, not a skip."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from distbench.comm.contract import read_comm_csv
from distbench.comm.job import run_comm_job
from distbench.comm.plan import CommJob, job_params
from distbench.health import node as health_node
from distbench.health.readings import FAILING, NODE, OK
from distbench.launch.cluster import free_port
from distbench.launch.hostlock import LOCK_ENV, RECORD_WAIT_S, HostBusy, hold, read_holder
from distbench.launch.joblock import NodesLock, held
from distbench.pipeline.config import check_config
from tests.conftest import REPO
from tests.health.test_health_nodes import FAKE_MODULE

REQUIRED = bool(os.environ.get("DISTBENCH_REQUIRE_SSH"))
HAVE = bool(shutil.which("sshd") or os.path.exists("/usr/sbin/sshd")) and bool(shutil.which("ssh")) and os.geteuid() == 0
# `pytest -m heavy` (README: the second test command): a real sshd (tools/ssh-test-server.sh) and jobs
# through it.
pytestmark = [pytest.mark.heavy, pytest.mark.e2e, pytest.mark.skipif(not HAVE and not REQUIRED, reason=(
    "needs openssh-server, as root (tools/ssh-test-server.sh install); CI sets DISTBENCH_REQUIRE_SSH=1"))]

HOSTS = ["127.0.0.1", "localhost"]


@pytest.fixture(scope="module")
def ssh_path(tmp_path_factory):
    """PATH with the test's ssh first, while the test's sshd runs."""
    assert HAVE, "DISTBENCH_REQUIRE_SSH is set but openssh-server/ssh are missing or this is not root"
    state = tmp_path_factory.mktemp("ssh")
    env = {**os.environ, "SSH_TEST_STATE": str(state), "SSH_TEST_PORT": str(free_port())}
    script = str(REPO / "tools/ssh-test-server.sh")
    started = subprocess.run(["bash", script, "start"], env=env, capture_output=True, text=True, timeout=60)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield f"{state / 'bin'}:{os.environ['PATH']}"
    finally:
        stopped = subprocess.run(["bash", script, "stop"], env=env, capture_output=True, text=True, timeout=30)
        assert not (state / "sshd.pid").exists(), stopped.stderr


def _comm_job(tmp_path, name, extra_env, timeout_s):
    cfg = check_config({"backends": ["gloo"]})
    params = {**job_params(cfg, "gloo"), "ops": ["all_reduce"], "sizes": [8, 4096], "trials": 2, "iters": 2,
              "warmup": 1, "job_timeout_s": timeout_s,
              "launch": {"nodes": 2, "ranks_per_node": 1, "launcher": "ssh", "hosts": HOSTS,
                         "rdzv_port": free_port()}}
    params["job_env"] = {**params["job_env"], **extra_env}
    out = tmp_path / name / "comm.csv"
    t0 = time.monotonic()
    status = run_comm_job(CommJob("gloo", "float32", 2, "default", {}), params, out, out.with_name("placement.json"),
                          out.with_name("job.log"))
    return status, out, time.monotonic() - t0


def _processes_naming(text: str) -> list[str]:
    """Command lines of the processes (any node: all are this machine) that name `text`."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{pid}: {cmdline[:200]}")
    return found


def test_a_two_node_job_runs_one_agent_per_node_over_ssh(tmp_path, monkeypatch, ssh_path):
    monkeypatch.setenv("PATH", ssh_path)
    status, out, _ = _comm_job(tmp_path, "ok", {}, 180)
    log = out.with_name("job.log").read_text()
    assert status == "ok", log[-3000:]
    # one agent per host, each started by ssh with the job's environment set remotely
    started = [ln for ln in log.splitlines() if ln.startswith("# ssh ")]
    assert [ln.split()[5] for ln in started] == HOSTS and all("--nnodes=2" in ln for ln in started)
    df = read_comm_csv(out)
    assert (df["status"] == "ok").all() and set(df["world_size"]) == {2} and set(df["nodes"]) == {2}
    assert not _processes_naming(str(out))  # nothing of the job left on either node


def test_a_job_that_hangs_over_ssh_ends_at_its_limit_and_leaves_no_process(tmp_path, monkeypatch, ssh_path):
    monkeypatch.setenv("PATH", ssh_path)
    # rank 1 (on the second node) never joins the first collective; the job's limit is 25 s
    status, out, wall_s = _comm_job(tmp_path, "hang", {"DISTBENCH_TEST_HANG_RANK": "1:0"}, 25)
    assert status != "ok" and wall_s < 25 + 30, (status, wall_s)
    df = read_comm_csv(out)
    assert set(df["status"]) <= {"hung", "failed", "not_run"} and (df["status"] != "ok").all()
    # the agents and ranks on both nodes are gone, not only the local ssh clients
    deadline = time.monotonic() + 15
    while _processes_naming(str(out)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _processes_naming(str(out)), _processes_naming(str(out))


def test_the_health_check_reads_every_node_over_ssh(tmp_path, monkeypatch, ssh_path):
    # each node's reading imports a fake NVML (tests/health/test_health_nodes.py), reaching the remote side
    # through the PYTHONPATH the ssh command sets there; node 1 reports another driver
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_MODULE)
    monkeypatch.setenv("PATH", ssh_path)
    monkeypatch.setenv("PYTHONPATH", f"{fake}:{REPO}")
    monkeypatch.setenv("DISTBENCH_FAKE_NVML", json.dumps({"1": {"driver": "550.9"}}))
    monkeypatch.chdir(REPO)
    rows = health_node.read_nodes(2, "ssh", HOSTS, 2, 0.0, tmp_path, timeout_s=60)

    assert not [r for r in rows if r.item == health_node.NODE_READ], rows  # both nodes answered
    drivers = sorted(r.value for r in rows if r.gpu == NODE and r.item == "driver_version")
    assert drivers == ["550.9", "570.1"]  # one reading per node, each with its own node index
    assert [r.state for r in rows if r.gpu == NODE and r.item == "gpu_count"] == [OK, OK]
    # both "nodes" are this machine: said, as failing (a real cluster.hosts naming one host twice)
    (same,) = [r for r in rows if r.item == health_node.SAME_MACHINE]
    assert same.state == FAILING and same.value == "127.0.0.1 = localhost" and same.host == socket.gethostname()


def _gone(text: str, within_s: float = 10) -> list[str]:
    deadline = time.monotonic() + within_s
    while _processes_naming(text) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _processes_naming(text)


def _record_within(path, seconds: float) -> dict | None:
    """The holder's record, as a waiter reads it: a holder writes it right after it locks, and waiters
    give it RECORD_WAIT_S to appear (hostlock.acquire); a record never written still fails."""
    end = time.monotonic() + seconds
    while (record := read_holder(path)) is None and time.monotonic() < end:
        time.sleep(0.05)
    return record


def test_a_nodes_lock_over_ssh_makes_a_second_holder_fail_or_wait_naming_the_first(tmp_path, monkeypatch, ssh_path):
    monkeypatch.setenv("PATH", ssh_path)
    node_lock = tmp_path / "node.lock"  # the nodes' lock (passed on over ssh); each launcher has its own here
    monkeypatch.setenv(LOCK_ENV, str(node_lock))
    tag = f"hold-{os.getpid()}-{time.time_ns()}"  # names every holder process of this test
    first = NodesLock(f"{tag}/first", tmp_path / "first", "wait", ["127.0.0.1"], path=tmp_path / "a.lock").acquire()
    try:
        holder = read_holder(node_lock)  # the node's lock is held by the holder on the node, not by this process
        assert holder["job"] == f"{tag}/first" and holder["pid"] != os.getpid()
        assert [n["held_by"] for n in first.provenance("s")["nodes"]] == ["this process", "ssh"]
        with pytest.raises(HostBusy) as busy:
            NodesLock(f"{tag}/second", tmp_path / "second", "fail", ["localhost", "127.0.0.1"],
                      path=tmp_path / "b.lock").acquire()
        assert busy.value.why.startswith(f"node localhost: the host is busy: held by {tmp_path / 'first'} (pid {holder['pid']}")
        assert f"job {tag}/first" in busy.value.why
        with hold("free?", mode="fail", path=tmp_path / "b.lock"):
            pass  # the refused one let go of what it held
        third = NodesLock(f"{tag}/third", tmp_path / "third", "wait", ["localhost", "127.0.0.1"], path=tmp_path / "c.lock")
        waiter = threading.Thread(target=third.acquire)
        waiter.start()
        # first released 2 s after the third's holders have logged in and it asks for the locks (logging in
        # over ssh took over a second on a loaded 2-core CI machine, so a fixed timer from the start
        # could fire before the third ever waited)
        end = time.monotonic() + 60
        while not third.order and time.monotonic() < end:
            time.sleep(0.05)
        time.sleep(2.0)
        first.release()
        waiter.join(60)
        assert not waiter.is_alive()
        try:
            assert third.waited_s > 1.0
            assert len(third.waited_for) == 1 and f"job {tag}/first" in third.waited_for[0] and "(node localhost)" in third.waited_for[0]
            nodes = third.provenance("s")["nodes"]  # two names of one machine: held once, by its first name
            assert [n["node"] for n in nodes] == ["the launching host", "localhost"]
            # the node's lock is the third's now, and still a while after the thread that took it ended:
            # held (a try fails), its record names it. (It used to be let go then: the holders' ssh got
            # PR_SET_PDEATHSIG's SIGTERM when that thread ended; see processes.popen_for_life.)
            time.sleep(1.0)
            with pytest.raises(HostBusy):
                with hold("taken?", mode="fail", path=node_lock):
                    pass
            record = _record_within(node_lock, RECORD_WAIT_S)
            assert record is not None and record["job"] == f"{tag}/third", node_lock.read_bytes()[:400]
        finally:
            third.release()
    finally:
        first.release()
    assert not _gone(tag)  # no holder left, on the node or here
    with hold("free?", mode="fail", path=node_lock):
        pass


def test_a_node_holder_over_ssh_ends_when_its_launcher_is_killed(tmp_path, monkeypatch, ssh_path):
    monkeypatch.setenv("PATH", ssh_path)
    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "node.lock"))
    tag = f"orphan-{os.getpid()}-{time.time_ns()}"
    code = ("import sys, time\nfrom distbench.launch.joblock import NodesLock\n"
            f"NodesLock({tag + '/job'!r}, sys.argv[1], 'wait', ['localhost'], path=sys.argv[2]).acquire()\n"
            "print('held', flush=True)\ntime.sleep(600)\n")
    launcher = subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(tmp_path / "l.lock")],
                                stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert launcher.stdout.readline().strip() == "held"
        assert read_holder(tmp_path / "node.lock")["job"] == f"{tag}/job"
    finally:
        launcher.send_signal(signal.SIGKILL)
        launcher.wait()
    assert not _gone(tag)  # its ssh client got SIGTERM, the holder its stdin's end
    with hold("free?", mode="fail", path=tmp_path / "node.lock"):
        pass


def test_a_rule_over_ssh_holds_every_node_once_and_says_so(tmp_path, monkeypatch, ssh_path):
    # both "nodes" are this machine, as the launching host is: its one lock, held once (no self-wait)
    monkeypatch.setenv("PATH", ssh_path)
    monkeypatch.chdir(REPO)
    log = tmp_path / "results/lab/logs/comm/gloo/float32/ws2/default.log"
    placement = tmp_path / "results/lab/comm/placement.json"
    sm = SimpleNamespace(config={"host_lock": "fail"}, log=[str(log)], output={"placement": str(placement)},
                         params={"launch": {"nodes": 2, "ranks_per_node": 1, "launcher": "ssh", "hosts": HOSTS,
                                            "rdzv_port": 1}})

    def run():
        assert read_holder()["pid"] == os.getpid()
        placement.parent.mkdir(parents=True, exist_ok=True)
        placement.write_text(json.dumps({"ranks": [], "provenance": {}}))
        return "ok"

    assert held(sm, "comm job", run)() == "ok"
    lock = json.loads(placement.read_text())["provenance"]["host_lock"]
    assert lock["scope"].startswith("every node of the job (2 hosts over ssh)")
    assert [n["node"] for n in lock["nodes"]] == ["the launching host"] and lock["nodes"][0]["host"] == socket.gethostname()
    assert not _processes_naming(str(tmp_path / "results/lab"))
