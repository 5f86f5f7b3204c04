"""distbench.training.analysis.summary and distbench.training.analysis.plots on crafted training tables.

Every table goes through the real CSV contract (written, then read back by read_training_csv), and
every expected number is worked out by hand here, so changing a formula fails a test.
"""

from __future__ import annotations

import io
import math

import pandas as pd
import pytest

from distbench.training.analysis import summary as scaling
from distbench.training.analysis.plots import FIGURES, plot_training
from distbench.training.contract import TRAINING_COLUMN_NAMES, read_training_csv
from distbench.training.analysis.findings import best_config, bottleneck, training_findings
from distbench.training.analysis.summary import add_scaling, summarize_training

PLAIN_KNOBS = dict(bucket_cap_mb=25.0, gradient_as_bucket_view=False, static_graph=False, broadcast_buffers=True,
                   comm_hook="none", grad_accum=1, nccl_env="default")


def job(ws=2, config="plain", *, step=10.0, compute=9.0, allreduce=2.0, last=0.5, steps=None, n=5,
        sps=None, batch=100, scaling_mode="weak", global_batch=None, energy=None, status="ok", message="",
        backend="nccl", extra_status=(), **knobs) -> list[dict]:
    """Rows of one job: n steps (phase step) (all `step` ms, or `steps`), n compute_only, n comm_alone.

    `sps` sets the throughput instead of the step time (step = global batch / sps). `extra_status`
    appends (phase, status, message) rows, e.g. an OOM in one phase.
    """
    gbs = global_batch if global_batch is not None else (batch * ws if scaling_mode == "weak" else batch)
    if sps is not None:
        step = gbs / sps * 1000
    ddp_steps = list(steps) if steps is not None else [step] * n
    base = dict(backend=backend, world_size=ws, nodes=1, model="mlp", strategy="ddp", hidden_dim=256, num_layers=2,
                n_heads=None, seq_len=None, vocab_size=None, lora_rank=None, compile=False, tokens_per_s=None,
                tokens_per_s_per_device=None, params_total=1_000_000, params_trainable=1_000_000,
                flops_per_sample=6_000_000.0, device_name="NVIDIA H100 80GB HBM3", attention_kernel="",
                batch_size=batch if scaling_mode == "weak" else gbs // ws, global_batch_size=gbs,
                scaling=scaling_mode, dtype="float32", optimizer="sgd", **{**PLAIN_KNOBS, **knobs}, config=config,
                step_time_ms_rank_min=None, step_time_ms_rank_max=None, last_bucket_ms=None,
                samples_per_s=None, samples_per_s_per_device=None, grad_bytes=4_000_000, n_buckets=2,
                peak_mem_allocated_bytes=1000, peak_mem_reserved_bytes=2000, energy_j=None, correct=True,
                status=status, message=message)
    rows = []

    def add(phase, i, t, **kw):
        ok = status == "ok"
        rows.append({**base, "phase": phase, "step": i, "step_time_ms": t if ok else None,
                     "step_time_ms_rank_min": t if ok else None, "step_time_ms_rank_max": t if ok else None,
                     **kw})

    for i, t in enumerate(ddp_steps):
        add("step", i, t, samples_per_s=gbs / t * 1000 if status == "ok" else None,
            samples_per_s_per_device=gbs / t * 1000 / ws if status == "ok" else None, energy_j=energy,
            peak_mem_allocated_bytes=1000 + i, peak_mem_reserved_bytes=2000 + 10 * i)
    for i in range(n):
        if compute is not None:
            add("compute_only", i, compute)
        if allreduce is not None:
            add("comm_alone", i, allreduce, last_bucket_ms=last)
    for phase, st, msg in extra_status:
        rows.append({**base, "phase": phase, "step": 0, "step_time_ms": None, "status": st, "message": msg})
    return rows


def table(*jobs) -> pd.DataFrame:
    """The jobs' rows as training.csv, read back through the contract (dtypes and checks)."""
    df = pd.DataFrame([r for j in jobs for r in j], columns=list(TRAINING_COLUMN_NAMES))
    buf = io.StringIO(df.to_csv(index=False))
    return read_training_csv(buf)


def summary(*jobs, **kw) -> pd.DataFrame:
    return add_scaling(summarize_training(table(*jobs)), **kw)


def one(s, ws, config="plain") -> pd.Series:
    r = s[(s["world_size"] == ws) & (s["config"] == config)]
    assert len(r) == 1
    return r.iloc[0]


# ---------------------------------------------------------------- shape
def test_columns_and_one_row_per_job():
    s = summary(job(1), job(2), job(2, "bucket=100", bucket_cap_mb=100.0))
    assert tuple(s.columns) == scaling.SUMMARY_COLUMNS + scaling.SCALING_COLUMNS
    assert len(s) == 3
    r = one(s, 2)
    assert r["n_steps"] == 5 and r["grad_bytes"] == 4_000_000 and r["n_buckets"] == 2
    assert r["peak_mem_allocated_bytes"] == 1004 and r["peak_mem_reserved_bytes"] == 2040  # max over steps
    empty = summarize_training(table())
    assert empty.empty and tuple(empty.columns) == scaling.SUMMARY_COLUMNS


def test_step_statistics():
    r = one(summary(job(2, steps=[8.0, 9.0, 10.0, 11.0, 12.0])), 2)
    assert r["step_time_ms_median"] == 10.0
    assert r["step_time_ms_p5"] == pytest.approx(8.2)  # linear interpolation, as aggregate.py
    assert r["step_time_ms_p95"] == pytest.approx(11.8)
    assert r["step_time_ms_cv"] == pytest.approx(math.sqrt(2) / 10)  # std (ddof=0) / mean
    assert r["samples_per_s_median"] == pytest.approx(200 / 10.0 * 1000)
    assert r["samples_per_s_per_device_median"] == pytest.approx(200 / 10.0 * 1000 / 2)


# ---------------------------------------------------------------- efficiency
def test_efficiency_weak_scaling():
    s = summary(job(1, sps=1000), job(2, sps=1800), job(4, sps=3400))
    assert one(s, 1)["efficiency_vs_plain_1gpu"] == pytest.approx(1.0)
    assert one(s, 2)["efficiency_vs_plain_1gpu"] == pytest.approx(0.90)  # 1800 / (2 x 1000)
    assert one(s, 4)["efficiency_vs_plain_1gpu"] == pytest.approx(0.85)  # 3400 / (4 x 1000)
    assert one(s, 4)["plain_1gpu_samples_per_s"] == pytest.approx(1000)


def test_efficiency_strong_scaling_uses_the_same_global_batch():
    s = summary(job(1, sps=1000, scaling_mode="strong", global_batch=400),
                job(2, sps=1800, scaling_mode="strong", global_batch=400),
                # another 1-rank strong run with a different global batch, and a weak 1-rank run:
                # neither may serve as the baseline
                job(1, sps=5000, scaling_mode="strong", global_batch=800),
                job(1, sps=7000, scaling_mode="weak", batch=400))
    r = s[(s["world_size"] == 2)].iloc[0]
    assert r["efficiency_vs_plain_1gpu"] == pytest.approx(0.90)
    # the classic strong-scaling form T(1) / (N x T(N)) gives the same number
    t1 = one(s[(s["global_batch_size"] == 400) & (s["scaling"] == "strong")], 1)["step_time_ms_median"]
    assert r["efficiency_vs_plain_1gpu"] == pytest.approx(t1 / (2 * r["step_time_ms_median"]))


def test_efficiency_against_plain_vs_own_one_gpu_run():
    hook = dict(comm_hook="bf16_compress")
    s = summary(job(1, sps=1000), job(2, sps=1800),
                job(1, "hook=bf16_compress", sps=800, **hook), job(2, "hook=bf16_compress", sps=1700, **hook),
                job(2, "bucket=100", sps=1900, bucket_cap_mb=100.0))  # no 1-rank run of its own
    h = one(s, 2, "hook=bf16_compress")
    assert h["efficiency_vs_plain_1gpu"] == pytest.approx(1700 / (2 * 1000))
    assert h["efficiency_vs_own_1gpu"] == pytest.approx(1700 / (2 * 800))
    assert one(s, 1, "hook=bf16_compress")["efficiency_vs_plain_1gpu"] == pytest.approx(0.8)
    assert one(s, 2)["efficiency_vs_own_1gpu"] == pytest.approx(0.9)  # plain's own run is the plain run
    b = one(s, 2, "bucket=100")
    assert b["efficiency_vs_plain_1gpu"] == pytest.approx(0.95) and math.isnan(b["efficiency_vs_own_1gpu"])


def test_no_plain_baseline_gives_nan():
    s = summary(job(2, sps=1800))
    assert math.isnan(one(s, 2)["efficiency_vs_plain_1gpu"])


# ---------------------------------------------------------------- exposed comm, overlap, tail
def test_exposed_comm_and_overlap():
    r = one(summary(job(2, step=10.0, compute=9.0, allreduce=4.0)), 2)
    assert r["exposed_comm_ms"] == pytest.approx(1.0)
    assert r["overlap_fraction"] == pytest.approx(0.75)  # 1 - 1/4


def test_overlap_clipped_and_negative_exposed_kept_raw():
    s = summary(job(2, step=15.0, compute=10.0, allreduce=2.0),  # 1 - 5/2 = -1.5 -> 0
                job(3, step=8.9, compute=9.0, allreduce=2.0))  # 1 + 0.1/2 = 1.05 -> 1
    assert one(s, 2)["overlap_fraction"] == 0.0
    r = one(s, 3)
    assert r["exposed_comm_ms"] == pytest.approx(-0.1)  # noise, kept
    assert r["overlap_fraction"] == 1.0


def test_overlap_nan_at_one_rank_or_without_allreduce():
    s = summary(job(1, step=10.0, compute=9.0, allreduce=2.0), job(2, allreduce=None))
    assert math.isnan(one(s, 1)["overlap_fraction"])
    r = one(s, 2)
    assert math.isnan(r["overlap_fraction"]) and math.isnan(r["comm_alone_ms_median"])


def test_tail_and_other_buckets_split():
    s = summary(job(2, step=10.9, compute=9.3, allreduce=1.8, last=0.9),  # exposed 1.6
                job(3, step=10.9, compute=9.3, allreduce=1.8, last=3.0),  # last bucket > exposed
                job(4, step=8.9, compute=9.0, allreduce=1.8, last=0.9))  # nothing exposed
    a = one(s, 2)
    assert a["tail_comm_ms"] == pytest.approx(0.9) and a["exposed_comm_other_buckets_ms"] == pytest.approx(0.7)
    b = one(s, 3)
    assert b["tail_comm_ms"] == pytest.approx(1.6) and b["exposed_comm_other_buckets_ms"] == pytest.approx(0.0)
    c = one(s, 4)
    assert c["tail_comm_ms"] == 0.0 and c["exposed_comm_other_buckets_ms"] == 0.0
    assert a["last_bucket_ms_median"] == pytest.approx(0.9)


# ---------------------------------------------------------------- cost and energy
def test_cost_only_when_a_price_is_given():
    jobs = (job(1, sps=1000), job(2, sps=2000))
    r = one(summary(*jobs, cost_gpu_hour_usd=3.6), 2)
    assert r["cost_usd_per_1k_samples"] == pytest.approx(2 * 3.6 / 3600 / 2000 * 1000)  # $0.001
    assert summary(*jobs)["cost_usd_per_1k_samples"].isna().all()


def test_energy_per_step_and_per_1k_samples():
    s = summary(job(2, energy=50.0), job(3))
    r = one(s, 2)
    assert r["energy_j_per_step_median"] == pytest.approx(50.0)
    assert r["energy_j_per_1k_samples"] == pytest.approx(50.0 / 200 * 1000)  # 200 samples per step
    r3 = one(s, 3)
    assert math.isnan(r3["energy_j_per_step_median"]) and math.isnan(r3["energy_j_per_1k_samples"])


# ---------------------------------------------------------------- bounds
def test_bounds_ok_true():
    r = one(summary(job(2, step=10.0, compute=9.0, allreduce=2.0)), 2)
    assert bool(r["bounds_ok"]) is True
    assert r["bounds_note"] == ""


def test_bounds_step_faster_than_compute():
    # allowance = max(2 x 0, 2% x 9.0) = 0.18 ms; compute 9.5 > 9.0 + 0.18
    r = one(summary(job(2, step=9.0, compute=9.5, allreduce=2.0)), 2)
    assert not r["bounds_ok"]
    assert "faster than compute alone" in r["bounds_note"] and "180 µs noise allowance" in r["bounds_note"]


def test_bounds_step_slower_than_compute_plus_allreduce():
    r = one(summary(job(2, step=15.0, compute=10.0, allreduce=2.0)), 2)
    assert not r["bounds_ok"]
    assert "exceeds compute alone plus the all-reduce alone" in r["bounds_note"] and "12.0 ms" in r["bounds_note"]


def test_bounds_allowance_ignores_the_step_spread():
    # p5 = 9.1, p95 = 10.9, but compute_only and comm_alone are exact: the allowance is the 2% floor
    # (0.2 ms), so compute 10.15 <= 10 + 0.2 passes while compute 10.25 fails, however wide the step's spread
    steps = [9.0, 9.5, 10.0, 10.5, 11.0]
    s = summary(job(2, steps=steps, compute=10.15, allreduce=5.0), job(3, steps=steps, compute=10.25, allreduce=5.0))
    assert one(s, 2)["bounds_allowance_ms"] == pytest.approx(0.2)
    assert bool(one(s, 2)["bounds_ok"]) is True
    assert bool(one(s, 3)["bounds_ok"]) is False


def test_bounds_not_applicable_at_one_rank():
    r = one(summary(job(1)), 1)
    assert pd.isna(r["bounds_ok"]) and "world size 1" in r["bounds_note"]


# ---------------------------------------------------------------- verdict
def test_verdict_communication_bound():
    r = one(summary(job(2, step=10.9, compute=7.9, allreduce=4.0, last=0.9)), 2)  # exposed 3.0 = 27.5%
    label, text = bottleneck(r)
    assert label == "communication-bound"
    assert text.startswith("2 GPUs: 3.00 ms of each 10.9 ms step (28%) is exposed communication")
    assert "25% of the gradient all-reduce (4.00 ms alone) overlaps backward" in text
    assert "900 µs is the last bucket's all-reduce" in text
    assert "2.10 ms the other buckets' all-reduces not hidden behind it" in text and "slowed" not in text


def test_verdict_threshold_is_25_percent_of_the_step():
    at = one(summary(job(2, step=12.0, compute=9.0, allreduce=4.0)), 2)  # exactly 25%
    below = one(summary(job(2, step=12.0, compute=9.12, allreduce=4.0)), 2)  # 24%
    assert bottleneck(at)[0] == "communication-bound"
    assert bottleneck(below)[0] == "compute-bound"


def test_verdict_host_bound():
    r = one(summary(job(2, step=15.0, compute=10.0, allreduce=2.0)), 2)
    label, text = bottleneck(r)
    assert label == "host-bound"
    assert "3.00 ms more than compute alone (10.0 ms)" in text and "(2.00 ms)" in text and "host" in text


def test_verdict_host_bound_needs_more_than_the_noise_allowance():
    # 12.2 <= 10 + 2 + 0.244 (2% of the step): not host-bound; exposed 2.2 = 18%: compute-bound
    r = one(summary(job(2, step=12.2, compute=10.0, allreduce=2.0)), 2)
    assert bottleneck(r)[0] == "compute-bound"


def test_verdict_compute_bound():
    r = one(summary(job(2, step=10.5, compute=10.0, allreduce=2.0, last=0.3)), 2)
    label, text = bottleneck(r)
    assert label == "compute-bound"
    assert "500 µs of each 10.5 ms step (5%)" in text and "75% of the gradient all-reduce" in text
    assert "compute (10.0 ms under no_sync) dominates" in text


def test_verdict_at_one_rank_names_no_communication():
    label, text = bottleneck(one(summary(job(1, step=10.0, compute=9.0)), 1))
    assert label == "compute-bound"
    assert text.startswith("1 GPU: no communication between ranks; each 10.0 ms step spends 1.00 ms (10%)")


def test_findings_energy_per_1k_samples():
    lines = training_findings(summary(job(2, energy=50.0)))
    assert "250 J per 1K samples" in lines[0]  # 50 J per step / 200 samples x 1000


def test_verdict_unknown_for_a_failed_job():
    r = one(summary(job(2, status="failed", message="NCCL timeout")), 2)
    label, text = bottleneck(r)
    assert label == "unknown" and "failed" in text and "NCCL timeout" in text


# ---------------------------------------------------------------- status
def test_worst_status_and_first_message():
    s = summary(job(2, extra_status=[("compute_only", "oom", ""), ("comm_alone", "failed", "rank 1 died")]),
                job(3, extra_status=[("compute_only", "skipped", "no GPU"), ("step", "wrong", "replicas differ")]),
                job(4, extra_status=[("compute_only", "skipped", "")]),
                job(5, extra_status=[("compute_only", "failed", "x"), ("step", "wrong", "y"), ("step", "oom", "z")]),
                job(6, extra_status=[("compute_only", "skipped", ""), ("step", "oom", "out of memory")]))
    assert one(s, 2)["status"] == "failed" and one(s, 2)["message"] == "rank 1 died"
    assert one(s, 3)["status"] == "wrong" and one(s, 3)["message"] == "no GPU"
    assert one(s, 4)["status"] == "skipped"
    assert one(s, 5)["status"] == "wrong"  # wrong > failed > oom > skipped > ok
    assert one(s, 6)["status"] == "oom" and one(s, 6)["message"] == "out of memory"
    assert one(s, 2)["n_steps"] == 5  # ok steps still summarized
    assert math.isnan(one(s, 2)["efficiency_vs_plain_1gpu"])  # a job that is not ok gets no efficiency


# ---------------------------------------------------------------- best config and findings
def _tuned():
    return (job(1, step=10.0), job(2, step=10.5, compute=9.6, allreduce=3.0),  # 200/10.5 vs 2 x 100/10
            job(4, sps=4 * 10000 * 0.90),
            job(4, "bucket=100", sps=4 * 10000 * 0.93, bucket_cap_mb=100.0),
            job(2, "static=on", sps=2 * 10000 * 0.99, static_graph=True),  # best, but not at the largest ws
            job(4, "hook=bf16_compress", status="failed", message="CUDA error", comm_hook="bf16_compress"))


def test_best_config_at_the_largest_world_size():
    best = best_config(summary(*_tuned()))
    assert best.config == "bucket=100" and best.world_size == 4
    assert best.efficiency == pytest.approx(0.93) and best.plain_efficiency == pytest.approx(0.90)
    assert best.gain_points == pytest.approx(3.0)
    assert best_config(summary()) is None


def test_findings_sentences_carry_the_numbers():
    lines = training_findings(summary(*_tuned()))
    assert lines[0] == "ws4 config hook=bf16_compress: failed — CUDA error."  # failures first
    eff = (200 / 10.5) / (2 * 100 / 10.0)  # 95.2%
    assert (f"MLP 256x2, 2 GPUs (plain DDP, weak scaling): {100 * eff:.1f}% scaling efficiency against the plain 1-GPU run; "
            "900 µs of each 10.5 ms step is exposed communication; "
            "70% of gradient communication overlaps compute.") in lines
    assert any(line.startswith("MLP 256x2, 4 GPUs (bucket=100, weak scaling): 93.0% scaling efficiency") for line in lines)
    assert lines[-1] == "4 GPUs, best: bucket=100 at 93.0%, +3.0 points over plain DDP (90.0%)."
    assert not any(" 1 GPU " in line for line in lines)  # one sentence per world size > 1 (the MLP)


def test_findings_skip_missing_numbers_and_add_cost():
    lines = training_findings(summary(job(2, allreduce=None), cost_gpu_hour_usd=3.6))  # no 1-rank run
    assert len(lines) == 1
    assert "scaling efficiency" not in lines[0] and "overlaps" not in lines[0]
    cost = 2 * 3.6 / 3600 / (200 / 10.0 * 1000) * 1000
    assert lines[0].startswith("MLP 256x2, 2 GPUs (plain DDP, weak scaling): 1.00 ms of each 10.0 ms step")
    assert cost == pytest.approx(0.0001) and "$0.0001 per 1K samples" in lines[0]
    assert training_findings(summarize_training(table())) == []


def test_findings_report_a_failed_bounds_check():
    lines = training_findings(summary(job(1), job(2, step=15.0, compute=10.0, allreduce=2.0)))
    assert "timing check failed: step 15.0 ms exceeds" in lines[0]


# ---------------------------------------------------------------- figures
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


MLP_FIGURES = set(FIGURES) - {"training_lm_throughput"}  # the language models' figure needs their rows


def test_plot_training_writes_the_mlp_figures(tmp_path):
    s = summary(job(1, step=10.0), job(2, step=10.5), job(4, step=11.0),
                job(1, "bucket=100", step=10.0, bucket_cap_mb=100.0),
                job(4, "bucket=100", step=10.6, bucket_cap_mb=100.0))
    paths = plot_training(s, tmp_path / "fig")
    assert {p.name for p in paths} == {f"{n}.{e}" for n in MLP_FIGURES for e in ("png", "svg")}
    assert {p.name for p in (tmp_path / "fig").iterdir()} == {p.name for p in paths}  # no temp files left
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC) if p.suffix == ".png" else b"<svg" in data[:400]


def test_plot_training_empty_summary_writes_nothing(tmp_path):
    assert plot_training(summarize_training(table()), tmp_path / "fig") == []
    assert not (tmp_path / "fig").exists()


def test_plot_training_without_tuning_skips_the_tuning_figure(tmp_path):
    names = {p.stem for p in plot_training(summary(job(1), job(2)), tmp_path)}
    assert names == MLP_FIGURES - {"training_tuning"}


def test_a_tuning_point_with_nccl_settings_uses_its_ddp_knobs_one_rank_run():
    from distbench.training.analysis.summary import ddp_only_label

    assert ddp_only_label("bucket=100+NCCL_MAX_CTAS=8", "NCCL_MAX_CTAS=8") == "bucket=100"
    assert ddp_only_label("NCCL_MAX_CTAS=8", "NCCL_MAX_CTAS=8") == "plain"
    assert ddp_only_label("bucket=100", "default") == "bucket=100"
    s = summary(job(1, sps=1000), job(1, "bucket=100", sps=900, bucket_cap_mb=100.0),
                job(2, "bucket=100+NCCL_MAX_CTAS=8", sps=1710, bucket_cap_mb=100.0, nccl_env="NCCL_MAX_CTAS=8"),
                job(2, "NCCL_MAX_CTAS=8", sps=1800, nccl_env="NCCL_MAX_CTAS=8"))
    assert one(s, 2, "bucket=100+NCCL_MAX_CTAS=8")["efficiency_vs_own_1gpu"] == pytest.approx(1710 / (2 * 900))
    assert one(s, 2, "NCCL_MAX_CTAS=8")["efficiency_vs_own_1gpu"] == pytest.approx(0.9)


# ---------------------------------------------------------------- a CPU run never says GPU
def _figure_texts(s: pd.DataFrame) -> dict[str, list[str]]:
    """Every text of every training figure (titles, axis labels, tick labels, legends) drawn from s,
    the MLP's figures from its rows and the language models' from the same rows relabelled as gpt."""
    from matplotlib.text import Text

    from distbench.training.analysis.plots import BUILDERS, plt

    ok = s[s["status"] == "ok"]
    lm = ok.assign(model="gpt", seq_len=32, tokens_per_s_median=ok["samples_per_s_median"] * 32)
    texts = {}
    for name, build in BUILDERS.items():
        fig = build(lm if name == "training_lm_throughput" else ok)
        assert fig is not None, name
        texts[name] = [t.get_text() for t in fig.findobj(Text) if t.get_text()]
        plt.close(fig)
    return texts


def _backend_jobs(backend: str):
    device = "cpu" if backend == "gloo" else "NVIDIA H100 80GB HBM3"
    jobs = (job(1, backend=backend), job(2, step=10.5, backend=backend), job(4, step=11.0, backend=backend),
            job(4, "bucket=100", step=10.6, bucket_cap_mb=100.0, backend=backend))
    return [[dict(r, device_name=device) for r in j] for j in jobs]


def test_gloo_figures_and_section_never_say_gpu(tmp_path):
    s = summary(*_backend_jobs("gloo"))
    texts = _figure_texts(s)
    for name, words in texts.items():
        assert not [w for w in words if "GPU" in w], name
    assert any("1 rank" in w for w in texts["training_efficiency"])
    assert "world size (ranks, CPU processes under Gloo)" in texts["training_throughput"]
    # the training section (findings, tables, note) on the same rows
    from distbench.core.section import ReportInputs
    from distbench.training.analysis.section import build

    s.to_csv(tmp_path / "training_summary.csv", index=False)
    part = build(ReportInputs({"training_summary": tmp_path / "training_summary.csv"}))
    words = part["findings"] + [part["note"]] + part["table"]["headers"] + [c for r in part["table"]["rows"] for c in r]
    assert not [w for w in words if "GPU" in str(w)]
    assert "efficiency vs plain 1 rank" in part["table"]["headers"]


def test_nccl_figures_say_one_gpu():
    texts = _figure_texts(summary(*_backend_jobs("nccl")))
    assert any("plain DDP on 1 GPU" in w for w in texts["training_efficiency"])
    assert any("plain DDP on 1 GPU" in w for w in texts["training_tuning"])
    assert any("on 1 GPU" in w for w in texts["training_lm_throughput"])
    assert "world size (ranks, one GPU each)" in texts["training_step_breakdown"]


def test_mixed_backends_name_both_baselines():
    from distbench.training.analysis.findings import one_device_of

    s = pd.concat([summary(*_backend_jobs("gloo")), summary(*_backend_jobs("nccl"))])
    assert one_device_of(s) == "1 GPU (NCCL) or 1 rank (Gloo)"
    assert one_device_of(s[s["backend"] == "gloo"]) == "1 rank" and one_device_of(s.drop(columns="backend")) == "1 GPU"
