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


def run_step(sm) -> None:
    """The script of every rule a manifest's `steps` declares (rules/families.smk): its `entry`
    ("module:function"), called with Snakemake's object."""
    from distbench.core.manifest import resolve

    resolve(sm.params.entry)(sm)


def job_json_path(output_path) -> Path:
    """The job's parameters file, beside its result (the rule writes it; the job reads it)."""
    return Path(output_path).with_name(JOB_JSON)


JOB_JSON = "job.json"


def run_family_job(sm) -> None:
    """The script of every family's job rule (rules/families.smk): the job as the rule sees it (its
    rule, wildcards, params: `job` from the manifest's job_params, `launch`; outputs; log) is written
    to one JSON file beside its result, job.json, which is all the family's `job_entry` reads; the
    host is held while the job runs (config host_lock). The entry returns (what it runs, as the logs
    name it; a callable that runs it and returns "ok" or why it failed)."""
    from dataclasses import asdict

    from distbench.core.io import atomic_write_json
    from distbench.core.manifest import resolve
    from distbench.launch.batch import entry_of
    from distbench.launch.joblock import held

    me = entry_of(sm)
    path = job_json_path(sm.output[0])
    atomic_write_json(path, asdict(me))
    what, run = resolve(sm.params.entry)(path)
    run_job_in_rule(sm.log[0], what, held(sm, what, run))
