"""Snakemake's own view of this invocation: the jobs its DAG holds and which of them it will run (its
own rerun triggers: a missing or older output, changed params, input or code), read once that DAG is
final. The shared launches' manifest (distbench.launch.batch) and the estimate
(distbench.pipeline.estimate) both read it, so both count exactly the jobs Snakemake runs.

workflow.dag is not a documented API: a caller treats a failure as "no view". Torch-free.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable


def planned_jobs(workflow, rules: Iterable[str]) -> list[tuple[object, bool]]:
    """(job, runs) of every job of `rules` in this invocation's DAG, in the DAG's order: runs is
    Snakemake's own decision (dag.needrun); a job that does not run is cached (or not needed)."""
    rules = set(rules)
    dag = workflow.dag
    return [(job, dag.needrun(job)) for job in dag.jobs if job.rule.name in rules]


class StopBeforeJobs(Exception):
    """Raised by a when_planned callback to stop a run before its first job: it passes through the
    handler to Snakemake, which reports it and releases its lock (every other failure of a callback only
    loses what it would have printed)."""


class _WhenPlanned(logging.Handler):
    """Calls `callback` once, on the first log record Snakemake writes after deciding which jobs run:
    the run's job statistics (event RUN_INFO), or "Nothing to be done". Both come right after the DAG
    is final and before any job, in a dry run as in a real run (onstart runs in neither a dry run nor
    with --no-hooks)."""

    def __init__(self, callback: Callable[[], None]):
        super().__init__(logging.INFO)
        self.callback = callback
        self.called = False

    def emit(self, record: logging.LogRecord) -> None:
        from snakemake.common import NOTHING_TO_BE_DONE_MSG
        from snakemake_interface_logger_plugins.common import LogEvent

        if self.called:
            return
        if getattr(record, "event", None) != LogEvent.RUN_INFO and record.getMessage() != NOTHING_TO_BE_DONE_MSG:
            return
        self.called = True
        try:
            self.callback()
        except StopBeforeJobs:
            raise
        except Exception as e:  # noqa: BLE001 - the estimate informs; a failure to make one must not stop the run
            what = getattr(self.callback, "__name__", "a check before the first job")
            print(f"distbench: {what} did not run ({type(e).__name__}: {e})", file=sys.stderr)


def when_planned(callback: Callable[[], None]) -> None:
    """Run `callback` (once) as soon as this Snakemake process has decided which jobs run."""
    from snakemake.logging import logger

    logger.addHandler(_WhenPlanned(callback))
