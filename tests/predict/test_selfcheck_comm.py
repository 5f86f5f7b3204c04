"""distbench.predict.selfcheck: error sign, size bands and the summary's arithmetic on a tiny table."""

import numpy as np
import pandas as pd
import pytest

from distbench.predict import nccl_model as M
from distbench.predict import selfcheck as S


def test_rel_error_sign_and_bands():
    assert S.rel_err_pct(90.0, 100.0) == pytest.approx(-10.0)  # predicted too fast: negative
    assert S.rel_err_pct(125.0, 100.0) == pytest.approx(25.0)
    assert list(S.band_of([2**20 - 1, 2**20, 2**30])) == ["< 1 MiB", ">= 1 MiB", ">= 1 MiB"]


def test_summary_bands_max_median_and_goal():
    check = pd.DataFrame({
        "dataset": "x", "op": "all_reduce", "timing": "graph",
        "size_bytes": [1024, 65536, 2**20, 2**24, 2**28],
        "rel_err_pct": [-20.0, 30.0, 10.0, -16.0, 2.0], "rel_err_pct_envelope": [0.0, 0.0, -40.0, 0.0, 0.0]})
    check["band"] = S.band_of(check["size_bytes"])
    s = S.summarize(check).set_index("band")
    small, large = s.loc["< 1 MiB"], s.loc[">= 1 MiB"]
    assert (small["n"], small["max_abs_err_pct"], small["median_abs_err_pct"]) == (2, 30.0, 25.0)
    assert not small["meets_goal"]  # 30 > 25
    assert (large["n"], large["max_abs_err_pct"], large["median_abs_err_pct"]) == (3, 16.0, 10.0)
    assert not large["meets_goal"] and large["max_abs_err_pct_envelope"] == 40.0


def test_check_table_on_a_synthetic_two_world_size_table_is_exact():
    c = S.check_table(_sweeps({2: 1.0, 4: 1.0}), "synthetic")
    sizes = [2.0**k for k in range(3, 31, 2)]
    assert len(c) == len(sizes) and set(c["check_world_size"]) == {4}
    # exact but at the smallest sizes: the predicted floor is the 2-rank median small-size time moved
    # by NCCL's latency growth, while the 1-channel LL bandwidth term grows with n too
    assert np.abs(c["rel_err_pct"]).max() < 0.5 and np.abs(c[c["size_bytes"] >= 512]["rel_err_pct"]).max() < 1e-6
    assert set(c["band"]) == {"< 1 MiB", ">= 1 MiB"}


def model_sweep(op, sizes, n, extra=5.0, eta=1.0, phi=0.25):
    """Times in the calibrated model's own form (NCCL's latency, channel ramp and loop) with every
    protocol's start-up `extra`, efficiency `eta` and Simple's pipeline fill `phi` chunks."""
    fits = {p: M.ProtoFit(extra_us=extra, eta=eta, phi=phi if p == "Simple" else 0.0) for p in M.PROTOCOLS}
    cal = M.CalibratedComm(op=op, n0=n, topo=M.NcclTopo(n), protos=fits, floor_us=0.0)
    return cal.predict(sizes, n)["time_us"]


def _sweeps(eta_at: dict, extra=5.0, op="all_gather"):
    """A comm_summary where each world size follows the model's form with Simple's algBw x eta_at[n]."""
    sizes = [2.0**k for k in range(3, 31, 2)]
    rows = []
    for n, eta in eta_at.items():
        for s, t in zip(sizes, model_sweep(op, sizes, n, extra, eta)):
            rows.append({"backend": "nccl", "world_size": n, "op": op, "dtype": "float32", "nccl_env": "default",
                         "timing": "graph", "inplace": False, "size_bytes": int(s),
                         "time_us_median": t, "correct": True, "status": "ok"})
    return pd.DataFrame(rows)


def test_oracle_bandwidth_control_removes_an_asymptote_that_rises_with_n():
    # the 4-rank run reaches 1.25x the 2-rank bandwidth: the prediction is too slow at large sizes,
    # the oracle-bandwidth control (the 4-rank asymptote in the 2-rank fit) and in-sample are exact
    c = S.check_table(_sweeps({2: 0.8, 4: 1.0}), "synthetic", envelope=False)
    big = c[c["size_bytes"] >= 2**26]
    assert big["rel_err_pct"].min() > 15  # too slow by up to 25%
    assert big["rel_err_pct_oracle_bw"].abs().max() < 0.5
    assert c["rel_err_pct_in_sample"].abs().max() < 0.5
    ctl = S.control_summary(c).set_index("band")
    assert ctl.loc[">= 1 MiB", "verdict"].startswith("asymptote's rise")
    assert ctl.loc[">= 1 MiB", "max_abs_err_pct_oracle_bw"] < 0.5
    assert ctl.loc[">= 1 MiB", "band_oracle"] == "oracle_bw"


def test_oracle_latency_control_takes_the_measured_small_size_floor():
    d = _sweeps({2: 1.0, 4: 1.0})
    four = d["world_size"] == 4
    d.loc[four, "time_us_median"] += 6.0  # a 4-rank start-up 6 us above NCCL's per-step growth
    c = S.check_table(d, "synthetic", envelope=False)
    small = c[c["size_bytes"] <= 2**16]
    assert small["rel_err_pct"].max() < -20  # too fast
    assert small["rel_err_pct_oracle_lat"].abs().max() < 0.5
    ctl = S.control_summary(c).set_index("band")
    assert ctl.loc["< 1 MiB", "verdict"].startswith("floor's rise")


def test_verdict_names_the_model_form_when_in_sample_misses_too():
    assert S._verdict(">= 1 MiB", 15, 30, 20, 20, 40, 25).startswith("model form")
    assert S._verdict(">= 1 MiB", 15, 30, 20, 20, 40, 5).startswith("other change")
    assert S._verdict(">= 1 MiB", 15, 30, 20, 10, 40, 25).startswith("Simple asymptote")
    assert S._verdict("< 1 MiB", 25, 30, 40, 40, 10, 50).startswith("floor's rise")
    assert S._verdict("< 1 MiB", 25, 20, 40, 40, 40, 50) == "met"
