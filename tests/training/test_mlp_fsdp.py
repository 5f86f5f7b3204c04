"""The MLP under FSDP2 (strategy fsdp): its Linear + GELU blocks, the config key training.strategies,
the plan's FSDP job, a real 2-rank Gloo run of that job (phases, training.inspect) and how the
analysis names it."""

import json

import pytest
import torch
from torch import nn

from distbench.pipeline.config import ConfigError, check_config
from distbench.training.plan import DDP_DEFAULTS, training_jobs, training_params
from distbench.workloads import mlp
from distbench.workloads.registry import WORKLOADS

HIDDEN, LAYERS = 32, 2


def _cfg(**training):
    return check_config({"world_sizes": [2], "training": {"models": ["mlp"], **training}})


def _jobs(cfg, gpus=0):
    jobs, skipped = training_jobs(cfg, gpus)
    return {(j.model, j.world_size, j.config_label, j.strategy) for j in jobs}, jobs, skipped


# ---------------------------------------------------------------- the model
def _flat_reference(hidden, layers):
    """The MLP as it was before it had blocks: one flat nn.Sequential(Linear, GELU, ..., Linear)."""
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(hidden, hidden), nn.GELU()]
    return nn.Sequential(*mods, nn.Linear(hidden, mlp.n_classes(hidden)))


def test_the_mlp_has_blocks_and_ddp_sees_the_same_parameters_and_math():
    torch.manual_seed(0)
    model = mlp.make_mlp(HIDDEN, 3)
    torch.manual_seed(0)
    ref = _flat_reference(HIDDEN, 3)
    got, want = list(model.parameters()), list(ref.parameters())
    # the same tensors, in the same order (DDP's buckets and the replicas' check read this order)
    assert [p.shape for p in got] == [p.shape for p in want]
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    x, y = mlp.make_batch(8, HIDDEN, 0, "cpu")
    out, ref_out = model(x), ref(x)
    assert torch.equal(out, ref_out)
    nn.functional.cross_entropy(out, y).backward()
    nn.functional.cross_entropy(ref_out, y).backward()
    assert all(torch.equal(a.grad, b.grad) for a, b in zip(got, want, strict=True))
    # FSDP's units: one per Linear + GELU pair; the head is the root's
    assert len(model.blocks) == 3 and model[-1] not in model.blocks
    in_blocks = {id(p) for b in model.blocks for p in b.parameters()}
    assert [id(p) in in_blocks for p in got] == [True] * 6 + [False] * 2
    assert model[0].bias is got[1]  # model[0] is still the first layer (tests/helpers/training_faults.py)
    assert WORKLOADS["mlp"].fsdp


def test_fully_shard_blocks_serves_every_model_and_gpt_still_exports_it():
    from distbench.workloads import fsdp, gpt

    assert gpt.fully_shard_blocks is fsdp.fully_shard_blocks and gpt.FSDPUnavailable is fsdp.FSDPUnavailable


def test_the_harness_accepts_fsdp_for_the_mlp():
    from distbench.training.harness import parse_args

    a = parse_args(["--backend", "gloo", "--model", "mlp", "--strategy", "fsdp", "--out", "x.csv"])
    assert a.model == "mlp" and a.strategy == "fsdp"


# ---------------------------------------------------------------- config
def test_training_strategies_defaults_to_ddp_and_takes_fsdp():
    assert check_config({})["training"]["strategies"] == ["ddp"]
    assert _cfg(strategies=["ddp", "fsdp"])["training"]["strategies"] == ["ddp", "fsdp"]
    assert _cfg(strategies=["fsdp"])["training"]["strategies"] == ["fsdp"]


@pytest.mark.parametrize("bad,expect", [
    (["ddp", "zero"], ["training.strategies[1]", "'zero'", "allowed: ddp, fsdp"]),
    ([], ["training.strategies", "non-empty"]),
    (["fsdp", "fsdp"], ["training.strategies", "non-unique"]),
    ("fsdp", ["training.strategies", "ddp, fsdp"]),
])
def test_bad_training_strategies_are_refused_naming_key_element_and_allowed_values(bad, expect):
    with pytest.raises(ConfigError) as e:
        check_config({"training": {"strategies": bad}})
    for text in expect:
        assert text in str(e.value)


# ---------------------------------------------------------------- plan
def test_the_plan_makes_the_fsdp_job_above_one_rank_only():
    keys, jobs, _ = _jobs(_cfg(strategies=["ddp", "fsdp"]))
    assert keys == {("mlp", 1, "plain", "ddp"), ("mlp", 2, "plain", "ddp"), ("mlp", 2, "fsdp", "fsdp")}
    # the default (ddp only) plans no FSDP job for the MLP
    assert not [k for k in _jobs(_cfg())[0] if k[3] == "fsdp"]
    # on GPUs (the whole node) as on CPU
    gpu, _, _ = _jobs(check_config({"backends": ["nccl"], "training": {"models": ["mlp"], "strategies": ["ddp", "fsdp"]}}), 4)
    assert {k for k in gpu if k[3] == "fsdp"} == {("mlp", 4, "fsdp", "fsdp")}


def test_the_fsdp_job_keeps_ddp_knobs_at_their_defaults_and_passes_strategy_fsdp(tmp_path):
    from distbench.training.job import training_args

    cfg = _cfg(strategies=["ddp", "fsdp"], ddp={"bucket_cap_mb": 100, "comm_hook": "bf16_compress"})
    keys, jobs, _ = _jobs(cfg)
    assert ("mlp", 2, "bucket=100+hook=bf16_compress", "ddp") in keys
    fsdp = next(j for j in jobs if j.strategy == "fsdp")
    params = training_params(cfg, fsdp)
    assert params["strategy"] == "fsdp" and params["ddp"] == DDP_DEFAULTS
    assert (params["hidden_dim"], params["batch_size"]) == (cfg["training"]["cpu"]["hidden_dim"], cfg["training"]["cpu"]["batch_size"])
    args = training_args(fsdp, params, tmp_path / "t.csv", tmp_path / "p.json")
    assert args[args.index("--strategy") + 1] == "fsdp" and args[args.index("--config-label") + 1] == "fsdp"
    assert args[args.index("--comm-hook") + 1] == "none" and args[args.index("--model") + 1] == "mlp"
    assert training_params(cfg, next(j for j in jobs if j.config_label == "plain"))["strategy"] == "ddp"


def test_fsdp_alone_keeps_only_the_plain_ddp_baseline_and_says_so():
    keys, _, skipped = _jobs(_cfg(strategies=["fsdp"], ddp={"bucket_cap_mb": 100}, tune=True))
    assert keys == {("mlp", 1, "plain", "ddp"), ("mlp", 2, "fsdp", "fsdp")}
    said = [s for s in skipped if "training.strategies has no ddp" in s["why"]]
    assert said and "tuning sweep" in said[0]["what"]


def test_memory_keeps_fsdp_for_the_language_models():
    from distbench.memory.plan import memory_jobs

    jobs, _ = memory_jobs(check_config({"memory": {"models": ["mlp", "gpt"], "world_sizes": [2]}}), gpus=0)
    assert {(j.model, j.config_label) for j in jobs} == {("mlp", "ddp"), ("gpt", "ddp"), ("gpt", "fsdp")}


# ---------------------------------------------------------------- a real run: plan -> job -> rows
@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The plan's 2-rank FSDP job (training.inspect on) and its 1-rank plain DDP baseline, run by the
    pipeline's launcher on Gloo (torchrun, real process groups)."""
    from distbench.training.job import run_training_job

    d = tmp_path_factory.mktemp("mlp_fsdp")
    cfg = _cfg(strategies=["fsdp"], warmup_steps=1, steps=3, allreduce_trials=2, inspect=True, inspect_steps=2,
               cpu={"hidden_dim": HIDDEN, "num_layers": LAYERS, "batch_size": 8})
    _, jobs, _ = _jobs(cfg)
    out = {}
    for job in jobs:
        params = {**training_params(cfg, job), "job_timeout_s": 180}
        jd = d / f"ws{job.world_size}" / job.config_label
        jd.mkdir(parents=True)
        status = run_training_job(job, params, jd / "training.csv", jd / "placement.json", jd / "job.log")
        out[(job.world_size, job.config_label)] = (status, jd)
    return out


@pytest.mark.heavy
def test_the_fsdp_job_runs_every_phase_on_two_ranks(ran):
    from distbench.training.contract import TRAINING_PHASES, read_training_csv

    assert set(ran) == {(1, "plain"), (2, "fsdp")}
    status, jd = ran[(2, "fsdp")]
    log = (jd / "job.log").read_text()
    assert status == "ok", log[-3000:]
    df = read_training_csv(jd / "training.csv")
    assert list(df["phase"].unique()) == list(TRAINING_PHASES)
    assert (df["status"] == "ok").all(), df[["phase", "status", "message"]].drop_duplicates().to_string()
    assert set(df["model"]) == {"mlp"} and set(df["strategy"]) == {"fsdp"} and set(df["config"]) == {"fsdp"}
    assert (df["world_size"] == 2).all() and (df["hidden_dim"] == HIDDEN).all() and (df["num_layers"] == LAYERS).all()
    # one FSDP group per block plus the root (the head), reduce-scattered blocks last-first, root last
    block, head = 4 * (HIDDEN * HIDDEN + HIDDEN), 4 * (HIDDEN * mlp.n_classes(HIDDEN) + mlp.n_classes(HIDDEN))
    assert (df["n_buckets"] == LAYERS + 1).all() and (df["grad_bytes"] == LAYERS * block + head).all()
    assert f"(FSDP groups layout), in reduction order: {[block] * LAYERS + [head]} B" in log
    step, comm = df[df["phase"] == "step"], df[df["phase"] == "comm_alone"]
    assert step["correct"].isna().all()  # one sharded copy: no replicas to compare
    assert comm["correct"].fillna(False).all() and (comm["last_bucket_ms"] > 0).all()
    assert (df[df["phase"] != "comm_alone"]["step_time_ms"] > 0).all()


def test_inspect_traces_the_fsdp_steps(ran):
    from distbench.training.analysis.instep import bucket_table, job_instances

    _, jd = ran[(2, "fsdp")]
    inspect = jd / "inspect"
    manifest = json.loads((inspect / "inspect.json").read_text())
    assert (manifest["model"], manifest["strategy"], manifest["world_size"]) == ("mlp", "fsdp", 2)
    assert manifest["notes"] == []
    for phase in ("step", "compute_only"):
        assert sorted(p.name for p in (inspect / phase).iterdir()) == ["trace_rank0.json.gz", "trace_rank1.json.gz"]
    rows, about = job_instances(inspect, "gloo/mlp/ws2/fsdp")
    assert about["source"] == "gloo" and rows
    # FSDP's parameter all-gathers are inside the real step: the root's and each block's in forward,
    # the blocks' again in backward
    gathers = [r for r in rows if r["op"] == "all_gather"]
    assert len(gathers) == 2 * (1 + 2 * LAYERS)
    assert any(b["sentence"].startswith("FSDP's all_gathers") for b in bucket_table(rows, about, [], "fsdp"))


def test_the_analysis_takes_fsdp_against_plain_ddp_on_one_rank(ran, tmp_path):
    from distbench.training.analysis.findings import best_config, training_findings
    from distbench.training.analysis.summary import aggregate_training

    assert {s for s, _ in ran.values()} == {"ok"}
    summary = aggregate_training([jd / "training.csv" for _, jd in ran.values()], tmp_path / "raw.csv",
                                 tmp_path / "summary.csv")
    plain = summary[summary["config"] == "plain"].iloc[0]
    fsdp = summary[summary["config"] == "fsdp"].iloc[0]
    assert (plain["world_size"], plain["strategy"]) == (1, "ddp") and (fsdp["world_size"], fsdp["strategy"]) == (2, "fsdp")
    assert fsdp["plain_1gpu_samples_per_s"] == pytest.approx(plain["samples_per_s_median"])
    assert fsdp["efficiency_vs_plain_1gpu"] == pytest.approx(
        fsdp["samples_per_s_median"] / (2 * plain["samples_per_s_median"]))
    assert fsdp["efficiency_vs_own_1gpu"] != fsdp["efficiency_vs_own_1gpu"]  # NaN: FSDP has no 1-rank run of its own
    lines = training_findings(summary)
    assert any(f"MLP {HIDDEN}x{LAYERS}, 2 ranks (FSDP, weak scaling)" in line for line in lines), lines
    # FSDP is a strategy, not a DDP tuning point: no "best configuration" among the DDP ones
    assert best_config(summary) is None and not [line for line in lines if ", best: " in line]
