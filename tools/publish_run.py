"""Copy a finished run's tables, probes and figures into a benchmarks/results/ folder and render its report
there (figure links relative to the folder), without rerunning anything.

    python tools/publish_run.py WORKDIR CONFIG OUTDIR --gpus N [--label LABEL] [--gpus-source "..."]

from the repository root with this checkout importable (PYTHONPATH=. or the package installed).
"""

import argparse
import json
import shutil
from pathlib import Path

import yaml

from distbench.pipeline.config import check_config
from distbench.pipeline.plan import make_plan, plan_summary
from distbench.report.render import render_report


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workdir", type=Path, help="directory holding results/<label>/ of the run")
    p.add_argument("--label", help="the run's label under results/ (default: the only one there)")
    p.add_argument("config", type=Path)
    p.add_argument("outdir", type=Path)
    p.add_argument("--gpus", type=int, required=True, help="GPUs the run had (the plan is rebuilt from it)")
    p.add_argument("--gpus-source", default="detected on the GPU host; report re-rendered elsewhere")
    a = p.parse_args()
    runs = [d for d in sorted((a.workdir / "results").glob("*")) if (d / "tables").is_dir()]
    if a.label:
        res = a.workdir / "results" / a.label
    elif len(runs) == 1:
        res = runs[0]
    else:  # a tree from before run labels (results/tables), or several runs: which one is asked for
        res = a.workdir / "results"
        if not (res / "tables").is_dir():
            p.error(f"give --label: {a.workdir}/results holds {[d.name for d in runs]}")
    out = a.outdir
    for sub in ("tables", "probe", "figures", "probe/nccl_logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for f in (res / "tables").glob("*.csv"):
        shutil.copy(f, out / "tables")
    for name in ("env", "topology", "nccl", "advice"):
        shutil.copy(res / "probe" / f"{name}.json", out / "probe")
    for f in (res / "probe/nccl_logs").glob("nccl.*.log"):
        shutil.copy(f, out / "probe/nccl_logs")
    for f in (res / "figures").glob("*.png"):
        shutil.copy(f, out / "figures")
    cfg = check_config({**yaml.safe_load(a.config.read_text()), "gpus": a.gpus})
    plan_report = plan_summary(make_plan(cfg), a.gpus_source)
    render_report(out / "tables/comm_diagnosed.csv", out / "tables/comm_largest.csv", out / "probe/env.json",
                  sorted((out / "figures").glob("*.png")), cfg, plan_report, out / "report.md", out / "report.html",
                  extra=json.loads((out / "probe/advice.json").read_text()))


if __name__ == "__main__":
    main()
