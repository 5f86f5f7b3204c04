"""Print the tables of issue 8's GPU run (benchmarks/investigations/integrity/integrity_gpu.sh) from its output folder.

    python benchmarks/investigations/integrity/integrity_summary.py /tmp/integrity
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd


def median_by(df: pd.DataFrame, keys: list[str], col: str = "time_us") -> pd.Series:
    return df[df["status"] == "ok"].groupby(keys)[col].median()


def avg_over_ranks(ranks: pd.DataFrame, keys: list[str]) -> pd.Series:
    """nccl-tests' default (-a 1): per trial the mean over ranks, then the median over trials."""
    per_trial = ranks.groupby(keys + ["trial"])["time_us"].mean()
    return per_trial.groupby(keys).median()


def nccl_tests_times(path: Path) -> dict[int, float]:
    """Out-of-place time (us) per size from an nccl-tests output."""
    out = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and re.match(r"^[0-9.]+$", f[5]):
            out[int(f[0])] = float(f[5])
    return out


def main(w: Path) -> None:
    pd.set_option("display.width", 200)
    small = pd.read_csv(w / "small_L1.csv")
    small_ranks = pd.read_csv(w / "small_L1_ranks.csv")
    l10 = pd.read_csv(w / "small_L10.csv")
    l10_ranks = pd.read_csv(w / "small_L10_ranks.csv")
    k = ["timing", "size_bytes"]
    t = pd.DataFrame({
        "events_max": median_by(small, k).xs("events"),
        "graph_L1_max": median_by(small, k).xs("graph"),
        "graph_L1_avg": avg_over_ranks(small_ranks, k).xs("graph"),
        "graph_L10_max": median_by(l10, k).xs("graph"),
        "graph_L10_avg": avg_over_ranks(l10_ranks, k).xs("graph"),
        "L10_spread_pct": ((l10["time_us_rank_max"] - l10["time_us_rank_min"]) / l10["time_us_rank_max"] * 100)
        .groupby(l10["size_bytes"]).median(),
    })
    for name in ("G10", "t2_G10", "G0", "t2_G0"):
        ref = nccl_tests_times(w / "latency" / f"nccl_tests_{name}.txt")
        if ref:
            t[f"nccl_tests_{name}"] = [ref.get(s) for s in t.index]
    print("all_reduce float32, 2 ranks, us per op (median over 10 trials; max = max over ranks, avg = nccl-tests' -a 1)")
    print(t.round(2).to_string())
    if "nccl_tests_G10" in t:
        print("ratio graph_L10_avg / nccl-tests -g 2 -G 10:", (t["graph_L10_avg"] / t["nccl_tests_G10"]).round(2).tolist())
    if "nccl_tests_t2_G10" in t:
        print("ratio graph_L10_avg / nccl-tests -t 2 -G 10:", (t["graph_L10_avg"] / t["nccl_tests_t2_G10"]).round(2).tolist())

    on, off = pd.read_csv(w / "rot_on.csv"), pd.read_csv(w / "rot_off.csv")
    k = ["op", "timing", "size_bytes"]
    ratio = (median_by(on, k) / median_by(off, k)).rename("on_over_off").reset_index()
    ratio["band"] = pd.cut(ratio["size_bytes"], [0, 2**16, 2**20, 2**24, 2**27],
                           labels=["<=64K", "64K-1M", "1M-16M", "16M-64M"])
    print("\nbuffer rotation on / off, time per op (median over trials), by size band: median [min, max] of the ratio")
    g = ratio.groupby(["op", "timing", "band"], observed=True)["on_over_off"]
    print(pd.DataFrame({"median": g.median(), "min": g.min(), "max": g.max()}).round(3).to_string())

    for name in ("full_fp32", "full_bf16"):
        df = pd.read_csv(w / f"{name}.csv")
        print(f"\n{name}: rows by status: {df['status'].value_counts().to_dict()}; correct all: "
              f"{bool(df.loc[df['status'] == 'ok', 'correct'].fillna(True).all())}")
        bad = df[~df["status"].isin(["ok"])]
        if len(bad):
            print(bad.groupby(["op", "status"])["message"].first().to_string())
        big = df[(df["size_bytes"] >= 2**29) & (df["status"] == "ok")]
        print(big.groupby(["op", "timing", "inplace", "size_bytes"])["busbw_gbps"].median().unstack("size_bytes").round(1).to_string())
        spread = (df["time_us_rank_max"] - df["time_us_rank_min"]) / df["time_us_rank_max"] * 100
        print("rank spread % (median by timing):", spread.groupby(df["timing"]).median().round(2).to_dict())

    wrong = pd.read_csv(w / "wrong.csv")
    print("\nwrong_after_warmup (all_reduce right eagerly, MAX after warm-up):")
    print(wrong.groupby(["timing", "size_bytes"]).agg(status=("status", "first"), message=("message", "first")).to_string())


if __name__ == "__main__":
    main(Path(sys.argv[1]))
