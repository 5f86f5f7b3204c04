"""training.inspect's tables made from the traces' table (training_trace_split: distbench.traces.split_step)
are the tables made by reading the traces directly (distbench.traces.split.job_trace_split), on the
recorded inspect directories: the 2x H100 MLP under DDP and under FSDP2, a layout without a compute-only
step, the 2-rank Gloo run (no GPU traces) and a one-rank job (in the traces' table, not in the split)."""

import math
from pathlib import Path

import pandas as pd
import pytest

from distbench.traces.split import job_trace_split
from distbench.traces.split_step import write_split_table
from distbench.training.analysis.instep_summary import read_trace_split, write_instep_tables

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H100 = "NVIDIA H100 80GB HBM3"


def _job(run: Path, job: str, fixture: str | None, parts=None) -> Path:
    """results/<label>/training/<job>/inspect: the fixture, or only some of its parts (a layout without a
    compute-only step: no compute_only/), or empty."""
    d = run / "training" / job / "inspect"
    d.parent.mkdir(parents=True)
    if fixture and parts is None:
        d.symlink_to(FIXTURES / fixture)
        return d
    d.mkdir()
    for p in parts or ():
        (d / p).symlink_to(FIXTURES / fixture / p)
    return d


@pytest.fixture
def run(tmp_path):
    run = tmp_path / "results/label"
    dirs = [_job(run, "nccl/mlp/ws2/ddp", "instep_h100x2_mlp_ddp"),
            _job(run, "nccl/mlp/ws2/fsdp", "instep_h100x2_mlp_fsdp"),
            _job(run, "nccl/mlp/ws2/tp", "instep_h100x2_mlp_ddp", ("step", "inspect.json", "inspector")),
            _job(run, "gloo/mlp/ws2/plain", "instep_gloo_mlp"),
            _job(run, "nccl/mlp/ws1/plain", None)]
    base = {"model": "mlp", "dtype": "float32", "status": "ok", "scaling": "weak", "mfu": 0.6, "peak_tflops": 67.0,
            "tflops_per_device": 40.0, "comm_alone_ms_median": 5.0}
    summary = pd.DataFrame([
        {**base, "backend": "nccl", "world_size": 2, "config": "ddp", "strategy": "ddp", "device_name": H100,
         "step_time_ms_median": 11.60755, "compute_only_ms_median": 9.66456, "bounds_allowance_ms": 0.3},
        {**base, "backend": "nccl", "world_size": 2, "config": "fsdp", "strategy": "fsdp", "device_name": H100,
         "step_time_ms_median": 28.4008, "compute_only_ms_median": 9.64574, "bounds_allowance_ms": 3.5651},
        {**base, "backend": "nccl", "world_size": 2, "config": "tp", "strategy": "fsdp_tp", "device_name": H100,
         "step_time_ms_median": 11.60755, "compute_only_ms_median": math.nan, "bounds_allowance_ms": 0.3},
        {**base, "backend": "gloo", "world_size": 2, "config": "plain", "strategy": "ddp", "device_name": "cpu",
         "step_time_ms_median": 3.0, "compute_only_ms_median": 2.0, "bounds_allowance_ms": 0.5},
        {**base, "backend": "nccl", "world_size": 1, "config": "plain", "strategy": "ddp", "device_name": H100,
         "step_time_ms_median": 9.5, "compute_only_ms_median": 9.5}])
    summary.to_csv(tmp_path / "summary.csv", index=False)
    pd.DataFrame([{"device_index": i, "device_name": H100, "dtype": "float32", "status": "ok", "tflops": t,
                   "sm_clock_mhz": 1980, "power_limit_w": 700} for i, t in ((0, 50.0), (1, 48.0))]
                 ).to_csv(tmp_path / "matmul.csv", index=False)
    pd.DataFrame([{"backend": "nccl", "world_size": 2, "op": "all_reduce", "dtype": "float32", "timing": "events",
                   "nccl_env": "default", "status": "ok", "size_bytes": s, "busbw_gbps_median": b}
                  for s, b in ((16777216, 206.926), (67108864, 262.244), (134217728, 281.377))]
                 ).to_csv(tmp_path / "comm_summary.csv", index=False)
    return tmp_path, run, dirs


def test_the_tables_from_the_traces_table_are_those_from_the_traces(run):
    tmp, results, dirs = run
    table = results / "tables/training_trace_split.csv"
    write_split_table(dirs, table, results)
    from_table = read_trace_split(table)
    # the reader gives back the very dict the traces gave: same keys, values and types
    for d in dirs:
        direct, read = job_trace_split(d), from_table(d)
        assert read == direct and [type(v) for v in read.values()] == [type(v) for v in direct.values()], d
    assert from_table(dirs[0])["compute_only_traced"] is True and from_table(dirs[2])["compute_only_traced"] is False
    assert from_table(dirs[3]) == {} and from_table(dirs[4]) == {}

    ins = [str(tmp / "summary.csv"), str(tmp / "comm_summary.csv"), str(tmp / "matmul.csv")]
    logs = {}
    for way, trace_split in (("direct", job_trace_split), ("table", from_table)):
        logs[way] = write_instep_tables(dirs, *ins, tmp / way / "instep.csv", tmp / way / "split.csv", trace_split)
    for name in ("instep.csv", "split.csv"):
        direct, via = pd.read_csv(tmp / "direct" / name), pd.read_csv(tmp / "table" / name)
        pd.testing.assert_frame_equal(via, direct, check_exact=True)
        assert (tmp / "table" / name).read_text() == (tmp / "direct" / name).read_text()
    assert logs["table"] == logs["direct"]
    split = pd.read_csv(tmp / "table/split.csv").set_index("job")
    # the cases the comparison covers: a full split, a host-bound one, one without a compute-only step,
    # one without GPU traces; the one-rank job has no split
    assert list(split.index) == ["nccl/mlp/ws2/ddp", "nccl/mlp/ws2/fsdp", "nccl/mlp/ws2/tp", "gloo/mlp/ws2/plain"]
    assert split.loc["nccl/mlp/ws2/ddp", "adds_up"] and split.loc["nccl/mlp/ws2/fsdp", "profiler_host_ms"] > 10
    assert "no compute-only step" in split.loc["nccl/mlp/ws2/tp", "note"]
    assert "no GPU traces" in split.loc["gloo/mlp/ws2/plain", "note"]


def test_a_job_missing_from_the_traces_table_is_an_error(run):
    from distbench.core.contract import SchemaError

    tmp, results, dirs = run
    table = results / "tables/training_trace_split.csv"
    write_split_table(dirs[:1], table, results)
    with pytest.raises(SchemaError, match="no row for the job nccl/mlp/ws2/fsdp"):
        read_trace_split(table)(dirs[1])
