"""What the default run measures at each world size on a GPU node, so that one node of up to 8 GPUs
answers in about 5 minutes (issue 35): Gloo's all_reduce beside NCCL's smallest world size only,
training at 1 rank and the whole node (with world_sizes: auto; FSDP's own 1-rank run left out),
memory of the language models, graph timing up to comm.graph_max_bytes; everything left out is
named in the plan with the one line that runs it."""

from __future__ import annotations

from distbench.pipeline.config import check_config
from distbench.pipeline.plan import make_plan


def _plan(gpus, **cfg):
    return make_plan(check_config({"gpus": gpus, "world_sizes": [2, 4, 8], **cfg}))


def _sizes(plan, model):
    return sorted({j.world_size for j in plan["jobs"]["training"] if j.model == model})


def test_on_gpus_the_language_models_run_at_one_rank_and_the_whole_node():
    plan = _plan(8)
    assert _sizes(plan, "mlp") == [1, 2, 4, 8]
    assert _sizes(plan, "gpt") == [1, 8] and _sizes(plan, "lora") == [1, 8]
    left = [s for s in plan["skipped"] if s["what"] == "gpt, lora at world sizes [2, 4]"]
    assert left and "--config training='{lm: {world_sizes: [1, 2, 4, 8]}}'" in left[0]["why"]
    # asked for: every size, and the line the plan names does it
    every = _plan(8, training={"lm": {"world_sizes": [1, 2, 4, 8]}})
    assert _sizes(every, "gpt") == [1, 2, 4, 8]
    assert not [s for s in every["skipped"] if "gpt, lora" in s["what"]]


def test_with_auto_world_sizes_training_measures_one_rank_and_the_whole_node():
    plan = make_plan(check_config({"gpus": 8}))
    assert _sizes(plan, "mlp") == [1, 8] == _sizes(plan, "gpt") == _sizes(plan, "lora")
    left = [s for s in plan["skipped"] if s["what"] == "training at world sizes [2, 4]"]
    assert left and "--config training='{world_sizes: [2, 4, 8]}'" in left[0]["why"]
    assert sorted(j.world_size for j in plan["jobs"]["comm"] if j.backend == "nccl") == [2, 4, 8]
    # the line the plan names measures every size again
    every = make_plan(check_config({"gpus": 8, "training": {"world_sizes": [2, 4, 8]}}))
    assert _sizes(every, "mlp") == [1, 2, 4, 8]
    # FSDP's own 1-rank run is left out (plain DDP on 1 rank is both strategies' baseline), and named
    assert {(j.model, j.strategy) for j in plan["jobs"]["training"] if j.world_size == 1} == {
        ("mlp", "ddp"), ("gpt", "ddp"), ("lora", "ddp")}
    assert {(j.model, j.strategy) for j in plan["jobs"]["training"] if j.world_size == 8} >= {("gpt", "fsdp"), ("lora", "fsdp")}
    fsdp = [s for s in plan["skipped"] if s["what"] == "fsdp at 1 rank (gpt, lora)"]
    assert fsdp and "--config training='{lm: {world_sizes: [1, 8]}}'" in fsdp[0]["why"]
    asked = make_plan(check_config({"gpus": 8, "training": {"lm": {"world_sizes": [1, 8]}}}))
    assert ("gpt", "fsdp") in {(j.model, j.strategy) for j in asked["jobs"]["training"] if j.world_size == 1}
    # on CPU (Gloo) every size and FSDP's 1-rank run stay
    cpu = make_plan(check_config({"gpus": 0}))
    assert _sizes(cpu, "mlp") == [1, 2, 4, 6]
    assert ("gpt", "fsdp") in {(j.model, j.strategy) for j in cpu["jobs"]["training"] if j.world_size == 1}


def test_gloo_measures_all_reduce_beside_nccl_and_every_op_alone():
    from distbench.comm.plan import job_params

    cfg = check_config({"gpus": 2})
    plan = make_plan(cfg)
    gloo = next(j for j in plan["jobs"]["comm"] if j.backend == "gloo")
    assert job_params(cfg, "gloo", gloo.nccl_env_label, 2, beside_nccl=True)["ops"] == ["all_reduce"]
    assert "traffic" not in job_params(cfg, "gloo", gloo.nccl_env_label, 2, beside_nccl=True)
    left = [s for s in plan["skipped"] if s["what"].startswith("gloo ops all_gather")]
    assert left and "--config comm='{gloo: {ops: [all_reduce, all_gather" in left[0]["why"]
    # no NCCL job beside it (CPU): Gloo is the comm family, every op
    cpu_cfg = check_config({"gpus": 0})
    assert job_params(cpu_cfg, "gloo", "default", 2)["ops"] == cpu_cfg["comm"]["ops"]
    assert not [s for s in make_plan(cpu_cfg)["skipped"] if s["what"].startswith("gloo ops")]
    # a list is kept as given, and an op outside comm.ops is refused by name
    asked = check_config({"gpus": 2, "comm": {"gloo": {"ops": ["broadcast", "all_reduce"]}}})
    assert job_params(asked, "gloo", "default", 2, beside_nccl=True)["ops"] == ["all_reduce", "broadcast"]
    import pytest
    from distbench.pipeline.config import ConfigError

    with pytest.raises(ConfigError, match=r"comm.gloo.ops\[0\]: broadcast is not in comm.ops"):
        check_config({"gpus": 2, "comm": {"ops": ["all_reduce"], "gloo": {"ops": ["broadcast"]}}})


def test_memory_measures_the_language_models_on_gpus():
    def models(gpus, **mem):
        plan = make_plan(check_config({"gpus": gpus, **({"memory": mem} if mem else {})}))
        return sorted({j.model for j in plan["jobs"]["memory"]}), plan["skipped"]

    on_gpus, skipped = models(2)
    assert on_gpus == ["gpt", "lora"]
    left = [s for s in skipped if s["what"] == "memory jobs of mlp"]
    assert left and "--config memory='{models: [mlp, gpt, lora]}'" in left[0]["why"]
    assert models(0)[0] == ["gpt", "lora", "mlp"]
    assert models(2, models=["mlp", "gpt", "lora"])[0] == ["gpt", "lora", "mlp"]


def test_on_cpu_every_world_size_keeps_its_language_models():
    plan = make_plan(check_config({"gpus": 0, "world_sizes": [2, 4, 6]}))
    assert _sizes(plan, "gpt") == [1, 2, 4, 6] == _sizes(plan, "mlp")


def test_gloo_runs_once_beside_nccl_on_a_gpu_node():
    plan = _plan(8)
    assert [j.world_size for j in plan["jobs"]["comm"] if j.backend == "gloo"] == [2]
    assert sorted(j.world_size for j in plan["jobs"]["comm"] if j.backend == "nccl") == [2, 4, 8]
    left = [s for s in plan["skipped"] if s["what"] == "gloo world sizes [4, 8]"]
    assert left and "comm='{gloo: {world_sizes: [2, 4, 8]}}'" in left[0]["why"]


def test_graph_timing_stops_at_graph_max_bytes_and_the_plan_says_so():
    from distbench.comm.harness import plan_points
    from distbench.comm.job import comm_args
    from distbench.comm.plan import job_params

    cfg = check_config({"gpus": 2, "world_sizes": [2]})
    plan = make_plan(cfg)
    nccl = next(j for j in plan["jobs"]["comm"] if j.backend == "nccl")
    params = job_params(cfg, nccl.backend, nccl.nccl_env_label, nccl.world_size)
    assert params["graph_max_bytes"] == 16 * 2**20
    args = comm_args(nccl, params, "o.csv", "p.json")
    assert args[args.index("--graph-max-bytes") + 1] == str(16 * 2**20)
    points = plan_points(["all_reduce"], params["sizes"], params["timing"], graph_max_bytes=params["graph_max_bytes"])
    graph = [p.size_bytes for p in points if p.timing == "graph"]
    events = [p.size_bytes for p in points if p.timing == "events"]
    assert max(graph) == 16 * 2**20 and max(events) == 2**30 and len(events) == 28
    left = [s for s in plan["skipped"] if s["what"].startswith("graph timing above 16 MiB (6 sizes up to 1 GiB)")]
    assert left and "comm='{graph_max_bytes: 1GiB}'" in left[0]["why"]
    # Gloo times with the host clock only: the cap is not among its params (changing it reruns no Gloo job)
    gloo = next(j for j in plan["jobs"]["comm"] if j.backend == "gloo")
    assert "graph_max_bytes" not in job_params(cfg, gloo.backend, gloo.nccl_env_label, gloo.world_size)


def test_memory_runs_at_two_ranks_on_gpus_and_at_one_and_two_on_cpu():
    def sizes(gpus, **mem):
        plan = make_plan(check_config({"gpus": gpus, **({"memory": mem} if mem else {})}))
        return sorted({j.world_size for j in plan["jobs"]["memory"]})

    assert sizes(8) == [2] and sizes(2) == [2]
    assert sizes(1) == [1]  # a single GPU: the 1-rank split
    assert sizes(0) == [1, 2]  # CPU: as before
    assert sizes(8, world_sizes=[1, 2]) == [1, 2]  # asked for


def test_table_steps_run_beside_benchmark_jobs_only_on_a_gpu_node_with_cores_to_spare():
    """~80 s of the 4x H100 default run were aggregates, figures and the report, one after another. On a
    GPU node with cores to spare they take no core (threads 0) and run beside the benchmark jobs, which
    take every core, so two benchmark jobs still never overlap; on a CPU host they wait."""
    import re

    from distbench.pipeline.plan import side_threads
    from tests.conftest import REPO

    gpu, cpu = make_plan(check_config({"gpus": 8})), make_plan(check_config({"gpus": 0}))
    assert side_threads(gpu, 64) == 0
    assert side_threads(gpu, 4) == 1 and side_threads(cpu, 64) == 1
    rules = {}
    for smk in (REPO / "rules").glob("*.smk"):
        for name, body in re.findall(r"^rule (\w+):\n((?:    .*\n|\n)*)", smk.read_text(), re.M):
            rules[name] = body
    readers = [r for r in rules if r.startswith(("aggregate_", "plot_"))] + ["summary_json", "describe_run", "report"]
    assert len(readers) >= 4 and all("threads: SIDE_THREADS" in rules[r] for r in readers), readers
    # the two host probes do no GPU work: beside the jobs too (5 s of 2x H200's quick answer,
    # benchmarks/results/quick-h200x2-2026-11-29); the NCCL probe runs collectives: every core, and first
    # (after health's reading) so the communication tables are built beside the jobs that follow
    assert all("threads: SIDE_THREADS" in rules[r] for r in ("probe_env", "probe_topology"))
    assert "threads: workflow.cores" in rules["probe_nccl"]
    priority = {r: int(m.group(1)) for r in ("probe_nccl", "health_before")
                if (m := re.search(r"priority: (\d+)", rules[r]))}
    assert priority.get("health_before", 0) > priority.get("probe_nccl", 0) > 0, priority
    # every family's rules are built in one loop (rules/families.smk): its job rule takes every core, each
    # step that reads tables the side threads (a step that measures, every core)
    from distbench.pipeline.families import manifests

    loop = (REPO / "rules/families.smk").read_text()
    job_rule, steps = loop.split("for _s in _m.steps:")[0], loop.split("for _s in _m.steps:")[1]
    assert "threads: workflow.cores" in job_rule and "threads: workflow.cores if _s.measures else SIDE_THREADS" in steps
    table_steps = [s.rule for m in manifests() for s in m.steps if not s.measures]
    assert len(table_steps) >= 10 and {"aggregate_comm", "plot_training", "predict"} <= set(table_steps)
