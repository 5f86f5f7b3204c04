"""A job's values as (flag, value) pairs typed as the ranks' parser gives them, for both ways a job
is started: as flags on a command line (for people, and a job started by hand: `flags`) and through
its rule's job.json (`--params`: `apply` sets them on the parsed arguments as they are, nothing
joined into a string and parsed again). Each family declares its values once, as a
distbench.launch.job_record.RecordSpec, which also owns the job.json format."""

from __future__ import annotations

import argparse


def dest(flag: str) -> str:
    """argparse's attribute for a flag: --batch-size -> batch_size."""
    return flag.lstrip("-").replace("-", "_")


def flags(values: list[tuple[str, object]]) -> list[str]:
    """The values as a command line: booleans as true/false, lists comma-separated."""
    out: list[str] = []
    for flag, value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        out += [flag, ",".join(_text(v) for v in items)]
    return out


def _text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def apply(args: argparse.Namespace, values: list[tuple[str, object]]) -> argparse.Namespace:
    """Set each value on the parsed arguments, as it is (a list stays a list, an int an int)."""
    for flag, value in values:
        setattr(args, dest(flag), value)
    return args

