"""The Verdict fits the node it ran on (issue 54, part 1; docs/report.md, "Node shapes"), from fixture
tables: a one-GPU node leads with its language model's tokens/s and MFU, then memory, and its
communication row says there is no collective between GPUs to measure (the Gloo figures stay in their
section, labelled CPU processes); two GPUs lead with NCCL as before; a CPU-only host is judged on Gloo as
before. The quick answer picks the question the node can answer, and the prediction section's first line
says what it rests on, never a check fitted on Gloo as support for GPU figures."""

import json

import pandas as pd
from synthetic import summary_row

from distbench.comm.analysis.headlines import ONE_GPU_TEXT
from distbench.core.judged import node_gpus
from distbench.core.section import ReportInputs
from distbench.memory.analysis.summary import SUMMARY_COLUMNS as MEMORY_COLUMNS
from distbench.pipeline.config import check_config
from distbench.pipeline.plan import make_plan
from distbench.pipeline.quick import quick_jobs
from distbench.predict import section as predict_section
from distbench.predict.model import get_preset
from distbench.report.render import render_report
from distbench.report.sections import SECTIONS
from distbench.report.verdict import verdict_rows
from distbench.training.analysis.summary import SUMMARY_COLUMNS as TRAINING_COLUMNS, add_scaling

NAN = float("nan")
H200 = "NVIDIA H200"
GPT_1_3B = 1_315_575_808  # the 1.3b GPT's parameters (distbench.workloads.gpt)


def _lm_row(ws: int, backend: str = "nccl", mfu: float = 0.46, model: str = "gpt") -> dict:
    """A GPT 1.3b summary row on an H200 (the issue's one-GPU run: 53,696 tokens/s, 46.0% MFU)."""
    row = {c: NAN for c in TRAINING_COLUMNS}
    step = 152.6 * (1.05 if ws > 1 else 1.0)
    tokens = 8 * 1024 * ws / step * 1e3
    row.update(backend=backend, world_size=ws, nodes=1, model=model, strategy="ddp", hidden_dim=2048, num_layers=24,
               n_heads=16, seq_len=1024, vocab_size=50304, compile=False, batch_size=8, global_batch_size=8 * ws,
               scaling="weak", dtype="bfloat16", optimizer="adamw", config="plain", nccl_env="default", n_steps=20,
               step_time_ms_median=step, step_time_ms_p5=step * 0.99, step_time_ms_p95=step * 1.01,
               compute_only_ms_median=step * 0.97, comm_alone_ms_median=6.0, last_bucket_ms_median=1.0,
               samples_per_s_median=8 * ws / step * 1e3, samples_per_s_per_device_median=8 / step * 1e3,
               tokens_per_s_median=tokens, tokens_per_s_per_device_median=tokens / ws, exposed_comm_ms=NAN,
               overlap_fraction=NAN, status="ok", message="", bounds_ok=pd.NA, bounds_note="",
               device_name=H200 if backend == "nccl" else "cpu", attention_kernel="flash",
               params_total=GPT_1_3B, params_trainable=GPT_1_3B, grad_bytes=4 * GPT_1_3B, n_buckets=60,
               flops_per_sample=6 * GPT_1_3B * 1024, tflops_per_device=mfu * 989, mfu=mfu, peak_device="H200",
               peak_tflops=989.0, mfu_note="")
    return row


def _memory(backend: str) -> pd.DataFrame:
    row = {c: NAN for c in MEMORY_COLUMNS}
    row.update(backend=backend, world_size=1, model="gpt", config="ddp", strategy="ddp", hidden_dim=2048, num_layers=24,
               dtype="bfloat16", optimizer="adamw", device_name=H200 if backend == "nccl" else "cpu",
               batch_sizes_measured="1 8", largest_measured_batch=8, params_bytes=4 * GPT_1_3B,
               grads_bytes=4 * GPT_1_3B, optimizer_bytes=8 * GPT_1_3B, activations_bytes=2**34,
               activation_bytes_per_sample=2**31, activation_fit_residual=0.0, status="ok", message="")
    return pd.DataFrame([row])


def _gloo_comm(world_sizes=(2, 4, 6)) -> pd.DataFrame:
    return pd.DataFrame([summary_row(backend="gloo", world_size=ws, op="all_reduce", size_bytes=16 * 2**20,
                                     time_us_median=9000.0 * ws, timing="host", status="ok", correct=True)
                         for ws in world_sizes])


def _nccl_comm(world_sizes=(2,)) -> pd.DataFrame:
    return pd.DataFrame([summary_row(backend="nccl", world_size=ws, op="all_reduce", size_bytes=2**30,
                                     time_us_median=6500.0, status="ok", correct=True) for ws in world_sizes])


def _inputs(tmp_path, gpus: int, comm: pd.DataFrame, training: pd.DataFrame, backend: str = "nccl") -> ReportInputs:
    tables = tmp_path / "results" / "run" / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    training.to_csv(tables / "training_summary.csv", index=False)
    _memory(backend).to_csv(tables / "memory_summary.csv", index=False)
    comm.to_csv(tables / "comm_summary.csv", index=False)
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"cpu_count": 16, "gpu_count": gpus, "gpus": [{"name": H200}] * gpus}))
    return ReportInputs({"comm_summary": tables / "comm_summary.csv", "comm_largest": tables / "comm_summary.csv",
                         "training_summary": tables / "training_summary.csv",
                         "memory_summary": tables / "memory_summary.csv"},
                        env=env, config={}, plan={"gpus": gpus, "gpus_source": "declared in config (gpus)"})


def _areas(rows) -> list[str]:
    return [r["area"] for r in rows]


def test_node_gpus_reads_the_plan_first_then_env_json():
    assert node_gpus({"gpus": 1}, {"gpu_count": 4}) == 1
    assert node_gpus({}, {"gpu_count": 2}) == 2
    assert node_gpus(None, None) is None
    assert node_gpus({"gpus": 0}) == 0


def test_one_gpu_leads_with_mfu_then_memory_and_has_no_gloo_headline(tmp_path):
    training = add_scaling(pd.DataFrame([_lm_row(1)]))
    inputs = _inputs(tmp_path, 1, _gloo_comm(), training)
    rows = verdict_rows(SECTIONS, inputs)
    areas = _areas(rows)
    assert areas[:2] == ["training", "memory"], areas
    first = rows[0]
    assert "on 1 GPU" in first["headline"] and "tokens/s" in first["headline"] and "46.0% MFU" in first["headline"]
    assert "1.32B parameters" in first["headline"]
    comm = [r for r in rows if r["area"] == "communication"]
    assert len(comm) == 1 and comm[0]["headline"] == ONE_GPU_TEXT and comm[0]["verdict"] == "measured"
    assert not any("Gloo" in r["headline"] for r in rows)
    # the Gloo figures stay in their section, labelled as CPU processes
    render_report(inputs, tmp_path / "r.md", tmp_path / "r.html")
    md = (tmp_path / "r.md").read_text()
    verdict = md[md.index("## Verdict"): md.index("\n## ", md.index("## Verdict") + 1)]
    assert "Gloo all_reduce" not in verdict and "GB/s" not in verdict  # no Gloo figure is a headline
    assert verdict.index("46.0% MFU") < verdict.index("| memory |") < verdict.index(ONE_GPU_TEXT)
    section = md[md.index("\n## Communication\n"):]
    assert "These are Gloo figures: CPU processes over shared memory or TCP, not this node's GPU" in section
    assert "These are Gloo figures" in (tmp_path / "r.html").read_text()
    findings = md[md.index("## Findings"): md.index("\n## ", md.index("## Findings") + 1)]
    gloo = [line for line in findings.splitlines() if "Gloo" in line]
    assert gloo and all(line.startswith("- CPU processes (Gloo), not the GPUs: ") for line in gloo), findings


def test_a_failed_one_gpu_language_model_is_a_failing_training_row(tmp_path):
    row = _lm_row(1)
    row.update(status="oom", message="CUDA out of memory", tokens_per_s_median=NAN, mfu=NAN)
    inputs = _inputs(tmp_path, 1, _gloo_comm(), add_scaling(pd.DataFrame([row])))
    rows = verdict_rows(SECTIONS, inputs)
    assert rows[0]["area"] == "training" and rows[0]["verdict"] == "failing" and ": oom" in rows[0]["headline"]


def test_two_gpus_keep_nccl_first_and_no_one_gpu_row(tmp_path):
    training = add_scaling(pd.DataFrame([_lm_row(1), _lm_row(2)]))
    inputs = _inputs(tmp_path, 2, pd.concat([_nccl_comm(), _gloo_comm()]), training)
    rows = verdict_rows(SECTIONS, inputs)
    heads = [r["headline"] for r in rows]
    assert ONE_GPU_TEXT not in heads
    assert any(h.startswith("NCCL all_reduce 1 GiB") for h in heads)
    gpt = next(r for r in rows if r["area"] == "training")
    assert " at 2 ranks: " in gpt["headline"] and "scaling efficiency" in gpt["headline"]
    assert "46.0% MFU" in gpt["headline"]  # the MFU, judged beside the scaling


def test_a_cpu_host_is_judged_on_gloo_as_before(tmp_path):
    training = add_scaling(pd.DataFrame([_lm_row(ws, backend="gloo", mfu=NAN) for ws in (1, 2)]))
    inputs = _inputs(tmp_path, 0, _gloo_comm((2,)), training, backend="gloo")
    heads = [r["headline"] for r in verdict_rows(SECTIONS, inputs)]
    assert any(h.startswith("Gloo all_reduce 16 MiB") for h in heads)
    assert ONE_GPU_TEXT not in heads and not any("on 1 GPU" in h for h in heads)


def _real_plan(gpus: int):
    cfg = check_config({"gpus": gpus})
    return cfg, make_plan(cfg)


def test_quick_on_one_gpu_runs_the_language_model_on_the_gpu_and_no_gloo():
    cfg, plan = _real_plan(1)
    assert any(j.backend == "gloo" for j in plan["jobs"]["comm"])  # the full run still measures Gloo
    quick = quick_jobs(plan, cfg, cores=16)["jobs"]
    assert quick["comm"] == []
    (job,) = quick["training"]
    assert (job.model, job.backend, job.world_size, job.config_label) == ("gpt", "nccl", 1, "plain")
    assert job in plan["jobs"]["training"]  # one of the plan's own jobs: the full run reuses it


def test_quick_on_two_gpus_still_judges_nccl_and_scaling():
    cfg, plan = _real_plan(2)
    quick = quick_jobs(plan, cfg, cores=16)["jobs"]
    assert quick["comm"] and {j.backend for j in quick["comm"]} == {"nccl"}
    assert {(j.model, j.world_size) for j in quick["training"]} == {("mlp", 1), ("mlp", 2)}


def test_the_prediction_rests_on_a_named_preset_and_never_on_a_gloo_check():
    preset = get_preset("nvlink4-ib400")
    gloo_fits = pd.DataFrame([{"backend": "gloo", "world_size": 2}])
    gloo_check = pd.DataFrame([{"backend": "gloo", "size_bytes": 2**24, "rel_err_pct": 30.9, "fit_world_size": 2,
                                "check_world_size": 4}])
    training = pd.DataFrame([{"backend": "nccl", "model": "gpt"}])
    text = predict_section.rests_on(predict_section._of_backend(gloo_fits, "nccl"),
                                    predict_section._of_backend(gloo_check, "nccl"), None, training, preset)
    assert text.startswith("These predictions rest on the preset nvlink4-ib400 (8 GPUs per node") and "GB/s" in text
    assert "for every link, since no collective between GPUs was measured on this node" in text
    assert "30.9" not in text and "collectives not checked" in text
    nccl_fits = pd.DataFrame([{"backend": "nccl", "world_size": 2}, {"backend": "nccl", "world_size": 4}])
    check = pd.DataFrame([{"backend": "nccl", "size_bytes": 2**24, "rel_err_pct": 8.0, "fit_world_size": 2,
                           "check_world_size": 4}])
    text = predict_section.rests_on(nccl_fits, check, None, None, None)
    assert text.startswith("These predictions rest on the NCCL collectives measured on this node at 2, 4 ranks")
    assert "median |error| 8.0% at >= 1 MiB" in text


def test_lora_on_one_gpu_is_not_judged_against_full_training(tmp_path):
    lora = _lm_row(1, mfu=0.359, model="lora")
    lora.update(params_trainable=6_291_456)
    inputs = _inputs(tmp_path, 1, _gloo_comm(), add_scaling(pd.DataFrame([_lm_row(1), lora])))
    rows = [r for r in verdict_rows(SECTIONS, inputs) if r["area"] == "training"]
    by = {r["headline"].split(" ")[0]: r for r in rows}
    assert by["gpt"]["verdict"] == "healthy" and by["lora"]["verdict"] == "measured"
    assert "LoRA" in by["lora"]["reason"] and rows[0]["headline"].startswith("gpt")


def test_one_gpu_with_a_one_rank_nccl_job_still_has_no_collective_headline(tmp_path):
    # 1x H200, comm at world_sizes [1] (2026-11-29): "NCCL all_reduce 1 GiB: 0 GB/s busbw at 1 ranks"
    inputs = _inputs(tmp_path, 1, _nccl_comm((1,)), add_scaling(pd.DataFrame([_lm_row(1)])))
    comm = [r for r in verdict_rows(SECTIONS, inputs) if r["area"] == "communication"]
    assert [r["headline"] for r in comm] == [ONE_GPU_TEXT]


def test_one_gpu_names_the_compiled_twin_beside_the_eager_run(tmp_path):
    compiled = _lm_row(1, mfu=0.501)
    compiled.update(config="plain+compile", compile=True, tokens_per_s_median=58_507.0, compile_time_s=33.1)
    inputs = _inputs(tmp_path, 1, _gloo_comm(), add_scaling(pd.DataFrame([_lm_row(1), compiled])))
    first = verdict_rows(SECTIONS, inputs)[0]
    assert first["headline"].startswith("gpt (1.32B parameters, DDP) on 1 GPU: ")
    assert "46.0% MFU" in first["headline"]
    assert "; compiled: 58,507 tokens/s, 50.1% MFU (compile 33 s, not in tokens/s)" in first["headline"]


def test_no_peak_busbw_finding_at_one_rank():
    # 1x H200 with comm at world size 1: "Peak busbw at the largest size (1 GiB): all_reduce 0.0 GB/s ..."
    from distbench.comm.analysis.findings import compute_findings

    assert not [f for f in compute_findings(_nccl_comm((1,))) if f.startswith("Peak busbw")]
    assert [f for f in compute_findings(_nccl_comm((2,))) if f.startswith("Peak busbw")]


def test_the_language_models_table_says_eager_or_compiled_and_counts_parameters_with_separators():
    """The 1x H200 report's table read 'compile: False' and 'trainable params: 1313280000'."""
    from distbench.training.analysis.section import _lm_table

    compiled = _lm_row(1, mfu=0.501)
    compiled.update(config="plain+compile", compile=True, tokens_per_s_median=58_507.0, compile_time_s=33.1)
    t = _lm_table(add_scaling(pd.DataFrame([_lm_row(1), compiled])))
    col = {h: i for i, h in enumerate(t["headers"])}
    assert "compile" not in col and [r[col["mode"]] for r in t["rows"]] == ["eager", "compiled"]
    assert {r[col["trainable params"]] for r in t["rows"]} == {f"{GPT_1_3B:,}"}
