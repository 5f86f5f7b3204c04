"""Our nccl-tests documents carry the `-I 1` per-iteration, per-process fields (and the hosts) that
nccl-tests' tools/analyze_perf_json.py reads, so its --straggler, --spikes, --nodes and --iter0
work on our runs.

Field names and nesting, read from NVIDIA/nccl-tests at commit
a0b82b2260cf5152b9f8c061bbf7eaf0ba096432 (NCCL_TESTS_VERSION 2.19.6): src/util.cu
writePerIterReport (`out_of_place_per_iter` / `in_place_per_iter` per result, per_process_max_times_us
only for more than one process), writeDeviceReport + jsonRankInfo (`config.devices[]`), and
tools/analyze_perf_json.py (PROCESS_TIMES_KEY, node_groups reading devices[].hostname).

The analyzer itself is not part of this project (fetched code is never vendored): the test that
runs it skips unless `.fetched/nccl-tests` (or $NCCL_TESTS_DIR) holds a nccl-tests checkout; the
structure test always runs.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from distbench.comm.analysis.nccl_tests_json import placements_of, write_nccl_tests
from distbench.comm.contract import COMM_RANK_COLUMN_NAMES
from synthetic import summary_row

REPO = Path(__file__).resolve().parents[2]
ANALYZER = Path(os.environ.get("NCCL_TESTS_DIR") or REPO / ".fetched" / "nccl-tests") / "tools" / "analyze_perf_json.py"

# src/util.cu writePerIterReport, in its order
PER_ITER_KEYS = ["skipped_iterations", "min_us", "max_us", "avg_us", "p50_us", "p95_us", "p99_us", "stdev_us",
                 "cv_pct", "times_us", "per_process_max_times_us"]
OURS_ONLY = ["per_process_arrival_us"]  # not nccl-tests': when each rank was ready to start the trial
DEVICE_KEYS = ["rank", "group", "pid", "hostname", "device", "device_hex", "device_info"]  # jsonRankInfo
HOSTS = ["nodeA", "nodeA", "nodeB", "nodeB"]  # ranks 0-1 on one host, 2-3 on another
TRIALS = 8
STRAGGLER, SPIKER, SPIKE_TRIAL = 2, 1, 5


def rank_time(size: int, trial: int, rank: int) -> float:
    """A crafted point's time: trial 0 slow on every rank (a cold start), rank 2 always 50 µs behind,
    and at 128 KiB rank 1 alone spiking in trial 5."""
    if trial == 0:
        return 300.0
    t = 100.0 + trial * 0.5 + rank * 0.1 + (50.0 if rank == STRAGGLER else 0.0)
    return 1000.0 if (size == 131072 and rank == SPIKER and trial == SPIKE_TRIAL) else t


@pytest.fixture
def run_tables(tmp_path):
    """comm_summary.csv, comm_ranks.csv and the placement files of a 4-rank NCCL job over two hosts:
    all_gather out of place, all_reduce (torch's is always in place) in place, at 1 KiB and 128 KiB;
    and a 1-rank job, which nccl-tests writes no process rows for."""
    summary, ranks = [], []
    for ws in (4, 1):
        for op, inplace in (("all_gather", False), ("all_reduce", True)):
            for size in (1024, 131072):
                summary.append(summary_row(world_size=ws, op=op, inplace=inplace, size_bytes=size, n_trials=TRIALS,
                                           time_us_median=110.0))
                for trial in range(TRIALS):
                    for rank in range(ws):
                        ranks.append(dict(backend="nccl", world_size=ws, op=op, traffic="none", dtype="float32",
                                          nccl_env="default", timing="events", inplace=inplace, size_bytes=size,
                                          trial=trial, rank=rank, time_us=rank_time(size, trial, rank),
                                          arrival_us=3.0 * rank))
    pd.DataFrame(summary).to_csv(tmp_path / "comm_summary.csv", index=False)
    pd.DataFrame(ranks, columns=list(COMM_RANK_COLUMN_NAMES)).to_csv(tmp_path / "comm_ranks.csv", index=False)
    jobs, paths = [], []
    for ws in (4, 1):
        path = tmp_path / f"placement_ws{ws}.json"
        path.write_text(json.dumps({"ranks": [
            {"rank": r, "local_rank": r % 2, "hostname": HOSTS[r], "pid": 1000 + r, "cuda_visible_devices": None,
             "device": f"cuda:{r % 2}", "device_index": r % 2, "pci_bus_id": f"0000:1{r % 2}:00.0",
             "uuid": f"GPU-{r}", "gpu_name": "NVIDIA H100 80GB HBM3"} for r in range(ws)], "error": None}))
        jobs.append({"backend": "nccl", "dtype": "float32", "world_size": ws, "nccl_env": "default"})
        paths.append(str(path))
    out = tmp_path / "nccl_tests"
    written = write_nccl_tests(tmp_path / "comm_summary.csv", out, tmp_path / "comm_ranks.csv",
                               placements_of(jobs, paths))
    assert len(written) == 4
    return out


def test_documents_have_the_per_process_structure_the_analyzer_reads(run_tables):
    doc = json.loads((run_tables / "nccl_all_gather_float32_ws4_default_events.json").read_text())
    assert [list(d) for d in doc["config"]["devices"]] == [DEVICE_KEYS] * 4
    assert [d["hostname"] for d in doc["config"]["devices"]] == HOSTS
    assert [d["rank"] for d in doc["config"]["devices"]] == [0, 1, 2, 3]
    assert doc["config"]["iterations"] == TRIALS and doc["config"]["per_iter_skip"] == 0
    for rec in doc["results"]:
        assert rec["in_place"] is None and "in_place_per_iter" not in rec
        it = rec["out_of_place_per_iter"]
        assert list(it) == PER_ITER_KEYS + OURS_ONLY
        rows = it["per_process_max_times_us"]
        assert len(rows) == 4 and all(len(row) == TRIALS for row in rows)  # one row per process (rank)
        assert rows[STRAGGLER][3] == rank_time(rec["size"], 3, STRAGGLER)
        # the analyzer's consistency check: times_us is the max over process rows per iteration
        assert it["times_us"] == [max(row[i] for row in rows) for i in range(TRIALS)]
        assert rec["actual_iterations"] == TRIALS and it["skipped_iterations"] == 0
        times = sorted(it["times_us"])
        assert it["min_us"] == times[0] and it["max_us"] == times[-1] and it["p50_us"] == times[TRIALS // 2]
        assert it["avg_us"] == pytest.approx(sum(times) / TRIALS)
        assert it["per_process_arrival_us"][3] == [9.0] * TRIALS
    # all_reduce is measured in place only: its per-iteration fields are the in-place ones
    ar = json.loads((run_tables / "nccl_all_reduce_float32_ws4_default_events.json").read_text())
    assert all(r["out_of_place"] is None and list(r["in_place_per_iter"])[:len(PER_ITER_KEYS)] == PER_ITER_KEYS
               for r in ar["results"])
    # one process: times_us, no process rows (as nccl-tests)
    one = json.loads((run_tables / "nccl_all_gather_float32_ws1_default_events.json").read_text())
    assert all("per_process_max_times_us" not in r["out_of_place_per_iter"] for r in one["results"])
    assert one["config"]["devices"][0]["hostname"] == "nodeA"


def test_documents_without_ranks_stay_as_before(run_tables, tmp_path):
    out = write_nccl_tests(run_tables.parent / "comm_summary.csv", tmp_path / "bare")
    doc = json.loads(out[0].read_text())
    assert "devices" not in doc["config"] and "iterations" not in doc["config"]
    assert all(set(r) == {"size", "count", "type", "redop", "root", "out_of_place", "in_place", "experiment_name"}
               for r in doc["results"])


def analyze(path, *flags) -> str:
    res = subprocess.run([sys.executable, str(ANALYZER), str(path), *flags], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.skipif(not ANALYZER.exists(), reason=(
    f"nccl-tests' analyzer is not here ({ANALYZER}); fetch github:NVIDIA/nccl-tests into .fetched/nccl-tests "
    "(or set NCCL_TESTS_DIR) to run it on our documents"))
def test_nccl_tests_analyzer_reads_our_documents(run_tables):
    text = analyze(run_tables / "nccl_all_gather_float32_ws4_default_events.json",
                   "--straggler", "--spikes", "--nodes", "--iter0")
    assert "No per-process data available" not in text
    assert "Process rows: 4" in text and "Consistency (times_us == max over process rows, OOP): PASS" in text
    straggler = text.split("PER-PROCESS STRAGGLER ANALYSIS")[1].split("SPIKE ANALYSIS")[0]
    assert "1 KB:  fastest=process  0 (" in straggler and f"slowest=process  {STRAGGLER} (" in straggler
    spikes = text.split("SPIKE ANALYSIS")[1].split("ITERATION 0")[0]
    assert f"iter  {SPIKE_TRIAL}:  1/4 processes spiked  max=1000.0  [STRAGGLER: process {SPIKER}]" in spikes
    assert "iter  0:  4/4 processes spiked" in spikes and "[SYSTEM-WIDE]" in spikes
    iter0 = text.split("ITERATION 0 WARMUP IMPACT")[1].split("PER-NODE ANALYSIS")[0]
    assert "          1024       300.0" in iter0 and "***" in iter0
    assert "PER-NODE ANALYSIS (2 nodes" in text
    assert "Node 0 (nodeA, processes  0- 1)" in text and "Node 1 (nodeB, processes  2- 3)" in text
    # an op torch runs only in place: the analyzer's --in-place
    text = analyze(run_tables / "nccl_all_reduce_float32_ws4_default_events.json", "--in-place", "--straggler")
    assert "No per-process data available" not in text and f"slowest=process  {STRAGGLER} (" in text
