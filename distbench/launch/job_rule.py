"""A benchmark job run from its rule's script (a family's job, a measuring step): the launcher's own
output in `<log>.launcher`, the job's outcome as an exit status Snakemake acts on."""

from __future__ import annotations

import sys

from distbench.launch.in_rule import logged


def run_job_in_rule(log_path, what: str, run) -> None:
    """Run one benchmark job from its rule's script, the launcher's own output in `<log>.launcher`:
    prints `<what>: ok` or the failure reason. A failed measurement still leaves its CSV
    (failed/not_run rows), so the rest of the DAG goes on; an interrupted job (exit 128 + the
    signal) or one this host cannot run (no CUDA, too few GPUs; exit 1, the reason on stderr)
    leaves nothing, so the next run starts it again."""
    from distbench.launch.torchrun import HostCannotRun, JobNotKept

    with logged(str(log_path) + ".launcher"):
        try:
            print(f"{what}: {run()}")
            return
        except JobNotKept as e:
            print(f"{what}: {e.why}")
            failure = e
    if isinstance(failure, HostCannotRun):
        sys.exit(f"distbench error: {what}: {failure.why}")  # stderr: Snakemake's own output shows it
    sys.exit(failure.exit_code)

