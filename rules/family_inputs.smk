# The input functions, params and outputs of the rules rules/families.smk builds from each family's
# manifest (its job rule, its steps and their quick copies): every value is read from the manifest,
# no family is named here (tests/workflow/test_family_names.py).
from distbench.pipeline.run_rules import step_tables


def launch_param(family):
    """A job rule's `launch` param: the job's nodes, ranks per node and launcher (its family's own
    placement, the manifest's job_launch, else by backend and world size)."""
    m = FAMILIES[family]
    if m.job_launch:
        return lambda wc: resolve(m.job_launch)(config, PLAN, planned_job(family, wc))
    return lambda wc: job_launch(config, PLAN, wc.backend, int(wc.world_size))


def job_param(family):
    """A job rule's `job` param: every value that shapes the job (the manifest's job_params); the
    job reads them from job.json, which its rule writes."""
    hook = resolve(FAMILIES[family].job_params)
    return lambda wc: hook(config, PLAN, planned_job(family, wc))


def job_outputs(family):
    """A job rule's outputs: its files (the manifest's job_files), its parameters file (job.json), its
    trace directory while the family is profiled, and the outputs it makes on request (job_optional):
    turning one on or off reruns the family's jobs once."""
    m = FAMILIES[family]
    out = {name: job_path(family, f) for name, f in m.job_outputs.items()}
    out["job_json"] = job_path(family, "job.json")
    if PROFILE.get(family, "off") != "off":
        out["trace"] = directory(job_path(family, "trace"))
    for name, (path, when) in m.job_optional.items():
        if when(config):
            out[name] = directory(job_path(family, path))
    return out


def tables_before_jobs(family):
    """The tables this family's jobs wait for when this run makes them (the manifest's job_after):
    ancient, so a new one does not rerun the jobs; turning it on or off does, once."""
    return lambda wildcards=None: {
        name: ancient(path)
        for t in FAMILIES[family].job_after
        for name, path in table_input(t)().items()
    }


def caption(family, path):
    """A caption file of a family's folder (Snakemake's own report)."""
    return os.path.join(
        os.path.dirname(sys.modules[f"distbench.{family}"].__file__), path
    )


def step_inputs(family, step, plan=None):
    """A step's inputs: paths under results/<label>/, every planned job's file (JobFiles, from `plan`:
    the quick target's own), or a table by name (TableRef: left out when optional and not made).
    """

    def inputs(wildcards=None):
        out = {}
        for name, v in step.inputs.items():
            if isinstance(v, JobFiles):
                out[name] = job_files(family, v.name, plan)()
            elif isinstance(v, TableRef):
                made = table_input(v.name)()
                if made or not v.optional:
                    path = made.get(v.name) or results(table_path(v.name))
                    out[name] = ancient(path) if v.ancient else path
            else:
                out[name] = results(v)
        return out

    return inputs


def table_path(name):
    """Any family's table by name (its path under results/<label>/)."""
    return next(t.path for m in FAMILIES.values() for t in m.tables if t.name == name)


def step_outputs(family, step):
    """A step's outputs: its family's tables by name and figure directories, each in Snakemake's own
    report where its manifest gives a caption."""
    m = FAMILIES[family]
    out = {}
    for name, what in step.outputs.items():
        path = results(m.output_path(what))
        table = next((t for t in m.tables if t.name == what), None)
        figures = next((f for f in m.figures if f.path == what), None)
        if figures is not None or path.endswith("/"):  # a figure or document directory
            out[name] = directory(path.rstrip("/"))
            if figures is not None and figures.caption:
                out[name] = report(
                    out[name],
                    patterns=["{figure}.png"],
                    caption=caption(family, figures.caption),
                    category=figures.category,
                    labels={"figure": "{figure}"},
                )
        elif table is not None and table.caption:
            out[name] = report(
                path,
                caption=caption(family, table.caption),
                category="Tables",
                subcategory=table.subcategory,
            )
        else:
            out[name] = path
    return out


def quick_outputs(family, step):
    """The quick copy of a step: its tables under the quick answer's own directory."""
    m = FAMILIES[family]
    return {
        name: f"{QUICK_TABLES}/{os.path.basename(m.output_path(what))}"
        for name, what in step.outputs.items()
    }


def step_params(step):
    """A step's params, each its manifest's "module:function" called with (config, plan), and
    `read_tables`: the tables it reads by name, each checked before it runs, with why it must hold
    rows in this plan (distbench.pipeline.run_rules.step_tables)."""
    out = {name: resolve(ref)(config, PLAN) for name, ref in step.params.items()}
    tables = step_tables(step, PLAN)
    if tables:
        out["read_tables"] = tables
    return out


def step_resources(step):
    """A step that measures asks a cluster executor for a GPU node of its own, as a probe."""
    if not step.measures:
        return {}
    return {key: probe_resource(key) for key in SLURM_RESOURCES}


def cluster_resource(family, key):
    """One resource a benchmark job asks a cluster executor for (profiles/slurm)."""
    return lambda wc: job_resources(config, PLAN, family, planned_job(family, wc))[key]
