"""One family at a time (seed 000's --benchmark comm|training|memory|all): each target rule plans
only its family's jobs (and what they need), and `-n` lists them without running anything."""

import re

import pytest

from tests.conftest import snakemake


def _planned(output: str) -> set[str]:
    return set(re.findall(r"^(?:local)?rule (\w+):", output, flags=re.M))


@pytest.mark.parametrize("target,expected,absent", [
    ("probes", {"probe_env", "probe_topology", "probe_nccl"}, {"comm_job", "training_job", "memory_job", "report"}),
    ("comm", {"comm_job", "aggregate_comm", "diagnose", "plot_comm"}, {"training_job", "memory_job", "report"}),
    ("training", {"training_job", "aggregate_training", "plot_training"}, {"comm_job", "memory_job", "report"}),
    ("memory", {"memory_job", "aggregate_memory", "plot_memory"}, {"comm_job", "training_job", "report"}),
])
def test_a_family_target_plans_only_that_family(workflow_dir, target, expected, absent):
    r = snakemake(workflow_dir, "-n", target)
    assert r.returncode == 0, r.stderr[-2000:]
    planned = _planned(r.stdout + r.stderr)
    assert expected <= planned and not (absent & planned), planned
    assert not (workflow_dir / "results").exists()  # a dry run starts nothing


def test_a_disabled_family_target_has_nothing_to_do(workflow_dir):
    (workflow_dir / "off.yaml").write_text("memory:\n  enabled: false\n")
    r = snakemake(workflow_dir, "-n", "memory", "--configfile", "off.yaml")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "memory_job" not in _planned(r.stdout + r.stderr)
