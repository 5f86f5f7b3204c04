"""issue 49: the estimate counts a job as it launches. An inspected training job (training.inspect) launches
alone, not in its group's shared launch (distbench.launch.batch.batchable): it pays the launch's fixed
cost, which a shared launch pays once per group. With inspect on, the estimate is larger by exactly the
extra launches' cost, from the same constants (LAUNCH_COST_S)."""

import json
from collections import Counter
from types import SimpleNamespace

from distbench.pipeline.config import check_config
from distbench.pipeline.estimate import DEFAULTS, LAUNCH_COST_S, JobKey, estimate, launches_alone
from distbench.pipeline.families import manifest
from distbench.pipeline.hooks import resolve
from distbench.pipeline.plan import job_launch, make_plan


def _config(inspect: bool) -> dict:
    # the MLP under DDP and FSDP: two training jobs at each world size above 1, a shared launch each
    return check_config({"gpus": 4, "backends": ["nccl"], "world_sizes": [2, 4], "memory": {"enabled": False},
                         "training": {"models": ["mlp"], "strategies": ["ddp", "fsdp"], "inspect": inspect}})


def _dag_jobs(config: dict) -> list:
    """The training jobs as Snakemake's DAG holds them (rule, wildcards, the rule's params: job, launch)."""
    plan = make_plan(config)
    m = manifest("training")
    out = []
    for j in plan["jobs"]["training"]:
        params = {"job": resolve(m.job_params)(config, plan, j),
                  "launch": job_launch(config, plan, j.backend, j.world_size)}
        out.append(SimpleNamespace(rule=SimpleNamespace(name=m.job_rule), wildcards=dict(j.wildcards),
                                   params=params, output={"csv": "x/training.csv"}, log=["x.log"]))
    return out


def _estimate(config: dict, root):
    jobs = _dag_jobs(config)
    return estimate([(JobKey.of("training", j.wildcards), True, launches_alone(j)) for j in jobs], root, 4), jobs


def test_inspected_jobs_launch_alone_and_pay_their_launch(tmp_path):
    shared, _ = _estimate(_config(False), tmp_path)
    inspected, jobs = _estimate(_config(True), tmp_path)
    assert not any(launches_alone(j) for j in _dag_jobs(_config(False)))
    assert all(launches_alone(j) for j in jobs)
    groups = Counter((j.wildcards["backend"], str(j.wildcards["world_size"])) for j in _dag_jobs(_config(True)))
    extra = sum(n - 1 for n in groups.values())  # each job beyond a group's first: a launch of its own
    assert extra >= 2
    assert inspected.seconds - shared.seconds == extra * LAUNCH_COST_S[("gpu", "training")]
    assert inspected.seconds == len(jobs) * DEFAULTS[("gpu", "training", "nccl")].seconds
    assert all(j.alone for j in inspected.jobs)


def test_a_job_that_launches_alone_adds_the_launch_cost_to_a_shared_launch_time(tmp_path):
    """History measured in a shared launch (placement.json's batch wall_s: the configuration's own
    seconds, without the launch) counts the launch's fixed cost for a job that now launches alone."""
    key = JobKey("training", "nccl", 2, ("mlp", "ddp"))
    tsv = tmp_path / "then/benchmarks/training/nccl/mlp/ws2/ddp.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text("s\th:m:s\n0.3\t0:00:00\n")
    placement = tmp_path / "then/training/nccl/mlp/ws2/ddp/placement.json"
    placement.parent.mkdir(parents=True)
    placement.write_text(json.dumps({"provenance": {"batch": {"wall_s": 7.0}}}))
    cost = LAUNCH_COST_S[("gpu", "training")]
    assert estimate([(key, True)], tmp_path, 4).seconds == 7.0
    assert estimate([(key, True, True)], tmp_path, 4).seconds == 7.0 + cost
    assert estimate([(key, True)], tmp_path, 4, batch=False).seconds == 7.0 + cost  # no shared launches at all


def test_a_dry_run_counts_the_inspected_jobs_launches(workflow_dir):
    """rules/common.smk hands the estimate each DAG job's launches_alone: with training.inspect on, the
    training jobs' estimate grows (their own launches), the job count stays."""
    import re

    from tests.conftest import snakemake

    found = {}
    for inspect in (False, True):
        r = snakemake(workflow_dir, "-n", "--config", "gpus=0", "backends=[gloo]", "world_sizes=[1,2]",
                      f"training={{'inspect': {inspect}, 'strategies': ['ddp', 'fsdp']}}")
        assert r.returncode == 0, r.stderr[-2000:]
        found[inspect] = re.search(r"to run: .*training (\d+) \((\d+) s\)", r.stderr).groups()
    assert found[True][0] == found[False][0]
    assert int(found[True][1]) > int(found[False][1])
