"""Command line: python -m distbench.probes {topology,nccl-log,probe-topology,nvlink,env,health} ...

Prints JSON on stdout. Exit 2 with one line on stderr when an input file is missing or is not
what the subcommand parses, so a Snakemake rule fails with a readable reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _read(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    return p.read_text(errors="replace")


def _cmd_topology(args) -> dict:
    from distbench.probes.topology import parse_topology

    try:
        return parse_topology(_read(args.file))
    except ValueError as exc:
        raise ValueError(f"{args.file}: {exc}") from None


def _cmd_nccl_log(args) -> dict:
    from distbench.probes.nccl_algo import algo_by_size, describe_algo_ranges
    from distbench.probes.nccl_log import parse_nccl_log_files

    for f in args.files:
        _read(f)  # missing files fail before parsing starts
    parsed = parse_nccl_log_files(args.files)
    rows = algo_by_size(parsed)
    parsed["algo_by_size"] = rows
    parsed["algo_ranges"] = describe_algo_ranges(rows) if rows else None
    return parsed


def _cmd_probe_topology(args) -> dict:
    from distbench.probes.topology import probe_topology

    return probe_topology()


def _cmd_nvlink(args) -> dict:
    from distbench.probes.nvml import nvlink_state

    return nvlink_state()


def _cmd_env(args) -> dict:
    from distbench.probes.env import collect_env  # imported lazily: it may pull in torch

    return collect_env()


def _cmd_health(args) -> dict:
    """health_before.csv in --out; with --after, health_after.csv and health_diff.csv against it."""
    from distbench.probes.health import read_health
    from distbench.probes.health_table import check_after, check_before, stop_reason

    out = Path(args.out)
    if args.after:
        before = out / "health_before.csv"
        _read(str(before))
        diff = check_after(before, out / "health_after.csv", out / "health_diff.csv",
                           read_health(args.gpus, args.load_s))
        moved = [vars(r) for r in diff if r.state in ("degraded", "failing")]
        return {"written": [str(out / "health_after.csv"), str(out / "health_diff.csv")], "moved": moved}
    rows = check_before(out / "health_before.csv", read_health(args.gpus, args.load_s))
    return {"written": [str(out / "health_before.csv")],
            "not_ok": [vars(r) for r in rows if r.state in ("degraded", "failing")],
            "stop": stop_reason(rows, True)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m distbench.probes", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("topology", help="parse saved `nvidia-smi topo -m` output")
    p.add_argument("file")
    p.set_defaults(fn=_cmd_topology)
    p = sub.add_parser("nccl-log", help="parse NCCL_DEBUG=INFO logs (one file per rank is fine)")
    p.add_argument("files", nargs="+")
    p.set_defaults(fn=_cmd_nccl_log)
    sub.add_parser("probe-topology", help="run `nvidia-smi topo -m` on this host").set_defaults(fn=_cmd_probe_topology)
    sub.add_parser("nvlink", help="NVLink/PCIe link state from NVML").set_defaults(fn=_cmd_nvlink)
    sub.add_parser("env", help="software/hardware environment record").set_defaults(fn=_cmd_env)
    p = sub.add_parser("health", help="hardware health per GPU (NVML): health_before.csv, or with --after "
                                      "health_after.csv and health_diff.csv")
    p.add_argument("--out", required=True, help="directory of the CSVs")
    p.add_argument("--after", action="store_true", help="the reading after a run, against --out/health_before.csv")
    p.add_argument("--gpus", type=int, default=None, help="GPUs expected on this node (missing ones fail)")
    p.add_argument("--load-s", type=float, default=5.0, help="seconds of matmul load while sampling (0: idle)")
    p.set_defaults(fn=_cmd_health)
    args = parser.parse_args(argv)
    try:
        result = args.fn(args)
    except (ValueError, OSError) as exc:
        print(f"distbench.probes {args.cmd}: error: {exc}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
