"""Two runs of the main job side by side, per launch: `python3 compare.py A B [C D ...]` with each argument a
clone's results/<label>/ directory (the benchmark tsvs under benchmarks/). A batch launch's time lies in
one of its jobs' tsvs (the others hold well under a second), so the jobs are summed per family and world
size: one row per launch group, each run a column, then the totals."""

import sys
from pathlib import Path

import pandas as pd


def per_launch(results: Path) -> pd.Series:
    rows = []
    for p in (results / "benchmarks").rglob("*.tsv"):
        rel = p.relative_to(results / "benchmarks").parts
        ws = next((x for x in rel if x.startswith("ws")), "ws0")
        rows.append((rel[0], ws.removesuffix(".tsv"), float(pd.read_csv(p, sep="\t")["s"].iloc[-1])))
    return pd.DataFrame(rows, columns=["family", "ws", "s"]).groupby(["family", "ws"])["s"].sum()


runs = {Path(a).parent.parent.name + "/" + Path(a).name: per_launch(Path(a)) for a in sys.argv[1:]}
table = pd.DataFrame(runs).round(1)
print(table.to_string())
print("jobs, all launches:", {k: round(float(v.sum()), 1) for k, v in runs.items()})
