"""Command line: python -m distbench.probes {topology,nccl-log,probe-topology,nvlink,env} ...

Prints JSON on stdout. Exit 2 with one line on stderr when an input file is missing or is not
what the subcommand parses, so a Snakemake rule fails with a readable reason. The hardware health
check has its own: python -m distbench.health.
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
