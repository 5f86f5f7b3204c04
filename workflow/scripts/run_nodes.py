from distbench.launch.joblock import held
from distbench.nodes.job import run_round
from distbench.pipeline.in_rule import run_job_in_rule

sm = snakemake  # noqa: F821 - injected by Snakemake
# the round's values, and where its ranks run (every node, one agent each: distbench.launch.cluster)
params = {**sm.params.job, "launch": sm.params.launch}
what = f"node round {sm.wildcards.round} ({params['pairs']})"
# one measurement at a time on this host (config host_lock), taken before the round's time limit starts
run_job_in_rule(sm.log[0], what, held(sm, what, lambda: run_round(sm.wildcards.backend, params, sm.output.csv,
                                                                  sm.output.placement, sm.log[0])))
