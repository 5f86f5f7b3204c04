"""Columns, row counts and row keys of every table, and the report's headings, of one run dir."""
import json, re, sys
from pathlib import Path
import pandas as pd
d = Path(sys.argv[1]); out = {}
KEYS = ["backend", "world_size", "nodes", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes",
        "model", "config", "strategy", "phase", "batch_size", "family", "job", "src", "dst", "mode", "algorithm", "gpus", "fit_world_size", "check_world_size"]
for p in sorted((d / "results").glob("*/tables/**/*.csv")):
    df = pd.read_csv(p)
    keys = [k for k in KEYS if k in df.columns]
    out[str(p.relative_to(d / "results").as_posix().split("/", 1)[1])] = {
        "columns": list(df.columns), "rows": len(df),
        "keys": sorted(map(str, df[keys].astype(str).drop_duplicates().itertuples(index=False))) if keys else []}
md = (d / "report/report.md").read_text()
out["report.md headings"] = re.findall(r"(?m)^#+ .*$", md)
html = (d / "report/report.html").read_text()
out["report.html headings"] = re.findall(r"<h[1-4][^>]*>(.*?)</h[1-4]>", html)
out["figures"] = sorted(p.name for p in (d / "report/figures").iterdir())
print(json.dumps(out, indent=1))
