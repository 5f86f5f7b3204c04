"""What the default run measures at each world size on a GPU node, so that one node of up to 8 GPUs
answers in about 5 minutes (issue 35): Gloo beside NCCL's smallest world size only, the language
models at 1 rank and the whole node (the MLP at every size), graph timing up to comm.graph_max_bytes;
everything left out is named in the plan with the one line that runs it."""

from __future__ import annotations

from distbench.pipeline.config import check_config
from distbench.pipeline.plan import make_plan


def _plan(gpus, **cfg):
    return make_plan(check_config({"gpus": gpus, "world_sizes": [2, 4, 8], **cfg}))


def _sizes(plan, model):
    return sorted({j.world_size for j in plan["training_jobs"] if j.model == model})


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


def test_on_cpu_every_world_size_keeps_its_language_models():
    plan = make_plan(check_config({"gpus": 0, "world_sizes": [2, 4, 6]}))
    assert _sizes(plan, "gpt") == [1, 2, 4, 6] == _sizes(plan, "mlp")


def test_gloo_runs_once_beside_nccl_on_a_gpu_node():
    plan = _plan(8)
    assert [j.world_size for j in plan["comm_jobs"] if j.backend == "gloo"] == [2]
    assert sorted(j.world_size for j in plan["comm_jobs"] if j.backend == "nccl") == [2, 4, 8]
    left = [s for s in plan["skipped"] if s["what"] == "gloo world sizes [4, 8]"]
    assert left and "comm='{gloo: {world_sizes: [2, 4, 8]}}'" in left[0]["why"]


def test_graph_timing_stops_at_graph_max_bytes_and_the_plan_says_so():
    from distbench.comm.harness import plan_points
    from distbench.comm.job import comm_args
    from distbench.comm.plan import job_params

    cfg = check_config({"gpus": 2, "world_sizes": [2]})
    plan = make_plan(cfg)
    nccl = next(j for j in plan["comm_jobs"] if j.backend == "nccl")
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
    gloo = next(j for j in plan["comm_jobs"] if j.backend == "gloo")
    assert "graph_max_bytes" not in job_params(cfg, gloo.backend, gloo.nccl_env_label, gloo.world_size)


def test_memory_runs_at_two_ranks_on_gpus_and_at_one_and_two_on_cpu():
    def sizes(gpus, **mem):
        plan = make_plan(check_config({"gpus": gpus, **({"memory": mem} if mem else {})}))
        return sorted({j.world_size for j in plan["memory_jobs"]})

    assert sizes(8) == [2] and sizes(2) == [2]
    assert sizes(1) == [1]  # a single GPU: the 1-rank split
    assert sizes(0) == [1, 2]  # CPU: as before
    assert sizes(8, world_sizes=[1, 2]) == [1, 2]  # asked for
