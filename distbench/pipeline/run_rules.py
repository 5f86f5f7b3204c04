"""What the generic rules of rules/families.smk run (their scripts in workflow/scripts/ only call these):
a family's job from its job.json, and a family's step, each through its manifest's hook."""

from __future__ import annotations

from pathlib import Path

from distbench.launch.job_rule import run_job_in_rule
from distbench.pipeline.hooks import resolve


def run_step(sm) -> None:
    """The script of every rule a manifest's `steps` declares (rules/families.smk): its `entry`
    ("module:function"), called with Snakemake's object, once every table it reads by name is whole
    (check_step_tables): a damaged one ends the rule with its message, no traceback."""
    tables = dict(getattr(sm.params, "read_tables", None) or {})
    if tables:
        from distbench.launch.in_rule import run_in_rule

        run_in_rule(sm.log[0], check_step_tables, {name: sm.input.get(name) for name in tables}, tables)
    resolve(sm.params.entry)(sm)


def step_tables(step, plan) -> dict[str, list[str]]:
    """A step's `read_tables` param: {input name: [table name, why it must hold rows in this run ("":
    a header alone is whole)]} of every table it reads by name (its TableRef inputs). The plan is
    known here, when the rules are built, and not in the step's own process: the rows' reason
    (distbench.core.manifest.rows_reason) travels in the param."""
    from distbench.core.manifest import TableRef, rows_reason

    return {name: [ref.name, rows_reason(ref.name, plan)]
            for name, ref in step.inputs.items() if isinstance(ref, TableRef)}


def check_step_tables(paths: dict, tables: dict) -> None:
    """Read every table a step reads by name through the one reader (distbench.core.readers), against
    its manifest's Table (the columns its readers need; rows where its family ran): the same checks
    the report and summary.json make, so a plot or aggregate never draws from, or stops with a
    traceback on, a file the report would refuse. A document (.json) must be a whole JSON object; a
    directory (a step's output of documents) is not read."""
    from distbench.core.manifest import table_spec
    from distbench.core.readers import read_json, read_table, remake
    from distbench.pipeline.families import manifests

    manifests()  # the registry holds every family's tables
    for input_name, (table, rows_because) in tables.items():
        path = paths.get(input_name)
        if not path or Path(path).is_dir():  # an optional table this run does not write; a directory
            continue
        if str(path).endswith(".json"):
            read_json(path, remake(path))
            continue
        found = table_spec(table)
        read_table(path, remake(path), columns=found[1].columns if found else (), rows_because=rows_because)


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
    from distbench.launch.batch import entry_of
    from distbench.launch.job_record import write_job_json
    from distbench.launch.joblock import held

    me = entry_of(sm)
    path = write_job_json(job_json_path(sm.output[0]), me)
    what, run = resolve(sm.params.entry)(path)
    run_job_in_rule(sm.log[0], what, held(sm, what, run))
