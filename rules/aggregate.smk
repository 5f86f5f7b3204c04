# All job CSVs -> tidy tables.


rule aggregate_comm:
    input:
        jobs=comm_csvs,
        ranks=comm_rank_csvs,
    output:
        raw=results("tables/comm.csv"),
        ranks=results("tables/comm_ranks.csv"),
        summary=report(
            results("tables/comm_summary.csv"),
            caption="../workflow/report/comm_summary.rst",
            category="Tables",
            subcategory="Communication",
        ),
        largest=report(
            results("tables/comm_largest.csv"),
            caption="../workflow/report/comm_largest.rst",
            category="Tables",
            subcategory="Communication",
        ),
        stragglers=report(
            results("tables/comm_stragglers.csv"),
            caption="../workflow/report/comm_stragglers.rst",
            category="Tables",
            subcategory="Communication",
        ),
    log:
        results("logs/aggregate/comm.log"),
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/aggregate_comm.py"


# The GPU-pair matrix (comm.pairs): every job's pairs.csv, summarized, with each pair's link class
# from the topology probe.
rule aggregate_pairs:
    input:
        pairs=comm_pairs_csvs,
        topology=results("probe/topology.json"),
    output:
        report(
            results("tables/comm_pairs.csv"),
            caption="../workflow/report/comm_pairs.rst",
            category="Tables",
            subcategory="GPU pairs",
        ),
    log:
        results("logs/aggregate/pairs.log"),
    conda:
        "../envs/distbench.yaml"
    script:
        "../workflow/scripts/aggregate_pairs.py"


# Traces on request: each rank trace's communication/computation overlap (distbench.trace_overlap).
rule aggregate_traces:
    input:
        trace_dirs,
    output:
        report(
            results("tables/trace_overlap.csv"),
            caption="../workflow/report/trace_overlap.rst",
            category="Tables",
            subcategory="Traces",
        ),
    log:
        results("logs/aggregate/traces.log"),
    conda:
        "../envs/distbench.yaml"
    params:
        jobs=trace_jobs(),
    script:
        "../workflow/scripts/aggregate_traces.py"
