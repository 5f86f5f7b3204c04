"""The real workflow, end to end: Snakemake -> torchrun (Gloo, world sizes 1 and 2) -> tables ->
plots -> report; then the cache: a rerun does nothing, a deleted CSV reruns exactly one job, the
report target rebuilds from cached CSVs without torchrun."""

import re

import pandas as pd
import pytest
import yaml

from tests.conftest import RUN, snakemake


def _jobs_run(output: str) -> list[str]:
    return re.findall(r"^(?:local)?rule (\w+):", output, flags=re.M)


@pytest.mark.e2e
def test_pipeline_runs_caches_and_reruns_only_what_changed(shared_run, tmp_path):
    # the session's shared run (tests/conftest.py: SHARED_TINY, with a quick answer from before it),
    # checked here in full; then its copy is changed to check the cache
    workflow_dir = shared_run.copy_to(tmp_path / "wf")
    cfg = ["--configfile", "tiny.yaml"]
    first = shared_run
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(_jobs_run(first.stderr)).count("comm_job") == 2
    # mlp: plain DDP at 1 and 2 ranks; lora: FSDP at 1 and 2 ranks and its plain DDP 1-rank baseline
    assert _jobs_run(first.stderr).count("training_job") == 5
    assert _jobs_run(first.stderr).count("memory_job") == 1

    # tables follow the contract; every Gloo measurement is ok and checked
    raw = pd.read_csv(workflow_dir / f"{RUN}/tables/comm.csv")
    assert set(raw["backend"]) == {"gloo"} and set(raw["world_size"]) == {1, 2}
    ok = raw[raw["status"] == "ok"]
    assert len(ok) and ok.loc[ok["op"] != "barrier", "correct"].all()
    skipped = raw[raw["status"] == "skipped"]
    assert set(skipped["op"]) == {"send_recv"} and set(skipped["world_size"]) == {1}
    summary = pd.read_csv(workflow_dir / f"{RUN}/tables/comm_summary.csv")
    assert {"time_us_median", "time_us_p5", "time_us_p95", "time_us_cv", "busbw_gbps_median",
            "rank_spread_pct_median"} <= set(summary.columns)
    # every rank's time of every measured trial, aggregated like the rows
    ranks = pd.read_csv(workflow_dir / f"{RUN}/tables/comm_ranks.csv")
    measured = raw[raw["status"].isin(["ok", "wrong"])]
    assert len(ranks) == (measured["world_size"]).sum() and set(ranks["rank"]) == {0, 1}
    assert (raw["rank_agg"] == "max").all()

    # the training family: its table follows the contract, the summary has the scaling figures
    from distbench.training.contract import read_training_csv

    training = read_training_csv(workflow_dir / f"{RUN}/tables/training.csv")
    assert set(training["world_size"]) == {1, 2} and (training["status"] == "ok").all()
    tsum = pd.read_csv(workflow_dir / f"{RUN}/tables/training_summary.csv")
    two = tsum[(tsum["world_size"] == 2) & (tsum["model"] == "mlp")].iloc[0]
    assert two["efficiency_vs_plain_1gpu"] > 0 and pd.notna(two["exposed_comm_ms"])
    assert (workflow_dir / f"{RUN}/figures_training/training_throughput.png").exists()
    lora = tsum[tsum["model"] == "lora"].set_index(["world_size", "strategy"])
    assert sorted(lora.index) == [(1, "ddp"), (1, "fsdp"), (2, "fsdp")]
    assert (lora["tokens_per_s_median"] > 0).all() and lora["mfu"].isna().all()  # no peak for a CPU
    assert (workflow_dir / f"{RUN}/figures_training/training_lm_throughput.png").exists()
    assert (workflow_dir / f"{RUN}/training/gloo/lora/ws2/fsdp/training.csv").exists()

    # the memory family: one job, its table, summary, figures and report section
    from distbench.memory.contract import read_memory_csv

    memory = read_memory_csv(workflow_dir / f"{RUN}/tables/memory.csv")
    assert set(memory[memory["phase"] == "measure"]["batch_size"]) == {4, 8}
    assert (workflow_dir / f"{RUN}/tables/memory_summary.csv").exists()
    assert (workflow_dir / f"{RUN}/figures_memory/memory_split.png").exists()

    # machine-readable: summary.json (validated against its schema, as the rule does) and the comm
    # series as nccl-tests -J documents
    import json

    from distbench.report.summary_json import validate_summary

    doc = json.loads((workflow_dir / "report/summary.json").read_text())
    validate_summary(doc)
    assert doc["world_size"] == 2 and doc["config"]["device"] == "cpu" and doc["config"]["benchmark_iters"] == 3
    assert set(doc["results"]["communication"]) == {"all_reduce", "all_gather", "send_recv", "barrier"}
    assert {r["model"] for r in doc["results"]["training"]} == {"mlp", "lora"} and len(doc["results"]["memory"]) == 1
    nt = json.loads((workflow_dir / f"{RUN}/nccl_tests/gloo_all_reduce_float32_ws2_default_host.json").read_text())
    first = nt["results"][0]
    assert (first["size"], first["count"], first["type"], first["redop"], first["root"]) == (8, 2, "float", "sum", -1)
    # all_reduce runs in place by default (comm.inplace): out of place was not measured
    assert first["out_of_place"] is None and first["in_place"]["nwrong"] == 0
    assert set(first["in_place"]) == {"time", "alg_bw", "bus_bw", "nwrong"}
    assert nt["out_of_bounds"] == {"count": 0, "okay": True}

    # the report: NCCL skipped and why, figures, findings; HTML self-contained
    md = (workflow_dir / "report/report.md").read_text()
    assert "backend nccl" in md and "no GPU" in md
    assert "## Training" in md and "scaling efficiency" in md and "training_throughput.png" in md
    assert "## Memory" in md and "MLP 32x1, ddp, 2 ranks: at batch 8 per rank" in md and "memory_split.png" in md
    assert "### Language models" in md and "lora r16 on gpt 2L/2H/64d seq 16, 2 ranks (FSDP" in md
    assert "![" in md and "](figures/busbw_vs_size.png)" in md and "max over ranks" in md
    assert (workflow_dir / "report/figures/busbw_vs_size.png").exists()  # beside the report: portable
    # the GPU-pair matrix of the 2-rank job (CPU here: link class cpu), in a table, a heat map and a finding
    pairs = pd.read_csv(workflow_dir / f"{RUN}/tables/comm_pairs.csv")
    assert set(pairs["mode"]) == {"uni", "bi"} and set(pairs["link_class"]) == {"cpu"} and len(pairs) == 2 * 3
    assert "GPU-pair matrix (Gloo, 2 ranks" in md and "pairs_bandwidth_gloo_ws2.png" in md
    # every trial's arrival record, and no straggler flagged in a normal run
    assert raw["arrival_skew_us"].notna().any() and "Straggler" not in md
    # a CPU run's report shows no GPU-cluster prediction as a result (issue 34: an H100/InfiniBand
    # preset applied to CPU compute times read 99.7-100% efficiency at 8-64 GPUs): the fits, the
    # method checked on this host, and one sentence saying why there is no more
    assert "## Larger clusters (predicted)" not in md and "## The prediction method on this host" in md
    predicted = md.split("## The prediction method on this host")[1].split("\n## ")[0]
    assert "This run measured CPU processes over Gloo only, so no GPU-cluster prediction is shown" in predicted
    # one world size of two or more ranks (2): nothing to check against, so the section offers the fits only
    assert "below, the fits on this host's own numbers." in predicted and "method checked" not in predicted
    assert "GPUs |" not in predicted and "Training scaling efficiency predicted" not in predicted
    assert "Preset " not in predicted and "predict_training_efficiency.png" not in md
    assert "predict_allreduce_busbw.png" not in md
    for name in ("prediction_training.csv", "prediction_comm.csv"):  # their columns, no rows
        assert pd.read_csv(workflow_dir / f"{RUN}/tables/predict/{name}").empty, name
    assert len(pd.read_csv(workflow_dir / f"{RUN}/tables/predict/alpha_beta.csv"))
    # the quick answer beside the report (as `snakemake quick` left it) is marked superseded by it
    quick = (workflow_dir / "report/quick.md").read_text()
    assert "**Superseded** by the full report" in quick and "Left for the full run" not in quick
    html = (workflow_dir / "report/report.html").read_text()
    assert "data:image/png;base64," in html and 'src="http' not in html
    assert (workflow_dir / f"{RUN}/figures_comm/busbw_vs_size.svg").exists()

    # a second run does nothing
    again = snakemake(workflow_dir, *cfg)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # deleting one job's CSV reruns exactly that job (and the steps downstream of it)
    (workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default/comm.csv").unlink()
    one = snakemake(workflow_dir, *cfg)
    assert one.returncode == 0, one.stderr[-3000:]
    assert _jobs_run(one.stderr).count("comm_job") == 1
    assert "world_size=2" in one.stderr

    # changing a measurement parameter reruns the jobs it touches; adding a world size adds one job
    changed = snakemake(workflow_dir, *cfg, "-n", "--config", "world_sizes=[1,2,3]")
    # the new world size, and the old largest one: the pair matrix (comm.pairs) moves to the largest
    assert _jobs_run(changed.stdout + changed.stderr).count("comm_job") == 2
    assert "world_size=3" in changed.stdout + changed.stderr
    assert _jobs_run(changed.stdout + changed.stderr).count("training_job") == 2  # mlp and lora fsdp at 3
    (workflow_dir / "more_iters.yaml").write_text(yaml.safe_dump({"comm": {"gloo": {"iters": 4}}}))
    iters = snakemake(workflow_dir, "-n", "--configfile", "tiny.yaml", "more_iters.yaml")
    assert _jobs_run(iters.stdout + iters.stderr).count("comm_job") == 2

    # the report target rebuilds from cached CSVs without starting torchrun
    for p in ("report/report.md", "report/report.html", *(workflow_dir / f"{RUN}/tables").glob("*.csv")):
        (workflow_dir / p).unlink()
    rep = snakemake(workflow_dir, "report", *cfg)
    assert rep.returncode == 0, rep.stderr[-3000:]
    ran = _jobs_run(rep.stderr)
    assert "comm_job" not in ran and "training_job" not in ran and "memory_job" not in ran and "probe_nccl" not in ran
    assert {"aggregate_comm", "aggregate_training", "report"} <= set(ran)
    assert "torch.distributed.run" not in rep.stdout + rep.stderr
    assert (workflow_dir / "report/report.html").exists()
