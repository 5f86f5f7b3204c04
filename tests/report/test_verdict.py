"""The report's verdict: headline numbers with units, references and one-word verdicts, failing
first; the committed 4x H100 tables as a real case; the cache state from job provenance."""

import json
from datetime import datetime, timedelta, timezone

import pandas as pd
import pytest
from synthetic import make_synthetic, summary_row

from distbench.comm.analysis.headlines import comm_headlines
from distbench.core.section import ReportInputs
from distbench.memory.analysis.section import memory_headlines
from distbench.report.appendix import _cache_state
from distbench.report.render import render_report
from distbench.report.verdict import ordered
from distbench.training.analysis.section import training_headlines
from tests.conftest import REPO

GiB = 2**30
PEAK = {"peak_gbps": 450.0, "link": "NVLink4 x18"}


def headlines(summary, training=None, memory=None, gpu_name=None, peak=None, nvls=None) -> list[dict]:
    """Each family's headlines, in the registry's order, ordered as the report's Verdict shows them."""
    return ordered(comm_headlines(summary, gpu_name, peak, nvls) + training_headlines(training)
                   + memory_headlines(memory))


def _comm(bw, ws=8, status="ok", backend="nccl", op="all_reduce"):
    t = GiB * 2 * (ws - 1) / ws / (bw * 1e3)  # µs for this busbw
    return summary_row(backend=backend, world_size=ws, op=op, size_bytes=GiB, time_us_median=t,
                       busbw_gbps_median=bw, status=status, correct=status != "wrong")


@pytest.mark.parametrize("bw,verdict,words", [
    (365.0, "healthy", "within the published 360-370 GB/s for 8x H100"),
    (330.0, "healthy", "near the published 360-370 GB/s"),  # >= 90% of the low end
    (250.0, "below expected", "below the published 360-370 GB/s"),
])
def test_nccl_against_the_published_figure(bw, verdict, words):
    h = headlines(pd.DataFrame([_comm(bw)]), gpu_name="NVIDIA H100 80GB HBM3", peak=PEAK, nvls=False)[0]
    assert h["verdict"] == verdict and words in h["reason"], h
    assert h["headline"].startswith(f"NCCL all_reduce 1 GiB: {bw:.0f} GB/s busbw at 8 ranks, ")
    assert f"{100 * bw / 450:.0f}% of the 450 GB/s NVLink4 x18 peak" in h["headline"]


def test_peak_only_gloo_and_wrong_results():
    # 4 A100s: no reference figure, so the link peak decides
    h = headlines(pd.DataFrame([_comm(100.0, ws=4)]), gpu_name="NVIDIA A100-SXM4-80GB", peak=PEAK)[0]
    assert h["verdict"] == "below expected" and "under 50% of the link peak" in h["reason"]
    g = headlines(pd.DataFrame([_comm(3.0, ws=2, backend="gloo")]))[0]
    assert g["verdict"] == "measured" and "Gloo" in g["reason"]
    rows = pd.DataFrame([_comm(365.0), {**_comm(365.0), "size_bytes": 2**20, "status": "wrong", "correct": False}])
    bad = headlines(rows, gpu_name="NVIDIA H100 80GB HBM3", peak=PEAK)[0]
    assert bad["verdict"] == "failing" and "1 measurement(s) returned wrong results" in bad["reason"]


def _train(ws, eff, step=100.0, exposed=5.0, status="ok", model="mlp"):
    return dict(model=model, strategy="ddp", config="plain", backend="nccl", world_size=ws, status=status,
                message="boom" if status != "ok" else "", efficiency_vs_plain_1gpu=eff, step_time_ms_median=step,
                compute_only_ms_median=step - exposed, exposed_comm_ms=exposed, comm_alone_ms_median=exposed * 2,
                overlap_fraction=0.5, tail_comm_ms=1.0, compute_slowdown_ms=0.0)


def test_training_and_memory_and_order():
    train = pd.DataFrame([_train(1, 1.0), _train(4, 0.95), _train(4, 0.6, exposed=40.0, model="gpt"),
                          _train(2, None, status="failed", model="lora")])
    mem = pd.DataFrame([dict(model="gpt", config="ddp", world_size=1, status="ok", largest_batch_fits=24,
                             largest_measured_batch=8, peak_allocated_bytes=70 * GiB, message="")])
    hs = headlines(pd.DataFrame([_comm(365.0)]), train, mem, gpu_name="NVIDIA H100 80GB HBM3", peak=PEAK)
    assert [h["verdict"] for h in hs] == ["failing", "below expected", "healthy", "healthy", "measured"]
    assert hs[0]["area"] == "training" and hs[0]["headline"].startswith("lora (ddp, plain) at 2 ranks: failed")
    gpt = hs[1]
    assert gpt["headline"] == "gpt (ddp, plain) at 4 ranks: 60% scaling efficiency vs 1 GPU, 40.0 ms exposed communication of a 100 ms step"
    assert gpt["reason"] == ("under 90% of linear scaling: the 100 ms step is 40.0 ms over the 60.0 ms that linear "
                             "scaling from 1 GPU gives; the largest cost is exposed communication, 40.0 ms (40% of the step)")
    # an older search (no confirm row): the peak is named with the batch it belongs to, never beside 24
    assert hs[-1]["headline"] == ("gpt (ddp) at 1 rank: largest batch that fits: 24 per rank; measured split at "
                                  "batch 8: peak 70 GiB allocated")



def test_an_efficiency_that_rounds_onto_the_threshold_keeps_its_decimal():
    # 4x H200, gpt 1.3b DDP at 89.6%: "90% scaling efficiency" beside "under 90% of linear scaling" read
    # as a contradiction
    for eff, shown, verdict in ((0.8962, "89.6%", "below expected"), (0.9041, "90.4%", "healthy"),
                                (0.874, "87%", "below expected"), (0.90, "90%", "healthy")):
        h = headlines(pd.DataFrame([_comm(365.0)]), pd.DataFrame([_train(1, 1.0), _train(4, eff)]),
                      gpu_name="NVIDIA H100 80GB HBM3", peak=PEAK)
        t = next(x for x in h if x["area"] == "training")
        assert t["headline"].startswith(f"mlp (ddp, plain) at 4 ranks: {shown} scaling efficiency") and \
            t["verdict"] == verdict, (eff, t)


def test_super_linear_scaling_is_not_called_healthy():
    """Above 110% of linear scaling the 1-GPU baseline ran slower per GPU than the larger run (seen on
    2x H100 with gpt 125m: 122%); the verdict says so instead of calling it healthy."""
    h = headlines(pd.DataFrame([_comm(365.0)]), pd.DataFrame([_train(1, 1.0), _train(2, 1.22)]),
                  gpu_name="NVIDIA H100 80GB HBM3", peak=PEAK)
    t = next(x for x in h if x["area"] == "training")
    assert t["headline"].startswith("mlp (ddp, plain) at 2 ranks: 122% scaling efficiency vs 1 GPU")
    assert t["verdict"] == "measured" and "the baseline is suspect" in t["reason"]
    ok = next(x for x in headlines(pd.DataFrame([_comm(365.0)]), pd.DataFrame([_train(1, 1.0), _train(2, 1.05)]))
              if x["area"] == "training")
    assert ok["verdict"] == "healthy"  # a little above linear (noise, caches) is still healthy


def test_the_committed_h100_run():
    s = pd.read_csv(REPO / "benchmarks/results/traces-h100x4-2026-11-26/comm_summary.csv")
    t = pd.read_csv(REPO / "benchmarks/results/traces-h100x4-2026-11-26/training_summary.csv")
    hs = headlines(s, t, gpu_name="NVIDIA H100 80GB HBM3", peak=PEAK)
    comm = next(h for h in hs if h["area"] == "communication")
    assert comm["headline"] == "NCCL all_reduce 256 MiB: 339 GB/s busbw at 4 ranks, 75% of the 450 GB/s NVLink4 x18 peak"
    assert comm["verdict"] == "healthy"
    mlp = next(h for h in hs if h["headline"].startswith("mlp"))
    assert mlp["headline"].startswith("mlp (ddp, plain) at 4 ranks: 89% scaling efficiency") and mlp["verdict"] == "below expected"


def test_the_report_opens_with_the_verdict(tmp_path):
    data = make_synthetic(tmp_path / "t", pd.DataFrame([_comm(365.0), {**_comm(365.0), "size_bytes": 8, "status": "skipped",
                                                                       "message": "too small"}]))
    out_md, out_html = tmp_path / "r.md", tmp_path / "r.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, data["env_json"], [], {}, data["plan"],
                               extra={"peak": PEAK}),
                  out_md, out_html)
    md = out_md.read_text()
    assert md.index("## Verdict") < md.index("## Findings")
    assert "| communication | NCCL all_reduce 1 GiB: 365 GB/s busbw at 8 ranks, 81% of the 450 GB/s NVLink4 x18 peak " \
           "| **healthy** |" in md
    findings = md.split("## Findings")[1].split("\n## ")[0]
    plan = md.split("## Plan")[1].split("\n## ")[0]
    assert "skipped" not in findings and "1 measurement was skipped" in plan  # skipped points: the plan's
    assert "1 measurement was skipped (too small): all_reduce NCCL ws 8" in plan  # with its reason, from the table
    assert "Measurements that did not succeed" not in md  # a point skipped by design did not fail
    assert '<td class="v-healthy">healthy</td>' in out_html.read_text()


def test_cache_state_from_provenance(tmp_path):
    start = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)
    paths = []
    # "same": provenance written in whole seconds, the job started in the run's first second
    for name, started in (("old", start - timedelta(hours=2)), ("new", start + timedelta(minutes=1)),
                          ("same", start - timedelta(seconds=0.5))):
        p = tmp_path / "results" / "comm" / name / "placement.json"
        p.parent.mkdir(parents=True)
        p.write_text(json.dumps({"ranks": [], "provenance": {
            "commit": "0123456789abcdef0123", "host": "node-1", "started": started.isoformat(),
            "finished": (started + timedelta(seconds=30)).isoformat(timespec="seconds"), "outcome": "ok",
            "commands": [f"python -m torch.distributed.run --nproc_per_node=2 -m distbench.comm --out {name}.csv"]}}))
        paths.append(p)
    (tmp_path / "none.json").write_text("{}")
    cache = _cache_state([*paths, tmp_path / "none.json"], start)
    rows = {r[0].split("/")[-1] if "/" in r[0] else r[0]: r for r in cache["table"]["rows"]}
    assert rows["old"][1] == "reused from an earlier run" and rows["old"][2] == "2026-11-26 10:00:30"
    assert rows["new"][1] == "this run" and rows["new"][4] == "0123456789ab" and rows["same"][1] == "this run"
    assert cache["note"].startswith("4 benchmark jobs: 1 reused from earlier runs")
    assert "-m distbench.comm --out old.csv" in cache["commands"] and cache["commands"].endswith("--out same.csv")
