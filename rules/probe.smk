# Probes: what produced the numbers. (Topology and NCCL's own log join here.)


rule probe_env:
    output:
        "results/probe/env.json",
    log:
        "results/logs/probe/env.log",
    script:
        "../workflow/scripts/probe_env.py"
