"""One family at a time (seed 000's --benchmark comm|training|memory|all): each target rule plans
only its family's jobs (and what they need), and `-n` lists them without running anything."""

import re

import pytest

from tests.conftest import snakemake


def _planned(output: str) -> set[str]:
    return set(re.findall(r"^(?:local)?rule (\w+):", output, flags=re.M))


def _estimated(output: str) -> tuple[int, dict[str, int]]:
    """The estimate's lines (distbench.pipeline.estimate): jobs planned, and jobs to run per family."""
    planned = re.findall(r"^distbench: (\d+) benchmark jobs planned", output, flags=re.M)
    assert len(planned) == 1, output[-2000:]  # printed once
    to_run = re.findall(r"^distbench: to run: (.*)$", output, flags=re.M)
    families = dict(re.findall(r"(\w+) (\d+) \(", to_run[0])) if to_run else {}
    return int(planned[0]), {f: int(n) for f, n in families.items()}


@pytest.mark.parametrize("target,expected,absent,estimated", [
    ("probes", {"probe_env", "probe_topology", "probe_nccl"}, {"comm_job", "training_job", "memory_job", "report"},
     {}),  # on CPU the NCCL probe only writes why it did not run: no benchmark job
    ("comm", {"comm_job", "aggregate_comm", "plot_comm"}, {"training_job", "memory_job", "report"},
     {"comm": 3}),
    ("training", {"training_job", "aggregate_training", "plot_training"}, {"comm_job", "memory_job", "report"},
     {"training": 20}),
    ("memory", {"memory_job", "aggregate_memory", "plot_memory"}, {"comm_job", "training_job", "report"},
     {"memory": 10}),
])
def test_a_family_target_plans_only_that_family(workflow_dir, target, expected, absent, estimated):
    r = snakemake(workflow_dir, "-n", target, "--config", "gpus=0")
    assert r.returncode == 0, r.stderr[-2000:]
    planned = _planned(r.stdout + r.stderr)
    assert expected <= planned and not (absent & planned), planned
    # and the plan and estimate it prints are its own (issue 34: every target printed all 33 jobs)
    assert _estimated(r.stderr) == (sum(estimated.values()), estimated)
    assert not (workflow_dir / "results").exists()  # a dry run starts nothing


def test_a_disabled_family_target_has_nothing_to_do(workflow_dir):
    (workflow_dir / "off.yaml").write_text("memory:\n  enabled: false\n")
    r = snakemake(workflow_dir, "-n", "memory", "--configfile", "off.yaml")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "memory_job" not in _planned(r.stdout + r.stderr)
