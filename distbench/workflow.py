"""Small helpers shared by the thin entry points in workflow/scripts/."""

from __future__ import annotations

import contextlib
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
