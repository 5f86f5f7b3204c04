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


use rule aggregate_comm as quick_aggregate_comm with:
    input:
        jobs=quick_job_files("comm"),
        ranks=quick_job_files("comm", "comm_ranks.csv"),
        placement=quick_job_files("comm", "placement.json"),
        env=results("probe/env.json"),
        topology=results("probe/topology.json"),
        nccl=results("probe/nccl.json"),
    output:
        raw=f"{QUICK_TABLES}/comm.csv",
        ranks=f"{QUICK_TABLES}/comm_ranks.csv",
        summary=f"{QUICK_TABLES}/comm_summary.csv",
        largest=f"{QUICK_TABLES}/comm_largest.csv",
        stragglers=f"{QUICK_TABLES}/comm_stragglers.csv",
        advice=f"{QUICK_TABLES}/comm_advice.json",
    log:
        results("logs/quick/aggregate_comm.log"),
    localrule: True


use rule aggregate_training as quick_aggregate_training with:
    input:
        jobs=quick_job_files("training"),
    output:
        raw=f"{QUICK_TABLES}/training.csv",
        summary=f"{QUICK_TABLES}/training_summary.csv",
    log:
        results("logs/quick/aggregate_training.log"),
    localrule: True


rule quick_report:
    input:
        # by table name (distbench.core.section.ReportInputs.tables)
        unpack(quick_training_inputs),
        comm_summary=f"{QUICK_TABLES}/comm_summary.csv",
        comm_largest=f"{QUICK_TABLES}/comm_largest.csv",
        comm_advice=f"{QUICK_TABLES}/comm_advice.json",
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
