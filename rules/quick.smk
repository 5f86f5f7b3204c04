# The quick answer: `snakemake --cores 1 quick` runs a few of the full plan's own jobs (the same outputs
# and params, distbench.pipeline.quick) and renders the Verdict from them to report/quick.md. A later
# `snakemake --cores 1` reuses those jobs; the quick tables stay apart (results/<label>/quick/), so the
# full run's tables are built from every job.
# No output: it prints the verdict every time it is asked for (cached jobs are not rerun).
rule quick:
    input:
        "report/quick.md",
    log:
        results("logs/quick/quick.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    shell:
        "cat {input} | tee {log}"


rule quick_report:
    input:
        # by table name (distbench.core.section.ReportInputs.tables): the quick copies of the
        # families' steps marked quick (rules/families.smk), of the families with quick jobs
        unpack(quick_tables),
        env=results("probe/env.json"),
    output:
        md="report/quick.md",
    log:
        results("logs/quick/report.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    params:
        plan=plan_summary(PLAN),
        config=config,
        run_label=RUN_LABEL,
        quick=quick_summary(PLAN, QUICK),
    script:
        "../workflow/scripts/render_quick.py"
