"""The communication self-check over every committed GPU dataset (distbench.predict.selfcheck).

Finds each comm_summary.csv under benchmarks/results/ with NCCL rows at two or more world sizes,
calibrates NCCL's per-protocol model on the smallest world size of every series and predicts the
larger ones; checks NCCL's modelled protocol choice against the committed TUNING log; predicts 8x
H200 all_reduce / all_gather / reduce_scatter at 1 GiB from the 2x and 4x H200 sweeps. Writes CSVs
into the output folder and prints the summary tables (markdown), with the controls of each miss
(comm_selfcheck_controls.csv: oracle bandwidth, oracle latency, in-sample; selfcheck.CONTROLS).

    python benchmarks/runs/predict_selfcheck_comm.py [--out benchmarks/results/predict-selfcheck-cpu-2core-2026-11-29]
    python benchmarks/runs/predict_selfcheck_comm.py --table results/<label>/tables/comm_summary.csv --out DIR

--table checks that table alone (a new run's: benchmarks/runs/predict_gpu.sh does), without the check
against the committed 2x H200 NCCL log and the 8x H200 figures, which are the committed runs'.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from distbench.core.io import atomic_write_csv
from distbench.predict import selfcheck as S
from distbench.predict.nccl_model import NcclTopo

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks/results"
H200X4 = RESULTS / "comm-predict-h200x4-2026-11-26/comm_summary.csv"
H200X2_LOG = RESULTS / "comm-fidelity-h200x2-2026-11-26/probe/nccl_logs/nccl.vm.2189.log"
# Published 8-GPU figures (docs/fixtures.md): busbw GB/s at large sizes
PUBLISHED_8X = {
    "all_reduce": ("360-370 (ring, NVLS off; NVIDIA/nccl-tests#212, NVLink4 x18 as H100); "
                   "475 with NVLS (8x H200 defaults, NVIDIA/nccl-tests#272)", 365.0),
    "all_gather": ("361.4 (8x H200, 16 GiB, NCCL 2.27.7, stas00/ml-engineering network/README.md)", 361.4),
    "reduce_scatter": ("362.9 (8x H200, 16 GiB, NCCL 2.27.7, stas00/ml-engineering network/README.md)", 362.9),
}


def datasets() -> dict[str, Path]:
    """{name: comm_summary.csv} for every committed table with NCCL rows at >= 2 world sizes >= 2."""
    out = {}
    for f in sorted(RESULTS.glob("*/**/comm_summary.csv")):
        d = pd.read_csv(f)
        if not {"backend", "world_size"} <= set(d.columns):
            continue
        ws = sorted({int(w) for w in d.loc[d["backend"] == "nccl", "world_size"] if int(w) >= 2})
        if len(ws) >= 2:
            out[str(f.parent.relative_to(RESULTS))] = f
    return out


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(RESULTS / "predict-selfcheck-cpu-2core-2026-11-29"))
    ap.add_argument("--table", type=Path, help="check this comm_summary.csv alone, not the committed datasets")
    args = ap.parse_args(argv)
    out = Path(args.out)
    parts = []
    tables = {args.table.parent.name: args.table} if args.table else datasets()
    for name, f in tables.items():
        c = S.check_table(pd.read_csv(f), name)
        print(f"{name}: {len(c)} points", file=sys.stderr)
        parts.append(c)
    check = pd.concat(parts, ignore_index=True)
    if check.empty:  # one world size (a 2-GPU settling sweep): nothing larger to predict
        print("no series measured at two world sizes: nothing to check", file=sys.stderr)
        return 0
    atomic_write_csv(out / "comm_selfcheck.csv", check)
    by = ("dataset", "op", "timing", *(("nccl_env",) if check["nccl_env"].nunique() > 1 else ()))
    summ = S.summarize(check, by=by)
    atomic_write_csv(out / "comm_selfcheck_summary.csv", summ)
    sizes = S.per_size(check).round(1).reset_index()
    atomic_write_csv(out / "comm_selfcheck_per_size.csv", sizes)

    ctl = S.control_summary(check, by=by)
    atomic_write_csv(out / "comm_selfcheck_controls.csv", ctl)
    print("\n## controls (max |error| %; the band's oracle: bandwidth at >= 1 MiB, latency below)\n")
    print(_md(ctl[[*by, "band", "goal_pct", "max_abs_err_pct", "max_abs_err_pct_oracle_bw",
                   "max_abs_err_pct_oracle_bw_simple", "max_abs_err_pct_oracle_lat", "max_abs_err_pct_in_sample",
                   "worst_size_bytes_band_oracle", "worst_protocol_band_oracle", "verdict"]]))
    # the protocol transition the envelope got wrong: all_reduce at 2 MiB on 4x H200, graph timing
    t = check[(check["dataset"] == "comm-predict-h200x4-2026-11-26") & (check["op"] == "all_reduce")
              & (check["timing"] == "graph") & (check["size_bytes"] == 2**21)]
    print("\n## all_reduce 2 MiB, 4x H200 graph (fit at 2): envelope -> NCCL's model, % error\n")
    print(_md(t[["dtype", "inplace", "protocol", "rel_err_pct_envelope", "rel_err_pct"]]))

    wide = summ.pivot_table(index=list(by), columns="band",
                            values=["max_abs_err_pct", "median_abs_err_pct", "max_abs_err_pct_envelope"])
    wide.columns = [f"{a} {b}" for a, b in wide.columns]
    print("\n## self-check (max / median |error| %, new model; envelope max)\n")
    print(_md(wide.reset_index()))

    if args.table:  # what follows is the committed runs': NCCL's log of 2x H200, the 4x H200 sweep
        return 0
    # the regimes against NCCL's own log (2x H200, NCCL 2.28.9)
    if H200X2_LOG.is_file():
        logged = S.log_choices(H200X2_LOG.read_text(errors="replace"), 2)
        cmp_ = S.compare_log_choices(logged, NcclTopo(2))
        atomic_write_csv(out / "comm_log_regimes.csv", cmp_)
        print(f"\n## NCCL's choice vs its log (2x H200): {int(cmp_['agrees'].sum())}/{len(cmp_)} sizes agree\n")
        print(_md(cmp_[~cmp_["agrees"]]) if (~cmp_["agrees"]).any() else "(all agree)")

    # 8x H200 at 1 GiB
    rows = []
    comm = pd.read_csv(H200X4)
    for op, (text, ref) in PUBLISHED_8X.items():
        for fit_ws in (2, 4):
            r = S.predict_busbw(comm, op, fit_ws, 8, 2**30)
            rows.append({**r, "published": text, "err_pct_vs_published": 100 * (r["busbw_gbps"] / ref - 1)})
    pred8 = pd.DataFrame(rows)
    atomic_write_csv(out / "comm_8xh200_1gib.csv", pred8)
    print("\n## 8x H200, 1 GiB\n")
    print(_md(pred8[["op", "fit_world_size", "algorithm", "protocol", "time_us", "busbw_gbps",
                     "err_pct_vs_published"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
