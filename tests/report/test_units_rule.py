"""Issue 35: every number the report shows follows the README's units rule (distbench/core/units.py),
the appendix lists every launch of the run once, a training verdict's reason agrees with it, and a
communication verdict without a reference figure says which one it lacks."""

import json
import re

import pandas as pd
import pytest

from distbench.comm.analysis.advice import advise
from distbench.comm.analysis.headlines import comm_headlines
from distbench.core.references import missing_reference
from distbench.core.units import every_nth, human_gbps, ordinal, sig3
from distbench.launch import batch
from distbench.report.appendix import _cache_state
from distbench.training.analysis import section as training_section
from distbench.training.analysis.summary import add_scaling
from tests.comm.test_peak_advice import frame, row
from tests.report.test_smoke_verdicts import _training_row

GiB = 2**30


# ---------------------------------------------------------------- units
@pytest.mark.parametrize("x,text", [(2e-6, "0.00000200"), (0.0000757, "0.0000757"), (9.996, "10.0"),
                                    (0.0001, "0.000100"), (-2e-6, "-0.00000200")])
def test_three_significant_digits_never_an_exponent(x, text):
    """"2.00e-06 GB/s" came from sig3's '.3g' below 0.0001."""
    assert sig3(x) == text and "e" not in sig3(x)
    assert human_gbps(2e-6) == "0.00000200 GB/s"


def test_ordinals_and_every_nth():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th"]
    assert [every_nth(n, "size") for n in (1, 2, 3, 4)] == ["every size", "every other size", "every 3rd size",
                                                              "every 4th size"]


def test_the_plan_says_every_other_size_not_every_2th():
    from distbench.pipeline.config import check_config
    from distbench.pipeline.plan import make_plan

    cfg = check_config({"backends": ["gloo"], "comm": {"sizes": {"min_bytes": 8, "max_bytes": "64MiB", "step_factor": 2},
                                                       "gloo": {"max_bytes": "1KiB", "size_stride": 2}}})
    why = [s["why"] for s in make_plan(cfg, detected=(0, "test"))["skipped"] if "between those measured" in s["what"]]
    assert why and "measures every other size" in why[0] and "2th" not in why[0]


def test_noisy_advice_writes_p5_and_p95_in_the_unit_that_fits():
    """'p5 54359.0 us, p95 121515.0 us' -> 'p5 54.4 ms, p95 122 ms'."""
    fired = [i["text"] for i in advise(frame(row(time_us_cv=0.3, time_us_p5=54359.0, time_us_p95=121515.0)))
             if i["severity"] == "warn"]
    assert any("(p5 54.4 ms, p95 122 ms)" in t for t in fired), fired
    assert not any(" us" in t for t in fired)


# ---------------------------------------------------------------- training
def _cpu_training() -> pd.DataFrame:
    rows = [_training_row(m, ws, "gloo") for m in ("mlp", "gpt") for ws in (1, 2)]
    for r in rows:
        if r["model"] == "gpt":
            r["tflops_per_device"] = 0.0000757  # a CPU rank: model FLOPs are tiny against a GPU's
    return add_scaling(pd.DataFrame(rows))


def test_tflops_on_cpu_rows_keep_three_significant_digits():
    """'TFLOP/s per device' showed 0.0 in all 16 CPU rows (one decimal)."""
    lm = _cpu_training()
    lm = lm[lm["model"] == "gpt"]
    t = training_section._lm_table(lm)
    col = t["headers"].index("TFLOP/s per device")
    assert {r[col] for r in t["rows"]} == {"0.0000757"}
    grads = t["headers"].index("gradients per step")
    assert {r[grads] for r in t["rows"]} == {"39.1 KiB"}  # sizes in B/KiB/MiB/GiB, never MB


def test_training_tables_write_times_in_the_unit_that_fits():
    t = training_section._lm_table(_cpu_training().query("model == 'gpt'"))
    other = t["headers"].index("exposed comm")
    assert [r[other] for r in t["rows"]] == ["—", "50.0 ms"]


def test_training_findings_write_times_and_sizes_in_the_unit_that_fits():
    """'exposed communication 0.332 ms of a 158 ms step' and '50.3 MB of gradients ... instead of 5250 MB'
    (the 4x H100 default run) beside a table that says 48 MiB and 4.9 GiB."""
    from distbench.training.analysis.findings import lora_findings, training_findings
    from tests.conftest import REPO

    t = pd.read_csv(REPO / "benchmarks/results/training-lm-h100x4-2026-11-26/training_summary.csv")
    lora = lora_findings(t)
    assert lora and all("48 MiB of gradients synced per step instead of 4.9 GiB" in f for f in lora)
    assert "exposed communication 303 µs of a 158 ms step, against 20.0 ms of 180 ms" in lora[2]
    said = " ".join(lora + training_findings(t))
    assert " MB" not in said and not re.search(r"\b0\.\d+ ms", said)  # never '0.332 ms': 332 µs


def test_a_below_expected_reason_says_why_never_compute_bound():
    """A 4-rank MLP at 89% (the committed 4x H100 run) was 'below expected' with '(compute-bound)':
    its exposed communication is 18% of the step, under the 25% that makes a row communication-bound,
    yet it is what costs the step its linear scaling. The reason now says where the time goes."""
    from tests.conftest import REPO

    t = pd.read_csv(REPO / "benchmarks/results/traces-h100x4-2026-11-26/training_summary.csv")
    mlp = next(h for h in training_section.training_headlines(t) if h.headline.startswith("mlp"))
    assert mlp.verdict == "below expected" and "89% scaling efficiency" in mlp.headline
    assert "compute-bound" not in mlp.reason
    assert mlp.reason == ("under 90% of linear scaling: the 11.7 ms step is 1.23 ms over the 10.5 ms that linear "
                          "scaling from 1 GPU gives; the largest cost is exposed communication, 2.07 ms (18% of the step)")


def test_a_below_expected_reason_names_slower_compute_when_that_is_the_cost():
    r = dict(model="mlp", strategy="ddp", config="plain", backend="nccl", world_size=4, status="ok", message="",
             efficiency_vs_plain_1gpu=0.8, step_time_ms_median=10.0, compute_only_ms_median=9.5,
             comm_alone_ms_median=2.0, last_bucket_ms_median=0.5)
    h = training_section.training_headlines(pd.DataFrame([r]))[0]
    assert h.verdict == "below expected" and "-bound" not in h.reason
    assert "the largest cost is compute itself, 9.50 ms under no_sync, 1.50 ms over the linear step" in h.reason
    assert "then exposed communication, 500 µs (5% of the step)" in h.reason


# ---------------------------------------------------------------- comm reference
def test_a_comm_verdict_without_a_reference_names_the_one_it_lacks():
    """4x H100 all_reduce 353 GB/s said 'no reference figure ... for this GPU, world size' (4x H100 has a
    row now: 4x A100 has none)."""
    s = frame(row(world_size=4, size_bytes=GiB, busbw_gbps_median=200.0, algbw_gbps_median=133.0))
    h = comm_headlines(s, gpu_name="NVIDIA A100-SXM4-80GB", peak={"peak_gbps": 300.0, "link": "NVLink3 x12"})[0]
    assert h.verdict == "healthy"
    assert ("no reference figure for 4x A100 all_reduce at 1 GiB in distbench/core/references.py's table"
            in h.reason), h.reason
    assert "it has all_reduce for" in h.reason and "8x H100" in h.reason
    assert missing_reference("NVIDIA H100 80GB HBM3", 8, "all_reduce", 64 << 20) == (
        "no reference figure for 8x H100 all_reduce at 64 MiB in distbench/core/references.py's table "
        "(its 8x H100 all_reduce figure holds from 1 GiB)")
    none = comm_headlines(s, gpu_name="NVIDIA L40S")[0]
    assert none.verdict == "measured" and "no reference figure for 4x NVIDIA L40S all_reduce at 1 GiB" in none.reason


# ---------------------------------------------------------------- the appendix's launches
def _placement(path, commands, **prov):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"provenance": {"commit": "abc", "host": "h", "started": "2026-11-26T10:00:00+00:00",
                                               "outcome": "ok", "commands": commands, **prov}}))
    return path


def test_the_appendix_lists_every_launch_once(tmp_path):
    res = tmp_path / "results/lab"
    rank_cmd = "python -m distbench.comm --backend gloo --out comm.csv"
    batch_cmd = "python -m distbench.training --batch results/lab/logs/batch/launches/abc/batch.json"
    shared = {"batch": {"launched_by": "training gloo/mlp/2/plain", "configurations": 2, "log": "launch.log"}}
    paths = [_placement(res / "comm/gloo/float32/ws2/default/placement.json", [rank_cmd, rank_cmd]),
             _placement(res / "training/gloo/mlp/ws2/plain/placement.json", [batch_cmd, batch_cmd], **shared),
             _placement(res / "training/gloo/lora/ws2/plain/placement.json", [batch_cmd, batch_cmd], **shared),
             _placement(res / "memory/gloo/mlp/ws1/ddp/placement.json", ["python -m distbench.memory --x"])]
    text = _cache_state(paths, None)["commands"]
    assert text.count(rank_cmd) == 1 and text.count(batch_cmd) == 1 and text.count("distbench.memory") == 1
    assert "x 2 ranks" in text.split(rank_cmd)[0]
    shared_head = text.split(batch_cmd)[0].splitlines()[-1]
    assert "training/gloo/mlp/ws2/plain" in shared_head and "training/gloo/lora/ws2/plain" in shared_head
    assert "one shared launch of 2 configurations" in shared_head


def test_a_configuration_measured_in_a_shared_launch_records_the_launch_command(tmp_path, monkeypatch):
    """Training and memory jobs measured in a shared launch had `commands: []` in placement.json,
    so the appendix showed no training or memory launch."""
    from distbench.launch import torchrun

    def entry(model):
        out = tmp_path / f"training/gloo/{model}/ws2/plain"
        return batch.Entry("training_job", {"backend": "gloo", "model": model, "world_size": "2", "config": "plain"},
                           {"launch": {}, "job": {"job_env": {}}, "nccl_env": {}},
                           {"csv": str(out / "training.csv"), "placement": str(out / "placement.json")},
                           str(tmp_path / f"logs/{model}.log"))

    me, other = entry("mlp"), entry("lora")
    batch.write_manifest(tmp_path, [me, other])
    cmd = ["python", "-m", "distbench.training", "--batch", "b.json"]

    def fake_launch(job):  # what run_torchrun_job leaves: every configuration staged and done, provenance
        for config in batch.read_batch_file(job.args[1]):
            staged = batch.staged_dir(tmp_path, next(e for e in (me, other) if e.digest == config.digest))
            (staged / "training.csv").write_text("rows\n")
            (staged / "placement.json").write_text("{}")
            batch.mark_done(config, 0.0)
        torchrun.record_provenance(job.placement_json, torchrun.datetime.now(torchrun.timezone.utc), 1.0, "ok",
                                   [cmd, cmd])
        return "ok"

    monkeypatch.setattr(torchrun, "run_torchrun_job", fake_launch)
    family = batch.Family("distbench.training", lambda e, outs: ["--out", str(outs["csv"])], lambda e: {}, lambda e: 60)
    assert batch.run_job(me, tmp_path, family, alone=lambda: "alone").startswith("ok (measured first of 2")
    assert batch.run_job(other, tmp_path, family, alone=lambda: "alone").startswith("ok (measured in one launch")
    placements = [me.output["placement"], other.output["placement"]]
    for p in placements:
        prov = json.loads(open(p).read())["provenance"]
        assert prov["commands"] == ["python -m distbench.training --batch b.json"] * 2
    text = _cache_state(placements, None)["commands"]
    assert text.count("distbench.training --batch b.json") == 1 and "x 2 ranks" in text
