# The node gate (distbench.gate, docs/gate.md): `snakemake --cores 1 gate` reads this node's health,
# runs a short collective check and writes its verdict table beside the health check's
# (results/<label>/health/gate.csv; its readings and comm job under health/gate/). The verdict line is
# in the log; the command for a SLURM prolog or health check is `python -m distbench.gate`.
# gate_baseline, when set, holds the baseline runs (checked now, before any job); prometheus_dir, when
# set, gets distbench.prom.
from distbench.gate.points import baseline_problems

if baseline_problems(config["gate_baseline"]):
    raise WorkflowError("\n".join(baseline_problems(config["gate_baseline"])))


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
    script:
        "../workflow/scripts/gate.py"


# prometheus_dir: a successful run writes its health, comm and training figures there as distbench.prom
# (node_exporter's textfile collector), atomically (distbench.gate.prom.run_samples).
onsuccess:
    if config.get("prometheus_dir"):
        from distbench.gate.prom import write_run_metrics

        print(write_run_metrics(config["prometheus_dir"], results("")))
