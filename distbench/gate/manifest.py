"""The node gate as the workflow registry sees it (distbench.core.manifest, distbench.pipeline.families):
no job of a run and never part of `all` (the gate is its own target, `snakemake --cores 1 gate`, or the
command `python -m distbench.gate`), a rule that measures (so `report` alone never starts it), and its
table beside the health check's, for people and operators, not the report."""

from distbench.core.manifest import FamilyManifest, Table, register


def _never(_config, _plan) -> bool:
    return False


MANIFEST = register(FamilyManifest(
    name="gate",
    order=80,
    active=_never,
    measuring_rules=("gate",),
    tables=(Table("gate", "health/gate.csv", report=False),),
))
