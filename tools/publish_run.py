"""Copy a finished run's tables, probes and figures into a benchmarks/results/ folder and render its report
there (figure links relative to the folder), without rerunning anything.

    python tools/publish_run.py WORKDIR CONFIG OUTDIR --gpus N [--label LABEL] [--gpus-source "..."]

from the repository root with this checkout importable (PYTHONPATH=. or the package installed).
"""

import argparse
import shutil
from pathlib import Path

import yaml

from distbench.pipeline.config import check_config
from distbench.pipeline.plan import make_plan, plan_summary
from distbench.core.section import ReportInputs
from distbench.pipeline.families import figure_dirs, report_tables
from distbench.report.render import documents_of, figures_in, render_report


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
    cfg = check_config({**yaml.safe_load(a.config.read_text()), "gpus": a.gpus})
    plan = make_plan(cfg)
    for sub in ("tables", "probe", "probe/nccl_logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    shutil.copytree(res / "tables", out / "tables", dirs_exist_ok=True)
    for name in ("env", "topology", "nccl"):
        shutil.copy(res / "probe" / f"{name}.json", out / "probe")
    for f in (res / "probe/nccl_logs").glob("nccl.*.log"):
        shutil.copy(f, out / "probe/nccl_logs")
    if (res / "health").is_dir():  # the health readings' tables: the Verdict's hardware row
        shutil.copytree(res / "health", out / "health", dirs_exist_ok=True)
    # the families' tables and figure directories, as their manifests name them (distbench.pipeline.families)
    for d in figure_dirs(cfg, plan):
        if (res / d).is_dir():
            shutil.copytree(res / d, out / d, dirs_exist_ok=True)
    tables = {name: out / t.path for name, t in report_tables(cfg, plan).items() if (out / t.path).exists()}
    inputs = ReportInputs(tables=tables, env=out / "probe/env.json",
                          figures=figures_in([out / d for d in figure_dirs(cfg, plan)]), config=cfg,
                          plan=plan_summary(plan, a.gpus_source), extra=documents_of(tables))
    render_report(inputs, out / "report.md", out / "report.html")

if __name__ == "__main__":
    main()
