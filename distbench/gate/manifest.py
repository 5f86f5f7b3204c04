"""The node gate as the workflow registry sees it (distbench.core.manifest, distbench.pipeline.families):
no job of a run and never part of `all` (the gate is its own target, `snakemake --cores 1 gate`, or the
command `python -m distbench.gate`), a rule that measures (so `report` alone never starts it), and its
table beside the health check's, for people and operators, not the report. Its config keys (gate_baseline,
prometheus_dir) are checked before any job (config_check: distbench.gate.inputs)."""

from distbench.core.manifest import PackageManifest, Table, register


def _never(_config, _plan) -> bool:
    return False


MANIFEST = register(PackageManifest(
    name="gate",
    order=80,
    active=_never,
    measuring_rules=("gate",),
    config_check="distbench.gate.inputs:config_check",
    tables=(Table("gate", "health/gate.csv", report=False),),
))
