# Every family's rules, built from its manifest (distbench/<family>/manifest.py): its job rule (one
# torchrun job per configuration) and its target (`snakemake --cores 1 <family>`) where it has jobs,
# and its steps that read tables (aggregates, plots, the prediction, and the quick answer's copies of
# those marked quick). No family is named here: a new folder with a manifest gets its rules from this
# loop.


for _m in FAMILIES.values():
    if _m.job_entry:

        rule:
            name:
                _m.job_rule
            input:
                # health.stop_on_failing: after the health check passed (rules/probe.smk)
                unpack(health_gate),
                # tables made before the jobs, never beside them (ancient: a new one reruns no job)
                unpack(tables_before_jobs(_m.name)),
            output:
                **job_outputs(_m.name),
            log:
                results(_m.job_log),
            # Each job's wall time (column s): the estimate printed before a run (distbench.pipeline.estimate).
            benchmark:
                results(_m.benchmark)
            wildcard_constraints:
                **_m.job_constraints,
            conda:
                "../envs/distbench.yaml"
            # All cores: two benchmark jobs must never run at the same time and disturb each other.
            threads: workflow.cores
            # A cluster executor's view of the job (profiles/slurm): its nodes, exclusively, and time.
            resources:
                **{key: cluster_resource(_m.name, key) for key in SLURM_RESOURCES},
            params:
                # Values that shape the measurements: a change reruns exactly the jobs it touches.
                job=job_param(_m.name),
                # where its ranks run (nodes, ranks per node, launcher)
                launch=launch_param(_m.name),
                entry=_m.job_entry,
            script:
                "../workflow/scripts/run_job.py"

        # `snakemake --cores 1 <family>`: this family's jobs, tables and figures, nothing else
        rule:
            name:
                _m.name
            input:
                family_target(_m.name),
            localrule: True

    for _s in _m.steps:

        rule:
            name:
                _s.rule
            input:
                unpack(step_inputs(_m.name, _s)),
            output:
                **step_outputs(_m.name, _s),
            log:
                results(f"logs/{_m.name}/{_s.rule}.log"),
            localrule: not _s.measures
            conda:
                "../envs/distbench.yaml"
            threads: workflow.cores if _s.measures else SIDE_THREADS
            resources:
                **step_resources(_s),
            params:
                **step_params(_s),
                entry=_s.entry,
            script:
                "../workflow/scripts/run_step.py"

        if _s.quick:

            rule:
                name:
                    f"quick_{_s.rule}"
                input:
                    unpack(step_inputs(_m.name, _s, QUICK)),
                output:
                    **quick_outputs(_m.name, _s),
                log:
                    results(f"logs/quick/{_s.rule}.log"),
                localrule: True
                conda:
                    "../envs/distbench.yaml"
                threads: SIDE_THREADS
                params:
                    **step_params(_s),
                    entry=_s.entry,
                script:
                    "../workflow/scripts/run_step.py"
