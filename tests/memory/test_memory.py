"""The memory family (issue 11): the accounting of parameters, gradients, optimizer state and
activations from the tensors themselves, the analytic estimate, the fit, the plan, and real
torchrun jobs (Gloo, 2 ranks) under DDP and FSDP2."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from distbench.pipeline.config import check_config
from distbench.memory import accounting as acc
from distbench.memory.analysis.summary import fit_line, memory_findings, summarize_memory
from distbench.memory.contract import MEMORY_COLUMN_NAMES, read_memory_csv
from distbench.workloads import gpt as G
from distbench.workloads import mlp
from tests.conftest import REPO


def numel_bytes(params) -> int:
    return sum(p.numel() * p.element_size() for p in params)


def test_parameter_bytes_are_numel_times_element_size_once_per_storage():
    torch.manual_seed(0)
    model = mlp.make_mlp(64, 3)
    assert acc.parameter_bytes(model) == numel_bytes(model.parameters())
    half = mlp.make_mlp(64, 1).to(torch.bfloat16)
    assert acc.parameter_bytes(half) == numel_bytes(half.parameters()) == 2 * sum(p.numel() for p in half.parameters())
    # gpt ties its output projection to the embedding: one storage, counted once
    gpt = G.make_gpt(G.gpt_config("tiny", 128, 16))
    assert acc.parameter_bytes(gpt) == 4 * G.param_counts(gpt)["total"]
    # views of one storage count once
    w = torch.zeros(100)
    assert acc.unique_storage_bytes([w, w[:10], w.view(10, 10)]) == 400


def test_gradient_bytes_count_the_trainable_parameters_only():
    torch.manual_seed(0)
    cfg = G.gpt_config("tiny", 128, 16)
    model = G.make_gpt(cfg)
    G.apply_lora(model, 4, 8)
    x, y = G.make_tokens(2, cfg, 0, "cpu")
    G.lm_loss(model(x), y).backward()
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert acc.gradient_bytes(model) == numel_bytes(trainable) == 4 * G.lora_trainable_count(cfg, 4)


@pytest.mark.parametrize("name,per_param,per_tensor", [("sgd", 0, 0), ("sgd_momentum", 4, 0), ("adamw", 8, 4)])
def test_optimizer_state_per_definition(name, per_param, per_tensor):
    torch.manual_seed(0)
    model = mlp.make_mlp(32, 2)
    opt = mlp.make_optimizer(name, model.parameters())
    x, y = mlp.make_batch(4, 32, 0, "cpu")
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    # AdamW: exp_avg and exp_avg_sq (2 x fp32 parameters) plus a step counter per parameter tensor
    assert acc.optimizer_state_bytes(opt) == per_param * n + per_tensor * len(params)
    est = acc.estimate(n, n, len(params), name, world_size=1, sharded=False)
    assert est == {"params": 4 * n, "grads": 4 * n, "optimizer": per_param * n + per_tensor * len(params)}
    assert acc.estimate(n, n, len(params), name, world_size=4, sharded=True)["params"] == -(-n // 4) * 4


def test_saved_activations_exclude_parameters_and_grow_with_the_batch():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8, bias=False)
    x = torch.randn(5, 16)
    with acc.SavedActivations(lin) as saved:
        lin(x).sum().backward()
    assert saved.bytes == 5 * 16 * 4  # the input, saved for the weight's gradient; the weight is not counted
    model = mlp.make_mlp(64, 3)
    sizes, acts = [2, 4, 8, 16], []
    for b in sizes:
        x, y = mlp.make_batch(b, 64, 0, "cpu")
        with acc.SavedActivations(model) as saved:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        acts.append(saved.bytes)
    slope, intercept, residual = fit_line(sizes, acts)
    assert residual < 0.01 and slope > 0  # linear in the batch for the MLP
    assert acts[-1] == pytest.approx(slope * 16 + intercept, rel=0.01)


def test_fit_line_is_exact_on_a_line_and_empty_below_two_points():
    slope, intercept, residual = fit_line([1, 2, 4], [110, 120, 140])
    assert slope == pytest.approx(10) and intercept == pytest.approx(100) and residual == pytest.approx(0, abs=1e-9)
    assert all(v != v for v in fit_line([4], [40]))


def test_memory_jobs_in_the_plan():
    from distbench.memory.plan import memory_jobs, memory_params

    # on CPU the bucket-view variant is left out (its effect is on the GPU allocator), and said so
    jobs, skipped = memory_jobs(check_config({"memory": {"gradient_as_bucket_view": [False, True]}}), gpus=0)
    assert {j.config_label for j in jobs} == {"ddp", "fsdp"} and "gradient_as_bucket_view=true" in skipped[0]["what"]
    # the GPU default: DDP's default only, at 2 ranks (memory.world_sizes: auto), with the search, the
    # language models only (memory.models: auto); the plan names all three
    gpu_jobs, skipped = memory_jobs(check_config({"backends": ["nccl"]}), gpus=2)
    assert {j.config_label for j in gpu_jobs} == {"ddp", "fsdp"} and len(gpu_jobs) == 4
    assert {j.world_size for j in gpu_jobs if j.search} == {2} == {j.world_size for j in gpu_jobs}
    assert [s["what"] for s in skipped] == ["memory jobs at 1 rank", "memory jobs with gradient_as_bucket_view=true",
                                            "memory jobs of mlp"]
    assert "{world_sizes: [1, 2]}" in skipped[0]["why"] and "{gradient_as_bucket_view: [false, true]}" in skipped[1]["why"]
    # at 1 and 2 ranks, the search at the largest only
    both = check_config({"backends": ["nccl"], "memory": {"world_sizes": [1, 2], "models": ["mlp", "gpt", "lora"]}})
    jobs12, skipped = memory_jobs(both, gpus=2)
    assert [s["what"] for s in skipped] == ["memory jobs with gradient_as_bucket_view=true",
                                            "the largest-batch search at 1 rank"] and "{search_at: all}" in skipped[1]["why"]
    assert not memory_params(both, next(j for j in jobs12 if j.world_size == 1))["search"]
    full = check_config({"backends": ["nccl"], "memory": {"world_sizes": [1, 2], "gradient_as_bucket_view": [False, True],
                                                          "models": ["mlp", "gpt", "lora"],
                                                          "search_at": "all"}})
    gpu_jobs, skipped = memory_jobs(full, gpus=2)
    assert {j.config_label for j in gpu_jobs} == {"ddp", "ddp+gbv", "fsdp"} and len(gpu_jobs) == 16 and not skipped
    assert all(j.search for j in gpu_jobs)
    cfg = check_config({"memory": {"models": ["mlp", "lora"], "world_sizes": [2], "gradient_as_bucket_view": [True]}})
    jobs, _ = memory_jobs(cfg, gpus=0)
    assert {(j.model, j.config_label, j.world_size) for j in jobs} == {
        ("mlp", "ddp+gbv", 2), ("lora", "ddp+gbv", 2), ("lora", "fsdp", 2)}  # no FSDP for the MLP
    lora = memory_params(cfg, next(j for j in jobs if j.model == "lora"))
    assert lora["batch_sizes"] == [1, 2, 4] and lora["lora_rank"] == 16 and lora["size"] == "tiny"
    gpu = check_config({"backends": ["nccl"], "memory": {"world_sizes": [1, 4]}})
    jobs, skipped = memory_jobs(gpu, gpus=2)
    assert {j.world_size for j in jobs} == {1} and "memory world sizes [4]" in skipped[0]["what"]
    assert memory_jobs(check_config({"memory": {"enabled": False}}), 0)[0] == []


def run_memory(tmp_path, *args, nproc=2, env=None):
    out = tmp_path / "memory.csv"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "distbench.memory", "--backend", "gloo", "--out", str(out), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180,
                       env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    return r, out


def test_mlp_ddp_job_measures_every_batch_and_says_why_there_is_no_search(tmp_path):
    r, out = run_memory(tmp_path, "--model", "mlp", "--hidden-dim", "64", "--num-layers", "2",
                        "--batch-sizes", "4,8,16", "--optimizer", "adamw")
    assert r.returncode == 0, r.stderr[-3000:]
    df = read_memory_csv(out)
    assert list(df.columns) == list(MEMORY_COLUMN_NAMES)
    m = df[df["phase"] == "measure"]
    assert list(m["batch_size"]) == [4, 8, 16] and (m["status"] == "ok").all()
    n = m["params_total"].iloc[0]
    assert (m["params_bytes"] == 4 * n).all() and (m["grads_bytes"] == 4 * n).all()
    assert (m["estimate_error_bytes"] == 0).all()  # the formula is exact for these model states
    assert m["activations_bytes"].is_monotonic_increasing
    assert m["peak_allocated_bytes"].isna().all()  # no allocator on CPU
    search = df[df["phase"] == "search"]
    assert list(search["status"]) == ["skipped"] and "CPU: no device memory limit" in search["message"].iloc[0]
    s = summarize_memory(df).iloc[0]
    assert s["activation_fit_residual"] < 0.02 and s["largest_measured_batch"] == 16
    line = memory_findings(summarize_memory(df))[0]
    assert line.startswith("MLP 64x2, ddp, 2 ranks: at batch 16 per rank: parameters ")
    assert "the analytic model-state estimate" in line and "is exact" in line


@pytest.mark.heavy
def test_lora_fsdp_job_shards_the_model_states(tmp_path):
    r, out = run_memory(tmp_path, "--model", "lora", "--strategy", "fsdp", "--gpt-size", "tiny", "--seq-len", "16",
                        "--vocab-size", "128", "--lora-rank", "4", "--batch-sizes", "1,2", "--config-label", "fsdp")
    assert r.returncode == 0, r.stderr[-3000:]
    df = read_memory_csv(out)
    m = df[df["phase"] == "measure"]
    assert (m["status"] == "ok").all() and set(m["config"]) == {"fsdp"}
    cfg = G.gpt_config("tiny", 128, 16)
    torch.manual_seed(0)
    model = G.make_gpt(cfg)
    G.apply_lora(model, 4, 32.0)
    total, trainable = G.param_counts(model)["total"], G.lora_trainable_count(cfg, 4)
    # each rank holds its half of every parameter and gradient (shards padded per tensor)
    assert (m["params_bytes"] >= 4 * total // 2).all() and (m["params_bytes"] < 4 * total // 2 + 4096).all()
    assert (m["grads_bytes"] >= 4 * trainable // 2).all() and (m["grads_bytes"] < 4 * trainable // 2 + 1024).all()
    search = df[df["phase"] == "search"]
    assert list(search["status"]) == ["skipped"]


@pytest.mark.heavy
def test_a_job_that_dies_keeps_its_rows_and_marks_the_rest(tmp_path, monkeypatch):
    from distbench.launch import torchrun as launch
    from distbench.memory.job import run_memory_job
    from distbench.memory.plan import MemoryJob, memory_params

    real = launch.worker_command

    def command(*a, **kw):  # the real launcher, with a harness whose rank 1 dies at the second batch
        cmd = real(*a, **kw)
        i = cmd.index("distbench.memory")
        return cmd[: i - 1] + [str(REPO / "tests/helpers/memory_crash.py")] + cmd[i + 1:]

    monkeypatch.setattr(launch, "worker_command", command)
    cfg = check_config({"memory": {"models": ["mlp"], "world_sizes": [2]}})
    job = MemoryJob("gloo", 2, "mlp", "ddp", "ddp", False)
    params = {**memory_params(cfg, job), "job_timeout_s": 120}
    status = run_memory_job(job, params, tmp_path / "memory.csv", tmp_path / "p.json", tmp_path / "job.log")
    assert status != "ok"
    df = read_memory_csv(tmp_path / "memory.csv")
    by_batch = df.set_index("batch_size")["status"].to_dict()
    assert by_batch[8] == "ok" and by_batch[16] == "failed" and by_batch[32] == "not_run"
    assert "rank 1" in df[df["batch_size"] == 16]["message"].iloc[0]


def test_memory_figures(tmp_path):
    from distbench.memory.analysis.plots import FIGURES, plot_memory

    r, out = run_memory(tmp_path, "--model", "mlp", "--hidden-dim", "32", "--num-layers", "1", "--batch-sizes", "2,4",
                        nproc=1)
    assert r.returncode == 0, r.stderr[-3000:]
    paths = plot_memory(pd.read_csv(out), tmp_path / "fig")
    assert {p.name for p in paths} == {f"{n}.{e}" for n in FIGURES for e in ("png", "svg")}
    assert plot_memory(pd.read_csv(out).assign(status="oom"), tmp_path / "none") == []


def test_report_section_lists_findings_table_and_snapshots(tmp_path, monkeypatch):
    from distbench.core.section import ReportInputs
    from distbench.memory.analysis.section import build as memory_section

    r, out = run_memory(tmp_path, "--model", "mlp", "--hidden-dim", "32", "--num-layers", "1", "--batch-sizes", "2,4",
                        nproc=1)
    assert r.returncode == 0, r.stderr[-3000:]
    tables = tmp_path / "results/lab/tables"
    tables.mkdir(parents=True)
    summarize_memory(read_memory_csv(out)).to_csv(tables / "memory_summary.csv", index=False)
    snap = tmp_path / "results/lab/memory/nccl/gpt/ws1/ddp/snapshot.pickle"
    snap.parent.mkdir(parents=True)
    snap.write_bytes(b"x")
    (tmp_path / "results/other/memory/nccl/gpt/ws1/ddp").mkdir(parents=True)  # another run's: not listed
    (tmp_path / "results/other/memory/nccl/gpt/ws1/ddp/snapshot.pickle").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    section = memory_section(ReportInputs({"memory_summary": Path("results/lab/tables/memory_summary.csv")}))
    assert section["findings"][0].startswith("MLP 32x1, ddp, 1 rank: at batch 4 per rank")
    assert section["table"]["rows"][0][:4] == ["mlp", "ddp", "1", "4"]
    assert section["snapshots"] == ["results/lab/memory/nccl/gpt/ws1/ddp/snapshot.pickle"]
    assert memory_section(ReportInputs({"memory_summary": tmp_path / "missing.csv"})) is None


def test_the_ranks_read_a_memory_jobs_values_from_its_job_json_as_the_flags_give_them(tmp_path):
    """Issue 46: the memory job's ranks read its values from job.json (`--params`), typed as the plan
    gives them; the same arguments as the flags a person would type (memory_args without it)."""
    import json

    from distbench.launch.batch import read_entry
    from distbench.memory.harness import parse_args
    from distbench.memory.job import job_of, memory_args
    from distbench.memory.plan import memory_jobs, rule_params
    from distbench.pipeline.config import check_config

    cfg = check_config({})
    job = memory_jobs(cfg, 0)[0][0]
    entry = {"rule": "memory_job", "wildcards": {k: str(v) for k, v in job.wildcards.items()},
             "params": {"job": rule_params(cfg, {}, job), "launch": {}}, "output": {}, "log": ""}
    (tmp_path / "job.json").write_text(json.dumps(entry))
    j, params = job_of(read_entry(tmp_path / "job.json"))
    by_flags = memory_args(j, params, tmp_path / "m.csv", tmp_path / "p.json")
    by_json = memory_args(j, {**params, "params_json": str(tmp_path / "job.json")}, tmp_path / "m.csv", tmp_path / "p.json")
    assert by_json[:2] == ["--params", str(tmp_path / "job.json")] and "--batch-sizes" not in by_json
    a, b = vars(parse_args(by_flags)), vars(parse_args(by_json))
    assert a.pop("params") is None and b.pop("params")
    assert a == b and b["batch_sizes"] == sorted(params["batch_sizes"]) and b["search"] in (True, False)
