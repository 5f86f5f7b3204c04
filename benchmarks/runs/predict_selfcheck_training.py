"""The training prediction checked against the committed measured runs at 4 GPUs of the same cards
(distbench.predict.selfcheck_training): each dataset's rows at 1 (and 2) GPUs fed to the predictor,
its efficiency at 4 against the measured one. Writes
benchmarks/results/predict-selfcheck-cpu-2core-2026-11-29/training_selfcheck.csv and prints a markdown table.

    python3 benchmarks/runs/predict_selfcheck_training.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from distbench.core.io import atomic_write_csv
from distbench.predict.selfcheck_training import GOAL_POINTS, selfcheck
from distbench.predict.tables import fit_table, pick_link

REPO = Path(__file__).resolve().parents[2]
R = REPO / "benchmarks" / "results"


def _read(*paths: Path) -> pd.DataFrame:
    """The tables concatenated, a row measured in two of them (same world size and config) kept once."""
    t = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    keys = [c for c in ("backend", "world_size", "model", "strategy", "config") if c in t]
    return t.drop_duplicates(subset=keys, keep="first")


def _measured_link(comm_csv: Path, preset: str):
    """The NCCL all_reduce link fitted on the comm table's 2-rank rows only (what a 2-GPU run had)."""
    c = pd.read_csv(comm_csv)
    return pick_link(fit_table(c[pd.to_numeric(c["world_size"]) <= 2], preset=preset))


def datasets():
    """(name, training summary, preset, links, note) of every committed dataset with training rows
    at 1 and 4 GPUs."""
    h100 = "nvlink4-ib400"  # HGX H100: the preset of the H100 NVLink4 nodes these ran on
    h200 = "h200-ib400"
    report = R / "report-h100x4-2026-11-26/run-h100x4/tables"
    yield ("report-h100x4-2026-11-26", pd.read_csv(report / "training_summary.csv"), h100,
           {f"preset {h100}": None, "measured all_reduce at 2 ranks": _measured_link(report / "comm_summary.csv", h100)},
           "")
    yield ("training-lm-h100x4-2026-11-26", pd.read_csv(R / "training-lm-h100x4-2026-11-26/training_summary.csv"),
           h100, {f"preset {h100}": None}, "no comm table in the dataset")
    sweep = R / "training-h100x4-2026-11-26"
    yield ("training-h100x4-2026-11-26", _read(sweep / "training_summary_2gpu_sweep.csv",
                                               sweep / "training_summary_4gpu_sweep.csv"),
           h100, {f"preset {h100}": None}, "2- and 4-GPU sweeps of one machine kind; no comm table")
    lay4 = pd.read_csv(R / "layouts-h200x4-2026-11-28/tables/training_summary.csv")
    yield ("layouts-h200x4-2026-11-28", lay4, h200, {f"preset {h200}": None}, "no 2-GPU rows; no comm table")
    lay2 = pd.read_csv(R / "layouts-h200x2-2026-11-28/tables/training_summary.csv")
    both = pd.concat([lay2, lay4[pd.to_numeric(lay4["world_size"]) == 4]], ignore_index=True)
    yield ("layouts-h200x2+x4-2026-11-28", both, h200, {f"preset {h200}": None},
           "1 and 2 GPUs from the 2-GPU host, 4 from the 4-GPU host (same card, two hosts)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(R / "predict-selfcheck-cpu-2core-2026-11-29"))
    args = ap.parse_args(argv)
    parts = []
    for name, summary, preset, links, note in datasets():
        t = summary[summary["strategy"].isin(["ddp", "fsdp"])] if "strategy" in summary else summary
        fit_sets = ((1,), (1, 2)) if not name.startswith("layouts-h200x2+x4") else ((1, 2),)
        if name.startswith("layouts-h200x4"):
            fit_sets = ((1,),)
        parts.append(selfcheck(t, name, fit_sets, 4, preset, links, note))
    out = pd.concat(parts, ignore_index=True)
    atomic_write_csv(Path(args.out) / "training_selfcheck.csv", out.round(3))
    cols = ["dataset", "model", "strategy", "config", "fitted_on", "link", "predicted_eff_pct", "measured_eff_pct",
            "error_points", "predicted_comm_ms", "measured_comm_alone_ms", "compute_drift_points", "spread_points"]
    print("| " + " | ".join(cols) + " |\n|" + " --- |" * len(cols))
    for _, r in out.iterrows():
        print("| " + " | ".join(f"{r[c]:.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    miss = out[~out["within_goal"].astype(bool)]
    print(f"\n{len(out) - len(miss)} of {len(out)} within {GOAL_POINTS:g} points", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
