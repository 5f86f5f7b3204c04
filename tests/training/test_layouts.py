"""Parallel layouts of the language models (issue 49, "which layout should I train with?"):
training.lm.strategies' hsdp and fsdp_tp beside ddp and fsdp, refused where they cannot run, the
Verdict row that names the fastest, its figure, and every layout's real 2-rank Gloo run (one launch)."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from distbench.core.figures import write_figures
from distbench.launch.batch import Config, write_batch_file
from distbench.pipeline.config import ConfigError, check_config
from distbench.training.analysis.findings import layout_rows, layout_verdict
from distbench.training.analysis.plots import LAYOUT_FIGURE, fig_layouts, plot_training
from distbench.training.analysis.section import layout_headlines, training_headlines
from distbench.training.job import training_args
from distbench.training.plan import rule_params, training_jobs
from distbench.workloads.layouts import dp_batch, layout_problem
from tests.training.test_training_harness import read

LAYOUTS = ["ddp", "fsdp", "hsdp", "fsdp_tp"]


def _cfg(world_sizes, **lm):
    return check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": world_sizes,
                         "training": {"models": ["gpt", "lora"], "lm": {"strategies": LAYOUTS, **lm}}})


# ---------------------------------------------------------------- refused before any job
def test_a_layout_that_fits_no_listed_world_size_is_refused_naming_key_element_and_allowed_values():
    with pytest.raises(ConfigError) as e:
        check_config({"world_sizes": [2, 6], "training": {"lm": {"strategies": ["ddp", "hsdp"], "shard_size": 4}}})
    text = str(e.value)
    assert "config key training.lm.strategies[1] ('hsdp') runs at none of the world sizes [2, 6]" in text
    assert "training.lm.shard_size 4 does not divide the world size 2" in text and "allowed [1, 2]" in text
    assert "allowed [1, 2, 3, 6]" in text
    with pytest.raises(ConfigError, match=r"training.lm.strategies\[0\] \('fsdp_tp'\).*tp_size 2 does not divide the "
                                          r"world size 3"):
        check_config({"world_sizes": [3], "training": {"lm": {"strategies": ["fsdp_tp"]}}})
    with pytest.raises(ConfigError, match="tp_size"):  # the schema: 2 or 4
        check_config({"training": {"lm": {"tp_size": 3}}})
    # where some size fits (or the sizes are auto), the config stands and the plan skips the others
    check_config({"world_sizes": [2, 3], "training": {"lm": {"strategies": ["fsdp_tp"]}}})


def test_the_plan_skips_each_layout_where_it_cannot_run_with_the_reason():
    jobs, skipped = training_jobs(_cfg([1, 2, 3], shard_size=2), 0)
    planned = {(j.model, j.world_size, j.config_label) for j in jobs}
    assert ("gpt", 2, "hsdp") in planned and ("gpt", 2, "fsdp_tp") in planned and ("lora", 2, "hsdp") in planned
    assert not {(m, ws, s) for m, ws, s in planned if s in ("hsdp", "fsdp_tp") and ws in (1, 3)}
    assert ("lora", 2, "fsdp_tp") not in planned
    why = {s["what"]: s["why"] for s in skipped}
    assert why["hsdp (gpt, lora) at world size 3"] == (
        "training.lm.strategies element 'hsdp': training.lm.shard_size 2 does not divide the world size 3 (hsdp "
        "shards within groups of shard_size ranks): allowed [1, 3]")
    assert "tp_size 2 does not divide the world size 3" in why["fsdp_tp (gpt) at world size 3"]
    assert "lora wraps each in an adapter module" in why["fsdp_tp (lora) at world size 2, 3"]
    assert "needs at least 2 ranks" in why["hsdp (gpt, lora) at world size 1"]
    # the heads: tiny has 2, so TP 4 cannot split them even where it divides the world size
    assert "does not divide the model's 2 attention heads" in layout_problem("fsdp_tp", 4, tp_size=4, heads=2)
    # only the 2D layouts' params carry their group size: ddp's and fsdp's stay as they were
    cfg = _cfg([2], shard_size=1)
    params = {j.config_label: rule_params(cfg, {}, j) for j in training_jobs(cfg, 0)[0] if j.model == "gpt"}
    assert params["hsdp"]["shard_size"] == 1 and params["fsdp_tp"]["tp_size"] == 2
    assert "shard_size" not in params["fsdp"] and "tp_size" not in params["plain"]


def test_every_layout_keeps_the_global_batch():
    # 4 sequences per rank at 4 ranks: 16 per step; under TP 2 two data-parallel groups of 8
    assert dp_batch("fsdp_tp", 4, 2) * (4 // 2) == dp_batch("hsdp", 4, None) * 4 == dp_batch("ddp", 4, None) * 4 == 16


# ---------------------------------------------------------------- the Verdict row and its figure
def _summary():
    base = {"backend": "nccl", "model": "gpt", "world_size": 2, "num_layers": 24, "n_heads": 32, "hidden_dim": 2048,
            "seq_len": 1024, "global_batch_size": 16, "device_name": "NVIDIA H200", "compile": False,
            "shard_size": None, "tp_size": None, "status": "ok"}
    rows = [
        {**base, "world_size": 1, "strategy": "ddp", "config": "plain", "tokens_per_s_median": 5000.0,
         "peak_mem_allocated_bytes": 30 * 2**30},
        {**base, "strategy": "ddp", "config": "plain", "tokens_per_s_median": 8750.0, "peak_mem_allocated_bytes": 30 * 2**30},
        {**base, "strategy": "fsdp", "config": "fsdp", "tokens_per_s_median": 9800.0, "peak_mem_allocated_bytes": 18 * 2**30},
        {**base, "strategy": "fsdp_tp", "config": "fsdp_tp", "tp_size": 2, "tokens_per_s_median": 8036.0,
         "peak_mem_allocated_bytes": 14 * 2**30},
        {**base, "strategy": "hsdp", "config": "hsdp", "shard_size": 2, "tokens_per_s_median": None,
         "peak_mem_allocated_bytes": None, "status": "oom", "message": "CUDA out of memory"},
    ]
    return pd.DataFrame(rows)


def test_the_verdict_names_the_fastest_layout_the_others_and_an_out_of_memory_one():
    rows = layout_rows(_summary())
    assert list(rows) == ["gpt"] and set(rows["gpt"]["world_size"]) == {2}
    text, verdict, reason = layout_verdict(rows["gpt"])
    assert text == ("gpt 1.3b on 2x H200: FSDP2 full shard, 9,800 tokens/s, 12% faster than DDP; 2D (TP 2) 18% slower; "
                    "HSDP (shard 2) out of memory")
    assert verdict == "measured"
    assert reason.startswith("the fastest layout by median tokens/s, every layout at the same global batch (16 "
                             "sequences of 1024 tokens per step)")
    assert "peak memory per GPU FSDP2 full shard 18 GiB, DDP 30 GiB, 2D (TP 2) 14 GiB" in reason
    assert [h.headline for h in layout_headlines(_summary())] == [text]
    # DDP the fastest: the others are slower than it; nothing ran: failing, every layout named
    s = _summary()
    s.loc[s["strategy"] == "ddp", "tokens_per_s_median"] = 10000.0
    assert layout_verdict(layout_rows(s)["gpt"])[0] == (
        "gpt 1.3b on 2x H200: DDP, 10,000 tokens/s; FSDP2 full shard 2% slower; 2D (TP 2) 20% slower; "
        "HSDP (shard 2) out of memory")
    s["status"] = "oom"
    text, verdict, _ = layout_verdict(layout_rows(s)["gpt"])
    assert verdict == "failing" and text.count("out of memory") == 4


def test_the_layout_figure_is_drawn_from_a_synthetic_table(tmp_path):
    fig = fig_layouts(_summary())
    assert fig is not None
    tokens, memory = fig.axes[0], fig.axes[1]
    assert [t.get_text() for t in tokens.texts] == ["out of memory"]  # hsdp: named, not dropped
    assert "Peak memory by layout" in memory.get_title()
    paths = write_figures({LAYOUT_FIGURE: fig_layouts}, _summary(), tmp_path)
    assert {p.name for p in paths} == {f"{LAYOUT_FIGURE}.png", f"{LAYOUT_FIGURE}.svg"}
    assert fig_layouts(_summary().query("strategy == 'ddp'")) is None  # one layout: nothing to compare


# ---------------------------------------------------------------- every layout, really, on Gloo
@pytest.mark.heavy
def test_every_layout_runs_at_two_ranks_on_gloo_in_one_launch(tmp_path):
    """The plan's jobs at world size 2, each with its own argv (distbench.training.job.training_args),
    run one after another in one torchrun launch (distbench.launch.batch's --batch file)."""
    cfg = check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": [2],
                        "training": {"models": ["gpt"], "warmup_steps": 1, "steps": 2, "allreduce_trials": 2,
                                     "lm": {"strategies": LAYOUTS, "world_sizes": [2], "shard_size": 1,
                                            "cpu": {"seq_len": 32, "vocab_size": 256, "batch_size": 2}}}})
    jobs = [j for j in training_jobs(cfg, 0)[0] if j.world_size == 2]
    assert sorted(j.strategy for j in jobs) == sorted(LAYOUTS)
    configs, outs = [], {}
    for j in jobs:
        out = tmp_path / j.config_label / "training.csv"
        out.parent.mkdir()
        argv = training_args(j, rule_params(cfg, {}, j), out, out.with_name("placement.json"))
        configs.append(Config(argv, str(out.with_name("done.json")), j.config_label, j.config_label, 300))
        outs[j.strategy] = out
    write_batch_file(tmp_path / "batch.json", configs)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m",
           "distbench.training", "--batch", str(tmp_path / "batch.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr[-4000:]
    frames = {s: read(p) for s, p in outs.items()}
    for strategy, df in frames.items():
        step = df[df["phase"] == "step"]
        assert (step["status"] == "ok").all(), (strategy, step["message"].iloc[0])
        assert set(df["strategy"]) == {strategy}
        assert (df["global_batch_size"] == 4).all()  # 2 sequences per rank x 2 ranks, every layout
        assert json.loads(out.with_name("done.json").read_text())["name"]
    assert (frames["hsdp"]["shard_size"] == 1).all() and frames["hsdp"]["tp_size"].isna().all()
    assert (frames["fsdp_tp"]["tp_size"] == 2).all() and (frames["fsdp_tp"]["batch_size"] == 4).all()  # one TP group
    assert frames["hsdp"].query("phase == 'compute_only'")["status"].eq("ok").all()
    # what a layout cannot have is said, not faked: TP communicates inside every step; comm_alone replays 1D only
    tp = frames["fsdp_tp"].set_index("phase")
    assert tp.loc["compute_only", "status"].eq("skipped").all()
    assert tp.loc["compute_only", "message"].str.contains("tensor parallel's all-reduces").all()
    assert frames["hsdp"].query("phase == 'comm_alone'")["message"].str.contains("not replayed alone").all()
    # the summary and the Verdict row, from the real rows
    from distbench.training.analysis.summary import add_scaling, summarize_training

    summary = summarize_training(pd.concat(frames.values(), ignore_index=True))
    assert set(summary["status"]) == {"ok"}  # a phase the layout cannot have leaves the job ok
    text, verdict, _ = layout_verdict(layout_rows(summary)["gpt"])
    assert training_headlines(add_scaling(summary))[0].headline == text  # the answer first
    assert text.startswith("gpt tiny on 2 ranks (Gloo, CPU): ") and verdict == "measured"
    for name in ("DDP", "FSDP2 full shard", "HSDP (shard 1)", "2D (TP 2)"):
        assert name in text
    paths = plot_training(summary, tmp_path / "figures")  # the report's figures: the layouts' among them
    assert tmp_path / "figures" / f"{LAYOUT_FIGURE}.png" in paths
