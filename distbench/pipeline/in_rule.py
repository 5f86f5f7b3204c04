"""Small helpers shared by the thin entry points in workflow/scripts/."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


@contextlib.contextmanager
def logged(log_path):
    """Send this script's stdout and stderr to the rule's log file (tracebacks included)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        try:
            yield log
        except SystemExit:  # a deliberate exit (e.g. an interrupted job) has already said why
            raise
        except BaseException:
            import traceback

            traceback.print_exc(file=log)
            raise


def run_in_rule(log_path, fn, *args, **kwargs):
    """Run one step as a Snakemake rule's script, its output in the rule's log. Bad input (a
    distbench.core.contract.SchemaError, e.g. a corrupted cached job CSV) ends the script with the error's
    message, written to the log and to stderr, and exit status 1, without a traceback; anything
    else still raises (traceback in the log)."""
    from distbench.core.contract import SchemaError

    with logged(log_path):
        try:
            return fn(*args, **kwargs)
        except SchemaError as e:
            message = f"distbench error: {e}"
            print(message, flush=True)  # stdout is the log here
    sys.exit(message)


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
