import os

from distbench.launch.hostlock import MODE_ENV, RESULTS_ENV
from distbench.launch.joblock import results_dir_of_log
from distbench.launch.in_rule import logged
from distbench.health.node import check_run

sm = snakemake  # noqa: F821 - injected by Snakemake
# A health load holds its node's host lock (distbench.launch.hostlock): it waits or fails as config
# host_lock says, and names this run to a waiter; every node's reading inherits both (DISTBENCH_*).
os.environ.update({MODE_ENV: sm.config.get("host_lock", "wait"), RESULTS_ENV: str(results_dir_of_log(sm.log[0]))})
with logged(sm.log[0]):
    # every node of the run, once each (distbench.health.node); one node: in this process
    after = sm.params.phase != "before"
    print("\n".join(check_run(sm.params.phase, sm.params.nodes, sm.params.gpus or None, float(sm.params.load_s),
                              sm.output.after if after else sm.output[0], sm.input.get("before"),
                              sm.output.diff if after else None)))
