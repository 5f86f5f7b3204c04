"""Several hosts in one report (seed 001: Gloo on a laptop, NCCL on a cloud GPU, combined).

Every run writes everything under `results/<run_label>/` (config `run_label`; empty: the variable
DISTBENCH_RUN_LABEL, else the host name): its jobs, tables, figures, logs, and `run.json` (label,
host, GPU, versions, when). Copy another host's `results/<label>/` (its `tables/` and `run.json`
are enough) into this `results/`, and `snakemake --cores 1 report` shows every run found there side
by side: this module's table of the runs, then what each family compares across them (its
distbench.core.section.AcrossRuns, e.g. per-op time ratios). Reads tables only.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from distbench.core.choices import backend_name
from distbench.core.io import atomic_write_text
from distbench.core.readers import UnreadableFile, other_run_fix, read_json, read_table, remake
from distbench.core.section import AcrossRuns, ReportInputs, Run, table


def describe_run(env_json, out_path, label: str) -> None:
    """results/<label>/run.json: which run this is (label, host, GPU, versions, when), for the report
    of another host that this results/<label>/ is copied to."""
    env = read_json(env_json, remake(env_json)) if env_json and Path(env_json).exists() else {}
    gpus = env.get("gpus") or []
    about = {"label": label, "host": env.get("hostname") or socket.gethostname(),
             "gpu": gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None, "gpu_count": len(gpus),
             "torch": env.get("torch"), "nccl_version": env.get("nccl_version"), "git_commit": env.get("git_commit"),
             "exported": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    atomic_write_text(out_path, json.dumps(about, indent=1) + "\n")


# what the runs table reads of each run's tables
BACKEND_COLUMNS = ("backend", "world_size")


def load_runs(results_dir, tables: Sequence[str], first: str | None = None, parts: Sequence[AcrossRuns] = (),
              unreadable: list | None = None) -> dict[str, Run]:
    """{label: Run} for every results/<label>/ holding one of `tables` (file names under its tables/,
    those the families compare across runs), `first` first.

    Each run's run.json and tables are read here, once, through the one reader, with the columns
    the runs table and `parts` (the families' AcrossRuns) read: a run any of them cannot be read of is
    left out, its UnreadableFile added to `unreadable` (raised without that list). Those runs are
    copied from elsewhere, the baseline among them, so one of them must not stop this run's report;
    a file of this run's own (`first`) always raises."""
    runs = {}
    for d in sorted(Path(results_dir).glob("*")):
        if not any((d / "tables" / name).exists() for name in tables):
            continue
        fix = remake(d / "run.json") if d.name == first else other_run_fix(d)
        try:
            about = read_json(d / "run.json", fix) if (d / "run.json").exists() else {"label": d.name}
            frames = {}
            for name in tables:
                want = [p for p in parts if p.table == name]
                columns = tuple(dict.fromkeys([*BACKEND_COLUMNS, *(c for p in want for c in p.columns)]))
                numeric = tuple(dict.fromkeys(["world_size", *(c for p in want for c in p.numeric)]))
                frame = read_table(d / "tables" / name, remake(d / "tables" / name) if d.name == first else fix,
                                   columns=columns, numeric=numeric, finite_when_ok=numeric, missing_ok=True)
                if frame is not None:
                    frames[name] = frame
        except UnreadableFile as e:
            if unreadable is None or d.name == first:  # this run's own file: its report waits for the fix
                raise
            unreadable.append(e)
            continue
        if frames:  # its tables are all empty files: nothing of it to set beside the others
            runs[d.name] = Run(d.name, about, d / "tables", frames)
    if first in runs:
        runs = {first: runs.pop(first), **runs}
    return runs


def _backends(run: Run, tables: Sequence[str]) -> str:
    """What the run measured: each backend with its world sizes, from the runs' tables it has."""
    found = [t[list(BACKEND_COLUMNS)] for t in (run.table(name) for name in tables) if t is not None]
    # a row without a world size (a point that never ran) says nothing of what ran
    both = pd.concat(found, ignore_index=True).dropna().astype({"backend": "string", "world_size": "int64"})
    return "; ".join(f"{backend_name(b)} ({', '.join(str(w) for w in sorted(set(g['world_size'])))})"
                     for b, g in both.groupby("backend", sort=True))


def runs_table(runs: Mapping[str, Run], tables: Sequence[str]) -> tuple[list[str], list[list]]:
    headers = ["run", "host", "GPU", "backends (world sizes)", "torch", "NCCL", "exported"]
    rows = []
    for label, r in runs.items():
        a = r.about
        gpu = f"{a.get('gpu_count')}x {a['gpu']}" if a.get("gpu") else "none"
        rows.append([label, a.get("host"), gpu, _backends(r, tables), a.get("torch"), a.get("nccl_version"),
                     a.get("exported")])
    return headers, rows


def several_runs(inputs: ReportInputs) -> dict | None:
    """The SEVERAL_RUNS section: only when results/ holds another run. The runs table, then each
    registered section's AcrossRuns part that has something to show."""
    parts = [s.across_runs for s in inputs.sections if s.across_runs]
    if not inputs.results_dir or not parts:
        return None
    tables = list(dict.fromkeys(part.table for part in parts))
    unreadable = []
    runs = load_runs(inputs.results_dir, tables, first=inputs.run_label, parts=parts, unreadable=unreadable)
    problems = [{"path": e.path, "problem": e.problem, "fix": e.fix} for e in unreadable]
    if len(runs) < 2:
        # nothing to set side by side, but a run that was left out is still named
        return {"runs": None, "parts": [], "unreadable": problems} if problems else None
    shown = [{"fragment": part.fragment, "context": part.build(runs)} for part in parts]
    return {"runs": table(*runs_table(runs, tables)), "parts": [p for p in shown if p["context"] is not None],
            "unreadable": problems}
