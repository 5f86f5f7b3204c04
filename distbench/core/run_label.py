"""This run's label: every path a run writes is under results/<label>/ (config run_label, else
$DISTBENCH_RUN_LABEL, else the host name); resolved once where Snakemake plans the run."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path

LABEL_PATTERN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
LABEL_ENV = "DISTBENCH_RUN_LABEL"
# A path component holds 255 bytes (NAME_MAX); the label is results/<label>/, kept well under that.
MAX_LABEL_BYTES = 128
LABEL_CHARS = "letters, digits and _ . - only, not starting with a dot"


def label_problem(label: str) -> str | None:
    """Why `label` cannot be a run label (characters or length), in words; None when it can."""
    if not LABEL_PATTERN.fullmatch(label):
        return f"is not a path component: use {LABEL_CHARS}"
    if len(label.encode()) > MAX_LABEL_BYTES:
        return f"is {len(label.encode()):,} bytes long; at most {MAX_LABEL_BYTES} (it names a directory)"
    return None


def default_label() -> str:
    """The host name, as a path component (characters other than letters, digits, _ . - become -)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()).lstrip(".") or "run"


def resolve_label(configured: str | None) -> str:
    """This run's label: config run_label, else $DISTBENCH_RUN_LABEL, else the host name.

    The label is exported to DISTBENCH_RUN_LABEL, so that a job a cluster executor starts on
    another node (SLURM passes the environment on) writes under the same results/<label>/ as the
    Snakemake that planned it, not under that node's host name."""
    label = configured or os.environ.get(LABEL_ENV) or default_label()
    why = label_problem(label)
    if why:
        shown = label if len(label) <= 60 else f"{label[:60]}..."
        raise ValueError(f"run label {shown!r} (config key run_label, or {LABEL_ENV}) {why}")
    os.environ[LABEL_ENV] = label
    return label


def baseline_tables_dir(baseline, marks: Sequence[str], results_dir="results") -> Path | None:
    """The directory holding a baseline run's tables (report.baseline), the first that holds one of
    `marks` (file names of the tables a run is compared by: the families' summaries) of: `results/<baseline>/tables` (a run label: another host's run copied in, or an
    earlier run of this one), `<path>/tables` (a run's directory), `<path>/results/tables` (a tree
    from before run labels), `<path>/<label>/tables` when exactly one run is there (a copied
    results/), or the path itself (a tables directory). None when none does."""
    def _has_tables(d: Path) -> bool:
        return any((d / name).exists() for name in marks)

    p = Path(baseline)
    candidates = [Path(results_dir) / baseline / "tables"] if "/" not in str(baseline) else []
    candidates += [p / "tables", p / "results" / "tables"]
    for tree in (p, p / "results"):
        runs = [d / "tables" for d in sorted(tree.glob("*")) if _has_tables(d / "tables")] if tree.is_dir() else []
        if len(runs) == 1:
            candidates.append(runs[0])
    candidates.append(p)
    return next((d for d in candidates if _has_tables(d)), None)


def node_name() -> str:
    """This node's name, as the health check's readings and the jobs' placement files record it:
    DISTBENCH_NODE_NAME (set per process by a launcher whose nodes share one host), else
    SLURMD_NODENAME under SLURM (nodes of a test cluster on one machine share a host name, and SLURM's
    names are the ones a user knows), else the host name."""
    return os.environ.get("DISTBENCH_NODE_NAME") or os.environ.get("SLURMD_NODENAME") or socket.gethostname()
