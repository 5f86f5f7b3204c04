# Node-pair rounds (distbench.nodes): which node, or which link between two nodes, is slow. One job
# per round of the schedule: one torchrun world over every node (one agent each), all the round's
# pairs measuring at once; then the per-pair and per-node tables, heat maps and the report section.


include: "nodes_common.smk"


rule nodes_round:
    output:
        csv=job_path("nodes", "nodes.csv"),
        placement=job_path("nodes", "placement.json"),
    log:
        results("logs/nodes/{backend}/n{nodes}/{mode}/round{round}.log"),
    # Each round's wall time: the per-round cost of the estimate on paper (distbench.nodes.scale).
    benchmark:
        results(FAMILIES["nodes"].benchmark)
    wildcard_constraints:
        nodes=r"\d+",
        round=r"\d+",
        mode="all_pairs|random",
    conda:
        "../envs/distbench.yaml"
    # All cores: a round must never share the nodes with another benchmark job.
    threads: workflow.cores
    resources:
        nodes=nodes_resource("nodes"),
        tasks=nodes_resource("tasks"),
        tasks_per_gpu=nodes_resource("tasks_per_gpu"),
        gres=nodes_resource("gres"),
        cpus_per_task=nodes_resource("cpus_per_task"),
        runtime=nodes_resource("runtime"),
        mem_mb=nodes_resource("mem_mb"),
        slurm_extra=nodes_resource("slurm_extra"),
    params:
        job=nodes_round_params,
        launch=lambda wc: round_launch(config, NODES),
    script:
        "../workflow/scripts/run_nodes.py"


rule aggregate_nodes:
    input:
        rounds=job_files("nodes"),
    output:
        raw=results("tables/nodes.csv"),
        pairs=results("tables/nodes_pairs.csv"),
        scores=report(
            results("tables/nodes_scores.csv"),
            caption="../workflow/report/nodes_scores.rst",
            category="Tables",
            subcategory="Nodes",
        ),
    log:
        results("logs/aggregate/nodes.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        limits={
            k: v
            for k, v in config["nodes"].items()
            if k in ("slow_latency", "slow_bandwidth", "slow_share")
        },
    script:
        "../workflow/scripts/aggregate_nodes.py"


rule plot_nodes:
    input:
        pairs=results("tables/nodes_pairs.csv"),
    output:
        report(
            directory(results("figures_nodes")),
            patterns=["{figure}.png"],
            caption="../workflow/report/nodes_figures.rst",
            category="Nodes",
            labels={"figure": "{figure}"},
        ),
    log:
        results("logs/plot/nodes.log"),
    localrule: True
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    script:
        "../workflow/scripts/plot_nodes.py"


# `snakemake --cores 1 nodes`: the rounds, their tables and heat maps, nothing else.
rule nodes:
    input:
        family_target("nodes"),
    localrule: True
