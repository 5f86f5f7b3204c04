"""Side by side: nccl-tests in both process layouts, the raw-NCCL control and our comm job, from the
files benchmarks/runs/nccl_layouts_run.sh leaves in one directory (runs without a GPU):

    python benchmarks/investigations/graph-latency/layouts_compare.py DIR

DIR/nt/<name>.txt      nccl-tests stdout (-N cycles: the median over cycles is taken per size)
DIR/raw/<label>_rank<r>.csv   raw_nccl_ctypes.py, every rank
DIR/ours/small_*.csv, DIR/ours/large.csv   our comm job (--rank-agg avg)

Every time is per op in µs; a trial's time is the average over ranks (nccl-tests' default -a 1),
then the median over trials (over -N cycles for nccl-tests). Ratios are ours / nccl-tests for
times (> 1: we are slower) and ours / nccl-tests for busbw (< 1: we are slower).
"""

import importlib.util
import sys
from pathlib import Path

import pandas as pd

_spec = importlib.util.spec_from_file_location(
    "compare_nccl_tests", Path(__file__).resolve().parents[3] / "tools" / "compare_nccl_tests.py")
_TOOL = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_TOOL)

SMALL = [8, 1024, 65536, 2**20]
LARGE_OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"]


def nccl_tests(path: Path) -> pd.DataFrame:
    """size_bytes -> median out-of-place time_us and busbw_gbps over the printed cycles (the parser of
    tools/compare_nccl_tests.py)."""
    return _TOOL.read_nccl_tests(path)[1]


def raw(dir_: Path) -> pd.DataFrame:
    files = sorted(dir_.glob("raw/*_rank*.csv"))
    if not files:
        return pd.DataFrame()
    d = pd.concat([pd.read_csv(f) for f in files])
    per_trial = d.groupby(["label", "mode", "size_bytes", "trial"])[["host_clock_us", "events_us", "host_issue_us"]].mean()
    return per_trial.groupby(["label", "mode", "size_bytes"]).median()


def ours(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame()
    d = pd.read_csv(path)
    d = d[d["status"] == "ok"]
    cols = ["time_us", "busbw_gbps"] + (["host_issue_us"] if "host_issue_us" in d else [])
    key = "requested_bytes" if "requested_bytes" in d else "size_bytes"
    return d.groupby(["op", "timing", key])[cols].median().rename_axis(["op", "timing", "size_bytes"])


def pick(frame, key, col):
    try:
        return float(frame.loc[key, col])
    except (KeyError, TypeError):
        return float("nan")


def fmt(x: float) -> str:
    return "-" if x != x else f"{x:.2f}"


def table(title: str, header: list[str], body: list[list[str]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for r in body:
        print("| " + " | ".join(r) + " |")


def main(dir_: str) -> None:
    d = Path(dir_)
    nt = {p.stem: nccl_tests(p) for p in sorted(d.glob("nt/*.txt"))}
    r = raw(d)
    small = {name: ours(d / "ours" / f"small_{name}.csv") for name in ("torchrun", "norotate", "mpiexec", "torchrun_mix0")}
    empty = pd.DataFrame(columns=["time_us", "busbw_gbps"])

    def nt_t(name, size):
        return pick(nt.get(name, empty), size, "time_us")

    def raw_t(label, mode, size, col="host_clock_us"):
        return pick(r, (label, mode, size), col) if len(r) else float("nan")

    def our_t(name, timing, size, col="time_us"):
        f = small[name]
        return pick(f, ("all_reduce", timing, size), col) if len(f) else float("nan")

    body = []
    for s in SMALL:
        ref = nt_t("mpi2_all_reduce_G10", s)
        vals = [nt_t("mpi2_all_reduce_G10", s), nt_t("mpi1g2_all_reduce_G10", s),
                raw_t("torchrun_plain", "graph", s), raw_t("mpiexec_plain", "graph", s),
                raw_t("torchrun_with_torch", "graph", s), raw_t("torchrun_with_torch", "torch_graph", s),
                our_t("torchrun", "graph", s), our_t("norotate", "graph", s), our_t("mpiexec", "graph", s)]
        body.append([str(s)] + [fmt(v) for v in vals] + [fmt(vals[6] / ref), fmt(vals[2] / ref)])
    table("all_reduce float32, CUDA graph (20 ops x 10 launches), µs per op",
          ["size B", "nccl-tests mpiexec -n 2 -G 10", "nccl-tests -g 2 -G 10", "raw NCCL, torchrun",
           "raw NCCL, mpiexec", "raw NCCL + torch in process", "raw NCCL, torch.cuda.graph capture",
           "ours (c10d), torchrun", "ours, no buffer rotation", "ours, mpiexec",
           "ours / nccl-tests MPI", "raw torchrun / nccl-tests MPI"], body)

    body = []
    for s in SMALL:
        vals = [nt_t("mpi2_all_reduce_G0", s), nt_t("mpi1g2_all_reduce_G0", s),
                raw_t("torchrun_plain", "eager", s), raw_t("torchrun_plain", "eager", s, "host_issue_us"),
                our_t("torchrun", "events", s), our_t("torchrun", "events", s, "host_issue_us")
                if "host_issue_us" in small["torchrun"] else float("nan"), our_t("mpiexec", "events", s)]
        body.append([str(s)] + [fmt(v) for v in vals])
    table("all_reduce float32, eager back to back (20 ops), µs per op",
          ["size B", "nccl-tests mpiexec -n 2 -G 0", "nccl-tests -g 2 -G 0", "raw NCCL (ctypes), torchrun",
           "raw NCCL: host issue per call", "ours events, torchrun", "ours: host issue per call",
           "ours events, mpiexec"], body)

    if len(small["torchrun_mix0"]) or "mpi2_all_reduce_G10_mix0" in nt:
        body = []
        for s in SMALL:
            pairs = [(nt_t("mpi2_all_reduce_G10", s), nt_t("mpi2_all_reduce_G10_mix0", s)),
                     (raw_t("torchrun_plain", "graph", s), raw_t("torchrun_plain_mix0", "graph", s)),
                     (raw_t("mpiexec_plain", "graph", s), raw_t("mpiexec_plain_mix0", "graph", s)),
                     (raw_t("torchrun_with_torch", "graph", s), raw_t("torchrun_with_torch_mix0", "graph", s)),
                     (raw_t("torchrun_with_torch", "torch_graph", s), raw_t("torchrun_with_torch_mix0", "torch_graph", s)),
                     (our_t("torchrun", "graph", s), our_t("torchrun_mix0", "graph", s))]
            ref = pairs[0][0]
            body.append([str(s)] + [f"{fmt(a)} / {fmt(b)}" for a, b in pairs]
                        + [fmt(pairs[-1][0] / ref), fmt(pairs[-1][1] / ref)])
        table("CUDA graph, µs per op: NCCL_GRAPH_MIXING_SUPPORT unset (NCCL's default 1) / =0",
              ["size B", "nccl-tests mpiexec -n 2 -G 10", "raw NCCL, torchrun", "raw NCCL, mpiexec",
               "raw NCCL + torch in process", "raw NCCL, torch.cuda.graph capture", "ours (c10d), torchrun",
               "ours / nccl-tests (default)", "ours mixing=0 / nccl-tests default"], body)

    large = ours(d / "ours" / "large.csv")
    body = []
    for op in LARGE_OPS:
        ref = nt.get(f"mpi2_{op}_large", empty)
        for s in sorted(set(ref.index) | {k[2] for k in large.index if k[0] == op} if len(large) else ref.index):
            theirs, mine = pick(ref, s, "busbw_gbps"), pick(large, (op, "events", s), "busbw_gbps") if len(large) else float("nan")
            ratio = mine / theirs if theirs == theirs and theirs else float("nan")
            body.append([op, str(s), fmt(theirs), fmt(mine), fmt(ratio), "" if ratio != ratio or ratio >= 0.97 else "below 0.97"])
    table("busbw GB/s at 32 MiB - 1 GiB: nccl-tests (mpiexec -n 2, -G 0, out of place) vs ours (events)",
          ["op", "size B", "nccl-tests", "ours", "ours / nccl-tests", ""], body)


if __name__ == "__main__":
    main(sys.argv[1])
