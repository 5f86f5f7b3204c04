"""training.inspect (issue 40) on recorded data: tests/fixtures/instep_h100x2_mlp_ddp is the `inspect/`
directory of the MLP DDP job of benchmarks/results/instep-h100x2-2026-11-27 (2x H100, torch 2.11,
NCCL 2.28.9, Inspector built from NVIDIA/nccl 5067397c): Inspector's JSON per rank, NCCL's TUNING
log, and the traced real and compute-only steps. Timed medians of that job: step 11.608 ms,
compute-only 9.665 ms (its training.csv). tests/fixtures/instep_gloo_mlp: the same directory of a 2-rank Gloo
run on CPU (torch 2.13; `torchrun --standalone --nproc_per_node=2 -m distbench.training --backend gloo --hidden-dim 64
--num-layers 2 --batch-size 8 --steps 3 --warmup-steps 1 --allreduce-trials 2 --inspect-dir ... --inspect-steps 2`)."""

import math
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from distbench.traces.instep_summary import achievable_peak, headline
from distbench.traces.overlap import load_trace
from distbench.traces.split import four_part_split, job_trace_split, span_states
from distbench.training.analysis import instep
from distbench.training.analysis.instep import (bucket_sentence, bucket_table, inspector_instances, job_instances,
                                                standalone_busbw, timed_window)

FIX = Path(__file__).resolve().parent / "fixtures/instep_h100x2_mlp_ddp"
STEP_MS, COMPUTE_MS = 11.60755, 9.66456
COMM = [{"backend": "nccl", "world_size": "2", "op": "all_reduce", "dtype": "float32", "timing": "events",
         "nccl_env": "default", "status": "ok", "size_bytes": str(s), "busbw_gbps_median": str(b)}
        for s, b in ((16777216, 206.926), (33554432, 234.109), (67108864, 262.244), (134217728, 281.377))]


def test_inspector_records_exactly_the_timed_steps():
    rows, about = job_instances(FIX, "mlp")
    assert about["source"] == "inspector" and about["steps"] == 20
    sizes = pd.Series([r["size_bytes"] for r in rows]).value_counts().to_dict()
    assert sizes == {67125248: 160, 16781312: 20}  # 8 + 1 buckets per step, no marker, no alignment
    assert {(r["algo"], r["proto"]) for r in rows} == {("RING", "SIMPLE")}  # NCCL's own word (TUNING lines)
    assert all(r["rank_count"] == 2 and r["time_us"] > 0 for r in rows)
    r = rows[0]
    assert r["busbw_gbps"] == pytest.approx(r["size_bytes"] / r["time_us"] / 1e3)  # all_reduce at 2 ranks: factor 1


def test_window_needs_both_markers():
    recs = instep.read_inspector(FIX / "inspector")[0]
    assert timed_window([p for p in recs if p["coll_msg_size_bytes"] != instep.MARK_END_BYTES]) is None
    window = timed_window(recs)
    assert all(p["coll_msg_size_bytes"] > 8 for p in window)


def test_profiler_fallback_and_its_sizes(tmp_path):
    d = tmp_path / "inspect"
    shutil.copytree(FIX, d, ignore=shutil.ignore_patterns("vm-pid*"))  # Inspector did not load
    rows, about = job_instances(d, "mlp")
    assert about["source"] == "profiler" and "Inspector did not load" in about["note"]
    assert {r["size_bytes"] for r in rows} == {67125248, 16781312}
    assert {r["dtype"] for r in rows} == {"float32"}
    assert len(rows) == 27  # 9 buckets x 3 traced steps


def test_buckets_beside_the_comm_family_in_the_issue_form():
    rows, about = job_instances(FIX, "mlp")
    b = bucket_table(rows, about, COMM, "ddp")
    top = b[0]
    assert top["size_bytes"] == 67125248 and top["per_step"] == 8
    assert top["standalone_busbw_gbps"] == pytest.approx(262.244, rel=1e-3)  # interpolated at 64.02 MiB
    assert top["sentence"].startswith("DDP's 64 MiB buckets (8 per step) reached ") and " inside the step, " in top["sentence"]
    assert "% of the 262 GB/s the same all_reduce reaches alone: " in top["sentence"]
    assert standalone_busbw(COMM, "nccl", 2, "all_reduce", "float32", 2**30)[0] != standalone_busbw(
        COMM, "nccl", 2, "all_reduce", "float32", 2**30)[0]  # outside the measured sizes: none, never extrapolated
    far = dict(top, busbw_gbps_median=60.0, ratio=60 / 262.244)
    assert "the link is fine, the overlap with compute is what costs" in bucket_sentence("ddp", far)


def test_gloo_says_what_it_could_record(tmp_path):
    rows, about = job_instances(Path(__file__).parent / "fixtures/instep_gloo_mlp", "mlp")
    assert about["source"] == "gloo" and "no bandwidth" in about["note"]
    assert rows and all(math.isnan(r["busbw_gbps"]) for r in rows)


def test_four_part_split_adds_up_on_the_h100_traces():
    t = job_trace_split(FIX)
    assert t["n_traced_steps"] == 3
    assert t["slowdown_ms"] > 0.5  # the same kernels, 1.1 ms slower per step beside the all-reduces
    parts = four_part_split(STEP_MS, COMPUTE_MS, t, 0.02 * STEP_MS + 0.1)
    total = sum(parts[k] for k in ("compute_ms", "compute_slowdown_ms", "exposed_comm_ms", "rest_ms"))
    assert total == pytest.approx(STEP_MS)
    assert parts["adds_up"] and abs(parts["rest_unexplained_ms"]) < 0.2
    # removing the slowdown from the split leaves the step unexplained
    assert not four_part_split(STEP_MS, COMPUTE_MS, dict(t, slowdown_ms=0.0), 0.02 * STEP_MS + 0.1)["adds_up"]


def test_headline_names_the_largest_cost_and_overlap():
    row = {"job": "gpt", "step_ms": 100.0, "compute_ms": 70.0, "compute_slowdown_ms": 5.0, "exposed_comm_ms": 20.0,
           "rest_ms": 5.0}
    text = headline(row, [{"ratio": 0.3}])
    assert "largest cost of the 100.0 ms step is exposed communication (20.0 ms, 20%)" in text
    assert "the link is fine, the overlap costs" in text
    assert "link is fine" not in headline(row, [{"ratio": 0.95}])


def test_achievable_peak_never_guessed():
    mm = pd.DataFrame([{"device_index": i, "device_name": "Mystery GPU", "dtype": "bfloat16", "tflops": t, "status": "ok",
                        "sm_clock_mhz": 1500, "power_limit_w": 400} for i, t in ((0, 300.0), (1, 280.0))])
    assert achievable_peak(mm, "Mystery GPU", "bfloat16")["achievable_tflops"] == 280.0  # the slowest GPU's best
    assert achievable_peak(mm, "Other GPU", "bfloat16") == {}
    from distbench.training.analysis.mfu import peak_for
    assert peak_for("Mystery GPU", "bfloat16").tflops is None  # no spec figure for an unknown GPU


hta = pytest.importorskip("hta.trace_analysis") if os.environ.get("DISTBENCH_REQUIRE_HTA") != "1" else __import__(
    "hta.trace_analysis")


def test_split_states_agree_with_hta_within_two_points(tmp_path, monkeypatch):
    from hta.trace_analysis import TraceAnalysis

    for r in (0, 1):
        shutil.copy(FIX / f"step/trace_rank{r}.json.gz", tmp_path / f"trace_rank{r}.json.gz")
    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "0")
    b = TraceAnalysis(trace_dir=str(tmp_path)).get_temporal_breakdown(visualize=False).set_index("rank")
    for r in (0, 1):
        s = span_states(load_trace(tmp_path / f"trace_rank{r}.json.gz"))
        ours = (100 * s["idle"] / s["step_us"], 100 * s["compute"] / s["step_us"],
                100 * (s["exposed_comm"] + s["memory_other"]) / s["step_us"])
        theirs = (b.loc[r, "idle_time_pctg"], b.loc[r, "compute_time_pctg"], b.loc[r, "non_compute_time_pctg"])
        assert all(abs(a - t) <= 2 for a, t in zip(ours, theirs)), (r, ours, theirs)
