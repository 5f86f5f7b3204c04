# All job CSVs -> tidy tables.


rule aggregate_comm:
    input:
        comm_csvs,
    output:
        raw="results/tables/comm.csv",
        summary="results/tables/comm_summary.csv",
        largest="results/tables/comm_largest.csv",
    log:
        "results/logs/aggregate/comm.log",
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/aggregate_comm.py"
