"""The tables of README.md from results-2026-11-28/ (processes.tsv, tests.tsv): CPU by kind of process,
and the tests by CPU. `python summarize.py [results dir]`."""
import csv
import sys
from pathlib import Path

import pandas as pd

d = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent / "results-2026-11-28")
cols = ["pid", "ppid", "cpu_s", "wall_s", "torch", "pandas", "matplotlib", "snakemake", "test", "python", "argv"]
p = pd.read_csv(d / "processes.tsv", sep="\t", names=cols, quoting=csv.QUOTE_NONE)


def kind(r):
    a = str(r["argv"])
    if "torch/distributed/run.py" in a:
        return "torchrun agent"
    if "snakemake/__main__.py" in a:
        return "Snakemake, a SLURM job step" if "--target-jobs" in a else "Snakemake, main"
    if ".snakemake/scripts" in a:
        return "Snakemake rule script, figures" if ".plot_" in a else "Snakemake rule script, other"
    # pytest-xdist's workers run as `python -c <code>` (argv: just "-c"), for the whole session
    if a.startswith("-c") and r["cpu_s"] > 50:
        return "pytest worker (in-process tests)"
    if r["torch"] and ("distbench/" in a or "tests/helpers" in a):
        return "rank (a job's process that imports torch)"
    return "other"


p["kind"] = p.apply(kind, axis=1)
by = p.groupby("kind").agg(processes=("cpu_s", "size"), cpu_s=("cpu_s", "sum"), cpu_s_median=("cpu_s", "median"))
print(by.sort_values("cpu_s", ascending=False).round(1).to_markdown())
print(f"\nprocesses that imported torch: {int(p['torch'].sum())}, their CPU-s: {p.loc[p['torch'], 'cpu_s'].sum():.0f}")
print(f"all logged: {len(p)} processes, {p['cpu_s'].sum():.0f} CPU-s")

t = pd.read_csv(d / "tests.tsv", sep="\t", names=["test", "wall_s", "self_cpu_s", "children_cpu_s"])
t["cpu_s"] = t["self_cpu_s"] + t["children_cpu_s"]
print(f"\n{len(t)} tests, {t['wall_s'].sum():.0f} worker-s, {t['cpu_s'].sum():.0f} CPU-s (waited-for children included)")
print(t.sort_values("cpu_s", ascending=False).head(30)[["test", "cpu_s", "wall_s"]].round(0).to_markdown(index=False))
