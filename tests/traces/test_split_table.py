"""The traces' step table (distbench.traces.split_step): one row per job's inspect directory, keyed by
the job's directory under results/<label>/, with every figure job_trace_split gives written so that it
reads back exactly; a job without GPU traces is a row with its status and no figure."""

import csv
from pathlib import Path
from types import SimpleNamespace

from distbench.traces.split import TRACE_SPLIT_FIELDS, job_trace_split
from distbench.traces.split_step import TRACE_SPLIT_COLUMNS, job_name, split_table

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _job(run: Path, job: str, fixture: str | None) -> Path:
    d = run / job / "inspect"
    d.parent.mkdir(parents=True)
    if fixture:
        d.symlink_to(FIXTURES / fixture)
    else:
        d.mkdir()
    return d


def test_a_row_per_job_with_every_figure_read_back_exactly(tmp_path):
    run = tmp_path / "results/label"
    dirs = [_job(run, "training/nccl/mlp/ws2/ddp", "instep_h100x2_mlp_ddp"),
            _job(run, "training/gloo/mlp/ws2/plain", "instep_gloo_mlp"),
            _job(run, "training/nccl/mlp/ws1/plain", None)]
    out = run / "tables/training_trace_split.csv"
    sm = SimpleNamespace(input=SimpleNamespace(inspect=[str(d) for d in dirs]), output=SimpleNamespace(table=str(out)),
                         log=[str(run / "logs/training/training_trace_split.log")])
    split_table(sm)
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == TRACE_SPLIT_COLUMNS
        rows = list(reader)
    assert [r["job"] for r in rows] == ["training/nccl/mlp/ws2/ddp", "training/gloo/mlp/ws2/plain",
                                        "training/nccl/mlp/ws1/plain"]
    ddp, gloo, empty = rows
    figures = job_trace_split(dirs[0])
    assert ddp["status"] == "ok" and set(figures) == set(TRACE_SPLIT_FIELDS)
    for k, v in figures.items():  # the cell is the value's exact text: floats in full
        assert ddp[k] == (repr(v) if isinstance(v, float) else str(v)), k
        if isinstance(v, float):
            assert float(ddp[k]) == v
    # no GPU traces (a CPU run, or none written): a row saying so, never zeros
    assert job_trace_split(dirs[1]) == {} and job_trace_split(dirs[2]) == {}
    for r in (gloo, empty):
        assert r["status"] == "skipped" and all(r[k] == "" for k in TRACE_SPLIT_FIELDS)
    log = Path(sm.log[0]).read_text()
    assert "training/nccl/mlp/ws2/ddp: rank " in log and "training/gloo/mlp/ws2/plain: no GPU traces" in log


def test_a_layout_without_a_compute_only_step_leaves_its_figures_empty(tmp_path):
    only = tmp_path / "results/training/nccl/gpt/ws2/fsdp_tp/inspect"
    only.mkdir(parents=True)
    (only / "step").symlink_to(FIXTURES / "instep_h100x2_mlp_ddp/step")
    out = tmp_path / "results/tables/t.csv"
    from distbench.traces.split_step import write_split_table

    write_split_table([only], out, tmp_path / "results")
    row = next(csv.DictReader(open(out, newline="")))
    assert row["job"] == "training/nccl/gpt/ws2/fsdp_tp" and row["compute_only_traced"] == "False"
    assert row["slowdown_ms"] == "" and row["exposed_comm"] != ""


def test_a_job_outside_the_run_keeps_its_path():
    assert job_name("/elsewhere/nccl/mlp/ws2/plain/inspect", "/results/label") == "/elsewhere/nccl/mlp/ws2/plain"
    assert job_name("results/label/comm/x/inspect", "results/label") == "comm/x"
