from pathlib import Path

from distbench.pipeline.in_rule import logged
from distbench.probes.health_node import read_run
from distbench.probes.health_table import check_after, check_before

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    gpus, load_s, nodes = sm.params.gpus or None, float(sm.params.load_s), sm.params.nodes
    out = Path(sm.output[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    # every node of the run, once each (distbench.probes.health_node); one node: in this process
    rows = read_run(nodes["nodes"], nodes["launcher"], nodes["hosts"], gpus, load_s, out.parent)
    print("\n".join(f"{r.host} {r.gpu} {r.item}: {r.state} ({r.value}) {r.reason}" for r in rows))
    if sm.params.phase == "before":
        check_before(sm.output[0], rows)
    else:
        diff = check_after(sm.input.before, sm.output.after, sm.output.diff, rows)
        print("\n".join(f"{r.host} {r.gpu} {r.item}: {r.state} ({r.delta}) {r.reason}" for r in diff))
