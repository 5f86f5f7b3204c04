"""The prediction section's first line says what the figures rest on (backend, world sizes, tables,
preset) and how well the model held on this node (the collectives' and the training efficiency's
in-node check, "not checked" where one world size leaves nothing to check; a Gloo check is named as
CPU and never as support for a GPU figure), and predictions beyond the checked world size carry the
check's error as their band."""

from __future__ import annotations

import numpy as np
import pandas as pd

from distbench.core.section import ReportInputs
from distbench.predict import section as S
from distbench.predict import tables as T
from distbench.predict.model import get_preset

SIZES = [2**k for k in range(10, 31, 2)]


def comm(backend="nccl", world_sizes=(2, 4), timing="graph"):
    rows = []
    for ws in world_sizes:
        beta = 300.0 if ws == 2 else 320.0  # the 4-rank run a little faster than the 2-rank fit predicts
        for s in SIZES:
            t = 10.0 + ws + s / (1e3 * beta) * 2 * (ws - 1) / ws
            rows.append({"backend": backend, "world_size": ws, "op": "all_reduce", "dtype": "float32",
                         "nccl_env": "default", "timing": timing, "inplace": False, "size_bytes": s,
                         "time_us_median": t, "correct": True, "status": "ok"})
    return pd.DataFrame(rows)


def training(backend="nccl", world_sizes=(1, 2, 4)):
    steps = {1: (10.0, 0.0, 0.0), 2: (11.0, 1.5, 1.0), 4: (12.5, 2.1, 2.5)}
    return pd.DataFrame([{"backend": backend, "model": "mlp", "strategy": "ddp", "config": "plain", "scaling": "weak",
                          "dtype": "float32", "status": "ok", "world_size": ws, "step_time_ms_median": steps[ws][0],
                          "compute_only_ms_median": 10.0, "comm_alone_ms_median": steps[ws][1],
                          "exposed_comm_ms": steps[ws][2], "grad_bytes": 400_000_000, "n_buckets": 1}
                         for ws in world_sizes])


def section(tmp_path, comm_table, training_table, gpus="2,4,8,16"):
    comm_table.to_csv(tmp_path / "comm_summary.csv", index=False)
    training_table.to_csv(tmp_path / "training_summary.csv", index=False)
    out = tmp_path / "pred"
    assert T.main([str(tmp_path / "comm_summary.csv"), "--training", str(tmp_path / "training_summary.csv"),
                   "--out-dir", str(out), "--gpus", gpus]) == 0
    return S.build(ReportInputs({"prediction_validation": out / "prediction_validation.csv"})), out


def test_gpu_nccl_data_with_a_check_names_its_data_and_both_errors(tmp_path):
    sec, out = section(tmp_path, comm(), training())
    line = sec["rests_on"]
    assert line.startswith("These predictions rest on the NCCL collectives measured on this node at 2, 4 ranks "
                           "(comm_summary) and the training steps measured at 1, 2, 4 ranks (training_summary)")
    assert "the preset nvlink4-ib400 (8 GPUs per node" in line
    v = pd.read_csv(out / "prediction_validation.csv")
    big = v[v["size_bytes"] >= 2**20]["rel_err_pct"].abs()
    assert f"collectives (NCCL) fitted at 2 ranks, checked at 4: median |error| {big.median():.1f}% at >= 1 MiB" in line
    t = pd.read_csv(out / "prediction_training.csv")
    e = t["check_error_points"].iloc[0]
    assert e != 0
    assert f"training efficiency fitted at 1, 2 ranks, checked at 4: max |error| {abs(e):.1f} points (mlp ddp {e:+.1f})" in line
    assert "those beyond 4 ranks show it as their band" in line
    assert "not checked" not in line


def test_one_world_size_says_not_checked(tmp_path):
    sec, _ = section(tmp_path, comm(world_sizes=(2,)), training(world_sizes=(2,)))
    line = sec["rests_on"]
    assert "at 2 ranks (comm_summary)" in line and "training steps measured at 2 ranks" in line
    assert "collectives not checked (that needs NCCL collectives" in line and "training not checked: one world size" in line
    assert "band" not in line
    cells = sec["tables"]["training"]["rows"][0]
    assert "not checked: one world size" in cells and not any("±" in str(c) for c in cells)


def test_a_gloo_check_is_named_cpu_and_supports_no_gpu_figure(tmp_path):
    """A node with one GPU and Gloo over CPU processes at 2 and 4 ranks: the GPU figures rest on the
    preset; the Gloo check exists but is never their support, and its error is not printed."""
    gloo = comm("gloo", timing="host")
    one_gpu_nccl = training(world_sizes=(1,))
    sec, out = section(tmp_path, gloo, one_gpu_nccl, gpus="8,16")
    line = sec["rests_on"]
    assert line.startswith("These predictions rest on the preset nvlink4-ib400")
    assert "for every link, since no collective between GPUs was measured on this node" in line
    assert "the Gloo check here is CPU processes and supports no GPU figure" in line
    assert "the training steps measured at 1 rank (training_summary)" in line  # one rank, not "1 ranks"
    v = pd.read_csv(out / "prediction_validation.csv")
    assert len(v) and set(v["backend"]) == {"gloo"}
    big = v[v["size_bytes"] >= 2**20]["rel_err_pct"].abs()
    assert f"{big.median():.1f}%" not in line and "collectives (NCCL)" not in line
    # rests_on alone with a GPU preset and the Gloo check, as the section calls it
    text = S.rests_on(pd.DataFrame(columns=["backend", "world_size"]), v, None, None, get_preset("h200-ib400"))
    assert "Gloo check here is CPU processes and supports no GPU figure" in text and "the preset h200-ib400" in text


def test_the_band_is_beyond_the_checked_world_size_only(tmp_path):
    sec, out = section(tmp_path, comm(), training())
    tab = sec["tables"]["training"]
    col = {h: i for i, h in enumerate(tab["headers"])}
    row = tab["rows"][0]
    t = pd.read_csv(out / "prediction_training.csv").set_index("gpus")
    e = t["check_error_points"].iloc[0]
    assert row[col["in-node check"]] == f"fitted at 1, 2 ranks, at 4: {e:+.1f} points"
    for n in (2, 4):
        assert "±" not in row[col[f"{n} GPUs"]] and np.isnan(t.loc[n, "band_points"])
    for n in (8, 16):
        cell = row[col[f"{n} GPUs"]]
        assert cell == (f"{100 * t.loc[n, 'efficiency']:.1f}% ± {abs(e):.1f} points "
                        f"(in-node check at 4 ranks: error {e:+.1f} points)")
        assert t.loc[n, "band_points"] == abs(e)


def test_templates_print_the_first_line_and_the_band_note_in_step():
    root = S.TEMPLATES
    md, html = (root / "prediction.md.j2").read_text(), (root / "prediction.html.j2").read_text()
    for text in (md, html):
        assert "prediction.rests_on" in text
        assert "± that check's error in points" in text
