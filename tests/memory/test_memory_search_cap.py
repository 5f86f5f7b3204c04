"""The largest-batch search's cap (issue 24, part 3): memory.search_max_batch is a setting that reaches
the harness, a search that stops there says so in memory.csv (search_capped) and memory_summary.csv
(largest_batch_capped), and the report says "at least" the cap instead of calling it the largest
batch that fits. The search is GPU-only, so its arithmetic (distbench.memory.search) and the harness's
search rows are driven here with a made-up limit instead of a device."""

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from distbench.core.io import csv_text
from distbench.core.sizes import human_bytes
from distbench.core.section import ReportInputs
from distbench.memory import harness, largest
from distbench.memory.rows import PEAK, Tried, base_row
from distbench.memory.analysis.section import build as memory_section
from distbench.memory.analysis.section import memory_headlines
from distbench.memory.analysis.summary import memory_findings, summarize_memory
from distbench.memory.contract import MEMORY_COLUMN_NAMES, read_memory_csv
from distbench.memory.job import memory_args
from distbench.memory.plan import memory_jobs, memory_params
from distbench.memory.search import DEFAULT_SEARCH_MAX_BATCH, search_largest_batch
from distbench.pipeline.config import ConfigError, check_config

# -- the search's arithmetic ----------------------------------------------------------------------


def limited(limit: int):
    """A `fits` that holds batches up to `limit`, and the batches it was asked about."""
    tried = []

    def fits(b):
        tried.append(b)
        return b <= limit
    return fits, tried


def test_a_search_whose_every_batch_fits_stops_at_the_cap_and_says_so():
    fits, tried = limited(10**9)
    found = search_largest_batch(128, 1000, fits)
    assert found.capped is True and found.largest_fits == 1000 and found.first_oom is None
    assert tried == [128, 256, 512, 1000]  # the last doubling is clamped: the cap itself is tried, nothing above it
    # a start above the cap is clamped too
    fits, tried = limited(10**9)
    assert search_largest_batch(4096, 1000, fits).capped is True and tried == [1000]


def test_a_search_that_runs_out_of_memory_below_the_cap_finds_the_true_largest():
    fits, tried = limited(700)
    found = search_largest_batch(128, DEFAULT_SEARCH_MAX_BATCH, fits)
    assert found.capped is False and found.largest_fits == 700 and found.first_oom == 701
    assert max(tried) == 1024
    # the cap itself running out of memory is no capped search: the limit is below it
    fits, _ = limited(700)
    found = search_largest_batch(128, 1000, fits)
    assert (found.largest_fits, found.first_oom, found.capped) == (700, 701, False)
    # even the start does not fit: halving, then bisection
    fits, _ = limited(20)
    found = search_largest_batch(128, 1000, fits)
    assert (found.largest_fits, found.first_oom, found.capped) == (20, 21, False)
    fits, _ = limited(0)
    assert search_largest_batch(128, 1000, fits).largest_fits is None


def test_a_failed_try_stops_the_search():
    found = search_largest_batch(128, 1000, lambda b: None if b == 256 else True)
    assert found.failed and found.largest_fits == 128 and not found.capped


# -- the harness's search rows --------------------------------------------------------------------

SHAPE = {"hidden_dim": 64, "num_layers": 2, "n_heads": None, "seq_len": None, "vocab_size": None, "lora_rank": None}
GIB = 2**30


def device(limit: int, confirm_limit: int | None = None, base: float = GIB, per_sample: float = 2**20):
    """A try_batch for a made-up GPU whose real steps run up to batch `limit` (the confirm's steps up to
    `confirm_limit`, when given) and peak at `base` + `per_sample` x batch allocated."""
    tried = []

    def try_batch(b, steps=harness.FRESH_STEPS):
        tried.append((b, steps))
        top = confirm_limit if confirm_limit is not None and steps == largest.CONFIRM_STEPS else limit
        if b > top:
            return Tried("oom", "CUDA out of memory")
        alloc = base + per_sample * b
        return Tried("ok", "", (alloc, alloc + 2**20, 0.0, 140 * GIB))
    return try_batch, tried


def job_rows(limit: int, cap: int, confirm_limit: int | None = None) -> list[dict]:
    """One GPU DDP job's rows as the harness writes them: a measured batch, then the search and its
    confirm against a device that holds batches up to `limit`."""
    a = SimpleNamespace(search=True, strategy="ddp", search_max_batch=cap, batch_sizes=[128], backend="nccl",
                        model="mlp", gradient_as_bucket_view=False, config_label="ddp", shape=SHAPE,
                        dtype="float32", optimizer="adamw")
    h = SimpleNamespace(cuda=True, world_size=1, device_name="NVIDIA H200", n_params=100, n_trainable=100,
                        try_batch=device(limit, confirm_limit)[0])
    rows = [{**base_row(a, h), "phase": "measure", "batch_size": 128, "params_bytes": 400,
             "grads_bytes": 400, "optimizer_bytes": 800, "activations_bytes": 1000, "parts_bytes": 2600}]
    largest.search(a, h, rows.extend, lambda _: None)
    return rows


def memory_csv(tmp_path: Path, rows: list[dict], drop=()) -> pd.DataFrame:
    columns = [c for c in MEMORY_COLUMN_NAMES if c not in drop]
    path = tmp_path / "memory.csv"
    path.write_text(csv_text([{k: v for k, v in r.items() if k not in drop} for r in rows], columns))
    return read_memory_csv(path)


def test_the_search_rows_say_whether_the_search_stopped_at_its_cap(tmp_path):
    df = memory_csv(tmp_path, job_rows(limit=10**9, cap=1000))
    search = df[df["phase"] == "search"]
    assert list(search["batch_size"]) == [128, 256, 512, 1000] and (search["status"] == "ok").all()
    assert list(search["search_capped"]) == [False, False, False, True]
    assert df.loc[df["phase"] == "measure", "search_capped"].isna().all()
    confirm = df[df["phase"] == "confirm"]  # the cap, run again: it is still the cap that fit
    assert list(confirm["batch_size"]) == [1000] and list(confirm["search_capped"]) == [True]
    df = memory_csv(tmp_path, job_rows(limit=700, cap=1000))
    search = df[df["phase"] == "search"]
    assert "oom" in set(search["status"]) and not search["search_capped"].any()


def test_the_harness_takes_the_cap_from_its_arguments():
    base = ["--backend", "gloo", "--batch-sizes", "1,2", "--out", "x.csv"]
    assert harness.parse_args(base + ["--search-max-batch", "512"]).search_max_batch == 512
    assert harness.parse_args(base).search_max_batch == DEFAULT_SEARCH_MAX_BATCH
    with pytest.raises(SystemExit):
        harness.parse_args(base + ["--search-max-batch", "0"])


# -- the setting: config, plan, job ---------------------------------------------------------------


def test_the_config_rejects_a_cap_below_one_naming_the_key():
    with pytest.raises(ConfigError) as e:
        check_config({"memory": {"search_max_batch": 0}})
    assert "memory.search_max_batch" in str(e.value)
    with pytest.raises(ConfigError):
        check_config({"memory": {"search_max_batch": "lots"}})
    assert check_config({})["memory"]["search_max_batch"] == DEFAULT_SEARCH_MAX_BATCH  # the harness's default too


def test_the_cap_is_a_job_param_and_reaches_the_harness_arguments():
    cfg = check_config({"backends": ["nccl"], "memory": {"models": ["mlp"], "search_max_batch": 4096}})
    jobs, _ = memory_jobs(cfg, gpus=1)
    params = memory_params(cfg, jobs[0])
    assert params["search_max_batch"] == 4096  # so a change reruns the memory jobs
    other = memory_params(check_config({"backends": ["nccl"], "memory": {"models": ["mlp"]}}), jobs[0])
    assert other != params
    args = memory_args(jobs[0], params, "m.csv", "p.json")
    assert args[args.index("--search-max-batch") + 1] == "4096"
    assert harness.parse_args(args).search_max_batch == 4096


# -- the summary and the report -------------------------------------------------------------------


def summary_csv(tmp_path: Path, df: pd.DataFrame) -> Path:
    tables = tmp_path / "results/lab/tables"
    tables.mkdir(parents=True, exist_ok=True)
    summarize_memory(df).to_csv(tables / "memory_summary.csv", index=False)
    return tables / "memory_summary.csv"


def report_text(path: Path) -> str:
    inputs = ReportInputs({"memory_summary": path})
    section = memory_section(inputs)
    headlines = memory_headlines(inputs.table("memory_summary"))
    return "\n".join([*section["findings"], *(str(c) for r in section["table"]["rows"] for c in r),
                      *(h.headline for h in headlines)])


def test_a_capped_search_is_reported_as_at_least_the_cap(tmp_path):
    df = memory_csv(tmp_path, job_rows(limit=10**9, cap=1000))
    s = summarize_memory(df).iloc[0]
    assert s["largest_batch_fits"] == 1000 and pd.isna(s["first_batch_oom"])
    assert s["largest_batch_capped"] == True
    line = memory_findings(summarize_memory(df))[0]
    assert "the largest batch that fits is at least 1000 per rank (the search cap, memory.search_max_batch)" in line
    text = report_text(summary_csv(tmp_path, df))
    assert text.count("at least 1000 per rank (the search cap") == 3  # findings, table, headline
    assert "the largest batch that fits is 1000 per rank" not in text


def test_an_uncapped_search_is_reported_as_the_largest_that_fits(tmp_path):
    df = memory_csv(tmp_path, job_rows(limit=700, cap=1000))
    s = summarize_memory(df).iloc[0]
    assert s["largest_batch_fits"] == 700 and s["first_batch_oom"] == 701
    assert s["largest_batch_capped"] == False
    text = report_text(summary_csv(tmp_path, df))
    peak = human_bytes(GIB + 700 * 2**20)  # the made-up device's peak at 700, the confirm's
    assert f"the largest batch that fits is 700 per rank (a real DDP step ran at peak {peak} allocated; batch 701 ran out of memory)" in text
    assert "at least" not in text and "search cap" not in text


def older(rows: list[dict]) -> list[dict]:
    """The rows as a harness from before the confirm wrote them (no confirm rows; search rows without peaks)."""
    return [{k: v for k, v in r.items() if r["phase"] != "search" or k not in PEAK}
            for r in rows if r["phase"] != "confirm"]


def test_a_memory_csv_from_before_the_column_still_reads_and_its_capped_search_is_recognised(tmp_path):
    # the old harness stopped doubling past 65536: a search that fit and never ran out of memory was capped
    old = ("search_capped", "steady_peak_allocated_bytes")
    df = memory_csv(tmp_path, older(job_rows(limit=10**9, cap=1000)), drop=old)
    assert df["search_capped"].isna().all() and df["steady_peak_allocated_bytes"].isna().all()
    assert summarize_memory(df).iloc[0]["largest_batch_capped"] == True
    df = memory_csv(tmp_path, older(job_rows(limit=700, cap=1000)), drop=old)
    s = summarize_memory(df).iloc[0]
    assert s["largest_batch_capped"] == False and s["largest_batch_fits"] == 700
    # its answer was tried under no_sync and never confirmed: the report says so, with no peak beside it
    assert s["largest_batch_confirmed"] == False and pd.isna(s["largest_batch_peak_allocated_bytes"])
    line = memory_findings(summarize_memory(df))[0]
    assert "700 per rank (an older search, each try under no_sync: no real step confirmed it; batch 701 ran out of memory)" in line


def test_the_headline_shows_the_search_where_it_ran_not_the_unsearched_smaller_world_size():
    # the GPU default searches at the largest world size only (memory.search_at: largest): the
    # 1-rank row has no search, the 2-rank row found 49 (a real 2x H200 run's memory_summary, trimmed)
    import pandas as pd

    nan = float("nan")
    rows = pd.DataFrame({
        "model": ["gpt", "gpt", "gpt", "gpt"], "config": ["ddp", "ddp", "fsdp", "fsdp"], "backend": ["nccl"] * 4,
        "world_size": [1, 2, 1, 2], "status": ["ok"] * 4, "largest_measured_batch": [8, 8, 8, 8],
        "largest_batch_fits": [nan, 49.0, nan, nan], "largest_batch_capped": [nan, False, nan, nan],
        "search_note": [nan, nan, nan, "FSDP: the search runs DDP configurations only"],
        "peak_allocated_bytes": [4.3e10, 4.4e10, 3.6e10, 2.0e10]})
    heads = {h.headline.split(":")[0]: h for h in memory_headlines(rows)}
    assert heads["gpt (ddp) at 2 ranks"].headline.startswith("gpt (ddp) at 2 ranks: largest batch that fits: 49 per rank")
    assert "gpt (ddp) at 1 rank" not in heads
    assert heads["gpt (fsdp) at 1 rank"].headline.startswith("gpt (fsdp) at 1 rank: batches up to 8 per rank measured")


def _old_and_guessed(threshold: int, cap: int, start: int, guess: int):
    from distbench.memory.search import search_largest_batch

    tried = {"plain": [], "guess": []}

    def fits_for(name):
        def fits(b):
            tried[name].append(b)
            return b <= threshold
        return fits

    return (search_largest_batch(start, cap, fits_for("plain")),
            search_largest_batch(start, cap, fits_for("guess"), guess=guess), tried)


def test_a_search_from_the_predicted_limit_finds_what_the_plain_search_finds():
    # every limit, near and far guesses, both sides of the cap: the same answer as doubling from start
    for cap in (64, 1000):
        for threshold in range(0, 80):
            for start in (1, 8):
                for guess in {1, max(1, threshold - 3), max(1, threshold), threshold + 5, 2 * threshold + 1, 5 * cap}:
                    plain, guessed, _ = _old_and_guessed(threshold, cap, start, guess)
                    assert (guessed.largest_fits, guessed.first_oom, guessed.capped) == (
                        plain.largest_fits, plain.first_oom, plain.capped), (cap, threshold, start, guess)


def test_a_close_guess_takes_a_few_tries():
    # a 1.3B GPT on H200 (limit 49 per rank, measured up to 8): 9 tries doubling, 5 from a guess of 47
    plain, guessed, tried = _old_and_guessed(49, 65536, 8, 47)
    assert guessed.largest_fits == plain.largest_fits == 49
    assert (len(tried["plain"]), len(tried["guess"])) == (9, 5)
    # an MLP whose limit is past the cap: 1 try (the cap) instead of 7 doublings
    plain, guessed, tried = _old_and_guessed(10**6, 65536, 1024, 400_000)
    assert guessed.capped and plain.capped and (len(tried["plain"]), len(tried["guess"])) == (7, 1)


def test_the_prediction_is_the_line_through_the_two_largest_measured_batches():
    from distbench.memory.search import predicted_largest_batch

    gib = 2**30
    # peak reserved 30 GiB at batch 4 and 40 GiB at batch 8: 2.5 GiB per sample, 140 GiB reach batch 48
    assert predicted_largest_batch([(1, 20 * gib), (4, 30 * gib), (8, 40 * gib)], 140 * gib) == 48
    assert predicted_largest_batch([(8, 40 * gib)], 140 * gib) is None  # one point: no line
    assert predicted_largest_batch([(4, 40 * gib), (8, 40 * gib)], 140 * gib) is None  # flat: no prediction
    assert predicted_largest_batch([(4, 30 * gib), (8, None)], 140 * gib) is None


def test_the_harness_starts_its_search_at_the_limit_its_measured_batches_predict():
    # a fake GPU (the search runs on CUDA only): 10 GiB free + 2 GiB reserved by torch now, measured
    # peaks 4 GiB at batch 64 and 6 GiB at 128 (1/32 GiB per sample): batch 320 reaches 12 GiB
    gib = 2**30
    cuda = SimpleNamespace(mem_get_info=lambda device: (10 * gib, 80 * gib), memory_reserved=lambda device: 2 * gib)
    a = SimpleNamespace(search=True, strategy="ddp", search_max_batch=65536, batch_sizes=[64, 128], backend="nccl",
                        model="mlp", gradient_as_bucket_view=False, config_label="ddp", shape=SHAPE,
                        dtype="float32", optimizer="adamw")
    try_batch, tried = device(390)
    # two ranks: the other predicts 400, so both start at the smaller guess
    h = SimpleNamespace(cuda=True, world_size=2, device="cuda:0", device_name="NVIDIA H200", n_params=100,
                        n_trainable=100, torch=SimpleNamespace(cuda=cuda), try_batch=try_batch,
                        gather_rows=lambda values: [values, [400.0]])
    rows, said = [], []
    largest.search(a, h, rows.extend, said.append, measured=[(64, 4 * gib), (128, 6 * gib)])
    assert tried[0] == (320, harness.FRESH_STEPS)
    assert max(r["batch_size"] for r in rows if r["status"] == "ok" and r["phase"] == "search") == 390
    assert said == [f"largest batch that fits: 390 per rank, confirmed by {largest.CONFIRM_STEPS} real steps "
                    "(the search started at 320, the predicted limit)"]
    # a rank without a prediction: every rank starts at the largest measured batch, as before
    tried.clear()
    h.gather_rows = lambda values: [values, [0.0]]
    largest.search(a, h, rows.extend, said.append, measured=[(64, 4 * gib), (128, 6 * gib)])
    assert [b for b, _ in tried[:3]] == [128, 256, 512]


def test_a_cpu_runs_memory_rows_are_one_verdict_row():
    """On CPU nothing is searched and no device peak exists: five rows saying 'batches up to 4 per rank
    measured' crowded the Verdict; one row names the configurations, a failed one keeps its own row."""
    def row(model, config, batch, status="ok"):
        return dict(model=model, config=config, backend="gloo", world_size=1, status=status, message="boom",
                    largest_batch_fits=float("nan"), largest_measured_batch=batch, peak_allocated_bytes=float("nan"),
                    search_note="")
    heads = memory_headlines(pd.DataFrame([row("gpt", "ddp", 4), row("gpt", "fsdp", 4), row("mlp", "ddp", 32),
                                           row("lora", "ddp", 4, status="failed")]))
    assert [h.verdict for h in heads] == ["failing", "measured"]
    assert heads[1].headline == "3 configurations at 1 rank (gpt ddp, gpt fsdp, mlp ddp): batches up to 4-32 per rank measured"
    assert "no device limit to search for" in heads[1].reason
    one = memory_headlines(pd.DataFrame([row("mlp", "ddp", 32)]))
    assert [h.headline for h in one] == ["mlp (ddp) at 1 rank: batches up to 32 per rank measured"]
