"""When each benchmark measurement of a run ran, read after the fact from the provenance in its
placement files (the `started` and `ended` every job records: distbench.launch.torchrun), and which two
of them overlapped on one host: each would have measured the other's load. The host lock
(distbench.launch.hostlock) keeps them apart while they run; this reader checks that it did, for the
report's appendix (distbench.report.appendix) and `python -m distbench.launch.hostlock DIR`.

A placement file that cannot be read, or has no times, is left out (the appendix's cache table names
it); nothing here raises on a run's files. Torch-free, pandas-free.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

MEASUREMENT_FILE = "placement.json"  # every benchmark job's and every shared launch's provenance


def _time(text) -> datetime | None:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def intervals(results_dir) -> list[dict]:
    """Every benchmark measurement of a run: {name, host, start, end} from each placement file's
    provenance (its `ended`, else the whole-second `finished` of older files). A configuration
    adopted from a shared launch is measured by that launch (logs/batch/launches/*/placement.json),
    and listed as that launch; staged results are not yet a job's. Symlinks are not followed."""
    root = Path(results_dir)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "staged"]
        if MEASUREMENT_FILE not in filenames:
            continue
        path = Path(dirpath) / MEASUREMENT_FILE
        try:
            if path.is_symlink() or path.stat().st_size > 16 * 2**20:
                continue
            prov = json.loads(path.read_text()).get("provenance")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(prov, dict) or prov.get("batch"):
            continue
        start, end = _time(prov.get("started")), _time(prov.get("ended") or prov.get("finished"))
        if start and end:
            found.append({"name": str(path.parent.relative_to(root)), "host": prov.get("host"), "start": start, "end": end})
    return sorted(found, key=lambda i: i["start"])


def overlaps(results_dir) -> list[str]:
    """One line per two benchmark measurements of a run that ran at the same time on one host."""
    lines = []
    items = intervals(results_dir)
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if b["start"] >= a["end"]:
                break
            if a["host"] == b["host"]:
                lines.append(f"{a['name']} ({a['start']:%H:%M:%S.%f}-{a['end']:%H:%M:%S.%f}) and {b['name']} "
                             f"({b['start']:%H:%M:%S.%f}-{b['end']:%H:%M:%S.%f}) overlapped on {a['host']}")
    return lines
