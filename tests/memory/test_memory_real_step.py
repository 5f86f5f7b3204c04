"""Issue 54, part 4: the largest batch is one at which a real training step runs. A search try is a
fresh DDP wrapper's first two real steps (gradients synced, optimizer state present), bounded on
several ranks by a vote on the step's compute alone first; the answer is run again (phase `confirm`)
and recorded with its peak, stepping down when it runs out of memory; the report says each peak beside
the batch it belongs to.

On CPU no device limits memory, so the real ranks (Gloo) run against a made-up limit
(tests/memory/real_step_ranks.py), and the summary and headline are driven with a made-up GPU whose
memory per batch is known."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pandas as pd

from distbench.core.io import csv_text
from distbench.core.sizes import human_bytes
from distbench.memory import harness, largest
from distbench.memory.rows import Tried, base_row
from distbench.memory.analysis.section import memory_headlines
from distbench.memory.analysis.summary import memory_findings, summarize_memory
from distbench.memory.contract import MEMORY_COLUMN_NAMES, read_memory_csv
from tests.conftest import REPO

GIB = 2**30
MIB = 2**20

# -- real ranks ---------------------------------------------------------------------------------


def run_ranks(tmp_path, limit: int, oom_ranks: str):
    out_json, out_csv = tmp_path / "report.json", tmp_path / "memory.csv"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(REPO / "tests/memory/real_step_ranks.py"), str(out_json), str(out_csv), str(limit), oom_ranks]
    # PYTHONPATH: the script is run by path, so the repository is not on its path by itself
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=170, cwd=tmp_path,
                       env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out_json.read_text()), read_memory_csv(out_csv)


def test_a_try_is_a_fresh_wrappers_real_synced_steps_and_one_rank_out_of_memory_leaves_none_waiting(tmp_path):
    report, df = run_ranks(tmp_path, limit=12, oom_ranks="1")
    # the try at batch 8 ran two synced steps: every gradient (4 B per trainable parameter) all-reduced
    # twice (no_sync would all-reduce nothing, one step once), on a wrapper made for the try, whose
    # second step rebuilt its buckets as a training run's does, and the ranks' different data were
    # averaged: the replicas agree
    assert report["status"] == "ok"
    assert report["allreduced_bytes"] == 2 * report["grad_bytes"]
    assert report["fresh_wrapper"] and report["rebuilt_buckets"] and report["replicas_agree"]
    # rank 1 alone runs out of memory above batch 12: the vote on the step's compute alone catches it
    # before any rank enters a synced step, so every try ends with a vote (no op timeout, no failure)
    search = df[df["phase"] == "search"]
    assert set(search["status"]) == {"ok", "oom"}
    oom = search[search["status"] == "oom"]
    assert (oom["batch_size"] > 12).all() and (search.loc[search["status"] == "ok", "batch_size"] <= 12).all()
    assert oom["message"].str.startswith("the step's forward and backward alone, before any sync: rank(s) 1: oom").all()
    # the answer, run again: its confirm row ran, and it is the summary's largest batch
    confirm = df[df["phase"] == "confirm"]
    assert list(confirm["batch_size"]) == [12] and list(confirm["status"]) == ["ok"] and report["confirmed"] == 12
    s = summarize_memory(df).iloc[0]
    assert (s["largest_batch_fits"], s["first_batch_oom"], s["largest_batch_confirmed"]) == (12, 13, True)


# -- the confirm and the report, on a made-up GPU -----------------------------------------------

GPT = {"hidden_dim": 2048, "num_layers": 24, "n_heads": 32, "seq_len": 1024, "vocab_size": 50304, "lora_rank": None}


def peak_at(b: int) -> float:
    """The made-up GPU's peak allocated at batch b: 45.2 GiB at batch 8, 2.4 GiB more per sample."""
    return 45.2 * GIB + (b - 8) * 2.4 * GIB


def gpu_rows(limit: int, confirm_limit: int) -> tuple[list[dict], list]:
    """A gpt job's rows as the harness writes them on a made-up GPU: batch 8 measured (peak 45.2 GiB),
    then the search (real steps run up to `limit`) and the confirm (up to `confirm_limit`)."""
    a = SimpleNamespace(search=True, strategy="ddp", search_max_batch=65536, batch_sizes=[8], backend="nccl",
                        model="gpt", gradient_as_bucket_view=False, config_label="ddp", shape=GPT,
                        dtype="bfloat16", optimizer="adamw")
    tried = []

    def try_batch(b, steps=harness.FRESH_STEPS):
        tried.append((b, steps))
        if b > (confirm_limit if steps == largest.CONFIRM_STEPS else limit):
            return Tried("oom", "CUDA out of memory")
        return Tried("ok", "", (peak_at(b), peak_at(b) + GIB, 0.0, 140 * GIB))

    h = SimpleNamespace(cuda=True, world_size=1, device_name="NVIDIA H200", n_params=1_313_000_000,
                        n_trainable=1_313_000_000, try_batch=try_batch)
    parts = {"params_bytes": 5 * GIB, "grads_bytes": 5 * GIB, "optimizer_bytes": 10 * GIB, "activations_bytes": 18 * GIB}
    rows = [{**base_row(a, h), "phase": "measure", "batch_size": 8, **parts, "parts_bytes": sum(parts.values()),
             "estimate_params_bytes": 5 * GIB, "estimate_grads_bytes": 5 * GIB, "estimate_optimizer_bytes": 10 * GIB,
             "estimate_error_bytes": 0, "peak_allocated_bytes": int(peak_at(8)), "peak_reserved_bytes": int(peak_at(8) + GIB),
             "steady_peak_allocated_bytes": int(peak_at(8) - 4.9 * GIB), "device_total_bytes": 140 * GIB,
             "peak_share": (peak_at(8) + GIB) / (140 * GIB), "unexplained_bytes": int(peak_at(8)) - sum(parts.values())}]
    largest.search(a, h, rows.extend, lambda _: None)
    return rows, tried


def summary_of(tmp_path, rows) -> pd.DataFrame:
    path = tmp_path / "memory.csv"
    path.write_text(csv_text(rows, MEMORY_COLUMN_NAMES))
    return summarize_memory(read_memory_csv(path))


def test_the_confirm_row_records_the_answers_peak_and_the_headline_names_each_peaks_batch(tmp_path):
    rows, tried = gpu_rows(limit=42, confirm_limit=42)
    confirm = [r for r in rows if r["phase"] == "confirm"]
    assert [(r["batch_size"], r["status"], r["peak_allocated_bytes"]) for r in confirm] == [(42, "ok", int(peak_at(42)))]
    assert tried[-1] == (42, largest.CONFIRM_STEPS)  # the search's answer, run again with the steady step too
    s = summary_of(tmp_path, rows)
    r = s.iloc[0]
    assert (r["largest_batch_fits"], r["first_batch_oom"], r["largest_measured_batch"]) == (42, 43, 8)
    assert r["largest_batch_peak_allocated_bytes"] == int(peak_at(42)) and r["peak_allocated_bytes"] == int(peak_at(8))
    [head] = memory_headlines(s)
    at42, at8 = human_bytes(int(peak_at(42))), human_bytes(int(peak_at(8)))
    assert at8 == "45.2 GiB"
    assert head.headline == (f"gpt (ddp) at 1 rank: largest batch that fits: 42 per rank (a real DDP step ran at peak "
                             f"{at42} allocated; batch 43 ran out of memory); measured split at batch 8: peak {at8} allocated")
    # never a peak beside a batch it does not belong to
    assert f"42 per rank, peak {at8}" not in head.headline and "50 per rank" not in head.headline
    line = memory_findings(s)[0]
    assert f"at batch 8 the allocator's peak is {at8} allocated" in line
    assert f"largest batch that fits is 42 per rank (a real DDP step ran at peak {at42} allocated" in line
    assert f"a later step, its buckets rebuilt, peaks at {human_bytes(int(peak_at(8) - 4.9 * GIB))}" in line
    assert "a fresh DDP wrapper's first two steps" in line
    # an FSDP2 row has no DDP wrapper and no buckets to rebuild (the 1x H200 run's FSDP rows said both)
    fsdp = memory_findings(s.assign(strategy="fsdp", config="fsdp"))[0]
    assert "a fresh FSDP2 wrapper's first two steps; a later step peaks at" in fsdp
    assert "DDP" not in fsdp.split("beyond the parts")[1].split(";")[0] and "buckets" not in fsdp


def test_a_confirm_out_of_memory_drops_the_answer_until_one_runs(tmp_path):
    # the search's two steps run at 42, the confirm's three only up to 40: 42 and 41 fail, 40 is the answer
    rows, _ = gpu_rows(limit=42, confirm_limit=40)
    confirm = [(r["batch_size"], r["status"]) for r in rows if r["phase"] == "confirm"]
    assert confirm == [(42, "oom"), (41, "oom"), (40, "ok")]
    r = summary_of(tmp_path, rows).iloc[0]
    assert (r["largest_batch_fits"], r["first_batch_oom"]) == (40, 41)
    assert r["largest_batch_peak_allocated_bytes"] == int(peak_at(40))
    # none of CONFIRM_ATTEMPTS batches confirms: no largest batch, and the report says why
    rows, _ = gpu_rows(limit=42, confirm_limit=30)
    confirm = [r for r in rows if r["phase"] == "confirm"]
    assert [r["batch_size"] for r in confirm] == list(range(42, 42 - largest.CONFIRM_ATTEMPTS, -1))
    s = summary_of(tmp_path, rows)
    assert pd.isna(s.iloc[0]["largest_batch_fits"]) and s.iloc[0]["status"] == "ok"
    [head] = memory_headlines(s)
    assert head.headline.startswith("gpt (ddp) at 1 rank: batches up to 8 per rank measured, peak 45.2 GiB allocated at batch 8")
    assert f"no batch from 42 down to {43 - largest.CONFIRM_ATTEMPTS} ran its confirm steps" in head.reason
