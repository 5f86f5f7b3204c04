"""Command line: python -m distbench.health --out DIR [--after] [--gpus N] [--load-s S]

Reads this node's hardware health (distbench.health.readings) by hand: health_before.csv in --out;
with --after, health_after.csv and health_diff.csv against it. Prints JSON on stdout; exit 2 with one
line on stderr when the reading before is missing or cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def health(args) -> dict:
    """health_before.csv in --out; with --after, health_after.csv and health_diff.csv against it."""
    from distbench.health.readings import read_health
    from distbench.health.table import check_after, check_before, stop_reason

    out = Path(args.out)
    if args.after:
        before = out / "health_before.csv"
        if not before.is_file():
            raise FileNotFoundError(f"no such file: {before}")
        diff = check_after(before, out / "health_after.csv", out / "health_diff.csv",
                           read_health(args.gpus, args.load_s))
        moved = [vars(r) for r in diff if r.state in ("degraded", "failing")]
        return {"written": [str(out / "health_after.csv"), str(out / "health_diff.csv")], "moved": moved}
    rows = check_before(out / "health_before.csv", read_health(args.gpus, args.load_s))
    return {"written": [str(out / "health_before.csv")],
            "not_ok": [vars(r) for r in rows if r.state in ("degraded", "failing")],
            "stop": stop_reason(rows, True)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m distbench.health",
                                description="hardware health per GPU (NVML): health_before.csv, or with --after "
                                            "health_after.csv and health_diff.csv")
    p.add_argument("--out", required=True, help="directory of the CSVs")
    p.add_argument("--after", action="store_true", help="the reading after a run, against --out/health_before.csv")
    p.add_argument("--gpus", type=int, default=None, help="GPUs expected on this node (missing ones fail)")
    p.add_argument("--load-s", type=float, default=5.0, help="seconds of matmul load while sampling (0: idle)")
    args = p.parse_args(argv)
    try:
        result = health(args)
    except (ValueError, OSError) as exc:
        print(f"distbench.health: error: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
