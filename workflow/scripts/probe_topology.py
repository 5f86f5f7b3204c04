from distbench.core.io import atomic_write_json
from distbench.probes.nvml import nvlink_state
from distbench.probes.topology import probe_topology
from distbench.launch.in_rule import logged

with logged(snakemake.log[0]):  # noqa: F821 - injected by Snakemake
    topo = probe_topology()
    atomic_write_json(snakemake.output[0], {  # noqa: F821
        "available": topo.get("available", False), "topology": topo if topo.get("available") else None,
        "reason": topo.get("reason"), "nvlink": nvlink_state()})
