"""The same-machine default runs of the old (5a8a229) and the new workflow, side by side: every comm
point's bus bandwidth, every training configuration's step time and every memory configuration's largest
batch, new against old (benchmarks/results/family-folder-h200x2-2026-11-28/tables-a-{new,old}).

    python compare_default_runs.py RESULTS_DIR
"""

import sys
from pathlib import Path

import pandas as pd

COMM_KEYS = ["backend", "op", "traffic", "world_size", "dtype", "nccl_env", "timing", "inplace", "size_bytes"]


def main(d: Path) -> None:
    new, old = d / "tables-a-new", d / "tables-a-old"
    comm = pd.read_csv(new / "comm_summary.csv").merge(pd.read_csv(old / "comm_summary.csv"),
                                                       on=COMM_KEYS, suffixes=("_new", "_old"))
    comm = comm[comm["busbw_gbps_median_old"] > 0]
    ratio = comm["busbw_gbps_median_new"] / comm["busbw_gbps_median_old"]
    big = comm[comm["size_bytes"] >= 1 << 24]
    big_ratio = big["busbw_gbps_median_new"] / big["busbw_gbps_median_old"]
    print(f"comm: {len(comm)} points with bandwidth, new/old busbw median {ratio.median():.4f}; from 16 MiB "
          f"({len(big)} points): median {big_ratio.median():.4f}, range {big_ratio.min():.3f}-{big_ratio.max():.3f}")
    for name, keys, col in (("training", ["model", "config", "world_size"], "step_time_ms_median"),
                            ("memory", ["model", "config", "world_size"], "largest_batch_fits")):
        t = pd.read_csv(new / f"{name}_summary.csv").merge(pd.read_csv(old / f"{name}_summary.csv"), on=keys,
                                                           suffixes=("_new", "_old"))
        t["new_over_old"] = t[f"{col}_new"] / t[f"{col}_old"]
        print(f"{name}:")
        print(t[keys + [f"{col}_new", f"{col}_old", "new_over_old"]].to_string(index=False, float_format="%.3f"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
