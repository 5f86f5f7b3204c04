"""The training prediction checked against a measured larger run (distbench.predict.selfcheck_training,
distbench.predict.scaling.check_training_config): on a synthetic table whose every number is known, the
fit sees only the rows at the smaller world sizes, and the error is predicted - measured in points."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from distbench.predict import scaling as T
from distbench.predict.model import PRESETS, Link
from distbench.predict.selfcheck_training import COLUMNS, selfcheck

# an intra link whose 4-rank all_reduce of 400 MB in one bucket is exactly 400e6 * 2*3/4 / 300e3 us = 2 ms
LINK = Link(0.0, 300.0)


def row(ws, step, compute, comm_alone, exposed, cv=0.02, n_steps=20):
    return {"backend": "nccl", "model": "mlp", "strategy": "ddp", "config": "plain", "scaling": "weak",
            "dtype": "float32", "status": "ok", "world_size": ws, "step_time_ms_median": step,
            "compute_only_ms_median": compute, "comm_alone_ms_median": comm_alone, "exposed_comm_ms": exposed,
            "grad_bytes": 400_000_000, "n_buckets": 1, "step_time_ms_cv": cv, "n_steps": n_steps}


def synthetic(step4=12.5):
    return pd.DataFrame([row(1, 10.0, 10.0, 0.0, 0.0), row(2, 11.0, 10.0, 1.5, 1.0), row(4, step4, 10.0, 2.1, 2.5)])


def comm4_ms():
    return 400e6 * (2 * 3 / 4) / (1e3 * LINK.beta_gbps) / 1e3


def test_the_check_sees_only_the_smaller_world_sizes_and_signs_its_error():
    t = synthetic()
    assert comm4_ms() == pytest.approx(2.0)
    c = T.check_training_config(t, (1, 2), 4, "nvlink4-ib400", LINK)
    # fitted at 2: window = 1.5 - 1.0 = 0.5 ms hidden; step(4) = 10 + (2.0 - 0.5) = 11.5; step(1) measured 10
    assert c["ref_world_size"] == 2 and c["fit_world_sizes"] == "1,2"
    assert c["step_time_ms_predicted"] == pytest.approx(11.5)
    assert c["efficiency_predicted"] == pytest.approx(10 / 11.5)
    assert c["efficiency_measured"] == pytest.approx(10 / 12.5)
    assert c["error_points"] == pytest.approx(100 * (10 / 11.5 - 10 / 12.5))  # +6.96: optimistic
    assert c["error_points"] > 0
    # the 4-rank row never reaches the fit: another measured step there moves only the measured side
    c2 = T.check_training_config(synthetic(step4=11.0), (1, 2), 4, "nvlink4-ib400", LINK)
    assert c2["efficiency_predicted"] == pytest.approx(c["efficiency_predicted"])
    assert c2["error_points"] == pytest.approx(100 * (10 / 11.5 - 10 / 11.0)) and c2["error_points"] < 0
    # fitted at 1 only: no overlap window, the collectives in full: step(4) = 10 + 2 = 12
    c1 = T.check_training_config(t, (1,), 4, "nvlink4-ib400", LINK)
    assert c1["ref_world_size"] == 1 and c1["efficiency_predicted"] == pytest.approx(10 / 12.0)
    assert c1["error_points"] == pytest.approx(100 * (10 / 12.0 - 10 / 12.5))
    # nothing to check against: no row at the checked world size, or it is among the fitted ones
    assert T.check_training_config(t, (1, 2), 8, "nvlink4-ib400", LINK) is None
    assert T.check_training_config(t, (1, 2, 4), 4, "nvlink4-ib400", LINK) is None


def test_a_one_rank_fit_keeps_the_one_rank_sync_time_as_a_floor():
    """FSDP2 pays its gathers and scatters as local copies on one rank: that exposed time is a floor
    under the collectives at N, not added to them."""
    t = pd.DataFrame([row(1, 130.0, 100.0, 5.0, 30.0), row(4, 131.0, 100.0, 25.0, 31.0)]).assign(strategy="ddp")
    c = T.check_training_config(t, (1,), 4, "nvlink4-ib400", LINK)
    assert c["step_time_ms_predicted"] == pytest.approx(130.0)  # 100 + max(30, 2)
    assert c["efficiency_predicted"] == pytest.approx(1.0)


def test_selfcheck_table_has_its_columns_and_controls():
    out = selfcheck(synthetic(), "synthetic", fit_sets=((1,), (1, 2)), check_ws=4, preset="nvlink4-ib400",
                    links={"test link": LINK})
    assert list(out.columns) == list(COLUMNS) and len(out) == 2
    r = out.set_index("fitted_on").loc["1,2"]
    assert r["predicted_eff_pct"] == pytest.approx(100 * 10 / 11.5)
    assert r["measured_eff_pct"] == pytest.approx(80.0)
    assert r["error_points"] == pytest.approx(r["predicted_eff_pct"] - r["measured_eff_pct"])
    assert not r["within_goal"]  # 6.96 points > 5
    assert r["predicted_comm_ms"] == pytest.approx(2.0) and r["measured_comm_alone_ms"] == 2.1
    assert r["measured_eff_pct_at_fit"] == pytest.approx(100 * 10 / 11.0)
    assert r["spread_points"] == pytest.approx(80.0 * math.hypot(0.02, 0.02))
    assert r["median_se_points"] == pytest.approx(80.0 * 1.2533 * math.sqrt(2 * 0.02**2 / 20))
    assert r["compute_drift_points"] == pytest.approx(0.0)
    assert bool(out.set_index("fitted_on").loc["1", "within_goal"])  # 83.3 vs 80: 3.3 points


def test_predict_training_carries_the_check_and_its_band_beyond_the_checked_world_size():
    pred = T.predict_training(synthetic(), PRESETS["nvlink4-ib400"], gpu_counts=(2, 4, 8, 16), intra=LINK)
    pred = pred.set_index("gpus")
    err = 100 * (10 / 11.5 - 10 / 12.5)
    assert list(pred["check_error_points"]) == pytest.approx([err] * 4)
    assert (pred["check_world_size"] == 4).all() and (pred["check_fit_world_sizes"] == "1,2").all()
    assert pred[["band_points"]].loc[[2, 4]].isna().all().all()  # within the checked world size: no band
    assert list(pred.loc[[8, 16], "band_points"]) == pytest.approx([abs(err)] * 2)
    assert (pred["measured_world_sizes"] == "1,2,4").all()
    assert (pred["step_time_ms_1gpu"] == 10.0).all()  # the measured 1-GPU step
    # one world size: nothing checked, no band anywhere
    one = T.predict_training(synthetic().iloc[[1]], "nvlink4-ib400", gpu_counts=(8, 16), intra=LINK)
    assert one["check_error_points"].isna().all() and one["band_points"].isna().all()
