"""A torchrun entry point whose timed trials report known per-rank times (rank r: BASE[r] + trial),
so the per-rank bookkeeping over the real Gloo group can be checked exactly. Writes one CSV pair
per rank aggregation into the directory given as argv[1]."""
import sys
from pathlib import Path

from distbench.comm import main as cli, harness as comm
from distbench.core.io import PartialCsvs
from distbench.comm.contract import COMM_COLUMN_NAMES, COMM_RANK_COLUMN_NAMES

BASE = [20.0, 40.0, 10.0]


def fake_time_and_check(self, spec, ctx, slots, timing):
    return [BASE[self.rank] + t for t in range(self.args.trials)], True


comm.Harness._time_and_check = fake_time_and_check
out_dir = Path(sys.argv[1])
args = cli.parse_args(["--backend", "gloo", "--ops", "all_reduce", "--sizes", "1KiB", "--warmup", "0",
                        "--iters", "2", "--trials", "3", "--out", str(out_dir / "unused.csv")])
h = comm.Harness(args)
for how in ("max", "avg", "min", "rank0"):
    args.rank_agg = how
    writer = PartialCsvs([(out_dir / f"{how}.csv", COMM_COLUMN_NAMES),
                          (out_dir / f"{how}_ranks.csv", COMM_RANK_COLUMN_NAMES)]) if h.rank == 0 else None

    def emit(rows, rank_rows):
        if writer:
            writer.write(1, rank_rows)
            writer.write(0, rows)
    h.measure(comm.Point("all_reduce", 1024, "host"), emit)
    if writer:
        writer.close()
h.dist.barrier()
h.dist.destroy_process_group()
