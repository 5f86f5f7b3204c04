# Traces on request (config profile): each rank trace's communication/computation overlap.


# Traces on request: each rank trace's communication/computation overlap (distbench.traces.overlap).
rule aggregate_traces:
    input:
        trace_dirs,
    output:
        report(
            results(table_path("trace_overlap")),
            caption="../workflow/report/trace_overlap.rst",
            category="Tables",
            subcategory="Traces",
        ),
    log:
        results("logs/aggregate/traces.log"),
    conda:
        "../envs/distbench.yaml"
    threads: SIDE_THREADS
    params:
        jobs=trace_jobs(),
    script:
        "../workflow/scripts/aggregate_traces.py"
