"""training.inspect through the real workflow (issue 40), on Gloo: Snakemake -> the inspected training
jobs (each launched alone) -> training_instep.csv and training_split.csv -> the report, which says what
Gloo could record (each collective's op and time) and what it could not (sizes, bandwidth, the GPU
timeline's four-part split, an achievable matmul peak); a matmul sweep asked for on CPU is named as
skipped. And the report's view of the same tables on the recorded 2x H100 job (tests/training/test_instep.py's
fixture): the largest cost reaches the training headline."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import RUN, snakemake

# `pytest -m heavy` (README: the second test command): a real workflow run of the inspected training jobs.
pytestmark = pytest.mark.heavy

TINY = {
    "backends": ["gloo"], "world_sizes": [2],
    "health": {"enabled": False}, "memory": {"enabled": False}, "predict": {"enabled": False},
    "comm": {"ops": ["all_reduce"], "sizes": ["8", "64KiB"], "gloo": {"warmup": 1, "iters": 2, "trials": 1}},
    "training": {"models": ["mlp"], "warmup_steps": 1, "steps": 3, "allreduce_trials": 2, "inspect": True,
                 "inspect_steps": 2, "matmul_sweep": True, "cpu": {"hidden_dim": 32, "num_layers": 1, "batch_size": 8}},
}


@pytest.mark.e2e
def test_gloo_run_says_what_it_could_record(workflow_dir):
    (workflow_dir / "t.yaml").write_text(yaml.safe_dump(TINY))
    r = snakemake(workflow_dir, "--configfile", "t.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    run = workflow_dir / RUN
    # every job has its inspect directory; the 2-rank one recorded its traced steps
    assert (run / "training/gloo/mlp/ws1/plain/inspect").is_dir()
    about = json.loads((run / "training/gloo/mlp/ws2/plain/inspect/inspect.json").read_text())
    assert about["backend"] == "gloo" and about["traced_steps"] == 2
    # inspected jobs never share a launch (their NCCL environment is their own)
    assert json.loads((run / "logs/batch/manifest.json").read_text())["entries"] == []

    buckets = pd.read_csv(run / "tables/training_instep.csv")
    assert set(buckets["job"]) == {"gloo/mlp/ws2/plain"}  # multi-rank jobs only
    assert set(buckets["source"]) == {"gloo"} and (buckets["op"] == "all_reduce").all()
    assert (buckets["time_us_median"] > 0).all() and buckets["busbw_gbps_median"].isna().all()
    assert (buckets["standalone_note"] == "no size recorded").all()
    split = pd.read_csv(run / "tables/training_split.csv").iloc[0]
    assert split["job"] == "gloo/mlp/ws2/plain" and split["source"] == "gloo"
    assert "no bandwidth" in split["note"] and "no GPU traces" in split["note"]
    assert pd.isna(split["compute_slowdown_ms"]) and pd.isna(split["exposed_comm_ms"])  # never zeros on CPU
    assert not (run / "tables/training_matmul.csv").exists()

    report = (workflow_dir / "report/report.md").read_text()
    inside = report.split("### Inside the step", 1)[1]
    assert "recorded: Gloo's collectives on CPU, from the profiler: each one's op and time." in inside
    assert "Not recorded: " in inside and "no bandwidth" in inside and "no achievable matmul peak" in inside
    assert "DDP's all_reduces took " in inside and "no trace split" in inside
    assert "the matmul sweep (training.matmul_sweep): skipped" in report
    assert "training_split.csv" in report  # copied beside the report


def test_the_largest_cost_reaches_the_training_headline():
    from distbench.traces.split import job_trace_split
    from distbench.training.analysis.instep_summary import instep_tables
    from distbench.training.analysis.instep_view import instep_context
    from distbench.training.analysis.section import training_headlines

    fix = Path(__file__).resolve().parents[1] / "fixtures/instep_h100x2_mlp_ddp"
    base = {"backend": "nccl", "model": "mlp", "config": "plain", "strategy": "ddp", "dtype": "float32",
            "device_name": "NVIDIA H100 80GB HBM3", "status": "ok", "scaling": "weak"}
    summary = pd.DataFrame([
        {**base, "world_size": 1, "step_time_ms_median": 9.5, "compute_only_ms_median": 9.5,
         "efficiency_vs_plain_1gpu": 1.0},
        {**base, "world_size": 2, "step_time_ms_median": 11.60755, "compute_only_ms_median": 9.66456,
         "comm_alone_ms_median": 5.0, "bounds_allowance_ms": 0.3, "tflops_per_device": 40.0, "mfu": 0.6,
         "peak_tflops": 67.0, "efficiency_vs_plain_1gpu": 0.82, "overlap_fraction": 0.6}])
    matmul = pd.DataFrame([{"device_index": i, "device_name": base["device_name"], "dtype": "float32", "status": "ok",
                            "tflops": t, "sm_clock_mhz": 1980, "power_limit_w": 700} for i, t in ((0, 50.0), (1, 48.0))])
    buckets, split = instep_tables({"nccl/mlp/ws2/plain": ({"backend": "nccl", "model": "mlp", "world_size": 2,
                                                            "config": "plain"}, fix)}, summary, None, matmul,
                                   job_trace_split)
    row = split.iloc[0]
    assert row["mfu_achievable"] == pytest.approx(40 / 48)  # the slower GPU's best
    view = instep_context(buckets, split)
    assert view["jobs"][0]["recorded"].startswith("NCCL's Inspector plugin")
    assert "83.3% of 48.0 TFLOP/s (1980 MHz, 700 W limit)" in view["split_table"]["rows"][0]
    h = training_headlines(summary, split, buckets)[0]
    assert h.headline == ("mlp (ddp, plain) at 2 ranks: 82% scaling efficiency vs 1 GPU, 11.6 ms step; its largest "
                          "cost beyond compute: compute slowed down while communicating (1.00 ms, 9% of the step), "
                          "then exposed communication 499 µs, the rest 441 µs")  # rank 1's traces: it waited least
    assert "counts compute slowed down while communicating as communication" in h.reason
    plain = training_headlines(summary)[0]  # without the tables: the phases' difference, as before
    assert "1.94 ms exposed communication of a 11.6 ms step" in plain.headline


def test_matmul_sweep_is_planned_on_gpus_only_and_says_what_it_measured(tmp_path):
    from distbench.pipeline.config import check_config
    from distbench.pipeline.plan import make_plan
    from distbench.training.manifest import matmul_planned
    from distbench.training.matmul import run_sweeps
    from distbench.training.plan import matmul_params

    gpu = check_config({"gpus": 2, "backends": ["nccl"], "world_sizes": [2], "cluster": {"other_host": True},
                        "training": {"models": ["mlp", "gpt"], "matmul_sweep": True, "inspect": True}})
    plan = make_plan(gpu)
    params = matmul_params(gpu, plan["jobs"]["training"])
    assert matmul_planned(gpu, plan) and [s["dtype"] for s in params["sweeps"]] == ["bfloat16", "float32"]
    assert "512x4096x4096" in params["sweeps"][1]["gemms"]  # the MLP's forward GEMM at its per-rank batch
    cpu = check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": [2], "training": {"matmul_sweep": True}})
    plan = make_plan(cpu)
    assert not matmul_planned(cpu, plan) and matmul_params(cpu, plan["jobs"]["training"]) == {}
    assert any(s["what"].startswith("the matmul sweep") for s in plan["skipped"])
    # the rule's runner on a host without a GPU: a not_run row saying why, never a number
    said = run_sweeps({"sweeps": [{"dtype": "float32", "gemms": ["8x8x8"]}], "seconds": 0.01}, tmp_path / "m.csv",
                      tmp_path / "m.log")
    rows = pd.read_csv(tmp_path / "m.csv")
    assert list(rows["status"]) == ["not_run"] and "no GPU" in said
