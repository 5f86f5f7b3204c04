"""python -m distbench.gate [--prom DIR] [--baseline results/<label>] [--budget-s 60] [--drain] [--resume]

One node's gate: its health (the health check's items and vendor-cited limits), a short collective
check over its GPUs (Gloo on a CPU host: no GPU verdict), both held against the published reference
for this GPU and count and against the node's own baseline; one line

    distbench gate: PASS|WARN|FAIL <node>: <reason>

and exit 0 (pass, warn) or 1 (fail), within --budget-s (past it: fail, naming the step, with every
process the gate started killed); 2: a usage error, before anything is read (a flag's value, said with
what is allowed: never a verdict on the node); 3: no verdict to act on (not judged, or the gate itself
failed), a drain or resume that could not be carried out, or a verdict it could not write: never a
drain (EXIT_CODES, printed by --help, is docs/gate.md's table). Under SLURM (distbench.gate.slurm, docs/gate.md) it is a Prolog= or
a HealthCheckProgram=; --drain drains the node on FAIL, --resume returns it to service on PASS/WARN
if distbench drained it. --prom DIR writes DIR/distbench_gate.prom for node_exporter's textfile collector.
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
from distbench.gate import slurm, transport
from distbench.gate.inputs import (LEGACY_GATE_FILES, baseline_problems, clear_earlier_gate, flag_problems,
                                   record_gate_files, reserve_s)
from distbench.gate.supervise import Budget, python
from distbench.launch.hostlock import LockSettingError, check_kind, check_mode, lock_path
from distbench.launch.pycache import use_pycache

DEFAULT_BUDGET_S = 60.0  # DCGM's level 2 takes under 2 minutes; operators ask for less (soperator#2081)
DEFAULT_LOAD_S = 3.0  # the health reading's matmul load on GPUs (throttle and PCIe generation are read under it)
# exit codes: 2 is argparse's usage error; a Python error would exit 1 and read as a FAIL. EXIT_CODES is
# the one source of their meaning: --help's epilog prints it, and docs/gate.md's table must equal it
# (tests/health/test_gate_exit_codes.py).
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3
EXIT_CODES = {
    EXIT_PASS: "PASS or WARN: the node was judged and may run jobs (the line says why it warns); with `--resume`, "
               "a node distbench drained is back in service",
    EXIT_FAIL: "FAIL: the node was judged and must not run jobs; with `--drain` it is drained, reason "
               "`distbench: ...` (a FAIL whose outputs could not be written still exits 1: stderr says which)",
    EXIT_USAGE: "usage error: a flag's value cannot be used (the message names the flag, the value and what is "
                "allowed), e.g. a `--budget-s` outside its range, a `--baseline` that holds no gate output, an "
                "`--out` holding files the gate did not write. Nothing was read, no verdict, nothing drained; fix "
                "the wrapper",
    EXIT_ERROR: "no verdict to act on, and never a drain: the node was not judged (`ERROR <node>: not judged: "
                "...`: the host lock held by another run, refused or waited for past the budget; a `--baseline` "
                "that could not be read when judged), or the gate itself failed (`ERROR <node>: the gate itself "
                "failed ...`, a traceback on stderr); or a verdict whose drain or resume could not be carried out "
                "(`DRAIN FAILED: <why>` or `RESUME FAILED: <why>` first in the line, and in syslog); or a PASS/WARN "
                "whose outputs could not be written (stderr says which)",
}
EXIT_OTHER = ("the gate was killed (128 + the signal, e.g. 137 for SIGKILL) or Python could not start it; "
              "no verdict")


def _epilog() -> str:
    import textwrap

    rows = [*EXIT_CODES.items(), ("other", EXIT_OTHER)]
    return "exit codes (docs/gate.md):\n" + "\n".join(
        textwrap.fill(text, width=100, initial_indent=f"  {code!s:<7}", subsequent_indent=" " * 9)
        for code, text in rows)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.gate", description=__doc__.split("\n\n")[1],
                                epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prom", metavar="DIR", help="write DIR/distbench_gate.prom (node_exporter textfile collector; a full run writes distbench_run.prom beside it)")
    p.add_argument("--baseline", action="append", default=[],
                   help="a known-good run of this node type: a gate's --out directory, results/<label>, its tables/, "
                        "or a run label; repeat it for several runs (their run-to-run noise is then measured, and a "
                        "regression beyond it can fail; against one run it only warns)")
    p.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S,
                   help="finish within this many seconds, or fail (at least what the readings need: the usage "
                        "error says how much)")
    p.add_argument("--drain", action="store_true", help="on FAIL: scontrol update State=DRAIN Reason=\"distbench: ...\"")
    p.add_argument("--resume", action="store_true", help="on PASS/WARN: resume the node, only if distbench drained it")
    p.add_argument("--out", help="keep the readings, gate.csv and the comm job's files here (default: a temporary "
                                 "directory, removed), with the gate's list of them (.distbench-gate-files.json): "
                                 "an earlier gate's files there are removed first, and only those; a directory "
                                 "holding other files is refused")
    p.add_argument("--csv", help="also write the gate's table here (the Snakemake target's output)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs this node must have: fewer, or none readable, fails "
                                                       "(default 0: those detected)")
    p.add_argument("--load-s", type=float, default=DEFAULT_LOAD_S, help="seconds of matmul load while the health "
                                                                        "reading samples the GPUs (0: idle)")
    p.add_argument("--node", help="this node's name (default: SLURMD_NODENAME, else the host name)")
    p.add_argument("--mode", choices=("auto", "prolog", "health-check", "plain"), default="auto",
                   help="how SLURM runs the gate (auto: from slurmd's environment)")
    p.add_argument("--host-lock", choices=("wait", "fail"), default=None,
                   help="this host's benchmark lock (distbench.launch.hostlock) held by another run: wait for it "
                        "within the budget, or fail at once naming it (default: DISTBENCH_HOST_LOCK_MODE, else wait)")
    a = p.parse_args(argv)
    # every problem at once, before anything is read: exit 2, never a verdict on the node
    a.node_from = "--node" if a.node is not None else next(
        (k for k in ("DISTBENCH_NODE_NAME", "SLURMD_NODENAME") if os.environ.get(k)), "the host name")
    a.node = a.node if a.node is not None else node_name()
    problems = flag_problems(a, a.node, a.node_from)

    try:  # --host-lock, else DISTBENCH_HOST_LOCK_MODE, else wait; and DISTBENCH_HOST_LOCK a plain file
        a.host_lock = check_mode(a.host_lock)
        check_kind(lock_path())
    except LockSettingError as e:
        problems.append(e.why)
    if problems:
        p.error("; ".join(problems))
    return a


def _health_rows(readings: dict):
    from distbench.health.readings import HealthRow

    return [HealthRow(**r) for r in readings.get("health") or []]


def _this_runs_points(readings: dict) -> tuple[list, str]:
    """The collective's points of this invocation only: the comm CSV its readings named (never an
    earlier gate's file left in a reused --out)."""
    from distbench.gate import points as pts

    csv = readings.get("comm_csv")
    if not csv or not Path(csv).exists():
        return [], ""
    try:
        return pts.points_from_csv(csv), ""
    except (OSError, ValueError) as e:
        return [], f"its table {csv} is unreadable ({' '.join(str(e).split())[:200]})"


def _baseline_checks(checks: list, summary: list, baseline: list[str], base, where: str, notes: list[str],
                     points: list) -> list:
    """Whether the baseline was compared, said once: `against the baseline` only when some figure was;
    a baseline that cannot be compared warns, saying why (never reported as judged)."""
    from distbench.gate import rules

    out = []
    if notes:
        out.append(rules.Check("baseline", "left out", "", "", rules.INFO, "; ".join(notes)[:1000]))
    if base is None:
        out.append(rules.Check("baseline", ", ".join(baseline), "", "", rules.WARN,
                               f"cannot be compared, not judged against it: {where}"[:1000]))
        return out
    compared = [c for c in checks if c.check == "baseline" and c.value]
    if compared:
        text = "; ".join(notes)
        left = f" (left out: {text if len(text) <= 200 else text[:197] + '...'})" if notes else ""
        summary.append(f"against the baseline {where}{left}")
    elif any(p.status == "ok" for p in points):
        why = sorted({c.reason for c in checks if c.check == "baseline"})
        has = sorted({f"{b.backend} {b.world_size} ranks" for b in base.values()})
        now = sorted({f"{p.backend} {p.world_size} ranks" for p in points})
        out.append(rules.Check("baseline", where, "", "", rules.WARN,
                               f"cannot be compared, not judged against it: {'; '.join(why)} (the baseline has "
                               f"{', '.join(has)}; this run {', '.join(now)})"))
    else:
        out.append(rules.Check("baseline", where, "", "", rules.INFO,
                               "not compared: this run measured no collective figure"))
    return out


def judge(readings: dict, baseline: list[str], outcome: str, killed: int, budget_s: float, expected_gpus: int = 0):
    """(state, reason, checks, points) from this invocation's readings (distbench.gate.rules)."""
    from distbench.gate import culprit, rules
    from distbench.gate import points as pts
    from distbench.gate.check import GLOO_LARGE, NCCL_LARGE, SMALL

    rows = _health_rows(readings)
    checks = []
    if readings.get("host_busy"):
        checks.append(rules.Check("host_lock", "host lock", "", "", rules.FAIL,
                                  f"not read: {readings['host_busy']}"))
    checks += rules.health_checks(rows)
    if rows:
        checks = rules.gpu_count_check(checks, expected_gpus, int(readings.get("gpus") or 0),
                                       readings.get("gpus_source", ""))
        checks += culprit.span_check(rows, expected_gpus, int(readings.get("gpus") or 0),
                                     readings.get("backend", ""), readings.get("cuda_visible"),
                                     readings.get("gpus_source", ""))
    points, unreadable = _this_runs_points(readings)
    base, where, notes = pts.baseline_points(baseline, readings.get("gpu_name")) if baseline else (None, "", [])
    status = readings.get("comm_status", "not run")
    if unreadable:
        status = f"the collective ran ({status}) but {unreadable}"
    backend = readings.get("backend", "")
    summary = [rules.health_summary(rows)] if rows else ["no health reading"]
    if readings.get("host_busy"):
        pass  # nothing was read: the host lock's check says why
    elif status.startswith("skipped"):
        checks.append(rules.Check("collective", "comm job", "", "", rules.INFO, status))
    elif outcome == "done" or points:
        checks += rules.comm_checks(points, status if outcome == "done" or status != "not run" else "ok",
                                    readings.get("gpu_name"), readings.get("peak"), readings.get("nvls"),
                                    base if baseline else None, NCCL_LARGE if backend == "nccl" else GLOO_LARGE, SMALL)
    if backend == "nccl" and not readings.get("host_busy"):  # NCCL's transport beside the topology's, even
        checks += rules.transport_checks(readings)  # when the budget cut the collective (a configuration cause)
    for c in checks:
        if c.check == "collective" and c.state == rules.INFO and c.value:
            unit = "GB/s busbw" if c.subject.endswith("busbw_gbps") else "µs per op"
            summary.append(f"{c.subject.rsplit(' ', 1)[0]}: {float(c.value):.3g} {unit}")
    if backend == "gloo":
        summary.append("the collective check ran Gloo on CPU processes: not a GPU verdict")
    if baseline:
        checks += _baseline_checks(checks, summary, baseline, base, where, notes, points)
    if outcome != "done":
        step = readings.get("step", "starting the readings")
        checks.append(rules.Check("budget", "gate", "", f"<= {budget_s:g} s", rules.FAIL,
                                  f"{outcome}: not done within its {budget_s:g} s budget, in step '{step}' "
                                  f"({killed} process(es) killed)"))
    state = rules.verdict(checks)
    head = culprit.lead(rows, checks, state)  # the bad GPU first, named by index, bus id and UUID
    named = {f"GPU {g} " for g in culprit.evidence(rows)} if head else set()  # their items are in the head
    rest = rules.reason([c for c in checks if not (head and c.reason in head)
                         and not (c.check == "health" and any(c.subject.startswith(n) for n in named))],
                        state, summary if not head else [])
    return state, f"{head} | {rest}" if head and rest else head or rest, checks, points


# what a gate writes under --out: removed before it starts, so a reused directory (`snakemake gate`
# always reuses results/<label>/health/gate/) never hands an earlier run's figures to this one's verdict,
# its gate.csv, its .prom file or a later --baseline. The gate's list there (distbench.gate.inputs.OUT_MANIFEST)
# holds these names while it runs, and what it did write once it is done: the next gate removes only those.
GATE_FILES = (*LEGACY_GATE_FILES,  # what gates wrote before they kept a list, and still write
              transport.LOG_DIR)  # the comm check's NCCL logs (a folder: NCCL's account of its transport)


def main(argv=None) -> int:
    t0 = time.monotonic()
    a = parse_args(argv)  # a usage error exits 2 here, before anything is read
    try:
        return _run(a, t0)
    except Exception as e:  # noqa: BLE001 - the gate's own failure must not read as a node's FAIL (exit 1)
        import traceback

        traceback.print_exc()
        print(f"distbench gate: ERROR {a.node}: the gate itself failed, the node was not judged: "
              f"{' '.join(f'{type(e).__name__}: {e}'.split())[:300]}", flush=True)
        return EXIT_ERROR


def _run(a, t0: float) -> int:
    node = a.node
    keep = bool(a.out)
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="distbench-gate-"))
    out.mkdir(parents=True, exist_ok=True)
    if keep:  # only what an earlier gate wrote (its list): a directory holding more was refused (exit 2)
        clear_earlier_gate(out)
        record_gate_files(out, GATE_FILES)  # a gate killed mid-way leaves its list too
    limit = a.budget_s - reserve_s(a.budget_s)
    # a read-only environment's processes share one bytecode cache (distbench.launch.pycache): the check
    # and its benchmark job each import torch
    use_pycache()
    cmd = [python(), "-m", "distbench.gate.check", "--out-dir", str(out), "--gpus", str(a.gpus),
           "--load-s", str(a.load_s), "--deadline-s", f"{limit:.1f}", "--host", node, "--host-lock", a.host_lock]
    try:
        outcome, killed = Budget(limit).run(cmd, dict(os.environ), out / "gate_check.log")
        try:
            readings = json.loads((out / "readings.json").read_text())
        except (OSError, ValueError):
            readings = {}
        if outcome == "done" and "comm_status" not in readings:
            log = (out / "gate_check.log").read_text(errors="replace").strip().splitlines()
            readings["comm_status"] = "the readings ended early: " + (log[-1][:200] if log else "no output")
        unjudged = _not_judged(a, readings, outcome)
        if unjudged:  # no verdict: nothing drained, resumed or published (exit 3)
            said = f"distbench gate: ERROR {node}: not judged: {' '.join(unjudged.split())}"
            print(said, flush=True)
            _to_syslog(said)
            return EXIT_ERROR
        state, why, checks, points = judge(readings, a.baseline, outcome, killed, a.budget_s, a.gpus)
        if time.monotonic() - t0 > a.budget_s and state != "FAIL":
            state, why = "FAIL", f"over its {a.budget_s:g} s budget ({time.monotonic() - t0:.1f} s)"
        wall = time.monotonic() - t0
        actions, failed = _slurm(a, node, state, why)
        if failed:  # first in the line (and gate.csv's verdict): the node is not as the verdict asks
            why = f"{'; '.join(failed)} | {why}"
        unwritten = _write(a, out, node, state, why, checks, points, readings, wall)
        from distbench.gate.rules import line

        said = line(state, node, why)
        print(said, flush=True)
        for act in actions:
            print(f"distbench gate: {act}", file=sys.stderr, flush=True)
        for what in unwritten:
            print(f"distbench gate: ERROR: {what}", file=sys.stderr, flush=True)
        if failed:
            _to_syslog(said)
            return EXIT_ERROR
        if state == "FAIL":
            return EXIT_FAIL
        return EXIT_ERROR if unwritten else EXIT_PASS
    finally:
        if keep:
            try:
                record_gate_files(out)  # what this gate wrote there: the next one removes only these
            except OSError as e:
                print(f"distbench gate: ERROR: could not write the gate's list in {out}: {e}", file=sys.stderr,
                      flush=True)
        else:
            shutil.rmtree(out, ignore_errors=True)


# steps of the readings in which nothing of the node has been read yet (distbench.gate.check.take)
_LOCK_STEPS = ("taking the host lock", "waiting for the host lock")


def _not_judged(a, readings: dict, outcome: str) -> str | None:
    """Why this invocation cannot judge the node, or None: nothing of the node was read (the host lock
    held by another run: refused under --host-lock fail, or waited for until the budget ran out), or a
    --baseline that held a usable point when the flags were checked holds none now. A gate that could
    not judge exits 3 and never drains: only a judgement does."""
    if readings.get("host_busy"):
        return f"nothing was read: {readings['host_busy']}"
    step = str(readings.get("step") or "")
    if outcome != "done" and step.startswith(_LOCK_STEPS):
        return f"nothing was read: {outcome} ({a.budget_s:g} s) in step '{step}'"
    gone = baseline_problems(a.baseline, "--baseline")
    if gone:
        return "its baseline could not be read when judged: " + "; ".join(gone)
    return None


def _to_syslog(text: str) -> None:
    """`text` to syslog (daemon.err, tag distbench-gate): under HealthCheckProgram slurmd ignores the exit
    code, and logs the output only at its error level for a non-zero exit (docs/gate.md); syslog (the
    journal on systemd hosts) keeps it whatever runs the gate. Best effort: no syslog socket, nothing."""
    try:
        import syslog

        syslog.openlog("distbench-gate", syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_ERR, text)
        syslog.closelog()
    except Exception:  # noqa: BLE001 - never turn a said failure into the gate's own
        pass


def _slurm(a, node: str, state: str, why: str) -> tuple[list[str], list[str]]:
    """(what --drain / --resume did, in words; what could not be carried out: `DRAIN FAILED: <why>`,
    `RESUME FAILED: <why>`, for the one line and exit 3)."""
    acts = []
    if state == "FAIL" and a.drain:
        acts.append(("DRAIN", slurm.drain(node, why)))
    if state != "FAIL" and a.resume:
        acts.append(("RESUME", slurm.resume(node)))
    return [act.text for _, act in acts], [f"{what} FAILED: {act.text}" for what, act in acts if not act.done]


def _write(a, out: Path, node: str, state: str, why: str, checks, points, readings: dict, wall: float) -> list[str]:
    """gate.csv (and --csv) and the .prom file, each atomically; what could not be written, in words
    (the paths were checked writable before the readings: a failure here is the disk's, said, exit 3)."""
    import pandas as pd

    from distbench.core.io import atomic_write_csv
    from distbench.gate import prom, rules

    mode = slurm.mode() if a.mode == "auto" else a.mode
    checks = [*checks, rules.Check("budget", "wall_s", f"{wall:.1f}", f"<= {a.budget_s:g}", rules.INFO,
                                   f"the gate's wall time ({mode} mode)"),
              rules.Check("verdict", "gate", state, "", state, why)]
    df = pd.DataFrame(rules.rows(readings.get("host") or node, checks), columns=list(rules.GATE.names))
    failed = []
    for path in filter(None, (out / "gate.csv", a.csv)):
        try:
            atomic_write_csv(path, df)
        except OSError as e:
            failed.append(f"could not write {path}: {e}")
    if a.prom:
        samples = [("distbench_gate_status", {"node": node}, float(prom.STATUS[state]))]
        samples += prom.health_samples(node, _health_rows(readings))
        for p in points:
            if p.status == "ok":
                bw = rules._med(p.busbw_gbps)
                samples += prom.comm_sample(node, p.op, p.size_bytes, p.backend, p.world_size, p.timing, bw,
                                            rules._med(p.time_us),
                                            prom.node_type(readings.get("gpu_name"), int(readings.get("gpus") or 0)))
        samples.append(prom.timestamp(node, "gate"))
        try:
            prom.write(a.prom, samples, "gate")  # prom.GATE_FILE, never the run's
        except OSError as e:
            failed.append(f"could not write {Path(a.prom) / prom.GATE_FILE}: {e}")
    return failed
