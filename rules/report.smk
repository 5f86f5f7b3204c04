# Jinja2 report: Markdown + a self-contained HTML page. `snakemake report` rebuilds it from the
# cached tables without starting a benchmark.


rule report:
    input:
        summary="results/tables/comm_diagnosed.csv",
        largest="results/tables/comm_largest.csv",
        env="results/probe/env.json",
        advice="results/probe/advice.json",
        figures="results/figures",
    output:
        md="report/report.md",
        html="report/report.html",
    log:
        "results/logs/report/report.log",
    params:
        plan=plan_summary(PLAN),
        config=config,
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/render_report.py"
