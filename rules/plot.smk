# Seaborn figures (PNG + SVG) from the summary table.


rule plot_comm:
    input:
        # the summary with NCCL's algorithm/protocol per point (from the NCCL probe's tuning table)
        summary=results("tables/comm_diagnosed.csv"),
        # the link peak (advice.json) and the GPU (env.json): the bus-bandwidth figures' reference lines
        advice=results("probe/advice.json"),
        env=results("probe/env.json"),
    output:
        report(
            directory(results("figures")),
            patterns=["{figure}.png"],
            caption="../workflow/report/comm_figures.rst",
            category="Communication",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/comm.log"),
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/plot_comm.py"


rule plot_pairs:
    input:
        pairs=results("tables/comm_pairs.csv"),
    output:
        report(
            directory(results("figures_pairs")),
            patterns=["{figure}.png"],
            caption="../workflow/report/pairs_figures.rst",
            category="GPU pairs",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/pairs.log"),
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/plot_pairs.py"
