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

from distbench.traces.overlap import load_trace
from distbench.traces.split import job_trace_split, peer_waits, rank_split, span_states
from distbench.training.analysis import instep
from distbench.training.analysis.instep import (bucket_sentence, bucket_table, job_instances,
                                                standalone_busbw, timed_window)
from distbench.training.analysis.instep_summary import achievable_peak, four_part_split, headline

FIX = Path(__file__).resolve().parents[1] / "fixtures/instep_h100x2_mlp_ddp"
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
    # where there is no standalone figure, the note says which keys would measure one
    assert "comm.sizes sets them" in standalone_busbw(COMM, "nccl", 2, "all_reduce", "float32", 2**30)[1]
    bw, why = standalone_busbw(COMM, "nccl", 2, "all_gather", "bfloat16", 2**26)
    assert bw != bw and why.endswith("(to set one beside it: all_gather in comm.ops, bfloat16 in comm.dtypes)")
    far = dict(top, busbw_gbps_median=60.0, ratio=60 / 262.244)
    assert "the link is fine, the overlap with compute is what costs" in bucket_sentence("ddp", far)


def test_gloo_says_what_it_could_record(tmp_path):
    rows, about = job_instances(Path(__file__).resolve().parents[1] / "fixtures/instep_gloo_mlp", "mlp")
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


FSDP = Path(__file__).resolve().parents[1] / "fixtures/instep_h100x2_mlp_fsdp"
# benchmarks/results/instep-mlp-fsdp-h100x2-2026-11-27: the MLP (4096 x 8, batch 512, fp32) under FSDP2 on
# 2x H100, its `inspect/` directory; timed medians from its training_summary.csv (and its allowance)
FSDP_STEP_MS, FSDP_COMPUTE_MS, FSDP_ALLOWANCE_MS = 28.4008, 9.64574, 3.5651


def test_a_host_bound_step_slowed_by_the_profiler_loses_that_time_from_its_host_gaps():
    """FSDP2's host-bound step took 45.4 ms traced against 28.4 ms timed: the profiler's 17 ms land in
    the GPU's idle time (the host gaps), and taken off them the split adds up; without that, or with
    more added time than the host gaps hold, it does not."""
    t = job_trace_split(FSDP)
    # the rank the other waited for: rank 1's NCCL kernels spin ~40 ms per step until rank 0 arrives.
    # Counted as communication, that waiting is 30 ms of exposed communication and rank 1's split does
    # not add up; counted as idle (peer_waits), rank 1 tells rank 0's story: the same exposed
    # communication, and a split that adds up
    assert t["rank"] == 0 and t["peer_wait_ms"] == 0
    traces = [load_trace(FSDP / f"step/trace_rank{r}.json.gz") for r in (0, 1)]
    waits = peer_waits(traces)
    assert sum(waits[1]) / 1e3 > 100 and sum(waits[0]) == 0  # rank 1 waited, over the 3 traced steps
    as_comm = rank_split(traces[1], FSDP / "compute_only/trace_rank1.json.gz")
    as_idle = rank_split(traces[1], FSDP / "compute_only/trace_rank1.json.gz", waits[1])
    assert as_comm["exposed_comm"] > 5 * t["exposed_comm"]
    assert as_idle["exposed_comm"] == pytest.approx(t["exposed_comm"], abs=0.1)
    assert not four_part_split(FSDP_STEP_MS, FSDP_COMPUTE_MS, as_comm, FSDP_ALLOWANCE_MS)["adds_up"]
    assert four_part_split(FSDP_STEP_MS, FSDP_COMPUTE_MS, as_idle, FSDP_ALLOWANCE_MS)["adds_up"]
    added = t["step_trace_ms"] - FSDP_STEP_MS
    assert added > 10  # the profiler slowed these steps (GPU kernels keep their durations)
    parts = four_part_split(FSDP_STEP_MS, FSDP_COMPUTE_MS, t, FSDP_ALLOWANCE_MS)
    assert parts["profiler_host_ms"] == pytest.approx(added)
    traced_gaps = t["idle"] - t["compute_only_idle_ms"]
    assert parts["rest_host_gaps_ms"] == pytest.approx(traced_gaps - added)
    assert parts["adds_up"] and abs(parts["rest_unexplained_ms"]) <= FSDP_ALLOWANCE_MS
    # traces as fast as the timed step: nothing is taken, and the traces' host gaps overshoot the step
    same = four_part_split(FSDP_STEP_MS, FSDP_COMPUTE_MS, dict(t, step_trace_ms=FSDP_STEP_MS), FSDP_ALLOWANCE_MS)
    assert same["profiler_host_ms"] == 0 and not same["adds_up"]
    # added time beyond the GPU's idle is not host time: at most the host gaps are taken, the rest unexplained
    few = dict(t, idle=t["compute_only_idle_ms"] + 2.0)
    capped = four_part_split(FSDP_STEP_MS, FSDP_COMPUTE_MS, few, FSDP_ALLOWANCE_MS)
    assert capped["profiler_host_ms"] == pytest.approx(2.0) and capped["rest_host_gaps_ms"] == pytest.approx(0.0)
    assert not capped["adds_up"]


def test_overlapping_kernels_count_the_compute_time_they_add_once():
    """Two streams: a model kernel (0-100 us) and a copy kernel beside it (50-120 us): 120 us of compute
    state, and the names' times add up to it (the copy adds 20 us, not its 70), so an extra kernel
    that overlaps the model's is not counted twice in the split (GPT 1.3b FSDP: benchmarks/results/
    instep-mlp-fsdp-h100x2-2026-11-27)."""
    from distbench.traces.split import step_states

    events = [{"cat": "kernel", "name": "sm90_xmma_gemm", "ts": 0.0, "dur": 100.0},
              {"cat": "kernel", "name": "chunk_cat_cuda_kernel", "ts": 50.0, "dur": 70.0}]
    (s,) = step_states(events, [(0.0, 200.0)])
    assert s["compute"] == 120.0 and s["idle"] == 80.0
    assert s["kernels"] == {"sm90_xmma_gemm": 100.0, "chunk_cat_cuda_kernel": 20.0}
    assert sum(s["kernels"].values()) == s["compute"]


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


def test_a_layout_without_a_compute_only_step_is_split_from_its_real_step_alone(tmp_path):
    """fsdp_tp (issue 49) has no compute-only step: tensor parallel's all-reduces sit inside forward and
    backward, and its inspect pass writes no compute_only/ traces. The real step's GPU timeline still
    gives its exposed communication (the same figure the full split reads), its compute (slowdown
    included: NaN apart) and a rest of memory copies and host gaps that adds up; never zeros."""
    only = tmp_path / "inspect"
    shutil.copytree(FIX / "step", only / "step")
    full, alone = job_trace_split(FIX), job_trace_split(only)
    assert full["compute_only_traced"] is True and alone["compute_only_traced"] is False
    assert alone["rank"] == full["rank"]
    assert alone["exposed_comm"] == pytest.approx(full["exposed_comm"])
    assert "slowdown_ms" not in alone and "optimizer_extra_ms" not in alone
    parts = four_part_split(STEP_MS, math.nan, alone, 0.02 * STEP_MS + 0.1)
    assert math.isnan(parts["compute_slowdown_ms"]) and math.isnan(parts["rest_optimizer_ms"])
    assert parts["compute_ms"] == pytest.approx(alone["compute"])
    # the real step's compute kernels hold the compute-only step's, their slowdown and the optimizer
    assert parts["compute_ms"] > COMPUTE_MS
    assert parts["compute_ms"] + parts["exposed_comm_ms"] + parts["rest_ms"] == pytest.approx(STEP_MS)
    assert parts["adds_up"] and abs(parts["rest_unexplained_ms"]) <= 0.02 * STEP_MS + 0.1
    # a run whose compute-only traces were written for some ranks keeps the full split of those ranks
    partial = tmp_path / "partial"
    shutil.copytree(FIX, partial)
    (partial / "compute_only/trace_rank1.json.gz").unlink()
    assert job_trace_split(partial)["compute_only_traced"] is True and job_trace_split(partial)["rank"] == 0
