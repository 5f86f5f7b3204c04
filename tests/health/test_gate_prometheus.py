"""The gate's metrics and alerts in the real Prometheus stack (docs/gate-prometheus.md).

- The shipped rules (distbench/gate/prometheus/distbench-alerts.yaml) pass `promtool check rules` and
  their unit test (`promtool test rules distbench-alerts.test.yaml`); a copy with a syntax error fails
  the first, and copies with a constant changed or a label dropped fail the second.
- Real processes: four node exporters (one per node, each on its own textfile directory holding a
  `distbench_gate.prom` written by distbench.gate.prom's own `write`) and a Prometheus scraping them every
  0.5 s with the shipped rules loaded, all on loopback with free ports and temporary directories. The
  gate's series arrive; the busbw alert is pending for the slow node; a FAIL fires DistbenchGateFailed;
  an old gate timestamp fires DistbenchGateStale, which stays after the node's file is removed; every
  query of docs/gate-prometheus.md is run and returns what it should. A full run's metrics
  (`distbench_run.prom`, write_run_metrics) written beside a failing gate's file leave it as it was and
  DistbenchGateFailed firing, with every series of both files served.
- Fast, without the binaries: the two files' names, each written atomically and never touching the
  other; one HELP and TYPE per family across both and no series in common (node_exporter drops the
  series of either otherwise); the dtype and traffic labels; one run series per op, size, dtype and
  traffic, chosen by the run's settings and not by its place in the table. Each process runs in a session of
  its own and is stopped with its process group however the test ends. These are marked heavy (README's
  second test command): 14 s together on the 2-core machine, 6 s of it Prometheus' first scrape.

Debian's `prometheus` (promtool with it) and `prometheus-node-exporter`; CI installs them and sets
DISTBENCH_REQUIRE_PROMETHEUS=1: there a missing binary is a failure, not a skip."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from distbench.gate import prom
from tests.conftest import REPO

RULES_DIR = REPO / "distbench/gate/prometheus"
RULES = RULES_DIR / "distbench-alerts.yaml"
RULES_TEST = RULES_DIR / "distbench-alerts.test.yaml"
DOC = REPO / "docs/gate-prometheus.md"

REQUIRED = bool(os.environ.get("DISTBENCH_REQUIRE_PROMETHEUS"))
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
HAVE = bool(PROMTOOL and PROMETHEUS and NODE_EXPORTER)
WHY = ("needs prometheus (with promtool) and prometheus-node-exporter (Debian: apt-get install prometheus "
       "prometheus-node-exporter); CI sets DISTBENCH_REQUIRE_PROMETHEUS=1")
needs_prometheus = pytest.mark.skipif(not HAVE and not REQUIRED, reason=WHY)


def heavy_stack(test):
    """A test on the real stack (the module's `stack`): `pytest -m heavy`, README's second test command."""
    return pytest.mark.heavy(needs_prometheus(test))

GiB = 1 << 30
NODE_TYPE = "4x NVIDIA H200"
GROUP = ("source", "node_type", "op", "size_bytes", "backend", "world_size", "timing", "dtype", "traffic")
# The stack's scrape and rule evaluation interval. (Prometheus 2.42 scrapes its targets first about 5 s
# after it starts: its target discovery sends updates every 5 s.)
INTERVAL = "500ms"


@pytest.fixture
def binaries():
    assert HAVE, f"DISTBENCH_REQUIRE_PROMETHEUS is set but a binary is missing: {WHY}"


def _promtool(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------------------------- the rules alone
@needs_prometheus
def test_promtool_checks_the_shipped_rules(binaries):
    done = _promtool("check", "rules", RULES)
    assert done.returncode == 0 and "SUCCESS: 3 rules found" in done.stdout, done.stdout + done.stderr


@needs_prometheus
def test_promtool_rejects_a_broken_rules_file(binaries, tmp_path):
    broken = tmp_path / "distbench-alerts.yaml"
    text = RULES.read_text()
    whole = '(0.5, distbench_comm_busbw_gbps{traffic=~"none|uniform"})'
    assert whole in text
    broken.write_text(text.replace(whole, whole[:-1]))  # unclosed
    done = _promtool("check", "rules", broken)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr, done.stdout + done.stderr


@needs_prometheus
def test_the_rules_unit_test_passes(binaries):
    done = _promtool("test", "rules", RULES_TEST.name, cwd=RULES_DIR)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


# Each a change to the rules that their unit test must catch: (what, old text, new text).
MUTATIONS = [
    ("the 10% margin", "< 0.9", "< 0.8"),
    ("the fewest nodes of a fleet", ">= 3", ">= 2"),
    ("the stale age", "> 1200", "> 2400"),
    ("a gone series still named", 'last_over_time(distbench_run_timestamp_seconds{source="gate"}[1d])',
     'distbench_run_timestamp_seconds{source="gate"}'),
    ("the gate's timestamps only", 'distbench_run_timestamp_seconds{source="gate"}[1d]',
     "distbench_run_timestamp_seconds[1d]"),
    ("a FAIL only", 'expr: distbench_gate_status{source="gate"} == 2', 'expr: distbench_gate_status{source="gate"} >= 1'),
    ("the gate's status only", 'expr: distbench_gate_status{source="gate"} == 2', "expr: distbench_gate_status == 2"),
    ("the node type grouping", "node_type, op,", "op,"),
    ("the dtype grouping", "timing, dtype, traffic", "timing, traffic"),
    ("the writer grouping", "(source, node_type,", "(node_type,"),
    ("uniform traffic only", 'distbench_comm_busbw_gbps{traffic=~"none|uniform"}', "distbench_comm_busbw_gbps"),
]


@needs_prometheus
@pytest.mark.parametrize("what,old,new", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_rules_unit_test_catches_a_changed_rule(binaries, tmp_path, what, old, new):
    text = RULES.read_text()
    assert old in text, f"{what}: {old!r} is not in {RULES.name}"
    (tmp_path / RULES.name).write_text(text.replace(old, new))
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    assert _promtool("check", "rules", tmp_path / RULES.name).returncode == 0  # still valid rules
    done = _promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr, f"{what}: {done.stdout}{done.stderr}"


def test_the_wheel_ships_the_rules():
    import fnmatch
    import tomllib

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["distbench"]
    for f in (RULES, RULES_TEST):
        rel = f.relative_to(REPO / "distbench").as_posix()
        assert any(fnmatch.fnmatch(rel, p.replace("**/", "*")) for p in patterns), (rel, patterns)


def _busbw_rule_labels() -> set[str]:
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
                if r["alert"] == "DistbenchBusbwBelowFleet")
    return {lab.strip() for clause in re.findall(r"\b(?:by|on) \(([^)]*)\)", rule["expr"]) for lab in clause.split(",")}


def _comm(node: str, busbw: float, size_bytes: int = GiB, timing: str = "events", time_us: float = 9000.0):
    """prom.comm_sample's samples of one collective, with the node_type label the busbw rule groups by."""
    return prom.comm_sample(node, "all_reduce", size_bytes, "nccl", 4, timing, busbw, time_us, NODE_TYPE)


def test_the_busbw_rule_groups_by_the_labels_named_here():
    assert _busbw_rule_labels() == set(GROUP)


def test_prom_writes_every_label_the_busbw_rule_groups_by(tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    for source, samples in (("gate", _comm("n1", 480.0)), ("run", prom.run_samples(_run_tables(tmp_path), "n1"))):
        path = prom.write(tmp_path / source, samples, source)
        (bw,) = [f for f in text_string_to_metric_families(path.read_text()) if f.name == "distbench_comm_busbw_gbps"]
        for sample in bw.samples:
            assert _busbw_rule_labels() <= set(sample.labels), (source, sample.labels)
            assert sample.labels["source"] == source and sample.labels["dtype"] and sample.labels["traffic"]


def test_the_busbw_rule_reads_uniform_traffic_only():
    rule = next(r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]
                if r["alert"] == "DistbenchBusbwBelowFleet")
    selectors = re.findall(r"distbench_comm_busbw_gbps(\{[^}]*\})?", rule["expr"])
    assert selectors == ['{traffic=~"%s"}' % "|".join(prom.ALERTED_TRAFFIC)] * 3, selectors


# ------------------------------------------------------------------------- the gate's and the run's files
def _run_tables(root: Path, gate_verdict: str | None = None) -> Path:
    """A full run's results/<label>/: health before it, a comm summary whose rows are in an order that a
    first-row-wins choice gets wrong (bf16 before float32, in place before out of place, a non-default
    NCCL setting first, zipf before uniform), a training summary, and (when given) a gate verdict."""
    from distbench.health.readings import HealthRow
    from distbench.health.table import write_health

    (root / "tables").mkdir(parents=True, exist_ok=True)
    (root / "health").mkdir(parents=True, exist_ok=True)
    write_health(root / "health" / "health_before.csv",
                 [HealthRow("n1", str(g), "temperature_c", "40", "<= 85", "ok", "") for g in range(4)])
    head = "op,traffic,dtype,nccl_env,timing,inplace,size_bytes,backend,world_size,nodes,busbw_gbps_median,time_us_median,status"
    rows = ["all_reduce,none,float32,NCCL_ALGO=Tree,events,False,1073741824,nccl,4,1,200.0,10000,ok",
            "all_reduce,none,bfloat16,default,events,False,1073741824,nccl,4,1,300.0,7000,ok",
            "all_reduce,none,float32,default,events,True,1073741824,nccl,4,1,330.0,6500,ok",
            "all_reduce,none,float32,default,events,False,1073741824,nccl,4,1,331.5,6477,ok",
            "all_to_all_v,zipf:1.2,float32,default,events,False,1073741824,nccl,4,1,150.0,9000,ok",
            "all_to_all_v,uniform,float32,default,events,False,1073741824,nccl,4,1,250.0,5000,ok",
            "all_reduce,none,float32,default,events,False,16777216,nccl,4,1,,,error"]
    (root / "tables" / "comm_summary.csv").write_text("\n".join([head, *rows]) + "\n")
    (root / "tables" / "training_summary.csv").write_text(
        "model,strategy,config,backend,world_size,step_time_ms_median,mfu\ngpt,ddp,plain,nccl,4,178.5,0.393\n")
    if gate_verdict:
        (root / "health" / "gate.csv").write_text("host,check,subject,value,expected,state,reason\n"
                                                  f"n1,verdict,gate,{gate_verdict},,{gate_verdict},why\n")
    return root


def _families(path: Path) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f for f in text_string_to_metric_families(path.read_text())}


def test_the_gate_and_a_full_run_each_write_their_own_file_and_never_the_others(tmp_path):
    assert (prom.GATE_FILE, prom.RUN_FILE) == ("distbench_gate.prom", "distbench_run.prom")
    d = tmp_path / "textfile"
    gate = prom.write(d, [("distbench_gate_status", {"node": "n1"}, 2.0), *_comm("n1", 480.0),
                          prom.timestamp("n1", "gate")])
    assert gate == d / prom.GATE_FILE
    before = gate.read_bytes()
    said = prom.write_run_metrics(d, _run_tables(tmp_path / "res", gate_verdict="PASS"), "n1")
    assert said == f"distbench: metrics written to {d / prom.RUN_FILE}"
    assert gate.read_bytes() == before  # the gate's FAIL stands
    assert sorted(p.name for p in d.iterdir()) == [prom.GATE_FILE, prom.RUN_FILE]  # nothing else left there
    run = _families(d / prom.RUN_FILE)
    assert "distbench_gate_status" not in run  # a run never says the gate's verdict, not even a fresh PASS
    assert {s.labels["source"] for f in run.values() for s in f.samples} == {"run"}
    assert {s.labels["source"] for f in _families(gate).values() for s in f.samples} == {"gate"}
    run_before = (d / prom.RUN_FILE).read_bytes()
    prom.write(d, [("distbench_gate_status", {"node": "n1"}, 0.0), prom.timestamp("n1", "gate")])
    assert (d / prom.RUN_FILE).read_bytes() == run_before  # and the gate never the run's
    with pytest.raises(ValueError, match="is not run's"):
        prom.write(d, [prom.timestamp("n1", "gate")], "run")


def test_each_file_is_renamed_into_place_from_a_temporary_file_node_exporter_does_not_read(tmp_path, monkeypatch):
    import distbench.core.io as io

    d = tmp_path / "textfile"
    prom.write(d, [prom.timestamp("n1", "gate")])
    old = (d / prom.GATE_FILE).read_text()
    renames, real = [], os.replace

    def replace(src, dst):
        renames.append((Path(src), Path(dst)))
        assert Path(src).read_text().startswith("# HELP ")  # complete before the rename
        raise OSError("disk full")

    monkeypatch.setattr(io.os, "replace", replace)
    for source in ("gate", "run"):
        with pytest.raises(OSError):
            prom.write(d, [prom.timestamp("n1", source)], source)
    assert [(src.parent, dst) for src, dst in renames] == [(d, d / prom.GATE_FILE), (d, d / prom.RUN_FILE)]
    assert not any(src.name.endswith(".prom") for src, _ in renames)  # the collector reads *.prom only
    assert (d / prom.GATE_FILE).read_text() == old and not (d / prom.RUN_FILE).exists()
    assert sorted(p.name for p in d.iterdir()) == [prom.GATE_FILE]  # no temporary file left
    monkeypatch.setattr(io.os, "replace", real)


def test_the_two_files_share_each_familys_help_and_type_and_no_series(tmp_path):
    """node_exporter merges a family that several files hold only when their HELP and TYPE agree, and
    drops a series another file already gave it: either would silently lose the gate's."""
    d = tmp_path / "textfile"
    rows = [SimpleNamespace(gpu=str(g), item="temperature_c", state="ok") for g in range(4)]
    prom.write(d, [("distbench_gate_status", {"node": "n1"}, 2.0), *prom.health_samples("n1", rows),
                   *_comm("n1", 331.5), prom.timestamp("n1", "gate")])
    prom.write_run_metrics(d, _run_tables(tmp_path / "res"), "n1")
    gate, run = _families(d / prom.GATE_FILE), _families(d / prom.RUN_FILE)
    shared = set(gate) & set(run)
    assert shared >= {"distbench_health_item_ok", "distbench_comm_busbw_gbps", "distbench_run_timestamp_seconds"}
    for name in shared:
        assert (gate[name].documentation, gate[name].type) == (run[name].documentation, run[name].type), name
        key = lambda s: tuple(sorted(s.labels.items()))  # noqa: E731
        assert not {key(s) for s in gate[name].samples} & {key(s) for s in run[name].samples}, name


def test_a_runs_comm_series_carry_dtype_and_traffic_one_each_chosen_by_setting_not_by_row(tmp_path):
    prom.write_run_metrics(tmp_path / "d", _run_tables(tmp_path / "res"), "n1")
    fams = _families(tmp_path / "d" / prom.RUN_FILE)
    bw = {(s.labels["op"], s.labels["dtype"], s.labels["traffic"]): s.value
          for s in fams["distbench_comm_busbw_gbps"].samples}
    # default NCCL settings, out of place: not the Tree row, not the in-place one, bf16 a series of its own
    assert bw == {("all_reduce", "float32", "none"): 331.5, ("all_reduce", "bfloat16", "none"): 300.0,
                  ("all_to_all_v", "float32", "uniform"): 250.0, ("all_to_all_v", "float32", "zipf:1.2"): 150.0}
    assert len(fams["distbench_comm_busbw_gbps"].samples) == len(bw)  # one series per op, size, dtype, traffic
    alerted = {k: v for k, v in bw.items() if k[2] in prom.ALERTED_TRAFFIC}
    assert alerted[("all_to_all_v", "float32", "uniform")] == 250.0 and ("all_to_all_v", "float32", "zipf:1.2") not in alerted
    lat = {(s.labels["dtype"], s.labels["traffic"]) for s in fams["distbench_comm_latency_us"].samples}
    assert lat == {(k[1], k[2]) for k in bw}
    # the same key twice, with nothing to choose between (two node counts): left out, no row wins
    table = tmp_path / "res" / "tables" / "comm_summary.csv"
    text = table.read_text()
    table.write_text(text + "all_reduce,none,bfloat16,default,events,False,1073741824,nccl,4,2,150.0,14000,ok\n")
    prom.write_run_metrics(tmp_path / "d", tmp_path / "res", "n1")
    bw = {(s.labels["op"], s.labels["dtype"]) for s in _families(tmp_path / "d" / prom.RUN_FILE)["distbench_comm_busbw_gbps"].samples}
    assert ("all_reduce", "bfloat16") not in bw and ("all_reduce", "float32") in bw


def test_the_gates_series_name_the_dtype_its_collective_runs(tmp_path, monkeypatch):
    """comm_sample's default dtype is the gate's comm job's (distbench.gate.check.run_comm), and its op
    takes no traffic matrix."""
    import distbench.comm.job as job_module
    from distbench.core.ops_spec import SPECS
    from distbench.gate import check

    jobs = []
    monkeypatch.setattr(job_module, "run_comm_job", lambda job, params, *a, **k: jobs.append((job, params)) or "ok")
    for backend in ("nccl", "gloo"):
        check.run_comm(backend, 2, tmp_path, 30)
    assert {j.dtype for j, _ in jobs} == {prom.GATE_DTYPE}
    ops = {op for _, params in jobs for op in params["ops"]}
    assert ops and not any(SPECS[op].takes_traffic for op in ops)
    (_, labels, _), *_ = _comm("n1", 480.0)
    assert (labels["dtype"], labels["traffic"]) == (prom.GATE_DTYPE, prom.NO_TRAFFIC)


# ------------------------------------------------------------------------------------ the real stack
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 2.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def _stop(proc: subprocess.Popen) -> None:
    """The process and its group (it leads a session of its own): SIGTERM, then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    else:
        try:  # the leader has ended: whatever it left in its group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _serve(procs: list, command, ready_path: str, log: Path) -> int:
    """Start `command(port)` on a free loopback port (appended to `procs` at once, for the caller's
    `finally`) and wait until GET ready_path answers; another port if the process ends first (a port
    taken between the probe and the bind)."""
    for _ in range(3):
        port = _free_port()
        with open(log, "ab") as out:
            proc = subprocess.Popen(command(port), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        procs.append(proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                _get(f"http://127.0.0.1:{port}{ready_path}")
                return port
            except OSError:
                time.sleep(0.1)
        _stop(proc)
    raise AssertionError(f"{command(0)[0]} did not start: {log.read_text()[-3000:]}")


class Stack:
    """Four nodes n1..n4 (one node exporter and one textfile directory each) and a Prometheus."""

    NODES = ("n1", "n2", "n3", "n4")
    BUSBW = {"n1": 480.0, "n2": 478.0, "n3": 482.0, "n4": 400.0}  # median 479: n4 at 0.835 of it

    def __init__(self, root: Path):
        self.root, self.procs, self.ports = root, [], {}

    def samples(self, node: str, state: str = "PASS", age_s: float = 0.0):
        out = [("distbench_gate_status", {"node": node}, float(prom.STATUS[state]))]
        rows = [SimpleNamespace(gpu=str(g), item="temperature_c", state="ok") for g in range(4)]
        out += prom.health_samples(node, rows)
        out += _comm(node, self.BUSBW[node])
        out += _comm(node, 0.0, size_bytes=8, timing="graph", time_us=11.5)  # latency only (no busbw at 8 B)
        name, labels, now = prom.timestamp(node, "gate")
        return out + [(name, labels, now - age_s)]

    def write(self, node: str, **kw) -> Path:
        return prom.write(self.root / node, self.samples(node, **kw))  # the gate's file

    def start(self) -> None:
        for node in self.NODES:
            self.write(node)
            self.ports[node] = _serve(self.procs, lambda port, node=node: [
                NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                f"--collector.textfile.directory={self.root / node}", f"--web.listen-address=127.0.0.1:{port}"],
                "/metrics", self.root / f"node-exporter-{node}.log")
        config = {"global": {"scrape_interval": INTERVAL, "evaluation_interval": INTERVAL},
                  "rule_files": [str(RULES)],
                  "scrape_configs": [{"job_name": "node", "static_configs": [
                      {"targets": [f"127.0.0.1:{self.ports[n]}" for n in self.NODES]}]}]}
        (self.root / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = _serve(self.procs, lambda port: [
            PROMETHEUS, f"--config.file={self.root / 'prometheus.yml'}", f"--storage.tsdb.path={self.root / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}"], "/-/ready", self.root / "prometheus.log")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _stop(proc)

    def api(self, path: str, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        body = json.loads(_get(url))
        assert body["status"] == "success", body
        return body["data"]

    def query(self, q: str) -> list[dict]:
        data = self.api("query", query=q)
        assert data["resultType"] == "vector", data
        return data["result"]

    def by_node(self, q: str) -> dict[str, float]:
        return {r["metric"]["node"]: float(r["value"][1]) for r in self.query(q)}

    def alerts(self, name: str) -> dict[str, dict]:
        return {a["labels"]["node"]: a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name}

    def until(self, what: str, probe, timeout: float = 30.0):
        """probe()'s first truthy answer, polled until a deadline."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            last = probe()
            if last:
                return last
            time.sleep(0.2)
        raise AssertionError(f"{what}: not within {timeout:g} s (last: {last!r}); prometheus log: "
                             f"{(self.root / 'prometheus.log').read_text()[-2000:]}")


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    assert HAVE, f"DISTBENCH_REQUIRE_PROMETHEUS is set but a binary is missing: {WHY}"
    s = Stack(tmp_path_factory.mktemp("prometheus"))
    try:
        s.start()
        s.until("every node's gate status scraped", lambda: len(s.query("distbench_gate_status")) == len(s.NODES))
        yield s
    finally:
        s.stop()
        assert all(p.poll() is not None for p in s.procs)


def _fresh(stack: Stack) -> None:
    """Every node PASS with a new timestamp, and Prometheus has scraped it."""
    for node in stack.NODES:
        stack.write(node)
    def fresh():
        ages = stack.by_node('time() - distbench_run_timestamp_seconds{source="gate"}')
        return stack.by_node("distbench_gate_status") == dict.fromkeys(stack.NODES, 0.0) and max(ages.values()) < 60

    stack.until("every node PASS and fresh", fresh)
    scraped = time.time()
    stack.until("the rules evaluated after it", lambda: _evaluated_after(stack, scraped))


@heavy_stack
def test_prometheus_scrapes_the_gate_file_and_evaluates_the_rules(stack):
    _fresh(stack)
    status = stack.query("distbench_gate_status")
    got = {r["metric"]["node"]: (r["metric"]["job"], r["value"][1]) for r in status}
    assert got == dict.fromkeys(stack.NODES, ("node", "0"))
    bw = stack.query('distbench_comm_busbw_gbps{node="n1"}')
    assert [(r["metric"], r["value"][1]) for r in bw] == [(
        {"__name__": "distbench_comm_busbw_gbps", "instance": f"127.0.0.1:{stack.ports['n1']}", "job": "node",
         "node": "n1",
         "node_type": NODE_TYPE, "op": "all_reduce", "size_bytes": str(GiB), "backend": "nccl", "world_size": "4",
         "timing": "events", "dtype": "float32", "traffic": "none", "source": "gate"}, "480")]
    assert stack.by_node('distbench_comm_latency_us{size_bytes="8",timing="graph"}') == dict.fromkeys(stack.NODES, 11.5)
    assert len(stack.query("distbench_health_item_ok == 1")) == 4 * len(stack.NODES)
    assert {r["value"][1] for r in stack.query("node_textfile_scrape_error")} == {"0"}
    # the shipped rules loaded, each evaluated without an error (a many-to-many match would be one)
    rules = {r["name"]: r for g in stack.api("rules")["groups"] for r in g["rules"]}
    assert set(rules) == {"DistbenchGateFailed", "DistbenchBusbwBelowFleet", "DistbenchGateStale"}
    stack.until("every rule evaluated", lambda: all(r["health"] == "ok" for g in stack.api("rules")["groups"]
                                                   for r in g["rules"]))
    # the busbw rule's own expression: n4 under 0.9 of its type's median; the alert pending (for: 15m)
    ratio = stack.by_node(rules["DistbenchBusbwBelowFleet"]["query"])
    assert list(ratio) == ["n4"] and ratio["n4"] == pytest.approx(400 / 479)
    pending = stack.until("DistbenchBusbwBelowFleet pending for n4", lambda: stack.alerts("DistbenchBusbwBelowFleet"))
    assert list(pending) == ["n4"] and pending["n4"]["state"] == "pending", pending
    assert pending["n4"]["labels"]["node_type"] == NODE_TYPE
    assert float(pending["n4"]["value"]) == pytest.approx(400 / 479)
    assert "83.51% of the median busbw" in pending["n4"]["annotations"]["description"]


@heavy_stack
def test_a_failing_gate_fires_DistbenchGateFailed_and_a_pass_resolves_it(stack):
    _fresh(stack)
    assert not stack.alerts("DistbenchGateFailed")
    stack.write("n2", state="FAIL")
    fired = stack.until("DistbenchGateFailed firing for n2", lambda: stack.alerts("DistbenchGateFailed"))
    assert list(fired) == ["n2"] and fired["n2"]["state"] == "firing", fired  # no `for:`: at once
    assert fired["n2"]["labels"]["severity"] == "critical"
    assert fired["n2"]["annotations"]["summary"] == "distbench gate FAIL on n2"
    stack.write("n3", state="WARN")
    stack.until("n3 WARN scraped", lambda: stack.by_node('distbench_gate_status{node="n3"}') == {"n3": 1.0})
    scraped = time.time()
    stack.until("the rules evaluated after it", lambda: _evaluated_after(stack, scraped))
    assert list(stack.alerts("DistbenchGateFailed")) == ["n2"]  # a WARN does not fire it
    stack.write("n2", state="PASS")
    stack.until("DistbenchGateFailed resolved", lambda: not stack.alerts("DistbenchGateFailed"))


def _evaluated_after(stack: Stack, t: float) -> bool:
    from datetime import datetime

    group = stack.api("rules")["groups"][0]
    when = re.sub(r"(\.\d{6})\d*", r"\1", group["lastEvaluation"]).replace("Z", "+00:00")  # to microseconds
    return datetime.fromisoformat(when).timestamp() > t


@heavy_stack
def test_a_silent_gate_fires_DistbenchGateStale_even_once_its_file_is_gone(stack):
    _fresh(stack)
    assert not stack.alerts("DistbenchGateStale")
    stack.write("n1", age_s=1300)  # written 1300 s ago: more than 2 intervals of 600 s
    fired = stack.until("DistbenchGateStale firing for n1", lambda: stack.alerts("DistbenchGateStale"))
    assert list(fired) == ["n1"] and fired["n1"]["state"] == "firing", fired
    assert float(fired["n1"]["value"]) == pytest.approx(1300, abs=30)
    (stack.root / "n1" / prom.GATE_FILE).unlink()
    stack.until("n1's series gone (stale)", lambda: not stack.query('distbench_run_timestamp_seconds{node="n1"}'))
    gone = time.time()
    stack.until("the rules evaluated twice after it", lambda: _evaluated_after(stack, gone + 1.0))  # 2 intervals
    assert list(stack.alerts("DistbenchGateStale")) == ["n1"]  # still named: last_over_time keeps its last value
    stack.write("n1")
    stack.until("DistbenchGateStale resolved", lambda: not stack.alerts("DistbenchGateStale"))


# docs/gate-prometheus.md's queries, each with what it returns on the stack's fleet (n1..n4 fresh and PASS,
# n2 FAIL): the doc may name no query this list does not hold.
def _check_failed(r):
    assert [x["metric"]["node"] for x in r] == ["n2"]


def _check_bottom3(r):
    got = {x["metric"]["node"]: float(x["value"][1]) for x in r}
    assert got == {"n4": 400.0, "n2": 478.0, "n1": 480.0}  # not n3's 482


def _check_ratio(r):
    got = {x["metric"]["node"]: float(x["value"][1]) for x in r}
    assert got == pytest.approx({"n4": 400 / 479, "n2": 478 / 479, "n1": 480 / 479})
    assert all(x["metric"]["node_type"] == NODE_TYPE for x in r)


def _check_median(r):
    got = [(x["metric"]["node_type"], x["metric"]["timing"], float(x["value"][1])) for x in r]
    assert got == [(NODE_TYPE, "events", 479.0)]


def _check_age(r):
    got = {x["metric"]["node"]: float(x["value"][1]) for x in r}
    assert set(got) == set(Stack.NODES) and all(-5 < v < 120 for v in got.values()), got


def _check_alerts(r):
    got = {(x["metric"]["alertname"], x["metric"]["node"], x["metric"]["alertstate"]) for x in r}
    assert got == {("DistbenchGateFailed", "n2", "firing"), ("DistbenchBusbwBelowFleet", "n4", "pending")}, got


def _check_scrape_error(r):
    assert r == []


BUSBW_1G = 'distbench_comm_busbw_gbps{source="gate",op="all_reduce",size_bytes="1073741824",timing="events"}'
MEDIAN_BY = "quantile by (node_type, op, size_bytes, backend, world_size, timing)"
DOC_QUERIES = {
    'distbench_gate_status{source="gate"} == 2': _check_failed,
    f"bottomk by (node_type, backend, world_size) (3, {BUSBW_1G})": _check_bottom3,
    f"""bottomk by (node_type, backend, world_size) (3,
    {BUSBW_1G}
  / on (node_type, op, size_bytes, backend, world_size, timing) group_left
    {MEDIAN_BY} (0.5, {BUSBW_1G})
)""": _check_ratio,
    'quantile by (source, node_type, op, size_bytes, backend, world_size, timing, dtype) '
    '(0.5, distbench_comm_busbw_gbps{op="all_reduce",size_bytes="1073741824"})': _check_median,
    'time() - max by (node) (distbench_run_timestamp_seconds{source="gate"})': _check_age,
    'ALERTS{alertname=~"Distbench.*"}': _check_alerts,
    "node_textfile_scrape_error == 1": _check_scrape_error,
}


def _doc_blocks(lang: str) -> list[str]:
    return [b.strip() for b in re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), re.S)]


def test_every_query_of_the_doc_is_one_the_stack_test_runs():
    assert _doc_blocks("promql") and set(_doc_blocks("promql")) == set(DOC_QUERIES)


@heavy_stack
def test_the_docs_queries_on_the_real_stack(stack):
    _fresh(stack)
    stack.write("n2", state="FAIL")
    stack.until("DistbenchGateFailed firing for n2", lambda: stack.alerts("DistbenchGateFailed"))
    stack.until("DistbenchBusbwBelowFleet pending for n4", lambda: stack.alerts("DistbenchBusbwBelowFleet"))
    try:
        for q, check in DOC_QUERIES.items():
            try:  # the alerts of an earlier test may take an evaluation to resolve: polled
                stack.until(q, lambda: _passes(check, stack.query(q)), timeout=10)
            except AssertionError:
                check(stack.query(q))  # its own message
    finally:
        stack.write("n2")


def _passes(check, result) -> bool:
    try:
        check(result)
        return True
    except AssertionError:
        return False


@needs_prometheus
def test_the_docs_configuration_passes_promtool(binaries, tmp_path):
    """The doc's prometheus.yml, its rule file the shipped one (the doc copies it to /etc/prometheus)."""
    (config,) = [b for b in _doc_blocks("yaml") if "scrape_configs" in b]
    path = tmp_path / "prometheus.yml"
    path.write_text(config.replace("/etc/prometheus/distbench-alerts.yaml", str(RULES)))
    done = _promtool("check", "config", path)
    assert done.returncode == 0 and "SUCCESS: 1 rule files found" in done.stdout, done.stdout + done.stderr
    # the doc's command finds the rules in the package
    (find,) = [line for line in _doc_blocks("bash") if line.startswith("python -c")]
    found = subprocess.run(find.replace("python", sys.executable, 1), shell=True, capture_output=True, text=True,
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert Path(found.stdout.strip()) == RULES_DIR, found.stderr
    if NODE_EXPORTER.endswith("prometheus-node-exporter"):  # Debian's build: its default textfile directory
        helptext = subprocess.run([NODE_EXPORTER, "--help"], capture_output=True, text=True, timeout=30)
        assert 'collector.textfile.directory="/var/lib/prometheus/node-exporter"' in helptext.stdout + helptext.stderr


@heavy_stack
def test_the_file_parses_with_prometheus_client_as_written_and_as_node_exporter_serves_it(stack):
    from prometheus_client.parser import text_string_to_metric_families

    path = stack.write("n3")
    written = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    assert set(written) == {"distbench_gate_status", "distbench_health_item_ok", "distbench_comm_busbw_gbps",
                            "distbench_comm_latency_us", "distbench_run_timestamp_seconds"}
    assert [(s.labels["node_type"], s.value) for s in written["distbench_comm_busbw_gbps"].samples] == [
        (NODE_TYPE, 482.0)]
    metrics = _get(f"http://127.0.0.1:{stack.ports['n3']}/metrics").decode()
    served = {f.name: f for f in text_string_to_metric_families(metrics)}
    for name, fam in written.items():
        assert served[name].type == "gauge" and served[name].documentation == prom.HELP[name]
        key = lambda s: sorted(s.labels.items())  # noqa: E731 - node exporter sorts its series
        assert [(s.labels, s.value) for s in sorted(served[name].samples, key=key)] == [
            (s.labels, s.value) for s in sorted(fam.samples, key=key)]
    assert served["node_textfile_scrape_error"].samples[0].value == 0.0


@heavy_stack
def test_a_full_run_after_a_failing_gate_leaves_DistbenchGateFailed_firing(stack, tmp_path):
    """Issue 55: a full run publishing to the gate's textfile directory. Its file is its own: the gate's
    FAIL stays served, DistbenchGateFailed keeps firing, and node exporter serves every series of both
    files (a family's HELP that differed between them, or a series in both, would be dropped with no
    scrape error: node_textfile_scrape_error stays 0 then, so the series are counted)."""
    _fresh(stack)
    gate = stack.write("n2", state="FAIL")
    stack.until("DistbenchGateFailed firing for n2", lambda: stack.alerts("DistbenchGateFailed"))
    before = gate.read_bytes()
    # the run's own tables, a fresh gate PASS among them (a run of `snakemake all gate`): not republished
    said = prom.write_run_metrics(stack.root / "n2", _run_tables(tmp_path / "res", gate_verdict="PASS"), "n2")
    try:
        assert said == f"distbench: metrics written to {stack.root / 'n2' / prom.RUN_FILE}"
        assert gate.read_bytes() == before
        stack.until("the run's series scraped",
                    lambda: stack.query('distbench_run_timestamp_seconds{node="n2",source="run"}'))
        scraped = time.time()
        stack.until("the rules evaluated twice after it", lambda: _evaluated_after(stack, scraped + 1.0))
        fired = stack.alerts("DistbenchGateFailed")
        assert list(fired) == ["n2"] and fired["n2"]["state"] == "firing", fired
        assert fired["n2"]["labels"]["source"] == "gate"
        assert stack.query('distbench_gate_status{node="n2"}')[0]["value"][1] == "2"
        assert len(stack.query('distbench_gate_status{node="n2"}')) == 1  # the run says no verdict
        assert not stack.alerts("DistbenchGateStale")
        # every series of both files, as node exporter serves them and as Prometheus stored them
        from prometheus_client.parser import text_string_to_metric_families

        metrics = _get(f"http://127.0.0.1:{stack.ports['n2']}/metrics").decode()
        served = {f.name: f for f in text_string_to_metric_families(metrics)}
        key = lambda s: tuple(sorted(s.labels.items()))  # noqa: E731
        for path in (gate, stack.root / "n2" / prom.RUN_FILE):
            for name, fam in _families(path).items():
                assert {key(s) for s in fam.samples} <= {key(s) for s in served[name].samples}, (path.name, name)
                stored = stack.query(f'{name}{{node="n2",source="{fam.samples[0].labels["source"]}"}}')
                assert len(stored) == len(fam.samples), (path.name, name, stored)
        run_bw = stack.query('distbench_comm_busbw_gbps{node="n2",source="run"}')
        assert {(r["metric"]["dtype"], r["metric"]["traffic"]) for r in run_bw} == {
            ("float32", "none"), ("bfloat16", "none"), ("float32", "uniform"), ("float32", "zipf:1.2")}
        assert "error gathering metrics" not in (stack.root / "node-exporter-n2.log").read_text()
    finally:
        (stack.root / "n2" / prom.RUN_FILE).unlink(missing_ok=True)
        stack.write("n2")
        stack.until("DistbenchGateFailed resolved", lambda: not stack.alerts("DistbenchGateFailed"))
