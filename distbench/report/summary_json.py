"""report/summary.json: the run's results in one machine-readable document (reads tables only).

Its shape is the one seed 000 promises: `name`, `world_size`, `timestamp`, `config` (warm-up,
iterations, device, versions) and `results.<part>` per registered section that declares a part of it
(distbench.core.section.SummaryPart: its key, its table, the fields of each record, how they are
grouped). The document's JSON Schema is distbench/report/summary.schema.json (name, world_size,
timestamp, config) with each part's own schema merged into `results` (SummaryPart.schema: a file in
the family's folder, so a family adding a part changes nothing here); `summary_schema()` is the whole
contract readers validate summary.json against (`python -m distbench.report.summary_json` prints it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from distbench.core.io import atomic_write_text, json_safe
from distbench.core.section import ReportInputs, Section, SummaryPart
from distbench.report.sections import SECTIONS

SCHEMA_PATH = Path(__file__).with_name("summary.schema.json")


def _records(df: pd.DataFrame, columns) -> list[dict]:
    cols = [c for c in columns if c in df.columns]
    return [{c: json_safe(r[c]) for c in cols} for _, r in df[cols].iterrows()]


def _part(part: SummaryPart, df: pd.DataFrame | None) -> dict[str, list] | list[dict]:
    """results.<key>: the records of its table, one list or grouped by part.by (empty when absent)."""
    if part.by is None:
        return _records(df.sort_values(list(part.order)) if part.order else df, part.fields) if df is not None else []
    if df is None:
        return {}
    return {str(k): _records(g.sort_values(list(part.order)) if part.order else g, part.fields)
            for k, g in df.groupby(part.by, sort=True)}


def summary_document(inputs: ReportInputs, config: dict, name: str | None = None,
                     sections: Sequence[Section] = SECTIONS) -> dict:
    """The document from the run's tables (inputs: each part's table by its ReportInputs field, and env)."""
    parts = [s.summary for s in sections if s.summary]
    tables = {p.key: inputs.table(p.input, p.reader) for p in parts}
    env = inputs.env_dict()
    sizes = [int(w) for df in tables.values() if df is not None and len(df) for w in df["world_size"]]
    world = max(sizes) if sizes else 0
    gpus = env.get("gpus") or []
    device = (gpus[0].get("name") if gpus and isinstance(gpus[0], dict) else None) or ("cpu" if not env.get("cuda_available") else "gpu")
    settings = {k: v for p in parts if p.settings for k, v in p.settings(tables[p.key], config).items()}
    return {
        "name": name or f"distbench_{world}{'gpu' if device != 'cpu' else 'rank'}",
        "world_size": world,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "config": {**settings, "device": device, "backends": list(config["backends"]),
                   "torch": env.get("torch"), "nccl_version": env.get("nccl_version"), "git_commit": env.get("git_commit")},
        "results": {p.key: _part(p, tables[p.key]) for p in parts},
    }


def write_summary(inputs: ReportInputs, config: dict, out_summary) -> list[Path]:
    """Write summary.json, checked against its schema first."""
    doc = summary_document(inputs, config)
    validate_summary(doc)
    atomic_write_text(out_summary, json.dumps(doc, indent=1) + "\n")
    return [Path(out_summary)]


def summary_schema(sections: Sequence[Section] = SECTIONS) -> dict:
    """The document's whole JSON Schema: the base file, and under `results` every registered part's
    schema (each part required)."""
    schema = json.loads(SCHEMA_PATH.read_text())
    results = schema["properties"]["results"]
    for part in (s.summary for s in sections if s.summary):
        results["properties"][part.key] = json.loads(Path(part.schema).read_text()) if part.schema else {}
        results["required"].append(part.key)
    return schema


def validate_summary(doc: dict) -> None:
    import jsonschema

    jsonschema.validate(doc, summary_schema())


if __name__ == "__main__":  # the published contract: the whole schema, parts merged
    print(json.dumps(summary_schema(), indent=2, ensure_ascii=False))
