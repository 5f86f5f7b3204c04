from pathlib import Path

from distbench.core.io import atomic_write_json
from distbench.launch.joblock import held
from distbench.probes.nccl_probe import run_probe
from distbench.launch.in_rule import logged

sm = snakemake  # noqa: F821 - injected by Snakemake
with logged(sm.log[0]):
    p = sm.params.probe
    Path(sm.output.logs).mkdir(parents=True, exist_ok=True)
    if p["world_size"] < 2:
        atomic_write_json(sm.output.json, {"available": False, "reason": p["why"]})
    else:
        # Its collectives run on every GPU: one measurement at a time per host (distbench.launch.hostlock)
        res = held(sm, "NCCL probe", lambda: run_probe(p["world_size"], p["ops"], p["sizes"], p["job_env"],
                                                        sm.output.json, sm.output.logs))()
        print(res.get("algo_ranges") or res.get("reason"))
