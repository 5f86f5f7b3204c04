"""What the generic rules of rules/families.smk run (their scripts in workflow/scripts/ only call these):
a family's job from its job.json, and a family's step, each through its manifest's hook."""

from __future__ import annotations

from pathlib import Path

from distbench.launch.job_rule import run_job_in_rule
from distbench.pipeline.hooks import resolve


def run_step(sm) -> None:
    """The script of every rule a manifest's `steps` declares (rules/families.smk): its `entry`
    ("module:function"), called with Snakemake's object."""
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
    from distbench.launch.batch import entry_of
    from distbench.launch.joblock import held

    me = entry_of(sm)
    path = job_json_path(sm.output[0])
    atomic_write_json(path, asdict(me))
    what, run = resolve(sm.params.entry)(path)
    run_job_in_rule(sm.log[0], what, held(sm, what, run))
