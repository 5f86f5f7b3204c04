"""Print our figures next to nccl-tests' on the same kind of machine, with ratios.

    python tools/compare_nccl_tests.py benchmarks/results/comm-fidelity-h200x2-2026-11-26/tables/comm_summary.csv

Reference: nccl-tests on 2x H200 (NV18), torch 2.11 image / NCCL 2.28.9, fp32, NVLS off, as quoted
in distbench issue 3 (busbw in GB/s unless the metric says time_us).
"""

import sys

import pandas as pd

NCCL_TESTS = [  # (op, size_bytes, metric, value, our timing that nccl-tests' figure corresponds to)
    ("all_reduce", 8, "time_us", 19.4, "events"),
    ("all_reduce", 8, "time_us", 6.2, "graph"),
    ("all_reduce", 2**20, "time_us", 16.1, "events"),
    ("all_reduce", 2**20, "busbw_gbps", 65.0, "events"),
    ("all_reduce", 2**24, "busbw_gbps", 213.0, "events"),
    ("all_reduce", 2**26, "busbw_gbps", 268.0, "events"),
    ("all_reduce", 2**30, "busbw_gbps", 330.0, "events"),
    ("all_gather", 2**30, "busbw_gbps", 268.0, "events"),
    ("reduce_scatter", 2**30, "busbw_gbps", 274.0, "events"),
    ("broadcast", 2**30, "busbw_gbps", 366.0, "events"),
    ("all_to_all", 2**30, "busbw_gbps", 332.0, "events"),
    ("send_recv", 2**30, "busbw_gbps", 361.0, "events"),
]


def target(size_bytes: int, metric: str, timing: str) -> str:
    if metric == "time_us":
        return "<= 1.5x (graph)" if timing == "graph" else "-"
    return ">= 0.97x" if size_bytes >= 32 * 2**20 else ">= 0.90x"


def main(path: str, dtype: str = "float32") -> None:
    s = pd.read_csv(path)
    s = s[(s["backend"] == "nccl") & (s["dtype"] == dtype) & (s["nccl_env"] == "default") & (s["world_size"] == 2)]
    print("| op | size | metric | nccl-tests | ours: events | ours: graph | ours: host | ratio events | ratio graph | target |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for op, size, metric, ref, timing in NCCL_TESTS:
        rows = s[(s["op"] == op) & (s["size_bytes"] == size)].set_index("timing")
        col = "time_us_median" if metric == "time_us" else "busbw_gbps_median"
        val = {t: rows[col].get(t, float("nan")) for t in ("events", "graph", "host")}
        if metric == "time_us":  # lower is better: ratio = theirs / ours, so > 1 means we are faster
            ratio = {t: ref / v for t, v in val.items()}
        else:
            ratio = {t: v / ref for t, v in val.items()}
        ref_label = f"{ref:g} ({timing})" if metric == "time_us" else f"{ref:g}"
        print(f"| {op} | {size} | {metric} | {ref_label} | {val['events']:.1f} | {val['graph']:.1f} | {val['host']:.1f} "
              f"| {ratio['events']:.3f} | {ratio['graph']:.3f} | {target(size, metric, timing)} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
