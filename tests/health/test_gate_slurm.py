"""The gate under a real SLURM controller (tools/slurm-test-cluster.sh: munged, slurmctld, slurmd for
node1 and node2 on this machine), as docs/gate.md configures it: node1 gets a failing health reading
through the fake-NVML seam (tests/fake_nvml.py: a GPU at its shutdown temperature, which the health
check calls failing), node2 a healthy one.

- Prolog=: a job sent to node1 fails its prolog; node1 ends DRAIN with the gate's own reason in
  `sinfo -R` and the job is requeued (SLURM's documented prolog behaviour); a job on node2 runs and
  node2 stays IDLE.
- HealthCheckProgram= with --drain --resume: node1 ends DRAIN with our reason, node2 stays IDLE; once
  node1 reads healthy again the gate resumes it (distbench drained it), while node2, drained by an
  admin, stays drained though its gate passes.
Only the daemons the test started are stopped."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.launch.test_slurm import HAVE, REQUIRED

# `pytest -m heavy` (README: the second test command): a real SLURM controller (tools/slurm-test-cluster.sh).
pytestmark = [pytest.mark.heavy, pytest.mark.e2e, pytest.mark.skipif(not HAVE and not REQUIRED, reason=(
    "needs slurm-wlm and munge, as root (tools/slurm-test-cluster.sh install); CI sets DISTBENCH_REQUIRE_SLURM=1"))]

# `pynvml` for the gate under slurmd: healthy, except on the nodes the control file names (SLURMD_NODENAME)
FAKE = """
import os, sys
from tests.fake_nvml import fake_pynvml, healthy_state
_state = healthy_state(2)
_failing = os.environ.get("GATE_TEST_FAILING", "")
if os.path.exists(_failing) and os.environ.get("SLURMD_NODENAME") in open(_failing).read().split():
    _state["temp"] = 95  # at the shutdown threshold (92 C): failing
sys.modules[__name__] = fake_pynvml(_state)
"""
WRAPPER = """#!/bin/bash
# slurmd starts this with an environment of its own: the gate's Python, the fake NVML, our flags
{guard}
exec 9>"{tmp}/lock-$SLURMD_NODENAME"; flock -n 9 || exit 0  # one gate per node at a time
# each node its own host lock (the gate holds it for its readings): two nodes of a real cluster are two hosts
export PYTHONPATH="{tmp}/fake:{repo}" GATE_TEST_FAILING="{tmp}/failing" DISTBENCH_HOST_LOCK="{tmp}/host-$SLURMD_NODENAME.lock"
cd "{tmp}"
{python} -m distbench.gate {flags} >> "{tmp}/gate-$SLURMD_NODENAME.log" 2>&1
"""

# the healthy node's line (fake NVML on a CPU host: no collective over GPUs to span, said as a warning)
NODE2_OK = "distbench gate: WARN node2: GPUs spanned: the collective spanned no GPU"


def _cluster(tmp_path, lines: list[str]):
    conf = tmp_path / "extra.conf"
    conf.write_text("\n".join(lines) + "\n")
    # slurmstepd's Unix socket lives in the spool directory and its path may not pass 108 bytes: under
    # `pytest -n 2` tmp_path alone runs to 80 (".../popen-gw1/test_a_failing_node_fails_its_0"), and a
    # step's socket then failed to launch. A short directory of its own, removed by _stop.
    state = Path(tempfile.mkdtemp(prefix="gate-slurm-", dir="/tmp"))
    env = {**os.environ, "SLURM_TEST_STATE": str(state), "SLURM_TEST_NODES": "2", "SLURM_TEST_EXTRA_CONF": str(conf)}
    started = subprocess.run(["bash", str(REPO / "tools/slurm-test-cluster.sh"), "start"], env=env,
                             capture_output=True, text=True, timeout=120)
    return env, started, {**os.environ, "SLURM_CONF": str(state / "slurm.conf")}


def _stop(env, state):
    subprocess.run(["bash", str(REPO / "tools/slurm-test-cluster.sh"), "stop"], env=env, capture_output=True,
                   text=True, timeout=60)
    for name in ("slurmctld", "slurmd-node1", "slurmd-node2"):
        assert not (state / f"{name}.pid").exists()
    shutil.rmtree(state, ignore_errors=True)


def _script(tmp_path, name: str, flags: str, guard: str = "") -> str:
    (tmp_path / "fake").mkdir(exist_ok=True)
    (tmp_path / "fake" / "pynvml.py").write_text(FAKE)
    path = tmp_path / name
    path.write_text(WRAPPER.format(guard=guard, tmp=tmp_path, repo=REPO, python=sys.executable, flags=flags))
    path.chmod(0o755)
    return str(path)


def _nodes(env) -> dict[str, str]:
    out = subprocess.run(["sinfo", "-N", "-h", "-o", "%N %T"], env=env, capture_output=True, text=True, timeout=30)
    return dict(line.split() for line in out.stdout.splitlines())


def _reasons(env) -> str:
    return subprocess.run(["sinfo", "-R", "-h", "-o", "%N|%E"], env=env, capture_output=True, text=True,
                          timeout=30).stdout


def _jobs(env) -> dict[str, str]:
    out = subprocess.run(["squeue", "--states=all", "-h", "-o", "%j|%T|%r"], env=env, capture_output=True,
                         text=True, timeout=30).stdout
    return dict(line.split("|", 1) for line in out.splitlines())


def _wait(what, limit_s=150):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(2)
    return what()


def test_a_failing_node_fails_its_prolog_and_is_drained_with_our_reason(tmp_path):
    prolog = _script(tmp_path, "gate-prolog.sh", "--drain --budget-s 60 --load-s 0 --gpus 2")
    (tmp_path / "failing").write_text("node1\n")
    env, started, cl = _cluster(tmp_path, [f"Prolog={prolog}", "PrologEpilogTimeout=120"])
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        # the jobs' output files go to tmp_path: sbatch's default is the working directory (the checkout)
        bad = subprocess.run(["sbatch", "-w", "node1", "-J", "on-node1", "-o", str(tmp_path / "slurm-%j.out"),
                              "--wrap", "true"], env=cl,
                             capture_output=True, text=True, timeout=30)
        good = subprocess.run(["sbatch", "-w", "node2", "-J", "on-node2", "-o", str(tmp_path / "slurm-%j.out"),
                              "--wrap", "true"], env=cl,
                              capture_output=True, text=True, timeout=30)
        assert bad.returncode == 0 and good.returncode == 0, bad.stderr + good.stderr
        states = _wait(lambda: (s := _nodes(cl)).get("node1", "").startswith("drain") and s)
        assert states["node1"].startswith("drain"), (states, _reasons(cl))
        reasons = _reasons(cl)
        line = next(r for r in reasons.splitlines() if r.startswith("node1|"))
        assert "distbench: GPU 0 (0000:19:00.0, GPU-0): temperature_c" in line and "shutdown threshold" in line, reasons
        assert _wait(lambda: _nodes(cl).get("node2") == "idle"), _nodes(cl)
        # the requeued job passes through COMPLETING (its failed launch being cleaned up) before PENDING:
        # CI once read it mid-way, so wait for both jobs' settled states rather than read once
        _wait(lambda: (j := _jobs(cl)).get("on-node2", "").startswith("COMPLETED")
              and j.get("on-node1", "").startswith("PENDING"))
        queue = _jobs(cl)
        assert queue.get("on-node2", "").startswith("COMPLETED"), queue
        assert queue.get("on-node1", "").startswith("PENDING"), queue  # requeued: node1 is drained
        log = (tmp_path / "gate-node1.log").read_text()
        assert "distbench gate: FAIL node1: GPU 0 (0000:19:00.0, GPU-0): temperature_c" in log and "drained node1" in log, log
        # healthy, and not drained: a WARN only, because on this CPU host CUDA's view of the fake GPUs
        # cannot be read (distbench.gate.culprit.span_check), which exits 0 like a PASS
        assert NODE2_OK in (tmp_path / "gate-node2.log").read_text()
    finally:
        _stop(env, Path(env["SLURM_TEST_STATE"]))


def test_the_health_check_drains_a_failing_node_and_resumes_only_what_it_drained(tmp_path):
    armed = tmp_path / "armed"
    check = _script(tmp_path, "gate-health.sh", "--drain --resume --budget-s 60 --load-s 0 --gpus 2",
                    guard=f'[ -e "{armed}" ] || exit 0  # not before the cluster is up')
    env, started, cl = _cluster(tmp_path, [f"HealthCheckProgram={check}", "HealthCheckInterval=10",
                                           "HealthCheckNodeState=ANY"])
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        (tmp_path / "failing").write_text("node1\n")
        armed.touch()
        assert _wait(lambda: _nodes(cl).get("node1", "").startswith("drain")), (_nodes(cl), _reasons(cl))
        line = next(r for r in _reasons(cl).splitlines() if r.startswith("node1|"))
        assert line.startswith("node1|distbench: GPU 0 (0000:19:00.0, GPU-0): temperature_c") and "shutdown threshold" in line, line
        # each node's slurmd runs the check on its own timer: node2's may come after node1 has drained
        node2_log = tmp_path / "gate-node2.log"
        assert _wait(lambda: node2_log.exists() and NODE2_OK in node2_log.read_text()), \
            (_nodes(cl), _reasons(cl))
        assert _nodes(cl).get("node2") == "idle" and "node2" not in _reasons(cl)

        # node1 heals: the gate resumes it (distbench drained it); node2, drained by an admin, stays drained
        subprocess.run(["scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=admin: new cables"],
                       env=cl, check=True, timeout=30)
        (tmp_path / "failing").write_text("")
        assert _wait(lambda: _nodes(cl).get("node1") == "idle"), (_nodes(cl), _reasons(cl))
        # node2's next check runs on its own timer after the admin's drain; on a loaded 2-core CI machine
        # one wait of 150 s once passed without it (2026-11-28): wait longer, and say what was seen
        assert _wait(lambda: "stays drained: not drained by distbench" in node2_log.read_text(), limit_s=300), \
            (_nodes(cl), _reasons(cl), node2_log.read_text()[-1500:])
        assert _nodes(cl)["node2"].startswith("drain") and "node2|admin: new cables" in _reasons(cl)
        assert "resumed node1 (distbench had drained it)" in (tmp_path / "gate-node1.log").read_text()
    finally:
        _stop(env, Path(env["SLURM_TEST_STATE"]))


# issue 55: a drain or resume that cannot be carried out is loud. The gate's output goes to slurmd (its log
# shows a health check's output when it exits non-zero) as the docs' wrapper leaves it, and to our log.
LOUD = """#!/bin/bash
[ -e "{tmp}/armed" ] || exit 0  # not before the cluster is up
exec 9>"{tmp}/lock-$SLURMD_NODENAME"; flock -n 9 || exit 0  # one gate per node at a time
export PYTHONPATH="{tmp}/fake:{repo}" GATE_TEST_FAILING="{tmp}/failing" DISTBENCH_HOST_LOCK="{tmp}/host-$SLURMD_NODENAME.lock"
cd "{tmp}"
if [ "$SLURMD_NODENAME" = node1 ]; then
  path="{tmp}/nobin" extra=""  # scontrol missing from PATH
else
  path="${{PATH:-/usr/bin:/bin}}" extra="--node ghost"  # scontrol refusing: a node slurmctld does not know
fi
PATH="$path" {python} -m distbench.gate --drain --resume --budget-s 40 --load-s 0 --gpus 2 $extra 2>&1 \\
  | tee -a "{tmp}/gate-$SLURMD_NODENAME.log"
exit ${{PIPESTATUS[0]}}
"""


def test_a_drain_or_resume_scontrol_cannot_carry_out_is_loud_and_in_slurmds_log(tmp_path):
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "pynvml.py").write_text(FAKE)
    (tmp_path / "nobin").mkdir()
    check = tmp_path / "gate-loud.sh"
    check.write_text(LOUD.format(tmp=tmp_path, repo=REPO, python=sys.executable))
    check.chmod(0o755)
    env, started, cl = _cluster(tmp_path, [f"HealthCheckProgram={check}", "HealthCheckInterval=10",
                                           "HealthCheckNodeState=ANY"])
    state = Path(env["SLURM_TEST_STATE"])
    logs = {n: tmp_path / f"gate-{n}.log" for n in ("node1", "node2")}

    def seen(words):
        return all(p.exists() and words in p.read_text() for p in logs.values())

    try:
        assert started.returncode == 0, started.stdout + started.stderr
        (tmp_path / "failing").write_text("node1 node2\n")
        (tmp_path / "armed").touch()
        assert _wait(lambda: seen("DRAIN FAILED")), ({n: p.exists() and p.read_text()[-800:] for n, p in logs.items()},)
        one, two = (p.read_text() for p in logs.values())
        assert f"distbench gate: FAIL node1: DRAIN FAILED: could not drain node1: no scontrol on PATH ({tmp_path}/nobin) | " \
               "GPU 0 (0000:19:00.0, GPU-0): temperature_c" in one, one
        assert "distbench gate: FAIL ghost: DRAIN FAILED: could not drain ghost: scontrol update NodeName=ghost " \
               "refused (exit 1): " in two, two
        # never drained, and slurmd's own log says why (a health check's output, logged for a non-zero exit)
        assert _nodes(cl) == {"node1": "idle", "node2": "idle"}, (_nodes(cl), _reasons(cl))
        # slurmd logs the output once the program has exited, after the tee above wrote the gate's own log
        said = {"node1": "health_check failed: rc:3 output:distbench gate: FAIL node1: DRAIN FAILED: could not drain "
                         "node1: no scontrol on PATH",
                "node2": "health_check failed: rc:3 output:distbench gate: FAIL ghost: DRAIN FAILED"}

        def in_slurmd_log(node):
            path = state / f"slurmd-{node}.log"
            return path.exists() and said[node] in path.read_text()

        assert _wait(lambda: in_slurmd_log("node1")), (state / "slurmd-node1.log").read_text()[-2000:]
        assert _wait(lambda: in_slurmd_log("node2")), (state / "slurmd-node2.log").read_text()[-2000:]

        # healthy again: --resume cannot read the node's state either way: RESUME FAILED, never "not drained"
        (tmp_path / "failing").write_text("")
        assert _wait(lambda: seen("RESUME FAILED")), ({n: p.read_text()[-800:] for n, p in logs.items()},)
        one, two = (p.read_text() for p in logs.values())
        assert "RESUME FAILED: could not resume node1: its state is unknown: no scontrol on PATH" in one, one
        assert "RESUME FAILED: could not resume ghost: its state is unknown: scontrol show node refused (exit 1)" \
               in two, two
        assert "not drained (state unknown)" not in one + two
        said["node1"] = "health_check failed: rc:3 output:distbench gate: WARN node1: RESUME FAILED"
        assert _wait(lambda: in_slurmd_log("node1")), (state / "slurmd-node1.log").read_text()[-2000:]
    finally:
        _stop(env, state)
