# All job CSVs -> tidy tables.


rule aggregate_comm:
    input:
        jobs=comm_csvs,
        ranks=comm_rank_csvs,
    output:
        raw="results/tables/comm.csv",
        ranks="results/tables/comm_ranks.csv",
        summary="results/tables/comm_summary.csv",
        largest="results/tables/comm_largest.csv",
    log:
        "results/logs/aggregate/comm.log",
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/aggregate_comm.py"
