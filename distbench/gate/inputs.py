"""What the gate is given, checked before it reads anything (torch-free): its flags (distbench.gate.cli
turns each problem into a usage error, exit 2) and, for `snakemake gate`, its config keys (the gate
manifest's config_check, run with the config check before any job).

A gate is what a SLURM prolog trusts: a typo must never turn into a verdict on the node. A budget the
gate cannot finish in, a non-finite number, a negative GPU count, an output it cannot write or a node
name that would split its one line are refused here, before any reading, naming the flag, the value
and what is allowed; not found out after the readings (a traceback and no verdict), nor turned into a
FAIL that drains a healthy node.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import unicodedata
from pathlib import Path

from distbench.core.shown import shown

# The least budget a gate can pass in, from what its readings must fit (distbench.gate.check): the
# readings' own start (Python, its imports, the NVML reading: under a second on the 2-core CPU
# machine, ~1 s for 8 GPUs), the health reading's load (--load-s), the collective's least time and
# the time kept for its launcher's teardown, plus the share the gate keeps for itself after the
# readings (distbench.gate.cli.reserve_s). A budget under it always fails "no time left".
STARTUP_S = 2.0
# distbench.gate.check's: what the comm job's launcher may take after its limit (a progress look, 2 s;
# a kill's grace), and the least time the collective is started with (less: "no time left")
TEARDOWN_S = 12.0
MIN_COLLECTIVE_S = 5.0
# The most --budget-s (about 31.7 years: no real budget; any larger is a typo or a probe). The budget
# becomes the comm job's time limits (distbench.gate.check.comm_params: op_timeout_s, job_timeout_s), and
# those become deadlines in int64 nanoseconds of a monotonic clock: torch's c10d store and process group
# (std::chrono::steady_clock::now() + timeout), Gloo's, NCCL's watchdog, Python's threading.TIMEOUT_MAX
# (9223372036 s on Linux). 2**63 ns is 9.22e9 s, less the clock's own reading (the uptime): past it the
# deadline overflows into the past and the collective "times out" at once ("The client socket has timed
# out after 9999999979000ms" at --budget-s 1e10, which failed, and --drain drained, a healthy node; 5e9
# passed). 1e9 keeps an order of magnitude under that for the clock's reading and the margins the comm
# job adds (measured: --budget-s 1e9 passes on the 2-core CPU machine).
MAX_BUDGET_S = 1e9


def reserve_s(budget_s: float) -> float:
    """The budget's share for the gate's own process after the readings: the tables, the verdict, scontrol."""
    return min(8.0, max(2.0, 0.1 * budget_s))


def finite_problem(flag: str, value: float, minimum: float = 0.0) -> str | None:
    if not math.isfinite(value):
        return f"{flag} {value!r}: not a finite number (allowed: a number of seconds >= {minimum:g})"
    if value < minimum:
        return f"{flag} {value:g}: below {minimum:g} (allowed: a number of seconds >= {minimum:g})"
    return None


def min_budget_s(load_s: float) -> float:
    """The least --budget-s in which the collective check can start at all (whole seconds)."""
    need = STARTUP_S + max(load_s, 0.0) + TEARDOWN_S + MIN_COLLECTIVE_S
    # budget - reserve_s(budget) grows with the budget; reserve_s is 2 s, a tenth, or 8 s: one candidate each
    for budget in (need + 2.0, need / 0.9, need + 8.0):
        if budget - reserve_s(budget) >= need - 1e-9:
            return float(math.ceil(budget))
    return float(math.ceil(need + 8.0))


def budget_problem(budget_s: float, load_s: float) -> str | None:
    floor = min_budget_s(load_s)
    if math.isfinite(budget_s) and budget_s > MAX_BUDGET_S:
        return (f"--budget-s {budget_s:g}: too large; allowed: a number of seconds from {floor:g} to "
                f"{MAX_BUDGET_S:g} (past it the comm job's time limits overflow the int64 nanosecond deadlines "
                "of torch, Gloo and NCCL, and the collective would time out at once: a FAIL of a healthy node)")
    if not math.isfinite(budget_s) or budget_s < floor:
        shown_value = f"{budget_s:g}" if math.isfinite(budget_s) else repr(budget_s)
        return (f"--budget-s {shown_value}: {'not a finite number' if not math.isfinite(budget_s) else 'too small'}; "
                f"allowed: a number of seconds >= {floor:g}, the least a gate can pass in with --load-s {load_s:g}: "
                f"{STARTUP_S:g} s for the readings to start, --load-s, {MIN_COLLECTIVE_S:g} s for the collective "
                f"check, {TEARDOWN_S:g} s kept for its teardown, and the gate's own share for the verdict "
                "(a smaller budget can only fail, which would drain a healthy node)")
    return None


def node_problem(node: str) -> str | None:
    """Why `node` cannot be this node's name in the one line, gate.csv and scontrol, or None."""
    try:
        node.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if not node:
        return "is empty"
    if any(c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in node):
        return "holds whitespace or a control character (it would split the verdict line)"
    return None


def _probe(directory: Path, make_dir: bool) -> str | None:
    """Whether this user can write in `directory`, tried: a temporary file (or directory, for one to
    be made below it) made there and removed at once. Tried rather than asked of os.access(2): the gate
    runs as root under slurmd, and root's access() says yes to /proc or a directory it cannot make."""
    try:
        if make_dir:
            os.rmdir(tempfile.mkdtemp(prefix=".distbench-probe-", dir=directory))
        else:
            fd, tmp = tempfile.mkstemp(prefix=".distbench-probe-", dir=directory)
            os.close(fd)
            os.unlink(tmp)
    except OSError as e:
        return str(e.strerror or e)
    return None


def dir_problem(path) -> str | None:
    """Why files cannot be written in directory `path` (made if missing), or None. Leaves nothing
    behind: a missing directory is not made here, only tried in its nearest existing parent."""
    if str(path) == "":
        return "is empty"
    p = Path(path)
    if p.is_symlink() and not p.exists():
        return "is a dangling symbolic link"
    if p.exists():
        if not p.is_dir():
            return "is not a directory"
        why = _probe(p, make_dir=False)
        return f"is not writable by this user ({why})" if why else None
    anc = p.absolute().parent
    while not anc.exists():
        if anc.is_symlink():
            return f"cannot be made: {anc} is a dangling symbolic link"
        anc = anc.parent
    if not anc.is_dir():
        return f"cannot be made: {anc} is not a directory"
    why = _probe(anc, make_dir=True)
    return f"cannot be made: {anc} is not writable by this user ({why})" if why else None


def file_problem(path) -> str | None:
    """Why file `path` cannot be written (atomically: a temporary file in its directory, renamed)."""
    if str(path) == "":
        return "is empty"
    p = Path(path)
    if p.is_dir():
        return "is a directory"
    why = dir_problem(p.absolute().parent)
    return f"its directory {why}" if why else None


def flag_problems(a, node: str, node_from: str) -> list[str]:
    """Every problem of the parsed flags `a` (distbench.gate.cli.parse_args), each naming its flag."""
    out = []
    load = finite_problem("--load-s", a.load_s)
    if not load and min_budget_s(a.load_s) > MAX_BUDGET_S:
        load = (f"--load-s {a.load_s:g}: too large (allowed: a number of seconds >= 0 that leaves the collective "
                f"its time within the largest --budget-s, {MAX_BUDGET_S:g})")
    out += [load] if load else []
    out += [p for p in [budget_problem(a.budget_s, a.load_s if not load else 0.0)] if p]
    if a.gpus < 0:
        out.append(f"--gpus {a.gpus}: negative (allowed: the number of GPUs this node must have, >= 1; "
                   "0 or none: those detected)")
    writable_dir = "a directory this user can write, or make"
    for flag, value, check, allowed in (("--prom", a.prom, dir_problem, writable_dir),
                                        ("--out", a.out, dir_problem, writable_dir),
                                        ("--csv", a.csv, file_problem, "a file path in a directory this user can write")):
        why = check(value) if value is not None else None
        if why:
            out.append(f"{flag} {ascii(value)}: {why} (allowed: {allowed})")
    if a.out is not None and not dir_problem(a.out):
        why = out_dir_problem(a.out)
        if why:
            out.append(f"--out {ascii(a.out)}: {why} (allowed: a new or empty directory, or one an earlier gate "
                       f"wrote: the files it lists in {OUT_MANIFEST} there)")
    out += baseline_problems(a.baseline, "--baseline")
    why = node_problem(node)
    if why:
        out.append(f"{node_from} {ascii(node)}: {why} (allowed: a node name of printable UTF-8, no whitespace)")
    return out


# ------------------------------------------------------------------------------------------- baseline
BASELINE_ALLOWED = "a gate's --out directory, results/<label>/health/gate of `snakemake gate`, or a full run's results/<label>/"


def baseline_problems(runs, flag: str) -> list[str]:
    """Each baseline run (--baseline, or config gate_baseline[i]) that holds no comm table with a point
    a comparison can use, naming it and why: a usage error, as the config check refuses it (a baseline
    that can never be compared would only warn at every gate, and never be judged against)."""
    from distbench.gate.points import baseline_points

    out = []
    for i, one in enumerate(runs or ()):
        base, why, _notes = baseline_points([one])
        if base is None:
            name = f"{flag}[{i}]: {shown(one)}" if flag.startswith("config") else f"{flag} {ascii(one)}"
            out.append(f"{name}: {why or 'empty'} (allowed: {BASELINE_ALLOWED})")
    return out


# ------------------------------------------------------------------------------------------- --out DIR
# The gate's own list of what it wrote in --out DIR (written before its readings, with the names it may
# write, and again after, with what it did write): the next gate removes exactly those, and nothing else.
OUT_MANIFEST = ".distbench-gate-files.json"
# What a gate wrote there before it kept a list (an earlier version's --out, `snakemake gate`'s
# results/<label>/health/gate/): a directory holding only these names, one of them a gate's own (not
# pairs.csv alone, which a comm job's directory holds too), is taken as such a gate's and cleared.
LEGACY_GATE_FILES = ("readings.json", "gate.csv", "gate_check.log", "gate_comm.csv", "gate_comm_ranks.csv",
                     "pairs.csv", "gate_placement.json", "gate_comm.log", "gate_comm.csv.partial",
                     "gate_comm_ranks.csv.partial")


def _listed(directory: Path) -> list[str] | None:
    """The names the gate's list in `directory` holds (plain names only), or None with no list."""
    try:
        data = json.loads((directory / OUT_MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return []
    names = data.get("files") if isinstance(data, dict) else None
    return [n for n in names or () if isinstance(n, str) and n and "/" not in n and n not in (".", "..",
                                                                                               OUT_MANIFEST)]


def earlier_gate_files(path) -> tuple[list[str], list[str]]:
    """(names in directory `path` an earlier gate wrote, names it holds that no gate wrote)."""
    p = Path(path)
    if not p.is_dir():
        return [], []
    present = sorted(e.name for e in p.iterdir() if e.name != OUT_MANIFEST)
    listed = _listed(p)
    if listed is not None:
        ours = [n for n in present if n in listed]
    elif set(present) <= set(LEGACY_GATE_FILES) and set(present) - {"pairs.csv"}:
        ours = present
    else:
        ours = []
    return ours, [n for n in present if n not in ours]


def out_dir_problem(path) -> str | None:
    """Why --out `path` is not the gate's to clear: it holds files no gate wrote (another run's results:
    a comm job's pairs.csv is a gate name too), or None."""
    _ours, other = earlier_gate_files(path)
    if other:
        shown_names = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        return f"holds files this gate did not write ({shown_names}): another run's results are never removed"
    return None


def clear_earlier_gate(path) -> list[str]:
    """Remove what an earlier gate wrote in directory `path` (its list, or its legacy names); returns them."""
    p = Path(path)
    ours, _other = earlier_gate_files(p)
    for name in ours:
        entry = p / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
    return ours


def record_gate_files(path, names=None) -> None:
    """The gate's list in directory `path`: `names`, or (None) every entry there now but the list itself
    (the gate clears the directory of an earlier gate's files and refuses one holding others, so what is
    there after its run is its own). Written atomically."""
    from distbench.core.io import atomic_write_json

    p = Path(path)
    if names is None:
        names = sorted(e.name for e in p.iterdir() if e.name != OUT_MANIFEST)
    atomic_write_json(p / OUT_MANIFEST, {"written_by": "python -m distbench.gate (distbench.gate.inputs)",
                                         "files": sorted(set(names))})


def config_check(config: dict) -> list[str]:
    """The gate's config keys, before any job (distbench.pipeline.config.family_problems): each
    gate_baseline run must hold a comm table with a point it can be compared by, and prometheus_dir
    must be a directory this user can write (else `snakemake gate` would measure, then fail writing,
    and Snakemake would remove its gate.csv)."""
    out = baseline_problems(config.get("gate_baseline") or (), "config key gate_baseline")
    prom = config.get("prometheus_dir") or ""
    why = dir_problem(prom) if prom else None
    if why:
        out.append(f"config key prometheus_dir: {shown(prom)} {why} (allowed: a directory this user can write, "
                   "or make; empty: none)")
    return out
