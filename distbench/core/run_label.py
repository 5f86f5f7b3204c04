"""This run's label: every path a run writes is under results/<label>/ (config run_label, else
$DISTBENCH_RUN_LABEL, else the host name); resolved once where Snakemake plans the run."""

from __future__ import annotations

import os
import re
import socket

LABEL_PATTERN = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")
LABEL_ENV = "DISTBENCH_RUN_LABEL"


def default_label() -> str:
    """The host name, as a path component (characters other than letters, digits, _ . - become -)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname()).lstrip(".") or "run"


def resolve_label(configured: str | None) -> str:
    """This run's label: config run_label, else $DISTBENCH_RUN_LABEL, else the host name.

    The label is exported to DISTBENCH_RUN_LABEL, so that a job a cluster executor starts on
    another node (SLURM passes the environment on) writes under the same results/<label>/ as the
    Snakemake that planned it, not under that node's host name."""
    label = configured or os.environ.get(LABEL_ENV) or default_label()
    if not LABEL_PATTERN.fullmatch(label):
        raise ValueError(f"run label {label!r} (config key run_label, or {LABEL_ENV}) is not a path component: "
                         "use letters, digits, _ . - and no leading dot")
    os.environ[LABEL_ENV] = label
    return label
