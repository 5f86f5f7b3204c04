"""Our comm figures next to nccl-tests' own output from the same machine, with ratios.

    python tools/compare_nccl_tests.py results/<label>/comm/.../comm.csv  nt/*.txt  [--timing events]

The first argument is a comm job CSV (one row per trial) or a comm summary (`*_median` columns);
every other argument is one nccl-tests run's stdout (its header names the test: `# Collective test
starting: sendrecv_perf`; `-N` cycles are allowed, the median over cycles is taken per size).
Compare like with like: nccl-tests built with MPI and run `mpiexec -n <ranks>` (one process per
GPU, as torchrun runs ours: tools/nccl_tests_build.sh), `-G 0` against our `events` timing and
`-G 10` against our `graph` timing, and our `--rank-agg avg` (nccl-tests' default -a 1).

Ratios: busbw ours / nccl-tests (below 1: we are slower), time ours / nccl-tests (above 1: slower).
nccl-tests' out-of-place figures are compared with our out-of-place rows where the op has them
(torch's all_reduce and broadcast work in place only: their rows are in place).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

from distbench.core.ops_spec import SPECS  # the one op table: nccl-tests' program per op

NCCL_TESTS_OPS = {s.nccl_tests_binary: s.name for s in SPECS.values() if s.nccl_tests_binary}
BUSBW_TARGET = 0.97  # at 32 MiB and above, where bandwidth, not per-op cost, sets the time


def read_nccl_tests(path: Path) -> tuple[str, pd.DataFrame]:
    """(our op name, per size: median out-of-place time_us and busbw_gbps over the printed cycles)."""
    text = path.read_text(errors="replace")
    m = re.search(r"# Collective test starting: (\S+)", text)
    if not m or m.group(1) not in NCCL_TESTS_OPS:
        raise SystemExit(f"{path}: no '# Collective test starting: <name>' line naming one of {', '.join(NCCL_TESTS_OPS)}")
    rows = []
    for line in text.splitlines():
        tok = line.split()
        if len(tok) < 10 or not tok[0].isdigit():
            continue
        try:  # out of place: time algbw busbw #wrong, then the in-place four
            rows.append({"size_bytes": int(tok[0]), "time_us": float(tok[-8]), "busbw_gbps": float(tok[-6])})
        except ValueError:
            continue
    if not rows:
        raise SystemExit(f"{path}: no result rows")
    return NCCL_TESTS_OPS[m.group(1)], pd.DataFrame(rows).groupby("size_bytes").median()


def read_ours(path: Path, timing: str) -> pd.DataFrame:
    """Per (op, requested size): median time_us and busbw_gbps of our out-of-place rows at `timing`."""
    d = pd.read_csv(path)
    if "time_us_median" in d:  # a summary
        d = d.rename(columns={"time_us_median": "time_us", "busbw_gbps_median": "busbw_gbps"})
    d = d[(d["status"] == "ok") & (d["timing"] == timing)]
    size = "requested_bytes" if "requested_bytes" in d else "size_bytes"
    if "inplace" in d:  # out-of-place rows where the op has them (all_reduce and broadcast run in place only)
        inplace = d["inplace"].astype(str).str.lower().isin(["true", "1"])
        has_oop = d.assign(oop=~inplace).groupby(["op", size])["oop"].transform("any")
        d = d[~inplace | ~has_oop]
    return d.groupby(["op", size])[["time_us", "busbw_gbps"]].median().rename_axis(["op", "size_bytes"])


def compare(ours: pd.DataFrame, theirs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for op, ref in theirs.items():
        for size in ref.index:
            if (op, size) not in ours.index:
                continue
            mine = ours.loc[(op, size)]
            rows.append({"op": op, "size_bytes": int(size),
                         "nccl_tests_time_us": ref.loc[size, "time_us"], "ours_time_us": mine["time_us"],
                         "nccl_tests_busbw_gbps": ref.loc[size, "busbw_gbps"], "ours_busbw_gbps": mine["busbw_gbps"],
                         "time_ratio": mine["time_us"] / ref.loc[size, "time_us"],
                         "busbw_ratio": (mine["busbw_gbps"] / ref.loc[size, "busbw_gbps"]
                                         if ref.loc[size, "busbw_gbps"] else float("nan"))})
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", type=Path, help="our comm CSV or comm summary CSV")
    ap.add_argument("nccl_tests", type=Path, nargs="+", help="nccl-tests stdout files")
    ap.add_argument("--timing", default="events", help="our timing to compare (events with -G 0, graph with -G 10)")
    a = ap.parse_args(argv)
    theirs = dict(read_nccl_tests(p) for p in a.nccl_tests)
    table = compare(read_ours(a.ours, a.timing), theirs)
    if table.empty:
        print("no (op, size) in common between our file and the nccl-tests outputs", file=sys.stderr)
        return 1
    print(f"| op | size B | nccl-tests µs | ours ({a.timing}) µs | time ours/theirs | nccl-tests busbw | ours busbw "
          f"| busbw ours/theirs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for _, r in table.iterrows():
        flag = " (below 0.97)" if r["size_bytes"] >= 32 << 20 and r["busbw_ratio"] < BUSBW_TARGET else ""
        print(f"| {r['op']} | {r['size_bytes']} | {r['nccl_tests_time_us']:.2f} | {r['ours_time_us']:.2f} "
              f"| {r['time_ratio']:.3f} | {r['nccl_tests_busbw_gbps']:.1f} | {r['ours_busbw_gbps']:.1f} "
              f"| {r['busbw_ratio']:.3f}{flag} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
