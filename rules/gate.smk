# The node gate (distbench.gate, docs/gate.md): `snakemake --cores 1 gate` reads this node's health,
# runs a short collective check and writes its verdict table beside the health check's
# (results/<label>/health/gate.csv; its readings and comm job under health/gate/). The verdict line is
# in the log; the command for a SLURM prolog or health check is `python -m distbench.gate`.
# gate_baseline, when set, holds the baseline runs, and prometheus_dir, when set, gets distbench_gate.prom:
# both checked with the config, before any job (the gate manifest's config_check, distbench.gate.inputs).
# The gate holds this host's lock (config host_lock) for its readings, as every measurement does.


rule gate:
    output:
        results("health/gate.csv"),
    log:
        results("logs/health/gate.log"),
    conda:
        "../envs/distbench.yaml"
    params:
        out=lambda wc, output: output[0].removesuffix(".csv"),  # health/gate/: readings, comm job
        gpus=PLAN["gpus"],
        load_s=config["health"]["load_s"],
        baseline=config["gate_baseline"],
        prom=config.get("prometheus_dir", ""),
        host_lock=config["host_lock"],
    script:
        "../workflow/scripts/gate.py"


# prometheus_dir: a successful run writes its health, comm and training figures there as distbench_run.prom (the gate its own distbench_gate.prom: neither erases the other)
# (node_exporter's textfile collector), atomically (distbench.gate.prom.run_samples): only the tables
# written since this Snakemake process started (an older table is never republished as new).
onsuccess:
    if config.get("prometheus_dir"):
        from distbench.gate.prom import process_started_at, write_run_metrics

        print(
            write_run_metrics(
                config["prometheus_dir"], results(""), since=process_started_at()
            )
        )
