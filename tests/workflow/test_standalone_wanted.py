"""issue 49: the collectives another family sets beside the comm family's standalone figures are measured
standalone too. A family states them as the plan's fact (distbench.comm.plan.WANTED); the comm plan,
whose hook takes `facts`, is planned after the families that state them (distbench.pipeline.plan.
family_plans) and plans them: e.g. inspected FSDP's bfloat16 all_gathers, which comm.dtypes' default
(float32) never measures."""

from types import SimpleNamespace

from distbench.comm.plan import WANTED, plan_family, rule_params
from distbench.core.manifest import FamilyPlan
from distbench.pipeline import plan as pipeline_plan
from distbench.pipeline.config import check_config
from distbench.pipeline.plan import family_plans, make_plan


def _config(**comm) -> dict:
    return check_config({"gpus": 4, "backends": ["nccl"], "world_sizes": [2, 4], "comm": comm})


def _want(op: str, dtype: str, ws: int = 2) -> dict:
    return {"backend": "nccl", "world_size": ws, "op": op, "dtype": dtype}


def test_a_wanted_dtype_gets_a_job_of_its_own_measuring_the_wanted_ops_only():
    cfg = _config()
    plain = plan_family(cfg, 4, "declared")
    wanted = plan_family(cfg, 4, "declared", facts={WANTED: [_want("all_gather", "bfloat16"),
                                                              _want("reduce_scatter", "float32"),
                                                              _want("all_gather", "bfloat16")]})
    added = [j for j in wanted.jobs if j not in plain.jobs]
    assert [(j.backend, j.dtype, j.world_size, j.nccl_env_label) for j in added] == [("nccl", "bfloat16", 2, "default")]
    plan = make_plan(cfg)
    p = rule_params(cfg, plan, added[0])
    assert p["ops"] == ["all_gather"] and p["pairs"] is False
    # float32 reduce_scatter is in comm.ops already: its job is as it was
    f32 = next(j for j in wanted.jobs if (j.dtype, j.world_size) == ("float32", 2))
    assert rule_params(cfg, plan, f32)["ops"] == cfg["comm"]["ops"]


def test_a_wanted_op_outside_comm_ops_joins_its_dtypes_job():
    cfg = _config(ops=["all_reduce"])
    wanted = plan_family(cfg, 4, "declared", facts={WANTED: [_want("reduce_scatter", "float32", 4)]})
    job = next(j for j in wanted.jobs if (j.dtype, j.world_size) == ("float32", 4))
    assert rule_params(cfg, make_plan(cfg), job)["ops"] == ["all_reduce", "reduce_scatter"]
    assert len(wanted.jobs) == len(plan_family(cfg, 4, "declared").jobs)


def test_a_wanted_collective_the_comm_family_cannot_run_is_named():
    cfg = _config()
    wanted = plan_family(cfg, 4, "declared", facts={WANTED: [_want("all_gather", "bfloat16", 8)]})
    assert len(wanted.jobs) == len(plan_family(cfg, 4, "declared").jobs)
    assert any(s["what"] == "standalone bfloat16 all_gather at 8 ranks (nccl)" for s in wanted.skipped)


def test_a_hook_that_takes_facts_is_planned_after_the_others_and_gets_theirs(monkeypatch):
    seen = {}

    def reading(config, gpus, gpus_source, facts=None):
        seen.update(facts)
        return FamilyPlan(("r",), (), {"read": True})

    def stating(config, gpus, gpus_source):
        return FamilyPlan(("s",), (), {"wanted": [1]})

    hooks = {"m:reading": reading, "m:stating": stating}
    manifests = [SimpleNamespace(name="a", plan="m:reading"), SimpleNamespace(name="b", plan="m:stating")]
    monkeypatch.setattr(pipeline_plan, "manifests", lambda: manifests)
    monkeypatch.setattr(pipeline_plan, "resolve", hooks.__getitem__)
    plans = family_plans({}, 0, "")
    assert list(plans) == ["a", "b"]  # the manifests' order, whatever order they were planned in
    assert seen == {"wanted": [1]}


def test_make_plan_carries_a_stated_fact_to_the_comm_plan(monkeypatch):
    """The training plan stating the in-step collectives of its inspected FSDP jobs (the change issue 49
    asks of distbench.training.plan.plan_family) reaches the comm plan through make_plan."""
    real = pipeline_plan.resolve

    def resolve(name):
        hook = real(name)
        if name != "distbench.training.plan:plan_family":
            return hook

        def stating(config, gpus, gpus_source):
            p = hook(config, gpus, gpus_source)
            return FamilyPlan(p.jobs, p.skipped, {**p.facts, WANTED: [_want("all_gather", "bfloat16", 4)]},
                              p.hosts_spanned)
        return stating

    monkeypatch.setattr(pipeline_plan, "resolve", resolve)
    plan = make_plan(_config())
    assert any((j.dtype, j.world_size) == ("bfloat16", 4) for j in plan["jobs"]["comm"])


def test_the_host_fit_sizes_a_wanted_job_by_its_own_ops():
    from distbench.comm.hooks import host_needs

    cfg = _config(ops=["all_to_all", "all_gather"])
    plan = make_plan(cfg)
    jobs = plan_family(cfg, 4, "declared", facts={WANTED: [_want("reduce_scatter", "bfloat16", 4)]}).jobs
    job = next(j for j in jobs if j.dtype == "bfloat16")
    assert host_needs(cfg, plan, job).at.startswith("reduce_scatter at ")
