from distbench.config import check_config
from distbench.plan import job_params, make_plan, nccl_env_label, nccl_probe_params, plan_summary


def test_cpu_host_skips_nccl_and_says_why():
    plan = make_plan(check_config({}), detected=(0, "detected 0 via no NVIDIA driver on this host"))
    assert {j.backend for j in plan["jobs"]} == {"gloo"}
    assert [j.world_size for j in plan["jobs"]] == [2, 4, 6]
    nccl = [s for s in plan["skipped"] if s["what"] == "backend nccl"]
    assert nccl and "no GPU" in nccl[0]["why"]


def test_declared_gpus_clamp_nccl_world_sizes_and_name_the_dropped():
    cfg = check_config({"gpus": 2, "comm": {"nccl_env": [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}]}})
    plan = make_plan(cfg)
    nccl = [j for j in plan["jobs"] if j.backend == "nccl"]
    assert {j.world_size for j in nccl} == {2}
    assert [j.nccl_env_label for j in nccl] == ["default", "NCCL_ALGO=Ring", "NCCL_ALGO=Tree"]
    assert any(s["what"] == "nccl world sizes [4, 6]" and "gpus=2" in s["why"] for s in plan["skipped"])
    # Gloo is not clamped: it runs CPU processes
    assert [j.world_size for j in plan["jobs"] if j.backend == "gloo"] == [2, 4, 6]


def test_env_labels_are_stable_and_path_safe():
    assert nccl_env_label({}) == "default"
    assert nccl_env_label({"NCCL_PROTO": "Simple", "NCCL_ALGO": "Tree"}) == "NCCL_ALGO=Tree+NCCL_PROTO=Simple"


def test_gloo_params_cap_sizes_and_use_host_timing():
    cfg = check_config({})
    g, n = job_params(cfg, "gloo"), job_params(cfg, "nccl")
    assert max(g["sizes"]) == 128 * 2**20 and max(n["sizes"]) == 2**30
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
                                                      "nccl_env": "default"} in summary["jobs"]
