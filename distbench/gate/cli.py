"""python -m distbench.gate [--prom DIR] [--baseline results/<label>] [--budget-s 60] [--drain] [--resume]

One node's gate: its health (the health check's items and vendor-cited limits), a short collective
check over its GPUs (Gloo on a CPU host: no GPU verdict), both held against the published reference
for this GPU and count and against the node's own baseline; one line

    distbench gate: PASS|WARN|FAIL <node>: <reason>

and exit 0 (pass, warn) or 1 (fail), within --budget-s (past it: fail, naming the step, with every
process the gate started killed). Under SLURM (distbench.gate.slurm, docs/gate.md) it is a Prolog= or
a HealthCheckProgram=; --drain drains the node on FAIL, --resume returns it to service on PASS/WARN
if distbench drained it. --prom DIR writes DIR/distbench.prom for node_exporter's textfile collector.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from distbench.core.run_label import node_name
from distbench.gate import slurm
from distbench.gate.supervise import Budget, python

DEFAULT_BUDGET_S = 60.0  # DCGM's level 2 takes under 2 minutes; operators ask for less (soperator#2081)
DEFAULT_LOAD_S = 3.0  # the health reading's matmul load on GPUs (throttle and PCIe generation are read under it)


def reserve_s(budget_s: float) -> float:
    """The budget's share for this process after the readings: the tables, the verdict, scontrol."""
    return min(8.0, max(2.0, 0.1 * budget_s))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.gate", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prom", metavar="DIR", help="write DIR/distbench.prom (node_exporter textfile collector)")
    p.add_argument("--baseline", action="append", default=[],
                   help="a known-good run of this node type: a gate's --out directory, results/<label>, its tables/, "
                        "or a run label; repeat it for several runs (their run-to-run noise is then measured, and a "
                        "regression beyond it can fail; against one run it only warns)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help="finish within this many seconds, or fail")
    p.add_argument("--drain", action="store_true", help="on FAIL: scontrol update State=DRAIN Reason=\"distbench: ...\"")
    p.add_argument("--resume", action="store_true", help="on PASS/WARN: resume the node, only if distbench drained it")
    p.add_argument("--out", help="keep the readings, gate.csv and the comm job's files here (default: a temporary "
                                 "directory, removed)")
    p.add_argument("--csv", help="also write the gate's table here (the Snakemake target's output)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs this node must have (default: those detected)")
    p.add_argument("--load-s", type=float, default=DEFAULT_LOAD_S, help="seconds of matmul load while the health "
                                                                        "reading samples the GPUs (0: idle)")
    p.add_argument("--node", help="this node's name (default: SLURMD_NODENAME, else the host name)")
    p.add_argument("--mode", choices=("auto", "prolog", "health-check", "plain"), default="auto",
                   help="how SLURM runs the gate (auto: from slurmd's environment)")
    a = p.parse_args(argv)
    if a.budget_s <= 0:
        p.error("--budget-s must be > 0")
    return a


def _health_rows(readings: dict):
    from distbench.health.readings import HealthRow

    return [HealthRow(**r) for r in readings.get("health") or []]


def judge(readings: dict, out: Path, baseline: list[str], outcome: str, killed: int, budget_s: float):
    """(state, reason, checks, points) from the readings (distbench.gate.rules)."""
    from distbench.gate import points as pts
    from distbench.gate import rules
    from distbench.gate.check import GLOO_LARGE, NCCL_LARGE, SMALL

    rows = _health_rows(readings)
    checks = rules.health_checks(rows)
    csv = Path(readings.get("comm_csv") or out / "gate_comm.csv")
    points = pts.points_from_csv(csv) if csv.exists() else []
    base, where = pts.baseline_points(baseline)
    if baseline and base is None:
        checks.append(rules.Check("baseline", ", ".join(baseline), "", "", rules.WARN, where))
    status = readings.get("comm_status", "not run")
    backend = readings.get("backend", "")
    summary = [rules.health_summary(rows)] if rows else ["no health reading"]
    if status.startswith("skipped"):
        checks.append(rules.Check("collective", "comm job", "", "", rules.INFO, status))
    elif outcome == "done" or points:
        checks += rules.comm_checks(points, status if outcome == "done" or status != "not run" else "ok",
                                    readings.get("gpu_name"), readings.get("peak"), readings.get("nvls"), base,
                                    NCCL_LARGE if backend == "nccl" else GLOO_LARGE, SMALL)
    for c in checks:
        if c.check == "collective" and c.state == rules.INFO and c.value:
            unit = "GB/s busbw" if c.subject.endswith("busbw_gbps") else "µs per op"
            summary.append(f"{c.subject.rsplit(' ', 1)[0]}: {float(c.value):.3g} {unit}")
    if backend == "gloo":
        summary.append("the collective check ran Gloo on CPU processes: not a GPU verdict")
    if base is not None:
        summary.append(f"against the baseline {where}")
    if outcome != "done":
        step = readings.get("step", "starting the readings")
        checks.append(rules.Check("budget", "gate", "", f"<= {budget_s:g} s", rules.FAIL,
                                  f"{outcome}: not done within its {budget_s:g} s budget, in step '{step}' "
                                  f"({killed} process(es) killed)"))
    state = rules.verdict(checks)
    return state, rules.reason(checks, state, summary), checks, points


def main(argv=None) -> int:
    t0 = time.monotonic()
    a = parse_args(argv)
    node = a.node or node_name()
    keep = bool(a.out)
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="distbench-gate-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "readings.json").unlink(missing_ok=True)
    limit = a.budget_s - reserve_s(a.budget_s)
    cmd = [python(), "-m", "distbench.gate.check", "--out-dir", str(out), "--gpus", str(a.gpus),
           "--load-s", str(a.load_s), "--deadline-s", f"{limit:.1f}", "--host", node]
    try:
        outcome, killed = Budget(limit).run(cmd, dict(os.environ), out / "gate_check.log")
        try:
            readings = json.loads((out / "readings.json").read_text())
        except (OSError, ValueError):
            readings = {}
        if outcome == "done" and "comm_status" not in readings:
            log = (out / "gate_check.log").read_text(errors="replace").strip().splitlines()
            readings["comm_status"] = "the readings ended early: " + (log[-1][:200] if log else "no output")
        state, why, checks, points = judge(readings, out, a.baseline, outcome, killed, a.budget_s)
        wall = time.monotonic() - t0
        actions = _slurm(a, node, state, why)
        _write(a, out, node, state, why, checks, points, readings, wall)
        if time.monotonic() - t0 > a.budget_s and state != "FAIL":
            state, why = "FAIL", f"over its {a.budget_s:g} s budget ({time.monotonic() - t0:.1f} s)"
        from distbench.gate.rules import line

        print(line(state, node, why), flush=True)
        for act in actions:
            print(f"distbench gate: {act}", file=sys.stderr, flush=True)
        return 1 if state == "FAIL" else 0
    finally:
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


def _slurm(a, node: str, state: str, why: str) -> list[str]:
    acts = []
    if state == "FAIL" and a.drain:
        acts.append(slurm.drain(node, why))
    if state != "FAIL" and a.resume:
        acts.append(slurm.resume(node))
    return acts


def _write(a, out: Path, node: str, state: str, why: str, checks, points, readings: dict, wall: float) -> None:
    import pandas as pd

    from distbench.core.io import atomic_write_csv
    from distbench.gate import prom, rules

    mode = slurm.mode() if a.mode == "auto" else a.mode
    checks = [*checks, rules.Check("budget", "wall_s", f"{wall:.1f}", f"<= {a.budget_s:g}", rules.INFO,
                                   f"the gate's wall time ({mode} mode)"),
              rules.Check("verdict", "gate", state, "", state, why)]
    df = pd.DataFrame(rules.rows(readings.get("host") or node, checks), columns=list(rules.GATE.names))
    for path in filter(None, (out / "gate.csv", a.csv)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_csv(path, df)
    if a.prom:
        samples = [("distbench_gate_status", {"node": node}, float(prom.STATUS[state]))]
        samples += prom.health_samples(node, _health_rows(readings))
        for p in points:
            if p.status == "ok":
                bw = rules._med(p.busbw_gbps)
                samples += prom.comm_sample(node, p.op, p.size_bytes, p.backend, p.world_size, p.timing, bw,
                                            rules._med(p.time_us))
        samples.append(prom.timestamp(node, "gate"))
        prom.write(a.prom, samples)
