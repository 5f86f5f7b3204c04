"""The gate for real on this host (a CPU host: the collective check runs Gloo and says it is not a GPU
verdict): the command within its budget, exit 0 and its one line, its Prometheus file; readings that
outlive the budget fail naming the step, leave no process behind and no earlier run's figure in a
reused --out; a failing health reading (the fake-NVML seam) fails it with exit 1; `snakemake --cores 1
gate` writes gate.csv beside the health check's CSVs and, with prometheus_dir, distbench_gate.prom, and under
host_lock=fail beside a run holding the host it fails naming it; its config keys are checked before any
job (a dry run refuses a baseline that is no comm table)."""

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from distbench.launch.hostlock import hold
from tests.conftest import REPO, RUN, snakemake

# `pytest -m heavy` (README: the second test command): the gate's real runs on this host (health reading,
# Gloo collective, Snakemake).
pytestmark = [pytest.mark.heavy, pytest.mark.e2e]
LINE = re.compile(r"^distbench gate: (PASS|WARN|FAIL) (\S+): (.+)$")


def gate(*args, env=None, timeout=120):
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "distbench.gate", *args], capture_output=True, text=True,
                         timeout=timeout, env={**os.environ, **(env or {})})
    return out, time.monotonic() - t0


def _marked(mark: str) -> list[int]:
    """Processes whose environment carries `mark` (the gate's and everything it started)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and mark.encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            continue
    return found


def test_the_gate_on_this_host_passes_within_its_budget_with_one_line(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    out, wall = gate("--budget-s", "60", "--prom", str(tmp_path), "--out", str(tmp_path / "run"))
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1 and LINE.match(lines[0]), out.stdout
    assert wall < 60
    assert "the collective check ran Gloo on CPU processes: not a GPU verdict" in lines[0]
    table = pd.read_csv(tmp_path / "run" / "gate.csv")
    assert table.query("check == 'verdict'")["state"].tolist() == [LINE.match(lines[0]).group(1)]
    fams = {f.name: f for f in text_string_to_metric_families((tmp_path / "distbench_gate.prom").read_text())}
    assert fams["distbench_gate_status"].samples[0].value in (0.0, 1.0)
    assert {s.labels["backend"] for s in fams["distbench_comm_busbw_gbps"].samples} == {"gloo"}

    # the same host against that run as its baseline: compared, and said
    again, _ = gate("--budget-s", "60", "--baseline", str(tmp_path / "run"), "--out", str(tmp_path / "again"))
    base = pd.read_csv(tmp_path / "again" / "gate.csv").query("check == 'baseline'")
    # compared and said, never judged: Gloo's CPU processes share the host with whatever else runs
    assert len(base) == 2 and set(base["state"]) == {"INFO"}, base
    assert base["reason"].str.contains("than the baseline's .*measured, not judged").all(), base["reason"]
    assert again.returncode == 0 and LINE.match(again.stdout.strip())


def test_past_its_budget_the_gate_fails_naming_the_step_and_leaves_no_process(tmp_path):
    """NVML that never answers (a GPU fallen off the bus can hang it): the health reading outlives the
    budget (the least the gate accepts: 22 s at --load-s 0); the gate kills its readings and everything
    they started, and says where it was. Its --out holds an earlier gate's figures: none of them reaches
    this verdict, its gate.csv or its .prom file (issue 47)."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text("import subprocess, time\n"
                                    "subprocess.Popen(['sleep', '300'])  # a child of its own, to be killed too\n"
                                    "time.sleep(300)\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "gate_comm.csv").write_text(
        "backend,world_size,op,size_bytes,timing,nccl_env,inplace,trial,time_us,busbw_gbps,status,message\n"
        "gloo,2,all_reduce,16777216,host,default,False,0,35000,0.777,ok,\n")
    mark = uuid.uuid4().hex
    out, wall = gate("--budget-s", "22", "--load-s", "0", "--out", str(tmp_path / "out"), "--prom", str(tmp_path),
                     env={"GATE_TEST_MARK": mark, "PYTHONPATH": f"{fake}:{REPO}"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert re.match(r"distbench gate: FAIL \S+: gate: over budget: not done within its 22 s budget, in step "
                    r"'health reading' \([2-9] process\(es\) killed\)", out.stdout), out.stdout
    assert wall < 22 + 2  # the interpreter's own start and exit around the budget
    time.sleep(0.5)
    assert _marked(mark) == []
    assert not (tmp_path / "out" / "gate_comm.csv").exists()
    assert "0.777" not in (tmp_path / "out" / "gate.csv").read_text()
    assert "distbench_comm_busbw_gbps" not in (tmp_path / "distbench_gate.prom").read_text()


def test_a_failing_health_reading_fails_the_gate(tmp_path):
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text("import sys\nfrom tests.fake_nvml import fake_pynvml, healthy_state\n"
                                    "s = healthy_state(2)\ns['remap'] = {1: (0, 0, 0, 1)}\n"
                                    "sys.modules[__name__] = fake_pynvml(s)\n")
    out, _ = gate("--budget-s", "60", "--load-s", "0", "--gpus", "2", "--node", "n7",
                  env={"PYTHONPATH": f"{fake}:{REPO}"})
    assert out.returncode == 1
    assert out.stdout.startswith("distbench gate: FAIL n7: GPU 1 (0000:1a:00.0, GPU-1): remap_pending: a row remap failed"), out.stdout


def test_snakemake_gate_writes_its_csv_beside_the_health_checks_and_the_prom_file(workflow_dir, tmp_path):
    run = snakemake(workflow_dir, "gate", "--config", f"prometheus_dir={tmp_path}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert LINE.match(next(ln for ln in run.stderr.splitlines() if ln.startswith("distbench gate:")))
    table = pd.read_csv(workflow_dir / RUN / "health" / "gate.csv")
    assert list(table.columns) == ["host", "check", "subject", "value", "expected", "state", "reason"]
    assert table["check"].iloc[-1] == "verdict" and table["state"].iloc[-1] in ("PASS", "WARN")
    assert (workflow_dir / RUN / "health" / "gate" / "gate_comm.csv").exists()  # a baseline for the next
    text = (tmp_path / "distbench_gate.prom").read_text()
    assert "distbench_gate_status{" in text and "distbench_run_timestamp_seconds{" in text

    # a benchmark run holds this host: under host_lock=fail the gate reads nothing, so it judges nothing
    # (issue 55: only a judgement drains): the rule fails, naming the holder, and the earlier verdict
    # stays published
    with hold("comm job gloo-2 (a benchmark)", tmp_path / "bench"):
        run = snakemake(workflow_dir, "gate", "--forcerun", "gate", "--config", f"prometheus_dir={tmp_path}",
                        "host_lock=fail")
    assert run.returncode != 0
    assert "not judged" in run.stderr and "the host is busy" in run.stderr, run.stderr[-3000:]
    assert "comm job gloo-2 (a benchmark)" in run.stderr
    assert (tmp_path / "distbench_gate.prom").read_text() == text  # nothing published over the last verdict


def test_the_gate_config_is_checked_before_any_job(workflow_dir, tmp_path):
    (tmp_path / "file").write_text("")
    run = snakemake(workflow_dir, "-n", "gate", "--config", "gate_baseline=[/etc/passwd]",
                    f"prometheus_dir={tmp_path / 'file'}")
    assert run.returncode != 0
    err = " ".join((run.stdout + run.stderr).split())
    assert "config key gate_baseline[0]: '/etc/passwd': baseline /etc/passwd: not a readable comm table" in err, err
    assert f"config key prometheus_dir: '{tmp_path / 'file'}' is not a directory" in err, err
