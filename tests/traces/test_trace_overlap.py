"""distbench.traces.overlap: interval arithmetic, classification, and one real 2-rank Gloo DDP trace."""

import gzip
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from distbench.traces import overlap as tov


def X(name, ts, dur, cat="cpu_op", tid=1, pid=1):
    return {"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "pid": pid, "tid": tid}


def K(name, ts, dur, stream=7):
    return X(name, ts, dur, cat="kernel", tid=stream, pid=0)


# --- interval arithmetic --------------------------------------------------------------------


def test_union_merges_nested_overlapping_and_touching():
    assert tov.union([(5, 8), (0, 10), (2, 3), (10, 12), (20, 25), (21, 22), (30, 30)]) == [(0, 12), (20, 25)]
    assert tov.union([]) == []


def test_intersection_length():
    assert tov.intersection_length([(0, 10)], [(5, 20)]) == 5
    assert tov.intersection_length([(0, 10), (20, 30)], [(5, 25)]) == 10
    assert tov.intersection_length([(0, 10)], [(10, 20)]) == 0
    assert tov.intersection_length([(0, 10), (2, 8)], [(0, 10), (1, 9)]) == 10  # unions, not sums
    assert tov.intersection_length([], [(0, 1)]) == 0


# --- classification -------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",  # NCCL >= 2.19
    "ncclDevKernel_Generic",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",  # NCCL 2.7 - 2.18
    "ncclKernel_AllGather_RING_LL_Sum_int8_t",
    "ncclAllReduceRingLLKernel_sum_f32(CollectiveArgs)",  # NCCL <= 2.6
    "void ncclKernel_ReduceScatter_RING_SIMPLE_Sum_bfloat16(ncclWorkElem)",
])
def test_nccl_kernel_names_recognised(name):
    assert tov.is_nccl_kernel(name)


@pytest.mark.parametrize("name", [
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(...)",
    "ampere_sgemm_128x64_nn", "Memcpy DtoD (Device -> Device)", "gloo:all_reduce", "c10d::allreduce_",
])
def test_other_names_are_not_nccl(name):
    assert not tov.is_nccl_kernel(name)


def test_gpu_trace_uses_kernels_only_and_exact_fraction():
    events = [
        K("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 10, stream=20),
        K("ampere_sgemm_128x64_nn", 5, 15),  # compute [5, 20)
        X("Memcpy DtoH (Device -> Pageable)", 0, 100, cat="gpu_memcpy", pid=0, tid=7),  # neither
        X("aten::mm", 0, 100),  # a CPU op: ignored when the trace has kernels
        X("c10d::allreduce_", 0, 100),
    ]
    o = tov.overlap_from_events(events)
    assert (o.source, o.n_comm_events, o.comm_us, o.compute_us, o.overlapped_us) == ("gpu_kernels", 1, 10, 15, 5)
    assert o.overlap_fraction == 0.5


def test_old_and_new_nccl_kernels_both_counted_as_comm():
    events = [K("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", 0, 10, stream=20),
              K("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 30, 10, stream=20),
              K("gemm", 35, 100)]
    o = tov.overlap_from_events(events)
    assert (o.n_comm_events, o.comm_us, o.overlapped_us) == (2, 20, 5)
    assert o.overlap_fraction == 0.25


def test_nested_and_concurrent_events_not_double_counted():
    events = [
        K("ncclKernel_AllReduce_RING_LL_Sum_float", 0, 10, stream=20),
        K("ncclKernel_AllReduce_RING_LL_Sum_float", 2, 4, stream=21),  # inside the first one
        K("gemm_a", 0, 6, stream=7), K("gemm_b", 4, 4, stream=8),  # concurrent compute: [0, 8)
    ]
    o = tov.overlap_from_events(events)
    assert (o.comm_us, o.compute_us, o.overlapped_us, o.n_comm_events) == (10, 8, 8, 2)
    assert o.overlap_fraction == 0.8


def test_cpu_trace_gloo_spans_and_aten_not_nested_in_collectives():
    events = [
        X("autograd::engine::evaluate_function: AddmmBackward0", 0, 40),
        X("aten::mm", 0, 20), X("aten::mm", 5, 10),  # nested aten ops: compute [0, 20) once
        X("c10d::allreduce_", 20, 2), X("aten::empty", 20, 1),  # enqueue, and an op inside it
        X("gloo:all_reduce", 21, 30, cat="user_annotation", tid=2),  # the collective, Gloo's thread
        X("aten::copy_", 25, 5, tid=2),  # inside gloo:all_reduce on its own thread: not compute
        X("aten::mm", 30, 10),  # backward goes on while the collective runs: [30, 40)
    ]
    o = tov.overlap_from_events(events)
    assert (o.source, o.n_comm_events) == ("cpu_ops", 1)
    assert (o.comm_us, o.compute_us, o.overlapped_us) == (30, 30, 10)
    assert o.overlap_fraction == pytest.approx(1 / 3)


def test_no_communication_gives_nan():
    for events in ([K("gemm", 0, 10)], [X("aten::mm", 0, 10)], []):
        o = tov.overlap_from_events(events)
        assert o.n_comm_events == 0 and o.comm_us == 0 and math.isnan(o.overlap_fraction)


def test_load_trace_plain_and_gzip_and_cli(tmp_path, capsys):
    trace = {"traceEvents": [K("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 10, stream=20), K("gemm", 5, 15),
                             {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
                             {"ph": "i", "name": "marker", "ts": 3, "pid": 0, "tid": 0}]}
    plain, packed = tmp_path / "rank0.json", tmp_path / "rank1.json.gz"
    plain.write_text(json.dumps(trace))
    packed.write_bytes(gzip.compress(json.dumps(trace).encode()))
    assert len(tov.load_trace(plain)) == 2 and tov.load_trace(packed) == tov.load_trace(plain)
    assert tov.overlap_from_trace(packed) == tov.overlap_from_trace(plain)
    assert tov.main([str(plain), str(packed)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all("overlap 50.0%" in line for line in lines)
    assert all("idle 0.0%  compute 75.0%  non-compute 25.0%" in line for line in lines)


# --- temporal breakdown (HTA's get_temporal_breakdown) ---------------------------------------


def test_temporal_breakdown_exact():
    events = [
        K("gemm", 0, 10),  # compute [0, 10)
        K("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5, 15, stream=20),  # comm [5, 20): [10, 20) non-compute
        X("Memcpy DtoD (Device -> Device)", 30, 5, cat="gpu_memcpy", pid=0, tid=7),  # memory [30, 35)
        X("Memset (Device)", 32, 1, cat="gpu_memset", pid=0, tid=7),  # inside the copy
        K("cudaStreamSynchronizeKernel", 40, 5),  # HTA: "Sync" in the name is not compute
        K("elementwise", 60, 40),  # compute [60, 100)
        X("aten::mm", -100, 1000),  # CPU ops never count, not even for the span
    ]
    b = tov.breakdown_from_events(events)
    # span [0, 100); busy [0, 20) + [30, 35) + [40, 45) + [60, 100) = 70; idle 30; compute 10 + 40
    assert (b.span_us, b.idle_us, b.compute_time_us, b.non_compute_time_us) == (100, 30, 50, 20)
    assert (b.idle_pct, b.compute_time_pct, b.non_compute_time_pct) == (30, 50, 20)


def test_temporal_breakdown_concurrent_compute_counted_once():
    events = [K("gemm_a", 0, 10, stream=7), K("gemm_b", 5, 10, stream=8), K("ncclKernel_AllGather", 0, 20, stream=20)]
    b = tov.breakdown_from_events(events)
    assert (b.span_us, b.idle_us, b.compute_time_us, b.non_compute_time_us) == (20, 0, 15, 5)


def test_temporal_breakdown_not_available_on_cpu():
    for events in ([X("aten::mm", 0, 10), X("gloo:all_reduce", 0, 5, cat="user_annotation", tid=2)], []):
        b = tov.breakdown_from_events(events)
        assert all(math.isnan(v) for v in (b.span_us, b.idle_us, b.compute_time_us, b.non_compute_time_us,
                                           b.idle_pct, b.compute_time_pct, b.non_compute_time_pct))
        assert "not available on CPU" in tov.format_breakdown(b)


def _job_dir(root, name, traces):
    d = root / name / "trace"
    d.mkdir(parents=True)
    (d / "profile.json").write_text(json.dumps({"mode": "torch", "note": "n"}))
    for rank, events in enumerate(traces):
        (d / f"trace_rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return d


GPU_RANK = [K("gemm", 0, 10), K("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5, 15, stream=20), K("gemm", 60, 40)]
CPU_RANK = [X("aten::mm", 0, 10), X("gloo:all_reduce", 5, 10, cat="user_annotation", tid=2)]


def test_table_has_breakdown_columns_and_nan_on_cpu(tmp_path):
    gpu = _job_dir(tmp_path, "gpu", [GPU_RANK])
    cpu = _job_dir(tmp_path, "cpu", [CPU_RANK, CPU_RANK])
    empty = tmp_path / "none" / "trace"
    empty.mkdir(parents=True)
    out = tmp_path / "trace_overlap.csv"
    tov.write_overlap_table({gpu: {"family": "training", "job": "g"}, cpu: {"family": "training", "job": "c"},
                             empty: {"family": "comm", "job": "e"}}, out)
    import pandas as pd

    t = pd.read_csv(out)
    assert list(t.columns) == list(tov.TABLE_COLUMNS)
    assert tov.TABLE_COLUMNS[:12] == ("family", "job", "mode", "rank", "trace", "source", "comm_us", "compute_us",
                                      "overlapped_us", "overlap_fraction", "n_comm_events", "note")  # kept as before
    g = t[t["job"] == "g"].iloc[0]
    assert (g["gpu_span_us"], g["idle_us"], g["compute_time_us"], g["non_compute_time_us"]) == (100, 40, 50, 10)
    assert (g["idle_pct"], g["compute_time_pct"], g["non_compute_time_pct"]) == (40, 50, 10)
    assert g["overlap_fraction"] == pytest.approx(1 / 3)
    for _, r in t[t["job"].isin(["c", "e"])].iterrows():
        assert all(pd.isna(r[c]) for c in tov.BREAKDOWN_COLUMNS)


def test_traces_section_shows_breakdown_beside_overlap(tmp_path):
    from distbench.core.section import ReportInputs
    from distbench.traces.section import build

    gpu = _job_dir(tmp_path, "gpu", [GPU_RANK, GPU_RANK[:2] + [K("gemm", 30, 10)]])
    cpu = _job_dir(tmp_path, "cpu", [CPU_RANK])
    out = tmp_path / "trace_overlap.csv"
    tov.write_overlap_table({gpu: {"family": "training", "job": "nccl/g"}, cpu: {"family": "comm", "job": "gloo/c"}}, out)
    part = build(ReportInputs({"trace_overlap": out}))
    headers, rows = part["table"]["headers"], {r[1]: r for r in part["table"]["rows"]}
    col = headers.index("GPU time: idle / compute / non-compute (per rank)")
    assert col == headers.index("overlap by step times") + 1
    # rank 0: 40 / 50 / 10 %; rank 1 (span 40, idle [20, 30)): 25 / 50 / 25 %: each rank, since a
    # median would hide the rank that idles
    assert rows["nccl/g"][col] == "rank 0: 40.0% / 50.0% / 10.0%; rank 1: 25.0% / 50.0% / 25.0%"
    assert rows["gloo/c"][col] == "not available on CPU"
    assert "temporal breakdown" in part["note"]


# --- a real 2-rank Gloo DDP job under torch.profiler ----------------------------------------

JOB = textwrap.dedent("""
    import os, sys
    import torch, torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    out = sys.argv[1]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)

    def make_model():
        return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256),
                                   torch.nn.ReLU(), torch.nn.Linear(256, 8))

    def steps(model, n):
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x, y = torch.randn(64, 256), torch.randn(64, 8)
        for _ in range(n):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    # the same training without any collective (a plain model), gzip-compressed
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        steps(make_model(), 2)
    prof.export_chrome_trace(os.path.join(out, f"nocomm_rank{rank}.json.gz"))

    # DDP: small buckets, so the first buckets' all-reduce runs while backward goes on
    ddp = torch.nn.parallel.DistributedDataParallel(make_model(), bucket_cap_mb=0.25)
    steps(ddp, 2)  # warm-up, incl. DDP's bucket rebuild (a broadcast) in the 2nd iteration
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        steps(ddp, 3)
    prof.export_chrome_trace(os.path.join(out, f"ddp_rank{rank}.json"))
    dist.destroy_process_group()
""")


def _busy_time(intervals):
    """Sweep line (independent of tov.union): time during which at least one interval is open."""
    edges = sorted([(s, 1) for s, e in intervals] + [(e, -1) for s, e in intervals], key=lambda x: (x[0], -x[1]))
    busy, open_, last = 0.0, 0, None
    for t, step in edges:
        if open_ > 0:
            busy += t - last
        open_ += step
        last = t
    return busy


@pytest.fixture(scope="module")
def gloo_traces(tmp_path_factory):
    dist = pytest.importorskip("torch.distributed")
    if not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("torch.distributed with Gloo is not available")
    out = tmp_path_factory.mktemp("gloo_traces")
    (out / "job.py").write_text(JOB)
    # --standalone: torchrun's c10d rendezvous on localhost picks a free port itself
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(out / "job.py"), str(out)]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.mark.heavy
@pytest.mark.parametrize("rank", [0, 1])
def test_real_gloo_ddp_trace(gloo_traces, rank):
    path = gloo_traces / f"ddp_rank{rank}.json"
    o = tov.overlap_from_trace(path)
    assert o.source == "cpu_ops"
    assert o.n_comm_events > 0 and o.comm_us > 0 and o.compute_us > 0
    assert 0 <= o.overlap_fraction <= 1
    assert o.overlapped_us <= min(o.comm_us, o.compute_us) + 1e-6

    # Recompute the communication time from the raw JSON, another way: a sweep over gloo:* events.
    raw = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    gloo = [(e["ts"], e["ts"] + e["dur"]) for e in raw if e["name"].startswith("gloo:")]
    names = {e["name"] for e in raw}
    assert "gloo:all_reduce" in names and "c10d::allreduce_" in names  # what torch records for Gloo
    assert o.n_comm_events == len(gloo)
    assert o.comm_us == pytest.approx(_busy_time(gloo), rel=1e-9, abs=1e-6)


def test_real_gloo_trace_has_no_breakdown(gloo_traces):
    b = tov.breakdown_from_trace(gloo_traces / "ddp_rank0.json")
    assert math.isnan(b.span_us) and math.isnan(b.idle_pct)


@pytest.mark.parametrize("rank", [0, 1])
def test_real_trace_without_collectives_has_no_comm(gloo_traces, rank):
    o = tov.overlap_from_trace(gloo_traces / f"nocomm_rank{rank}.json.gz")  # gzip, as torch writes it
    assert o.source == "cpu_ops" and o.compute_us > 0
    assert o.n_comm_events == 0 and o.comm_us == 0 and math.isnan(o.overlap_fraction)


# --- profiled steps against the unprofiled step time -----------------------------------------


def _launch(ts, correlation):
    return {**X("cudaLaunchKernel", ts, 5, cat="cuda_runtime", tid=3), "args": {"correlation": correlation}}


def _kernel(name, ts, dur, correlation, stream=7):
    return {**K(name, ts, dur, stream=stream), "args": {"correlation": correlation}}


def gpu_steps(step_us: float, n: int = 3, span_us: float = 5000) -> list[dict]:
    """A GPU rank as torch.profiler writes profile_pass: each step's CPU span (5 ms, back to back)
    only launches its kernels (from another thread, as DDP's backward does); the GPU runs them
    later, queued, each step's last kernel ending step_us after the previous one's. The CPU spans
    alone would say 5 ms a step."""
    events = []
    for i in range(n):
        start = i * (span_us + 100)
        events += [X(f"distbench_step_{i}", start, span_us, cat="user_annotation"),
                   X(f"distbench_step_{i}", (i + 1) * step_us - 10, 5, cat="gpu_user_annotation", pid=0, tid=7),
                   _launch(start + 100, 10 * i + 1), _launch(start + 200, 10 * i + 2),
                   _kernel("gemm", i * step_us + 500, step_us - 2500, 10 * i + 1),
                   _kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", (i + 1) * step_us - 2000, 2000, 10 * i + 2,
                           stream=20)]
    return events


def test_profiled_steps_end_with_their_last_gpu_kernel():
    from distbench.traces.steps import profiled_steps

    p = profiled_steps(gpu_steps(11_500))
    assert p.step_ms == pytest.approx((11.5, 11.5, 11.5)) and p.median_ms == pytest.approx(11.5)
    # CPU only: the spans, each from the end of the one before (the first from its start)
    cpu = [X("distbench_step_0", 0, 2000, cat="user_annotation"), X("distbench_step_1", 2010, 3000,
                                                                     cat="user_annotation"),
           X("aten::mm", 10, 100)]
    assert profiled_steps(cpu).step_ms == pytest.approx((2.0, 3.01))
    assert profiled_steps([X("aten::mm", 0, 10)]).n_steps == 0


def _profiled_job(tmp_path, step_us: float):
    """A profiled 2-rank training job whose unprofiled median step is 10 ms, and its report inputs."""
    import pandas as pd

    from distbench.core.section import ReportInputs

    d = _job_dir(tmp_path, "training/nccl/mlp/ws2/default", [gpu_steps(step_us), gpu_steps(step_us * 0.98)])
    out = tmp_path / "trace_overlap.csv"
    tov.write_overlap_table({d: {"family": "training", "job": "nccl/mlp/ws2/default"}}, out)
    summary = tmp_path / "training_summary.csv"
    from distbench.core.contract import table_contract

    row = {"backend": "nccl", "model": "mlp", "strategy": "ddp", "world_size": 2, "config": "default",
           "step_time_ms_median": 10.0, "samples_per_s_median": 3200.0, "overlap_fraction": 0.5, "status": "ok"}
    # every column the table's contract owes its readers; an MLP row leaves the language models' empty
    columns = list(dict.fromkeys([*row, *table_contract("training_summary").columns]))
    pd.DataFrame([row], columns=columns).to_csv(summary, index=False)
    return out, ReportInputs({"trace_overlap": out, "training_summary": summary})


@pytest.mark.parametrize("step_us, slowdown, warned", [(11_500, "+15.0", True), (10_500, "+5.0", False)])
def test_profiler_slowdown_flagged_above_ten_percent(tmp_path, step_us, slowdown, warned):
    import pandas as pd

    from distbench.report.render import _environment
    from distbench.traces.section import TRACES, build

    out, inputs = _profiled_job(tmp_path, step_us)
    t = pd.read_csv(out)
    assert list(t["profiled_step_ms"]) == pytest.approx([step_us / 1e3, step_us * 0.98 / 1e3])
    assert list(t["n_profiled_steps"]) == [3, 3]
    part = build(inputs)
    headers, row = part["table"]["headers"], part["table"]["rows"][0]
    cells = {h: row[headers.index(h)] for h in ("profiled step ms", "unprofiled step ms", "profiler slowdown %")}
    assert cells["profiled step ms"] == f"{step_us / 1e3:.3g}"  # the slowest rank's median
    assert cells["unprofiled step ms"] == "10.0"
    assert cells["profiler slowdown %"].startswith(slowdown)
    assert ("trace describes a different run" in cells["profiler slowdown %"]) == warned
    assert len(part["warnings"]) == int(warned)
    env = _environment((TRACES,))  # the section's own fragments, as the report renders them
    for text in (env.get_template(f"traces.{ext}.j2").render(traces=part, figures={}) for ext in ("md", "html")):
        assert "## Traces" in text or '<h2 id="traces">' in text
        assert ("the profiler slowed the job by 15%" in text) == warned
        assert ("describes a different run than the measured one" in text) == warned


def test_comm_traces_get_no_slowdown(tmp_path):
    from distbench.core.section import ReportInputs
    from distbench.traces.section import build

    d = _job_dir(tmp_path, "comm", [gpu_steps(50_000)])
    out = tmp_path / "trace_overlap.csv"
    tov.write_overlap_table({d: {"family": "comm", "job": "nccl/float32/ws1/default"}}, out)
    part = build(ReportInputs({"trace_overlap": out}))
    headers, row = part["table"]["headers"], part["table"]["rows"][0]
    assert row[headers.index("profiler slowdown %")] == "—" and part["warnings"] == []


def test_real_h100_trace_profiled_step_matches_the_unprofiled_step():
    """The committed H100 trace (mlp, 4 ranks, rank 0): its CPU spans are about 6 ms, half the step,
    because a step only launches its GPU work; ended by its last GPU kernel, a profiled step is
    within 1% of the same run's unprofiled median (training_summary.csv)."""
    import pandas as pd

    from distbench.traces.steps import profiled_steps

    run = Path(__file__).resolve().parents[2] / "benchmarks/results/traces-h100x4-2026-11-26"
    events = tov.load_trace(run / "mlp_ws4_rank0.json.gz")
    spans = [e["dur"] / 1e3 for e in events if e["name"].startswith("distbench_step_") and e["cat"] == "user_annotation"]
    s = pd.read_csv(run / "training_summary.csv")
    unprofiled = float(s[(s["model"] == "mlp") & (s["world_size"] == 4)]["step_time_ms_median"].iloc[0])
    p = profiled_steps(events)
    assert p.n_steps == 3 and sorted(spans)[1] < 0.6 * unprofiled  # the median span
    assert p.median_ms == pytest.approx(unprofiled, rel=0.01)


def test_the_breakdown_of_many_ranks_names_the_idlest_beside_the_medians():
    import pandas as pd

    from distbench.traces.section import _breakdown_cell

    idle = [10.0, 12.0, 11.0, 97.0, 13.0, 9.0]  # rank 3 waits for the others
    other = [5.0, 5.0, 5.0, 1.0, 5.0, 5.0]
    ranks = pd.DataFrame({"rank": range(6), "source": "gpu_kernels", "idle_pct": idle,
                          "compute_time_pct": [100 - i - o for i, o in zip(idle, other)], "non_compute_time_pct": other})
    assert _breakdown_cell(ranks) == "median 11.5% / 83.5% / 5.0%; idlest, rank 3: 97.0% / 2.0% / 1.0%"
