"""What the comm family states for the rest of the run, typed (distbench.core.plan_facts), its
`enabled` switch, and the one top-level op_timeout_s every family's process groups take."""

import pytest

from distbench.comm.plan import plan_family
from distbench.core.plan_facts import (FAMILY_DISABLED, NO_GPU_FOR_NCCL, NcclProbeWorkload, PlanFacts, SkippedPart,
                                       skipped_part)
from distbench.pipeline.config import ConfigError, check_config
from distbench.pipeline.plan import make_plan, nccl_probe_params, plan_summary


def test_comm_enabled_false_plans_no_comm_job_and_the_probe_follows_the_other_families_nccl_jobs():
    cfg = check_config({"gpus": 4, "comm": {"enabled": False}})
    plan = make_plan(cfg)
    assert list(plan["jobs"]["comm"]) == [] and plan["jobs"]["training"]
    assert plan["world_sizes"] == {} and plan["backends_run"] == []
    assert [s.reason for s in plan["skipped"] if s.what == "comm jobs"] == [FAMILY_DISABLED]
    probe = nccl_probe_params(cfg, plan)
    nccl = [j.world_size for j in plan["jobs"]["training"] if j.backend == "nccl"]
    assert probe["world_size"] == max(nccl) and probe["ops"] and probe["sizes"]  # comm's settings, still stated
    summary = plan_summary(plan)
    assert summary["jobs"]["comm"] == [] and {"what": "comm jobs", "why": "comm.enabled is false"} in summary["skipped"]


def test_comm_enabled_by_default():
    cfg = check_config({"gpus": 2})
    assert cfg["comm"]["enabled"] is True and plan_family(cfg, 2, "declared").jobs


def test_the_nccl_probe_reads_the_reason_key_not_the_sentence():
    cfg = check_config({})
    plan = make_plan(cfg, detected=(0, "none"))
    (nccl,) = [s for s in plan["skipped"] if s.reason == NO_GPU_FOR_NCCL]
    assert nccl_probe_params(cfg, plan)["why"] == nccl.why
    # the sentence reworded: the probe still says why
    plan["skipped"] = [SkippedPart("NCCL, every job", "no GPU here", NO_GPU_FOR_NCCL)]
    assert nccl_probe_params(cfg, plan)["why"] == "no GPU here"
    # the reason key removed, the old sentence kept: the probe no longer takes it as its reason
    plan["skipped"] = [SkippedPart("backend nccl", "no GPU here")]
    assert nccl_probe_params(cfg, plan)["why"] == "no NCCL jobs in this config"


def test_skipped_parts_read_as_the_entries_the_report_shows():
    part = SkippedPart("backend nccl", "no GPU", NO_GPU_FOR_NCCL)
    assert dict(part) == {"what": "backend nccl", "why": "no GPU"} and part == {"what": "backend nccl", "why": "no GPU"}
    assert skipped_part({"what": "a", "why": "b"}) == SkippedPart("a", "b") and skipped_part(part) is part
    with pytest.raises(ValueError, match="reason"):
        SkippedPart("a", "b", "no gpu")  # a reason key is one of plan_facts.REASONS
    plan = make_plan(check_config({}), detected=(0, "none"))
    assert all(type(s) is dict and set(s) == {"what", "why"} for s in plan_summary(plan)["skipped"])


def test_plan_facts_hold_only_what_was_stated():
    facts = PlanFacts(world_sizes={"nccl": [2]}, nccl_probe=NcclProbeWorkload(("all_reduce",), (8,), {}))
    assert set(facts) == {"world_sizes", "nccl_probe"} and facts["world_sizes"] == {"nccl": [2]}
    assert facts.get("backends_run") is None
    assert facts["nccl_probe"].params() == {"ops": ["all_reduce"], "sizes": [8], "job_env": {}}
    comm = plan_family(check_config({"gpus": 2}), 2, "declared")
    assert isinstance(comm.facts, PlanFacts) and isinstance(comm.facts["nccl_probe"], NcclProbeWorkload)


def test_op_timeout_s_is_top_level_and_reaches_every_familys_jobs():
    from distbench.comm.plan import job_params

    cfg = check_config({"op_timeout_s": 42, "gpus": 2})
    assert cfg["op_timeout_s"] == 42 and "op_timeout_s" not in cfg["comm"]
    assert job_params(cfg, "nccl")["op_timeout_s"] == 42
    assert check_config({})["op_timeout_s"] == 300


def test_op_timeout_s_under_comm_is_refused_naming_the_top_level_key():
    with pytest.raises(ConfigError) as e:
        check_config({"comm": {"op_timeout_s": 300}})
    assert "config key comm.op_timeout_s" in str(e.value) and "top-level op_timeout_s" in str(e.value)
