"""distbench.predict.selfcheck: error sign, size bands and the summary's arithmetic on a tiny table."""

import numpy as np
import pandas as pd
import pytest

from distbench.predict import nccl_channels as C
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


def _bubble_sweeps(E=1.2, b=0.6, phi=0.25, extra=5.0, ops=("all_reduce", "all_gather"), ranks=(2, 4)):
    """A comm_summary whose ring ops follow the loop's bubble (nccl_model section 3): Simple's and
    LL128's efficiency E steps / (steps + b) at every world size, a fill of `phi` chunks at the link's
    own rate E (in the model's units, phi x the efficiency); LL's efficiency that of the smallest
    world size at all (the committed 4-rank LL rows do not rise)."""
    sizes = [2.0**k for k in range(3, 31, 2)]
    rows = []
    for op in ops:
        for n in ranks:
            g = C.bubble_efficiency(op, n, b)
            fits = {p: M.ProtoFit(extra_us=extra, eta=E * (C.bubble_efficiency(op, ranks[0], b) if p == "LL" else g),
                                  phi=phi * g if p == "Simple" else 0.0) for p in M.PROTOCOLS}
            cal = M.CalibratedComm(op=op, n0=n, topo=M.NcclTopo(n), protos=fits, floor_us=0.0)
            for s, t in zip(sizes, cal.predict(sizes, n)["time_us"]):
                rows.append({"backend": "nccl", "world_size": n, "op": op, "dtype": "float32", "nccl_env": "default",
                             "timing": "graph", "inplace": op == "all_reduce", "size_bytes": int(s),
                             "time_us_median": t, "correct": True, "status": "ok"})
    return pd.DataFrame(rows)


def test_the_loops_bubble_is_fitted_across_ops_and_predicts_the_asymptotes_rise():
    # all_reduce and all_gather at 2 ranks differ only by their steps per loop (2 and 1): their
    # ratio alone gives b, and with it the rise at 4 ranks (6 and 3 steps), which no 1-op fit sees
    c = S.check_table(_bubble_sweeps(), "synthetic", envelope=False)
    assert c["bubble"].dropna().to_numpy() == pytest.approx(0.6, rel=1e-6)
    big = c[c["size_bytes"] >= 2**20]
    assert big["rel_err_pct"].abs().max() < 1e-6
    # without it the 4-rank asymptote is the 2-rank one: all_gather too slow by 1.5/1.25 - 1 = 20% at the top
    gather = big[big["op"] == "all_gather"]
    assert gather["rel_err_pct_no_bubble"].max() > 15


def test_broadcast_and_a_node_with_only_all_reduce_have_no_bubble():
    assert C.bubble_efficiency("broadcast", 4, 0.6) == 1.0 and C.bubble_efficiency("all_to_all", 4, 0.6) == 1.0
    assert C.bubble_efficiency("all_gather", 4, 0.6) == pytest.approx(3 / 3.6)
    assert np.isnan(C.bubble_from_etas(0.7, 0.9, 2))  # all_reduce below all_gather: no b >= 0 fits
    assert C.bubble_from_etas(0.912, 0.737, 2) == pytest.approx(2 * (0.912 / 0.737 - 1) / (2 - 0.912 / 0.737))
    c = S.check_table(_bubble_sweeps(ops=("all_reduce",)), "synthetic", envelope=False)
    assert c["bubble"].isna().all()  # one side of the ratio only: no bubble, NCCL's flat bandwidth
    np.testing.assert_allclose(c["time_us_predicted"], c["time_us_no_bubble"])


def test_committed_h200_and_h100_runs_hold_the_ring_ops_within_15_pct_at_1_mib_and_up():
    # the self-check's finding on the committed 2 -> 4 rank sweeps (graph timing, fit at 2 ranks):
    # all_reduce, reduce_scatter and broadcast within 15% at >= 1 MiB on both cards, all_gather on H200
    # (benchmarks/results/predict-selfcheck-cpu-2core-2026-11-29); without the bubble all_gather and
    # reduce_scatter miss by 20% and more
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "benchmarks/results"
    for name, ops in (("comm-predict-h200x4-2026-11-26", ("all_reduce", "all_gather", "reduce_scatter", "broadcast")),
                      ("report-h100x4-2026-11-26/run-h100x4/tables", ("all_reduce", "reduce_scatter", "broadcast"))):
        d = pd.read_csv(root / name / "comm_summary.csv")
        d = d[(d["timing"] == "graph") & d["op"].isin(["all_reduce", "all_gather", "reduce_scatter", "broadcast"])]
        c = S.check_table(d, name, envelope=False)
        big = c[(c["size_bytes"] >= 2**20) & c["op"].isin(ops)]
        worst = big.groupby("op")["rel_err_pct"].apply(lambda e: e.abs().max())
        assert (worst <= 15).all(), (name, worst.to_dict())
        flat = c[(c["size_bytes"] >= 2**20) & c["op"].isin(["all_gather", "reduce_scatter"])]
        assert flat["rel_err_pct_no_bubble"].abs().max() > 20


def test_the_reports_validation_uses_the_nodes_bubble():
    from distbench.predict.tables import validate

    v = validate(_bubble_sweeps(), 2, 4)
    big = v[(v["size_bytes"] >= 2**20) & (v["model"] == "nccl")]
    assert set(big["op"]) == {"all_reduce", "all_gather"}
    assert big["rel_err_pct"].abs().max() < 1e-6


def test_send_recv_is_predicted_on_nccls_p2p_split():
    # the 4-rank shift runs each peer on half the 2-rank channels up to 128 MiB (nccl_p2p): with that
    # split the committed H100 sweep is within 15% at >= 1 MiB; the ring form it replaced missed by 45%
    from dataclasses import replace
    from pathlib import Path

    d = pd.read_csv(Path(__file__).resolve().parents[2] / "benchmarks/results/report-h100x4-2026-11-26/run-h100x4"
                    "/tables/comm_summary.csv")
    d = d[(d["op"] == "send_recv") & (d["timing"] == "graph") & (d["backend"] == "nccl")]
    two, four = (d[d["world_size"] == w].sort_values("size_bytes") for w in (2, 4))
    cal = M.fit_calibrated("send_recv", two["size_bytes"], two["time_us_median"], 2)
    assert cal.p2p is not None
    big = four["size_bytes"].to_numpy() >= 2**20
    err = S.rel_err_pct(cal.predict(four["size_bytes"], 4)["time_us"], four["time_us_median"])
    assert np.abs(err[big]).max() <= 15
    ring = S.rel_err_pct(replace(cal, p2p=None).predict(four["size_bytes"], 4)["time_us"], four["time_us_median"])
    assert np.abs(ring[big]).max() > 40


def test_all_to_all_keeps_the_ring_form_which_misses_less_than_the_p2p_split():
    # the decision in nccl_model section 4, on the committed 2 -> 4 rank sweeps (graph timing): the
    # ring form (with NCCL's p2p protocol rule) misses by less at >= 1 MiB than nccl_p2p's model of
    # all_to_all, whose 2 MiB two-step LL parts no 2-rank sweep runs; the split is closer at the top
    from pathlib import Path

    from distbench.predict import nccl_p2p as P

    root = Path(__file__).resolve().parents[2] / "benchmarks/results"
    for name, ring_max, split_max in (("comm-predict-h200x4-2026-11-26", 19.5, 39.8),
                                      ("report-h100x4-2026-11-26/run-h100x4/tables", 20.7, 31.3)):
        d = pd.read_csv(root / name / "comm_summary.csv")
        d = d[(d["timing"] == "graph") & (d["op"] == "all_to_all")]
        c = S.check_table(d, name, envelope=False)
        big = c[c["size_bytes"] >= 2**20]
        assert big["rel_err_pct"].abs().max() == pytest.approx(ring_max, abs=0.1)
        split = P.prediction_errors(root / name / "comm_summary.csv", "all_to_all")
        err = 100 * np.abs(split["rel_err"][split["sizes"] >= 2**20])
        assert err.max() == pytest.approx(split_max, abs=0.1) and err.max() > big["rel_err_pct"].abs().max()
        top = split["sizes"] >= 2**27
        assert (100 * np.abs(split["rel_err"][top])).max() < big[big["size_bytes"] >= 2**27]["rel_err_pct"].abs().max()


def test_a_node_off_nvlink_keeps_the_ring_form_for_send_recv():
    sizes = [2.0**k for k in range(3, 31, 2)]
    times = model_sweep("send_recv", sizes, 2)
    assert M.fit_calibrated("send_recv", sizes, times, 2).p2p is not None
    assert M.fit_calibrated("send_recv", sizes, times, 2, M.NcclTopo(2, intra="pci")).p2p is None


def test_the_selfcheck_script_checks_one_new_table_by_nccl_setting(tmp_path):
    # benchmarks/runs/predict_gpu.sh checks a new run's table with --table; a sweep of NCCL settings
    # (the settle config's NCCL_BUFFSIZE variants) is summarised per setting, never pooled
    import runpy
    from pathlib import Path

    a, b = _bubble_sweeps(), _bubble_sweeps(b=0.3)
    table = pd.concat([a, b.assign(nccl_env="NCCL_BUFFSIZE=2097152")], ignore_index=True)
    table.to_csv(tmp_path / "comm_summary.csv", index=False)
    script = Path(__file__).resolve().parents[2] / "benchmarks/runs/predict_selfcheck_comm.py"
    main = runpy.run_path(str(script))["main"]
    assert main(["--table", str(tmp_path / "comm_summary.csv"), "--out", str(tmp_path / "out")]) == 0
    for name in ("comm_selfcheck_summary.csv", "comm_selfcheck_controls.csv"):
        s = pd.read_csv(tmp_path / "out" / name)
        assert set(s["nccl_env"]) == {"default", "NCCL_BUFFSIZE=2097152"}, name
    c = pd.read_csv(tmp_path / "out" / "comm_selfcheck.csv")
    bubbles = c.groupby("nccl_env")["bubble"].first()
    assert bubbles["default"] == pytest.approx(0.6) and bubbles["NCCL_BUFFSIZE=2097152"] == pytest.approx(0.3)
    assert not (tmp_path / "out" / "comm_8xh200_1gib.csv").exists()  # the committed runs', not this table's
