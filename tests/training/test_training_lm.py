"""The language-model workloads (issue 10): the GPT decoder and LoRA adapters, the FLOPs definition
against a FLOP counter, the peak table behind MFU, and real torchrun jobs (Gloo, 1 and 2 ranks) for
gpt and lora under DDP and FSDP2."""

import math
import re

import pandas as pd
import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from distbench.training.analysis.mfu import mfu, peak_for
from distbench.workloads import gpt as G
from distbench.workloads.mlp import grad_param_bytes
from tests.training.test_training_harness import read, train

CFG = G.gpt_config("tiny", vocab_size=512, seq_len=64)
LM = ["--gpt-size", "tiny", "--seq-len", "32", "--vocab-size", "256", "--batch-size", "4", "--optimizer", "adamw",
      "--warmup-steps", "2", "--steps", "3", "--allreduce-trials", "2", "--lora-rank", "4"]


def counted_flops_per_token(model, cfg) -> float:
    """Forward + backward FLOPs of one batch by torch's FLOP counter, per token (the math attention
    path, whose matmuls the counter sees; the fused CPU kernel is not counted)."""
    x, y = G.make_tokens(3, cfg, 0, "cpu")
    counter = FlopCounterMode(display=False)
    with counter, sdpa_kernel(SDPBackend.MATH):
        G.lm_loss(model(x), y).backward()
    return counter.get_total_flops() / x.numel()


def layernorm_params(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if ".ln_" in n or n.startswith("ln_"))


def test_flops_per_token_matches_a_hand_count_and_the_flop_counter():
    torch.manual_seed(0)
    model = G.make_gpt(CFG)
    counts = G.param_counts(model)
    L, d, V, T, H = CFG.n_layers, CFG.dim, CFG.vocab_size, CFG.seq_len, CFG.n_heads
    # by hand: 12 d^2 of projection weights per block + the tied V x d output projection + 2 d x 2
    # LayerNorm parameters per block + the final LayerNorm's 2 d
    assert counts["non_embedding"] == L * 12 * d * d + V * d + L * 4 * d + 2 * d
    assert counts["total"] == counts["non_embedding"] + T * d
    formula = G.flops_per_token(CFG, counts["non_embedding"])
    assert formula == 6 * counts["non_embedding"] + 12 * L * H * (d // H) * T
    # The counter sees matmuls only: the formula's 6 N also counts the LayerNorm weights.
    assert counted_flops_per_token(model, CFG) == formula - 6 * layernorm_params(model)


def test_lora_flops_skip_the_frozen_weights_gradients():
    torch.manual_seed(0)
    model = G.make_gpt(CFG)
    G.apply_lora(model, rank=4, alpha=8)
    counts = G.param_counts(model)
    formula = G.flops_per_token(CFG, counts["non_embedding"], counts["trainable"])
    d, r = CFG.dim, 4
    # Beyond LayerNorm (frozen: 4 per weight in the formula), the counter also skips the input
    # gradient of the first block's qkv projection and of its adapter: their input comes from the
    # frozen embeddings, which need no gradient.
    skipped = 4 * layernorm_params(model) + 2 * (3 * d * d) + 2 * (r * d)
    assert counted_flops_per_token(model, CFG) == formula - skipped


def test_lora_trains_only_the_adapters_and_syncs_their_bytes():
    torch.manual_seed(0)
    full = G.make_gpt(CFG)
    full_trainable = G.trainable_params(full)
    torch.manual_seed(0)
    lora = G.make_gpt(CFG)
    trainable = G.apply_lora(lora, rank=8, alpha=16)
    assert trainable == G.lora_trainable_count(CFG, 8) == CFG.n_layers * 8 * 16 * CFG.dim  # r x (in + out): qkv 4d, out 2d, mlp 5d + 5d
    assert all(not p.requires_grad for n, p in lora.named_parameters() if "lora_" not in n)
    # DDP syncs the trainable gradients only: bytes drop by the ratio of trainable parameters
    assert sum(grad_param_bytes(lora)) == 4 * trainable
    assert sum(grad_param_bytes(full)) == 4 * full_trainable
    # B starts at zero: the adapted model computes what the base model does
    torch.manual_seed(0)
    base = G.make_gpt(CFG)
    x, _ = G.make_tokens(2, CFG, 0, "cpu")
    assert torch.equal(base(x), lora(x))


def test_gpt_config_names_its_problems():
    assert G.gpt_config("1.3b", 50304, 1024) == G.GPTConfig(24, 32, 2048, 50304, 1024)
    assert G.gpt_config("125m", 100, 8, layers=2).n_layers == 2
    with pytest.raises(ValueError, match="allowed tiny, 125m"):
        G.gpt_config("7b", 100, 8)
    with pytest.raises(ValueError, match="not divisible"):
        G.gpt_config(None, 100, 8, layers=2, heads=3, dim=64)
    with pytest.raises(ValueError, match="give a size or all"):
        G.gpt_config(None, 100, 8, layers=2)


def test_peak_table_matches_reported_names_and_never_guesses():
    assert peak_for("NVIDIA H100 80GB HBM3", "bfloat16").tflops == 989.4
    assert peak_for("NVIDIA H100 80GB HBM3", "bfloat16").device == "H100 SXM"
    assert peak_for("NVIDIA H100 PCIe", "bfloat16").tflops == 756.5
    assert peak_for("NVIDIA H100 NVL", "bfloat16").device == "H100 NVL"
    assert peak_for("NVIDIA H200", "bfloat16").device == "H200 SXM"
    assert peak_for("NVIDIA GH200 480GB", "bfloat16").device == "GH200"
    assert peak_for("NVIDIA A100-SXM4-80GB", "bfloat16").tflops == 312.0
    assert peak_for("NVIDIA A10", "bfloat16").tflops == 125.0
    assert peak_for("NVIDIA L40S", "bfloat16").tflops == 362.05
    assert peak_for("NVIDIA H100 80GB HBM3", "float32").tflops == 67.0
    for name in ("cpu", "NVIDIA GeForce RTX 9090", ""):
        match = peak_for(name, "bfloat16")
        assert match.tflops is None and "MFU left empty" in match.note
    # MFU: model FLOPs x samples/s per device / peak
    tflops, value, match = mfu(1e12, 500.0, "NVIDIA H100 80GB HBM3", "bfloat16")
    assert tflops == pytest.approx(500.0) and value == pytest.approx(500 / 989.4) and match.device == "H100 SXM"
    _, value, match = mfu(1e12, 500.0, "cpu", "float32")
    assert math.isnan(value) and match.note


@pytest.mark.heavy
@pytest.mark.parametrize("model,strategy,nproc", [
    ("gpt", "ddp", 2), ("gpt", "fsdp", 2), ("lora", "ddp", 2), ("lora", "fsdp", 2), ("gpt", "fsdp", 1)])
def test_language_model_jobs_under_torchrun(tmp_path, model, strategy, nproc):
    out = tmp_path / "training.csv"
    r = train([*LM, "--model", model, "--strategy", strategy, "--out", str(out),
               "--placement-out", str(tmp_path / "placement.json")], nproc=nproc, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["status"] == "ok").all(), df[["phase", "status", "message"]].drop_duplicates().to_string()
    assert set(df["model"]) == {model} and set(df["strategy"]) == {strategy}
    cfg = G.gpt_config("tiny", vocab_size=256, seq_len=32)
    assert (df["num_layers"] == cfg.n_layers).all() and (df["n_heads"] == cfg.n_heads).all()
    assert (df["hidden_dim"] == cfg.dim).all() and (df["seq_len"] == 32).all()
    torch.manual_seed(0)
    m = G.make_gpt(cfg)
    if model == "lora":
        G.apply_lora(m, 4, 32.0)
    counts = G.param_counts(m)
    assert (df["params_total"] == counts["total"]).all() and (df["params_trainable"] == counts["trainable"]).all()
    assert (df["grad_bytes"] == 4 * counts["trainable"]).all()
    expected_flops = 32 * G.flops_per_token(cfg, counts["non_embedding"], counts["trainable"] if model == "lora" else None)
    assert df["flops_per_sample"].iloc[0] == pytest.approx(expected_flops)
    steps = df[df["phase"] != "comm_alone"]
    assert list(steps["tokens_per_s"]) == pytest.approx(list(steps["samples_per_s"] * 32), rel=1e-5)  # CSV keeps 6 digits
    assert list(steps["tokens_per_s_per_device"]) == pytest.approx(list(steps["tokens_per_s"] / nproc), rel=1e-5)
    assert set(df["attention_kernel"]) == {"flash_for_cpu"}  # what SDPA picks on CPU today
    assert set(df["device_name"]) == {"cpu"}
    step, comm = df[df["phase"] == "step"], df[df["phase"] == "comm_alone"]
    # DDP: replicas compared bitwise; FSDP keeps one sharded copy (not checked); the collectives
    # timed alone were checked exactly in both
    assert step["correct"].isna().all() if strategy == "fsdp" else step["correct"].fillna(False).all()
    assert comm["correct"].fillna(False).all()
    if strategy == "fsdp":  # one group per block with trainable parameters, plus the root for gpt
        assert (df["n_buckets"] == cfg.n_layers + (model == "gpt")).all()


@pytest.mark.heavy
def test_fsdp_that_cannot_run_is_skipped_with_the_reason(tmp_path):
    from tests.conftest import REPO

    out = tmp_path / "training.csv"
    r = train([*LM, "--model", "gpt", "--strategy", "fsdp", "--out", str(out)], nproc=2,
              script=REPO / "tests/helpers/training_faults.py", env={"FAULT": "no_fsdp"}, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["status"] == "skipped").all()
    assert df["message"].str.contains("FSDP2 \\(fully_shard\\) cannot run with backend gloo on cpu here: "
                                      "NotImplementedError: fully_shard: this device is not supported").all()


@pytest.mark.heavy
def test_the_job_prints_a_line_per_step_window(tmp_path):
    r = train([*LM, "--model", "gpt", "--steps", "5", "--log-every", "2", "--out", str(tmp_path / "t.csv")], nproc=1)
    assert r.returncode == 0, r.stderr[-3000:]
    for phase in ("step", "compute_only"):
        windows = re.findall(rf"distbench: {phase} phase, steps (\d+)-(\d+): step [\d.]+ (?:µs|ms|s), [\d.]+ samples/s, "
                             rf"[\d.]+ tokens/s", r.stderr)
        assert windows == [("0", "1"), ("2", "3"), ("4", "4")], r.stderr[-2000:]


def test_mfu_in_the_summary_from_the_rows(tmp_path):
    from distbench.training.analysis.summary import summarize_training

    r = train([*LM, "--model", "gpt", "--out", str(tmp_path / "t.csv"), "--placement-out", str(tmp_path / "p.json")],
              nproc=1, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(tmp_path / "t.csv")
    row = summarize_training(df).iloc[0]
    assert row["tflops_per_device"] == pytest.approx(row["flops_per_sample"] * row["samples_per_s_per_device_median"] / 1e12)
    assert math.isnan(row["mfu"]) and "no peak FLOP/s table for device 'cpu'" in row["mfu_note"]
    # the same rows as if an H100 SXM had produced them: MFU against its bf16 peak, row recorded
    gpu = df.assign(device_name="NVIDIA H100 80GB HBM3", dtype="bfloat16")
    row = summarize_training(gpu).iloc[0]
    assert row["mfu"] == pytest.approx(row["tflops_per_device"] / 989.4) and row["peak_device"] == "H100 SXM"
    assert pd.isna(row["mfu_note"]) or row["mfu_note"] == ""
    # findings name the workload, its throughput and, when used, torch.compile
    from distbench.training.analysis.findings import training_findings

    lines = training_findings(summarize_training(gpu.assign(compile=True)))
    assert lines[0].startswith("gpt 2L/2H/64d seq 32, 1 rank (plain DDP, torch.compile, weak scaling): ")
    assert "TFLOP/s per rank, MFU " in lines[0] and "of the H100 SXM bfloat16 peak (989 TFLOP/s)" in lines[0]
    # figures: the language models get their tokens/s figure, not the MLP's
    from distbench.training.analysis.plots import plot_training

    names = {p.stem for p in plot_training(summarize_training(df), tmp_path / "fig")}
    assert "training_lm_throughput" in names and "training_throughput" not in names
