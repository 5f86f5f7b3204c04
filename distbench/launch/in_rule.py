"""A rule's script, its output in the rule's log: `logged`, and `run_in_rule` for a step that reads
tables (a bad table ends it with its message, no traceback). Torch-free: table readers' steps use it.
A benchmark job's script uses distbench.launch.job_rule.run_job_in_rule."""

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


def figures_in_rule(sm, draw, table: str) -> None:
    """A plot step (a manifest's Step writing a figure directory, `figures`): its input `table` read
    through the one reader (distbench.core.readers: a damaged file ends the rule with its message, no
    traceback), `draw(table, directory)` -> the figures' paths, each named in the rule's log. The
    directory is made also when there is nothing to draw (it is the rule's output)."""
    from distbench.core.readers import read_table, remake

    def main():
        out = Path(sm.output.figures)
        out.mkdir(parents=True, exist_ok=True)
        path = sm.input[table]
        for figure in draw(read_table(path, remake(path)), out):
            print(figure)

    run_in_rule(sm.log[0], main)
