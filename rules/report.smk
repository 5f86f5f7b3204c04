# Jinja2 report: Markdown + a self-contained HTML page. `snakemake report` rebuilds it from the
# cached tables without starting a benchmark (with none cached it stops: report_from_cache). report/figures holds copies of the figures the Markdown
# links (figures/<name>.png), so report/ can be copied elsewhere whole.


rule report:
    input:
        # `report` alone never starts a benchmark: nothing cached, it stops and says what to run
        unpack(report_from_cache),
        # every table the report reads, by name (ReportInputs.tables): those of the families this run
        # has (distbench.pipeline.families: each family's manifest says which, and when)
        unpack(report_inputs),
        # the figure directories of those families
        figure_dirs=report_figures,
        # copied beside the report and linked from the Markdown (the HTML has them collapsed)
        full_tables=full_tables,
        env=results("probe/env.json"),
        # each job's provenance (commit, host, dates): the appendix's cache state
        placements=job_placements,
        # which run this is; other hosts' runs copied into results/ beside it are read too
        run=results("run.json"),
        other_runs=other_runs,
    output:
        # update(): Snakemake neither deletes the last good report before this job nor keeps it gone
        # after a failure (it backs each up and puts it back), the figures and tables it links too (a
        # plain directory() output is deleted before the job: a failed report kept its page and lost
        # them). The script reads every table first (a damaged one fails the job with its message),
        # then stages the page, figures and tables and swaps them in together.
        md=update("report/report.md"),
        html=update("report/report.html"),
        figures=update(directory("report/figures")),
        tables=update(directory("report/tables")),
        # written last, once the report is in place, and not update(): a failed report leaves it
        # absent, so the next run renders again and says what is wrong again (the restored page has a
        # new time, and alone it would read as up to date: "Nothing to be done")
        rendered=results("logs/report/report.done"),
    log:
        results("logs/report/report.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        # the names of the inputs that are tables
        tables=lambda wc: list(report_inputs()),
        plan=plan_summary(PLAN),
        config=config,
        run_label=RUN_LABEL,
    script:
        "../workflow/scripts/render_report.py"


# results/<label>/run.json: which run this is (host, GPU, versions), for the report of another host
# that this results/<label>/ is copied to (distbench.report.runs).
rule describe_run:
    input:
        env=results("probe/env.json"),
    output:
        results("run.json"),
    log:
        results("logs/report/describe_run.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        label=RUN_LABEL,
    script:
        "../workflow/scripts/describe_run.py"


# Machine-readable results: report/summary.json (seed 000's shape, checked against
# distbench/report/summary.schema.json).
rule summary_json:
    input:
        # the tables summary.json's parts read, by name (their manifests say summary_json)
        unpack(summary_inputs),
        env=results("probe/env.json"),
    output:
        summary=update("report/summary.json"),  # as report.md: a failure puts the last good one back
        # as the report's: absent after a failure, so the next run writes summary.json again
        written=results("logs/report/summary_json.done"),
    log:
        results("logs/report/summary_json.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        tables=lambda wc: list(summary_inputs()),
        config=config,
        # which families ran (their jobs): a table of one that ran must hold rows, so that no family
        # that ran is left out of summary.json as if it had not
        plan=plan_summary(PLAN),
    script:
        "../workflow/scripts/write_summary.py"
