from distbench.pipeline.in_rule import logged
from distbench.probes.health_table import check_after, check_before

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    gpus, load_s = sm.params.gpus or None, float(sm.params.load_s)
    if sm.params.phase == "before":
        rows = check_before(sm.output[0], gpus, load_s)
        print("\n".join(f"{r.gpu} {r.item}: {r.state} ({r.value}) {r.reason}" for r in rows))
    else:
        diff = check_after(sm.input.before, sm.output.after, sm.output.diff, gpus, load_s)
        print("\n".join(f"{r.gpu} {r.item}: {r.state} ({r.delta}) {r.reason}" for r in diff))
