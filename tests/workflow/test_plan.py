import pytest

from distbench.pipeline.config import ConfigError, check_config
from distbench.comm.plan import job_params
from distbench.launch.planning import nccl_env_label
from distbench.pipeline.plan import make_plan, nccl_probe_params, plan_summary


def test_cpu_host_skips_nccl_and_says_why():
    plan = make_plan(check_config({}), detected=(0, "detected 0 via no NVIDIA driver on this host"))
    assert {j.backend for j in plan["jobs"]["comm"]} == {"gloo"}
    assert [j.world_size for j in plan["jobs"]["comm"]] == [2, 4, 6]
    nccl = [s for s in plan["skipped"] if s["what"] == "backend nccl"]
    assert nccl and "no GPU" in nccl[0]["why"]


@pytest.mark.parametrize("gpus,expected", [(0, [2, 4, 6]), (1, [2, 4, 6]), (2, [2]), (4, [2, 4]), (6, [2, 4, 6]),
                                           (8, [2, 4, 8]), (16, [2, 4, 8, 16])])
def test_default_world_sizes_follow_the_detected_node_whole_node_included(gpus, expected):
    """world_sizes: auto (the default): on G GPUs the powers of two from 2 below G and G itself; a
    CPU host keeps seed 001's 2, 4, 6 (the README's CPU quick start)."""
    cfg = check_config({})
    plan = make_plan(cfg, detected=(gpus, f"detected {gpus} (test)"))
    assert plan["config_world_sizes"] == expected and plan["world_sizes_auto"]
    comm = {b: sorted({j.world_size for j in plan["jobs"]["comm"] if j.backend == b}) for b in ("nccl", "gloo")}
    if gpus >= 2:
        assert comm["nccl"] == expected  # the whole node; Gloo beside it at some of these sizes
        assert comm["gloo"] and set(comm["gloo"]) <= set(expected)
        assert not [s for s in plan["skipped"] if s["what"].startswith(("nccl world sizes", "training world sizes"))]
        assert nccl_probe_params(cfg, plan)["world_size"] == gpus
    else:  # no GPU: Gloo's CPU processes; one GPU: no NCCL size fits (named), Gloo runs every size
        assert comm["gloo"] == expected and not comm["nccl"]
    # training follows the top-level list (plus its 1-rank baseline) on CPU, the whole node and 1 rank
    # on GPUs; memory (auto) runs at 2 ranks on GPUs (1 on a single GPU) and at 1 and 2 on CPU
    trained = [1] if gpus == 1 else [1, *expected] if gpus == 0 else [1, expected[-1]]
    assert sorted({j.world_size for j in plan["jobs"]["training"]}) == trained
    assert sorted({j.world_size for j in plan["jobs"]["memory"]}) == ([1, 2] if gpus == 0 else [1] if gpus == 1 else [2])
    assert plan_summary(plan)["config_world_sizes"] == expected


def test_auto_world_sizes_span_the_cluster_nodes():
    from distbench.launch.planning import auto_world_sizes

    assert auto_world_sizes(8, 2) == [2, 4, 8, 16]
    plan = make_plan(check_config({"gpus": 8, "cluster": {"nodes": 2}, "training": {"enabled": False},
                                   "memory": {"enabled": False}}))
    assert plan["world_sizes"]["nccl"] == [2, 4, 8, 16]


@pytest.mark.parametrize("gpus", [2, 8])
def test_an_explicit_world_size_list_is_honoured_as_given(gpus):
    cfg = check_config({"world_sizes": [2, 4, 6]})
    plan = make_plan(cfg, detected=(gpus, "test"))
    assert plan["config_world_sizes"] == [2, 4, 6] and not plan["world_sizes_auto"]
    placed = [ws for ws in (2, 4, 6) if ws <= gpus]
    assert plan["world_sizes"]["nccl"] == placed
    assert sorted({j.world_size for j in plan["jobs"]["training"]}) == [1, *placed]
    dropped = [s for s in plan["skipped"] if s["what"] == "nccl world sizes [4, 6]"]
    assert bool(dropped) == (gpus == 2)  # above gpus: dropped and named, as before
    assert 8 not in {j.world_size for j in plan["jobs"]["comm"]}  # the 8-GPU node is not added to a list


def test_declared_gpus_clamp_nccl_world_sizes_and_name_the_dropped():
    cfg = check_config({"gpus": 2, "world_sizes": [2, 4, 6],
                        "comm": {"nccl_env": [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}]}})
    plan = make_plan(cfg)
    nccl = [j for j in plan["jobs"]["comm"] if j.backend == "nccl"]
    assert {j.world_size for j in nccl} == {2}
    assert [j.nccl_env_label for j in nccl] == ["default", "NCCL_ALGO=Ring", "NCCL_ALGO=Tree"]
    assert any(s["what"] == "nccl world sizes [4, 6]" and "gpus=2" in s["why"] for s in plan["skipped"])
    # On a GPU host Gloo runs beside NCCL at NCCL's smallest world size; the others are named, with how to run them
    assert [j.world_size for j in plan["jobs"]["comm"] if j.backend == "gloo"] == [2]
    gloo = [s for s in plan["skipped"] if s["what"] == "gloo world sizes [4, 6]"]
    assert gloo and "gpus=2" in gloo[0]["why"] and "world_sizes: [2, 4, 6]" in gloo[0]["why"]
    assert "smallest world size" in gloo[0]["why"]


def test_gloo_world_sizes_follow_nccl_on_a_gpu_host_and_every_size_otherwise():
    def gloo_sizes(cfg, gpus):
        plan = make_plan(check_config({"gpus": gpus, **cfg}))
        return [j.world_size for j in plan["jobs"]["comm"] if j.backend == "gloo"]

    assert gloo_sizes({}, 0) == [2, 4, 6]  # a CPU host: Gloo is the comm family
    assert gloo_sizes({}, 4) == [2]  # beside NCCL's smallest world size: one comparison
    assert gloo_sizes({"world_sizes": [2, 4, 8]}, 8) == [2]
    assert gloo_sizes({"backends": ["gloo"]}, 2) == [2, 4, 6]  # no NCCL to compare with
    assert gloo_sizes({"world_sizes": [4, 6]}, 2) == [4, 6]  # NCCL runs no size here
    assert gloo_sizes({"world_sizes": [2, 4, 6], "comm": {"gloo": {"world_sizes": [2, 6]}}}, 2) == [2, 6]  # asked for
    with pytest.raises(ConfigError, match=r"comm.gloo.world_sizes\[1\]: 8 is not in world_sizes \[2, 4, 6\]"):
        check_config({"world_sizes": [2, 4, 6], "comm": {"gloo": {"world_sizes": [2, 8]}}})
    # world_sizes: auto: a Gloo size the node's sizes do not hold is named by the plan
    plan = make_plan(check_config({"gpus": 2, "comm": {"gloo": {"world_sizes": [2, 6]}}}))
    assert [j.world_size for j in plan["jobs"]["comm"] if j.backend == "gloo"] == [2]
    assert any(s["what"] == "gloo world sizes [6]" and "auto on gpus=2" in s["why"] for s in plan["skipped"])


def test_env_labels_are_stable_and_path_safe():
    assert nccl_env_label({}) == "default"
    assert nccl_env_label({"NCCL_PROTO": "Simple", "NCCL_ALGO": "Tree"}) == "NCCL_ALGO=Tree+NCCL_PROTO=Simple"


def test_gloo_params_cap_sizes_and_use_host_timing():
    cfg = check_config({})
    g, n = job_params(cfg, "gloo"), job_params(cfg, "nccl")
    assert max(g["sizes"]) == 16 * 2**20 and max(n["sizes"]) == 2**30
    assert g["timing"] == ["host"] and n["timing"] == ["events", "graph"]
    assert g["iters"] == 5 and n["iters"] == 20


def test_nccl_env_ops_limit_only_non_default_settings():
    cfg = check_config({"comm": {"nccl_env": [{}, {"NCCL_ALGO": "Tree"}], "nccl_env_ops": ["all_reduce"]}})
    assert job_params(cfg, "nccl", "default")["ops"] == cfg["comm"]["ops"]
    assert job_params(cfg, "nccl", "NCCL_ALGO=Tree")["ops"] == ["all_reduce"]


def test_probe_params_and_summary():
    cpu = make_plan(check_config({}), detected=(0, "none"))
    probe = nccl_probe_params(check_config({}), cpu)
    assert probe["world_size"] == 0 and "no GPU" in probe["why"]
    gpu_cfg = check_config({"gpus": 4})
    probe = nccl_probe_params(gpu_cfg, make_plan(gpu_cfg))
    assert probe["world_size"] == 4 and max(probe["sizes"]) == 2**30
    summary = plan_summary(make_plan(gpu_cfg), "declared")
    assert summary["gpus_source"] == "declared" and {"backend": "nccl", "dtype": "float32", "world_size": 4,
                                                      "nccl_env": "default"} in summary["jobs"]["comm"]


def test_training_jobs_include_the_plain_one_rank_baseline_and_tuning_points():
    from distbench.training.plan import ddp_label, training_jobs

    cfg = check_config({"world_sizes": [2, 4], "training": {"models": ["mlp"]}})
    jobs, skipped = training_jobs(cfg, gpus=2)
    assert [(j.backend, j.world_size, j.config_label) for j in jobs] == [("nccl", 1, "plain"), ("nccl", 2, "plain")]
    assert "training world sizes [4]" in skipped[0]["what"]
    # without GPUs the family runs on Gloo at every world size
    jobs, _ = training_jobs(cfg, gpus=0)
    assert {j.world_size for j in jobs} == {1, 2, 4} and {j.backend for j in jobs} == {"gloo"}
    # a non-default DDP setup still gets the plain 1-rank run as the fair baseline
    hooked = check_config({"world_sizes": [2], "training": {"models": ["mlp"], "ddp": {"comm_hook": "bf16_compress"}}})
    labels = {(j.world_size, j.config_label) for j in training_jobs(hooked, gpus=0)[0]}
    assert labels == {(1, "plain"), (1, "hook=bf16_compress"), (2, "hook=bf16_compress")}
    # tuning: every point at the largest world size, each with its own 1-rank run
    tune = check_config({"world_sizes": [2], "training": {"models": ["mlp"], "tune": True, "tune_space": {
        "bucket_cap_mb": [25, 50], "gradient_as_bucket_view": [False], "static_graph": [False],
        "comm_hook": ["none"], "grad_accum": [1, 2]}}})
    labels = {(j.world_size, j.config_label) for j in training_jobs(tune, gpus=0)[0]}
    assert labels == {(ws, c) for ws in (1, 2) for c in ("plain", "bucket=50", "accum=2", "bucket=50+accum=2")}
    # NCCL settings are swept at the largest world size only; one 1-rank run per DDP setup serves them
    tune = check_config({"backends": ["nccl"], "world_sizes": [2], "training": {"models": ["mlp"], "tune": True, "tune_space": {
        "bucket_cap_mb": [25], "gradient_as_bucket_view": [True], "static_graph": [False], "comm_hook": ["none"],
        "nccl_env": [{}, {"NCCL_MAX_CTAS": 8}, {"TORCH_NCCL_HIGH_PRIORITY": 1}]}}})
    labels = {(j.world_size, j.config_label) for j in training_jobs(tune, gpus=2)[0]}
    assert labels == {(1, "plain"), (2, "plain"), (1, "gbv=on"), (2, "gbv=on"), (2, "gbv=on+NCCL_MAX_CTAS=8"),
                      (2, "gbv=on+TORCH_NCCL_HIGH_PRIORITY=1")}
    assert ddp_label({"bucket_cap_mb": 12.5, "static_graph": True}, {"NCCL_MIN_CTAS": "4"}) == \
        "bucket=12.5+static=on+NCCL_MIN_CTAS=4"


def test_training_disabled_or_no_backend_is_said():
    from distbench.training.plan import training_jobs

    jobs, skipped = training_jobs(check_config({"training": {"enabled": False}}), gpus=0)
    assert jobs == [] and "training.enabled is false" in skipped[0]["why"]
    jobs, skipped = training_jobs(check_config({"backends": ["nccl"]}), gpus=0)
    assert jobs == [] and "needs a GPU" in skipped[0]["why"]


def test_language_model_jobs_per_model_strategy_and_world_size():
    from distbench.training.plan import training_jobs, training_params

    cfg = check_config({"world_sizes": [2], "training": {"models": ["gpt", "lora"], "lm": {"strategies": ["fsdp"]}}})
    jobs, _ = training_jobs(cfg, gpus=0)
    # FSDP at every world size, and plain DDP on one rank: the fair baseline of each model
    assert {(j.model, j.strategy, j.world_size, j.config_label) for j in jobs} == {
        (m, s, ws, label) for m in ("gpt", "lora") for s, ws, label in
        (("ddp", 1, "plain"), ("fsdp", 1, "fsdp"), ("fsdp", 2, "fsdp"))}
    lora = next(j for j in jobs if j.model == "lora" and j.world_size == 2)
    params = training_params(cfg, lora)
    assert params["model"] == "lora" and params["strategy"] == "fsdp" and params["size"] == "tiny"
    assert params["lora_rank"] == 16 and params["global_batch_size"] == 2 * params["batch_size"]
    assert "lora_rank" not in training_params(cfg, next(j for j in jobs if j.model == "gpt"))
    gpu = training_params(cfg, training_jobs(check_config({**cfg, "backends": ["nccl"]}), gpus=2)[0][0])
    assert (gpu["size"], gpu["seq_len"], gpu["dtype"]) == ("1.3b", 1024, "bfloat16")


def test_gloo_size_stride_keeps_every_nth_size_and_the_largest_and_says_what_it_drops():
    from distbench.comm.plan import job_params, strided

    assert strided([8, 16, 32, 64, 128], 2) == [8, 32, 128]
    assert strided([8, 16, 32, 64], 2) == [8, 32, 64]        # the largest always
    assert strided([8, 16, 32], 1) == [8, 16, 32]
    cfg = check_config({"backends": ["gloo"], "comm": {"sizes": {"min_bytes": 8, "max_bytes": "64MiB", "step_factor": 2},
                                                       "gloo": {"max_bytes": "1KiB"}}})
    assert job_params(cfg, "gloo")["sizes"] == [8, 32, 128, 512, 1024]
    assert len(job_params(cfg, "nccl")["sizes"]) == 24    # NCCL keeps the whole sweep
    skipped = make_plan(cfg, detected=(0, "test"))["skipped"]
    assert any("gloo sizes between those measured (3 of 8" in s["what"] and "size_stride: 1" in s["why"] for s in skipped)
    listed = check_config({"backends": ["gloo"], "comm": {"sizes": [8, 16, 32, 64]}})
    assert job_params(listed, "gloo")["sizes"] == [8, 16, 32, 64]  # a list of sizes is kept whole
    full = check_config({"backends": ["gloo"], "comm": {"gloo": {"size_stride": 1}}})
    assert not any("between those measured" in s["what"] for s in make_plan(full, detected=(0, "t"))["skipped"])
