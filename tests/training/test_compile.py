"""Layouts as trainers run them (issue 54, part 2): training.lm.compile as a dimension of the plan, the
compile time beside each compiled job and never in its tokens/s, a layout whose compile fails named
with torch's reason, the layouts Verdict in the compiled mode with the eager figures beside it, and the
step split of a compiled step read from its timeline. Two real launches, both marked heavy: one compiled
tiny GPT (1 rank, Gloo) and one whose inductor compile really fails (CXX=/bin/false, a few seconds)."""

import json
import math
import time
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from distbench.pipeline.config import check_config
from distbench.pipeline.estimate import DEFAULTS, JobKey, default_seconds, job_weight
from distbench.training.analysis.layout_verdict import layout_rows, layout_verdict
from distbench.training.analysis.plots import fig_layouts
from distbench.training.analysis.summary import add_scaling, summarize_training
from distbench.training.contract import COMPILE_FAILED, TRAINING, read_training_csv
from distbench.training.harness import parse_args
from distbench.training.hooks import COMPILE_S
from distbench.training.job import training_values
from distbench.training.plan import rule_params, training_jobs
from distbench.training.trainer import TrainingHarness, compile_seconds
from tests.training.test_training_harness import read, train
from tests.workflow.test_estimate_alone import _dag_jobs

LAYOUTS = ["ddp", "fsdp", "fsdp_tp"]


def _cfg(compile_value, backend="gloo", gpus=0):
    return check_config({"gpus": gpus, "backends": [backend], "world_sizes": [2], "memory": {"enabled": False},
                         "training": {"models": ["gpt"], "lm": {"strategies": LAYOUTS, "world_sizes": [2],
                                                                "compile": compile_value}}})


# ---------------------------------------------------------------- the plan's dimension
def test_compile_is_a_plan_dimension_each_job_named_and_typed():
    jobs, _ = training_jobs(_cfg([False, True]), 0)
    by = {(j.world_size, j.strategy, j.compile): j for j in jobs}
    # every layout at 2 ranks, and the 1-rank baselines, once eager and once compiled
    for ws, strategy in [(1, "ddp"), (1, "fsdp"), (2, "ddp"), (2, "fsdp"), (2, "fsdp_tp")]:
        assert (ws, strategy, False) in by and (ws, strategy, True) in by
    labels = {(j.world_size, j.config_label) for j in jobs}
    assert len(labels) == len(jobs)  # distinct names: distinct paths, job.json and cached results
    assert by[(2, "ddp", False)].config_label == "plain" and by[(2, "ddp", True)].config_label == "plain+compile"
    assert by[(2, "fsdp_tp", True)].wildcards["config"] == "fsdp_tp+compile"
    cfg = _cfg([False, True])
    for j in jobs:  # job.json's value is a JSON boolean, the job's own
        value = rule_params(cfg, {}, j)["compile"]
        assert value is j.compile and type(value) is bool
    # a plain boolean is that one value; the default is today's behaviour: eager, labels unchanged
    assert {j.config_label for j in training_jobs(_cfg(True), 0)[0]} == {"plain+compile", "fsdp+compile",
                                                                          "fsdp_tp+compile"}
    default = check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": [2],
                            "training": {"models": ["gpt"], "lm": {"strategies": LAYOUTS, "world_sizes": [2]}}})
    assert default["training"]["lm"]["compile"] is False
    assert {j.config_label for j in training_jobs(default, 0)[0]} == {"plain", "fsdp", "fsdp_tp"}


def test_a_string_false_in_a_jobs_job_json_is_refused_not_read_as_true(tmp_path, capsys):
    cfg = _cfg([False, True])
    job = next(j for j in training_jobs(cfg, 0)[0] if j.config_label == "fsdp" and j.world_size == 2)
    params = rule_params(cfg, {}, job)
    assert ("--compile", False) in training_values(job, params)
    with pytest.raises(ValueError, match=r"job.compile: 'false' is not of type 'boolean'"):
        training_values(job, {**params, "compile": "false"})  # bool("false") would be True: a compiled job
    # the ranks' reading of job.json: a usage error naming the file and the key
    path = tmp_path / "job.json"
    path.write_text(json.dumps({"rule": "training_job", "wildcards": job.wildcards,
                                "params": {"job": {**params, "compile": "false"}, "launch": None},
                                "output": {"csv": str(tmp_path / "training.csv")}, "log": str(tmp_path / "log")}))
    with pytest.raises(SystemExit) as e:
        parse_args(["--params", str(path), "--out", str(tmp_path / "training.csv")])
    assert e.value.code == 2
    assert f"{path}: job.compile: 'false' is not of type 'boolean'" in capsys.readouterr().err


def test_the_estimate_adds_the_stated_compile_time_per_compiled_job():
    """gpt 1.3b on GPUs: a compiled job's default is the eager one's plus COMPILE_S (40 s), through the
    manifest's estimate_weight hook as Snakemake's view of the jobs gives it."""
    jobs = _dag_jobs(_cfg([False, True], "nccl", 2))
    est = {(j.wildcards["config"], int(j.wildcards["world_size"])):
           default_seconds(JobKey.of("training", j.wildcards), 2, job_weight(j)) for j in jobs}
    default = DEFAULTS[("gpu", "training", "nccl")].seconds
    assert est[("plain", 2)] == pytest.approx(default)
    for label in ("plain", "fsdp", "fsdp_tp"):
        assert est[(f"{label}+compile", 2)] == pytest.approx(est[(label, 2)] + COMPILE_S["nccl"])
    # on CPU too (the 2-core measurement: 36 s of a 54 s compiled job)
    cpu = {j.wildcards["config"]: default_seconds(JobKey.of("training", j.wildcards), 0, job_weight(j))
           for j in _dag_jobs(_cfg([False, True])) if int(j.wildcards["world_size"]) == 2}
    assert cpu["fsdp+compile"] == pytest.approx(cpu["fsdp"] + COMPILE_S["gloo"])


# ---------------------------------------------------------------- compile time: beside the steps, never in them
class _OneRank:
    """What TrainingHarness.timed and warm_up use of a rank, on this process alone (no process group)."""

    timed = TrainingHarness.timed
    warm_up = TrainingHarness.warm_up

    def __init__(self):
        self.torch, self.cuda = torch, False
        self.args = SimpleNamespace(compile=True)
        self.beacon = SimpleNamespace(done=lambda: None)
        self.energy = SimpleNamespace(read_mj=lambda: None)
        self.votes = []

    def align(self):
        pass

    def sync(self):
        pass

    def agree(self, ok: bool) -> bool:
        self.votes.append(ok)
        return ok


def test_warm_up_runs_until_nothing_compiles_and_the_compile_time_stays_out_of_the_timed_steps():
    """A real torch.compile (dynamo, backend eager: no inductor, a tenth of a second) that compiles at the
    first call and again at the second (a new shape): warm-up asked for 1 step runs 3, the timed steps
    compile nothing, and compile_time_s is the warm-up beyond three steady steps."""
    f = torch.compile(lambda x: (x.sin() + 1).sum(), backend="eager")
    shapes = iter([(3,), (4, 4)])

    def step():
        f(torch.ones(*next(shapes, (5, 5, 5))))  # 2 new shapes, then the same one (dynamic after the second)
    rank = _OneRank()
    times, _ = rank.timed(step, 1, 4)
    assert rank.warmup_calls >= 3 and rank.votes[-1] is True and False in rank.votes
    assert rank.timed_note == "" and len(times) == 4
    # the arithmetic: warm-up 5.0 + 0.1 s against a steady 100 ms step
    assert compile_seconds([5.0, 0.1], [100.0, 90.0, 120.0]) == pytest.approx(4.9)
    assert compile_seconds([0.05], [100.0]) == 0.0 and math.isnan(compile_seconds([1.0], []))
    # a compilation inside the timed steps is said, not hidden: a function first called after warm-up
    g = torch.compile(lambda x: x.cos().sum(), backend="eager")
    calls = []

    def late():
        calls.append(1)
        if len(calls) > 1:  # warm-up's one call compiles nothing; the first timed one compiles g
            g(torch.ones(3))
    rank = _OneRank()
    rank.timed(late, 1, 3)
    assert rank.warmup_calls == 1 and rank.timed_note.startswith("torch compiled during the timed steps")


def _steps(phase, ms, compile_s, tokens=64):
    return [{"phase": phase, "step": i, "step_time_ms": t, "tokens_per_s": tokens * 4 / (t / 1e3),
             "compile_time_s": compile_s, "status": "ok"} for i, t in enumerate(ms)]


def test_the_summary_sums_each_phases_compile_time_and_takes_tokens_from_the_timed_steps_alone():
    base = {"backend": "gloo", "world_size": 1, "model": "gpt", "strategy": "ddp", "config": "plain+compile",
            "compile": True, "global_batch_size": 4, "seq_len": 64}
    raw = pd.DataFrame([{**base, **r} for r in _steps("step", [100.0, 110.0, 90.0], 30.0)
                        + _steps("compute_only", [80.0, 80.0, 80.0], 0.5) + _steps("comm_alone", [1.0, 1.0], None)])
    for c in TRAINING.names:
        raw[c] = raw[c] if c in raw else None
    s = summarize_training(raw[list(TRAINING.names)]).iloc[0]
    assert s["compile_time_s"] == pytest.approx(30.5)
    assert s["tokens_per_s_median"] == pytest.approx(64 * 4 / 0.1)  # the timed median, 100 ms



def test_a_training_csv_from_before_reads_as_eager(tmp_path):
    from tests.training.test_scaling import job

    path = tmp_path / "training.csv"
    old = pd.DataFrame(job(ws=1, n=3)).drop(columns=["compile", "compile_time_s"], errors="ignore")
    old.to_csv(path, index=False)
    df = read_training_csv(path)
    assert (df["compile"] == False).all() and df["compile_time_s"].isna().all()  # noqa: E712
    assert not summarize_training(df)["compile"].any()


# ---------------------------------------------------------------- the layouts Verdict, eager and compiled
def _summary(compiled=True, hsdp_compile_failed=False):
    """gpt 1.3b on 2x H200, global batch 16 x 1024 (issue 54): eager DDP 100,688, FSDP2 99,276, FSDP2+TP2
    57,719 tokens/s; compiled 108,574, 111,430, 92,966."""
    base = {"backend": "nccl", "model": "gpt", "world_size": 2, "num_layers": 24, "n_heads": 32, "hidden_dim": 2048,
            "seq_len": 1024, "global_batch_size": 16, "device_name": "NVIDIA H200", "shard_size": None,
            "tp_size": None, "peak_mem_allocated_bytes": None, "status": "ok", "message": ""}
    figures = {("ddp", False): 100_688.0, ("fsdp", False): 99_276.0, ("fsdp_tp", False): 57_719.0,
               ("ddp", True): 108_574.0, ("fsdp", True): 111_430.0, ("fsdp_tp", True): 92_966.0}
    rows = []
    for (strategy, comp), tok in figures.items():
        if comp and not compiled:
            continue
        label = ("plain" if strategy == "ddp" else strategy) + ("+compile" if comp else "")
        rows.append({**base, "strategy": strategy, "config": label, "compile": comp, "tokens_per_s_median": tok,
                     "tp_size": 2 if strategy == "fsdp_tp" else None, "compile_time_s": 41.0 if comp else None})
    if hsdp_compile_failed:
        rows += [{**base, "strategy": "hsdp", "config": "hsdp", "shard_size": 2, "compile": False,
                  "tokens_per_s_median": 95_000.0},
                 {**base, "strategy": "hsdp", "config": "hsdp+compile", "shard_size": 2, "compile": True,
                  "tokens_per_s_median": None, "status": COMPILE_FAILED,
                  "message": "torch.compile failed: InductorError: LoweringException: a reason"}]
    return pd.DataFrame(rows)


def test_the_verdict_names_the_compiled_winner_with_the_eager_figures_and_the_ranking_change():
    rows = layout_rows(_summary())["gpt"]
    assert len(rows) == 6 and rows["compile"].sum() == 3
    text, verdict, reason = layout_verdict(rows)
    assert text == ("gpt 1.3b on 2x H200, compiled: FSDP2 full shard, 111,430 tokens/s, 3% faster than DDP "
                    "(eager: 1% slower); 2D (TP 2) 17% slower (eager: 42% slower); eager ranks DDP first "
                    "(100,688 tokens/s): compile changes the ranking")
    assert verdict == "measured"
    assert "compile time per job (its warm-up, never in tokens/s): FSDP2 full shard 41.0 s, DDP 41.0 s" in reason
    # eager only (a table from before training.lm.compile, without the column): the eager Verdict as it was
    eager = _summary(compiled=False).drop(columns=["compile", "compile_time_s"])
    text, _, _ = layout_verdict(layout_rows(eager)["gpt"])
    assert text == "gpt 1.3b on 2x H200: DDP, 100,688 tokens/s; FSDP2 full shard 1% slower; 2D (TP 2) 43% slower"
    # the same winner both ways: said so, with the eager figure
    s = _summary()
    s.loc[(s["strategy"] == "fsdp") & ~s["compile"], "tokens_per_s_median"] = 101_000.0
    assert "FSDP2 full shard first eager too (101,000 tokens/s)" in layout_verdict(layout_rows(s)["gpt"])[0]


def test_a_layout_whose_compile_failed_is_named_with_torchs_reason_and_its_eager_run_stands():
    text, verdict, _ = layout_verdict(layout_rows(_summary(hsdp_compile_failed=True))["gpt"])
    assert verdict == "measured"
    assert ("HSDP (shard 2) compile failed (InductorError: LoweringException: a reason); its eager run stands: "
            "95,000 tokens/s") in text
    # nothing compiled: the eager Verdict stands, the failures beside it
    s = _summary(hsdp_compile_failed=True)
    s.loc[s["compile"], ["status", "tokens_per_s_median", "message"]] = [COMPILE_FAILED, None, "torch.compile failed: X"]
    text, verdict, reason = layout_verdict(layout_rows(s)["gpt"])
    assert text.startswith("gpt 1.3b on 2x H200, eager: DDP, 100,688 tokens/s") and verdict == "measured"
    assert "; compiled: " in text and "FSDP2 full shard compile failed (X); its eager run stands: 99,276" in text
    assert reason.endswith("no layout ran compiled")


def test_the_layout_figure_sets_eager_and_compiled_side_by_side_and_efficiency_is_per_mode():
    fig = fig_layouts(_summary())
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["gpt (ws 2, eager)", "gpt (ws 2, compiled)"]
    # a compiled row's scaling efficiency is against the compiled 1-rank plain run
    one = _summary().iloc[[0, 3]].assign(world_size=1, samples_per_s_median=[50.0, 60.0])
    s = pd.concat([_summary().assign(samples_per_s_median=100.0, scaling="weak", batch_size=8, dtype="bfloat16",
                                     optimizer="adamw", hidden_dim=2048, vocab_size=50304, lora_rank=None),
                   one.assign(scaling="weak", batch_size=8, dtype="bfloat16", optimizer="adamw", vocab_size=50304,
                              lora_rank=None)], ignore_index=True)
    out = add_scaling(s)
    at2 = out[out["world_size"] == 2].set_index("config")["efficiency_vs_plain_1gpu"]
    assert at2["fsdp"] == pytest.approx(100 / (2 * 50)) and at2["fsdp+compile"] == pytest.approx(100 / (2 * 60))


# ---------------------------------------------------------------- the step split of a compiled step
def _compiled_gpu_trace(step_us=10_000.0, n=3):
    """One rank's trace of n compiled steps as torch.profiler writes them on a GPU: the step's CPU span
    holds Torch-Compiled Region spans, inductor's triton kernels launched through the driver
    (cuLaunchKernel, cat cuda_driver), an NCCL all-reduce whose last 1 ms runs alone after backward."""
    ev = []
    for i in range(n):
        t = i * step_us
        c = 100 * i
        ev += [{"ph": "X", "name": f"distbench_step_{i}", "cat": "user_annotation", "ts": t, "dur": 2000, "pid": 1, "tid": 1},
               {"ph": "X", "name": "Torch-Compiled Region: 0/0", "cat": "user_annotation", "ts": t + 10, "dur": 900,
                "pid": 1, "tid": 1},
               {"ph": "X", "name": "Torch-Compiled Region: 0/0", "cat": "gpu_user_annotation", "ts": t + 200,
                "dur": 5000, "pid": 0, "tid": 7}]
        for k, (name, start, dur, stream) in enumerate([
                ("triton_poi_fused_add_gelu_0", 200, 3000, 7), ("triton_red_fused__log_softmax_1", 3200, 2000, 7),
                ("triton_tem_fused_mm_2", 5200, 3800, 7), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7000, 3000, 20)]):
            ev += [{"ph": "X", "name": "cuLaunchKernel", "cat": "cuda_driver", "ts": t + 20 + k, "dur": 5, "pid": 1,
                    "tid": 1, "args": {"correlation": c + k}},
                   {"ph": "X", "name": name, "cat": "kernel", "ts": t + start, "dur": dur, "pid": 0, "tid": stream,
                    "args": {"correlation": c + k}}]
    return ev


def test_a_compiled_steps_timeline_splits_as_an_eager_ones():
    """Inductor's triton kernels are compute, the NCCL kernel beside them overlapped, its last 1 ms exposed;
    each step ends with its last kernel, launched through the driver, not with its CPU span."""
    from distbench.traces.split import rank_split
    from distbench.traces.steps import profiled_steps

    ev = _compiled_gpu_trace()
    assert profiled_steps(ev).step_ms == pytest.approx((10.0, 10.0, 10.0))
    split = rank_split(ev, None)
    assert split["compute"] == pytest.approx(8.8) and split["exposed_comm"] == pytest.approx(1.0)
    assert split["idle"] == pytest.approx(0.2) and split["step_trace_ms"] == pytest.approx(10.0)


# ---------------------------------------------------------------- real launches (Gloo, one rank, tiny GPT)
LM = ["--model", "gpt", "--gpt-size", "tiny", "--seq-len", "16", "--vocab-size", "64", "--batch-size", "2",
      "--warmup-steps", "1", "--steps", "3", "--allreduce-trials", "2", "--compile", "true"]


@pytest.mark.heavy
def test_a_compiled_job_reports_its_compile_time_beside_tokens_per_s_and_traces_its_compiled_step(tmp_path):
    out = tmp_path / "training.csv"
    t0 = time.monotonic()
    r = train([*LM, "--out", str(out), "--placement-out", str(tmp_path / "p.json"),
               "--inspect-dir", str(tmp_path / "inspect"), "--inspect-steps", "2"], nproc=1, timeout=300)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    df = read(out)
    assert (df["status"] == "ok").all() and df["compile"].all()
    step = df[df["phase"] == "step"]
    compile_s = float(step["compile_time_s"].iloc[0])
    assert compile_s > 0 and compile_s < wall and df.loc[df["phase"] == "comm_alone", "compile_time_s"].isna().all()
    # tokens/s is the timed steps' alone: global batch x tokens per sample / each step's own time
    assert step["tokens_per_s"].to_numpy() == pytest.approx(2 * 16 / (step["step_time_ms"].to_numpy() / 1e3), rel=1e-4)
    assert step["step_time_ms"].max() / 1e3 < compile_s  # no step carries the compilation
    assert "compile" in r.stderr and "not in the timed steps" in r.stderr
    # the compiled step's trace: its steps found, its compiled regions inside them (CPU: no GPU timeline)
    from distbench.traces.overlap import load_trace
    from distbench.traces.steps import profiled_steps, step_windows

    ev = load_trace(tmp_path / "inspect" / "step" / "trace_rank0.json.gz")
    assert profiled_steps(ev).n_steps == 2
    (lo, _), (_, hi) = step_windows(ev)[0], step_windows(ev)[-1]
    regions = [e for e in ev if str(e["name"]).startswith("Torch-Compiled Region")]
    assert regions and all(lo <= e["ts"] <= hi for e in regions)


@pytest.mark.heavy
def test_a_layout_whose_compile_fails_is_a_compile_failed_row_with_torchs_reason(tmp_path):
    """A real inductor failure, provoked by its own config: CXX names the C++ compiler inductor builds CPU
    kernels with, and /bin/false is none (InvalidCxxCompiler, a few seconds in)."""
    out = tmp_path / "training.csv"
    r = train([*LM, "--out", str(out), "--placement-out", str(tmp_path / "p.json")], nproc=1, timeout=300,
              env={"CXX": "/bin/false"})
    assert r.returncode == 0, r.stderr[-3000:]  # the job ran: its rows say what became of each phase
    df = read_training_csv(out)  # the contract admits the status
    by = df.groupby("phase")["status"].agg(set).to_dict()
    assert by["step"] == by["compute_only"] == {COMPILE_FAILED} and by["comm_alone"] == {"ok"}
    message = df.loc[df["phase"] == "step", "message"].iloc[0]
    assert message.startswith("torch.compile failed: InductorError: InvalidCxxCompiler: No working C++ compiler")
    s = summarize_training(df).iloc[0]
    assert s["status"] == COMPILE_FAILED and math.isnan(s["tokens_per_s_median"])
