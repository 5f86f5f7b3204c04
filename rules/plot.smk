# Seaborn figures (PNG + SVG) from the summary table.


rule plot_comm:
    input:
        summary="results/tables/comm_summary.csv",
    output:
        directory("results/figures"),
    log:
        "results/logs/plot/comm.log",
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/plot_comm.py"


rule plot_pairs:
    input:
        pairs="results/tables/comm_pairs.csv",
    output:
        directory("results/figures_pairs"),
    log:
        "results/logs/plot/pairs.log",
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/plot_pairs.py"
