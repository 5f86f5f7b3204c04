"""A job's values as its plan gives them, typed, in one place for both ways a job is started: as
flags on a command line (for people, and a job started by hand) and through its rule's job.json
(`--params`: the ranks read the same values from JSON, so nothing is joined into a string and parsed
again). A family lists its values once, as (flag, value) pairs typed as its parser would give them;
`flags` renders them, `apply` sets them on the parsed arguments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from distbench.core.io import atomic_write_text


def dest(flag: str) -> str:
    """argparse's attribute for a flag: --batch-size -> batch_size."""
    return flag.lstrip("-").replace("-", "_")


def flags(values: list[tuple[str, object]]) -> list[str]:
    """The values as a command line: booleans as true/false, lists comma-separated."""
    out: list[str] = []
    for flag, value in values:
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value)
        else:
            text = str(value)
        out += [flag, text]
    return out


def apply(args: argparse.Namespace, values: list[tuple[str, object]]) -> argparse.Namespace:
    """Set each value on the parsed arguments, as it is (a list stays a list, an int an int)."""
    for flag, value in values:
        setattr(args, dest(flag), value)
    return args


def read_job_json(path, parser: argparse.ArgumentParser):
    """The job as its rule wrote it (distbench.launch.batch.Entry), or a usage error naming the file."""
    from distbench.launch.batch import Entry

    try:
        return Entry(**json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as e:
        parser.error(f"--params {path}: not a job's job.json ({e})")


def write_variant(job_json, path, **job_values) -> Path:
    """A copy of a job's job.json with some of its job values replaced (the nsys pass's short run), so
    that run reads its values from JSON too."""
    entry = json.loads(Path(job_json).read_text())
    entry["params"]["job"] = {**entry["params"]["job"], **job_values}
    atomic_write_text(path, json.dumps(entry, indent=1, sort_keys=True))
    return Path(path)
