"""distbench.predict.nccl_model: NCCL's own tuning model against a real TUNING table, its protocol
choice against NCCL's log, and the calibrated model on a synthetic sweep."""

import re

import numpy as np
import pandas as pd
import pytest

from distbench.predict import nccl_model as M
from distbench.predict import selfcheck as S
from tests.conftest import REPO

FIXTURE = REPO / "tests/fixtures/nccl_tuning/h200x2-nccl-2.28.9.txt"
H200X2_LOG = REPO / "benchmarks/results/comm-fidelity-h200x2-2026-11-26/probe/nccl_logs/nccl.vm.2189.log"
ROWS = {"Broadcast": "broadcast", "Reduce": "reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
        "AllReduce": "all_reduce"}
SIZES = [2.0**k for k in range(3, 31)]


def printed_table(text: str) -> dict:
    """{(op, algo, proto): (lat, bw)} from NCCL's TUNING table, first block (Tree, Ring, CollNetDirect)."""
    out = {}
    for line in text.splitlines():
        m = re.search(r"INFO\s+(\w+) \|(.*)$", line)
        if not m or m.group(1) not in ROWS:
            continue
        cells = re.findall(r"([\d.]+)/\s*([\d.]+)", m.group(2))
        if len(cells) != 9 or (ROWS[m.group(1)], "tree", "LL") in out:
            continue  # the later blocks (CollNetChain, NVLS, ...) are not modelled
        for i, (lat, bw) in enumerate(cells[:6]):
            out[(ROWS[m.group(1)], ("tree", "ring")[i // 3], M.PROTOCOLS[i % 3])] = (float(lat), float(bw))
    return out


def test_the_model_reproduces_a_real_nccl_2_28_9_tuning_table():
    printed = printed_table(FIXTURE.read_text())
    assert len(printed) == 30
    # the node's graph, from the fixture's own lines
    ring = re.search(r"Pattern 4, crossNic \d, nChannels (\d+), bw ([\d.]+)", FIXTURE.read_text())
    tree = re.search(r"Pattern 1, crossNic \d, nChannels (\d+), bw ([\d.]+)", FIXTURE.read_text())
    topo = M.NcclTopo(2, ring_channels=int(ring.group(1)), ring_bw=float(ring.group(2)),
                      tree_channels=int(tree.group(1)), tree_bw=float(tree.group(2)))
    model = M.tuning_table(topo)
    for key, (lat, bw) in printed.items():
        mlat, mbw = model[key]
        assert mbw == pytest.approx(bw, abs=0.051), key  # printed with one decimal
        if bw > 0:
            assert mlat == pytest.approx(lat, abs=0.051), key
    # NVLS off (NCCL_NVLS_ENABLE=0): no NVLS bandwidth
    assert all(model[(op, "nvls", p)][1] == 0 for op in M.NCCL_OPS for p in M.PROTOCOLS)


def test_protocol_structure_ll_and_ll128_follow_simple_by_nccl_ratios():
    for n in (2, 4, 8):
        t = M.tuning_table(M.NcclTopo(n))
        simple, ll128, ll = (t[("all_reduce", "ring", p)][1] for p in ("Simple", "LL128", "LL"))
        assert ll128 / simple == pytest.approx(0.92)
        assert ll == pytest.approx(min(141.0, 0.5 * 360.0) * n / (2 * (n - 1)))
        # latency terms: base + 2(n-1) hwLat (NVLink)
        for pi, p in enumerate(M.PROTOCOLS):
            assert t[("all_reduce", "ring", p)][0] == pytest.approx(M.BASE_LAT["ring"][pi]
                                                                   + 2 * (n - 1) * M.HW_LAT["nvlink"]["ring"][pi])


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast"])
def test_chosen_protocol_is_monotone_ll_ll128_simple(op, n):
    a, p, t = M.nccl_choice(M.tuning_table(M.NcclTopo(n)), op, SIZES)
    order = [M.PROTOCOLS.index(x) for x in p]
    assert order == sorted(order) and order[0] == 0 and order[-1] == 2
    assert np.all(np.isfinite(t))


def test_ll128_appears_only_where_its_latency_beats_simple():
    # 2 ranks: LL128's start-up (14 + 2 x 1.9) exceeds Simple's (8.4 + 2 x 3.4): never chosen, as NCCL's log shows
    _, p2, _ = M.nccl_choice(M.tuning_table(M.NcclTopo(2)), "all_reduce", SIZES)
    assert "LL128" not in set(p2)
    _, p4, _ = M.nccl_choice(M.tuning_table(M.NcclTopo(4)), "all_reduce", SIZES)
    assert "LL128" in set(p4)


def test_modelled_choices_match_nccls_log_on_2x_h200():
    logged = S.log_choices(H200X2_LOG.read_text(errors="replace"), 2)
    assert len(logged) > 100 and set(logged["protocol"]) == {"LL", "Simple"}
    cmp_ = S.compare_log_choices(logged, M.NcclTopo(2))
    assert cmp_["agrees"].all()
    # all_reduce switches LL -> Simple between 1 and 2 MiB
    ar = cmp_[cmp_["op"] == "all_reduce"].set_index("size_bytes")["protocol"]
    assert ar[2**20] == "LL" and ar[2**21] == "Simple"


def test_calibrated_model_recovers_a_synthetic_sweep_and_predicts_the_next_world_size():
    from tests.predict.test_selfcheck_comm import model_sweep

    sweep = model_sweep("all_reduce", SIZES, 2, extra=10.0, eta=0.9, phi=0.25)
    cal = M.fit_calibrated("all_reduce", SIZES, sweep, 2)
    assert cal.protos["Simple"].pinned and cal.protos["Simple"].eta == pytest.approx(0.9, rel=1e-6)
    assert cal.protos["Simple"].extra_us == pytest.approx(10.0, abs=1e-6)
    assert cal.protos["Simple"].phi == pytest.approx(0.25, rel=1e-6)
    assert cal.protos["LL128"].source == "Simple"  # never run at 2 ranks: Simple's start-up and efficiency
    pred = cal.predict(SIZES, 4)["time_us"]
    want = model_sweep("all_reduce", SIZES, 4, extra=10.0, eta=0.9, phi=0.25)
    big = np.asarray(SIZES) >= 2**10
    np.testing.assert_allclose(pred[big], want[big], rtol=1e-6)
    # below: the floor, the 2-rank median small-size time moved by NCCL's latency growth
    np.testing.assert_allclose(pred[~big], want[~big], rtol=1e-2)


def test_channel_ramp_by_hand_and_against_nccls_log():
    from distbench.predict import nccl_channels as C

    # all_reduce, ring LL, 2 ranks, 24 channels: threadThreshold 8 x 2 ranks x 512 threads = 8 KiB per channel
    assert C.max_channels(128 * 1024, "ring", "LL", 2) == 16  # 128 KiB < 17 x 8 KiB
    # 256 KiB: all 24 channels allowed; cells of 2 KiB (16 KiB traffic / 8 per byte), 6 per channel
    # (2 MiB traffic / 24 channels = 87381 B = 6 cells of 16 KiB traffic): 6 + 20 x 6 + 2 -> 22 channels
    assert C.coll_channels("all_reduce", 256 * 1024, "ring", "LL", 2) == 22
    # Simple: 64 x 512 = 32 KiB per channel, so all 24 from 768 KiB
    assert C.max_channels(768 * 1024 - 1, "ring", "Simple", 2) == 23 and C.max_channels(768 * 1024, "ring", "Simple", 2) == 24
    # NCCL's own "channel{Lo..Hi}" at every logged size (2x H200, NCCL 2.28.9)
    ops = {"AllReduce": "all_reduce", "AllGather": "all_gather", "ReduceScatter": "reduce_scatter",
           "Broadcast": "broadcast"}
    logged = re.findall(r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo..Hi\}=\{(\d+)..(\d+)\}",
                        H200X2_LOG.read_text(errors="replace"))
    assert len(logged) == 112
    for op, b, algo, proto, lo, hi in logged:
        o = ops[op]
        nbytes = int(b) * (2 if o in ("all_gather", "reduce_scatter") else 1)  # the log prints the per-rank count
        p = {"SIMPLE": "Simple"}.get(proto, proto)
        assert C.coll_channels(o, nbytes, algo.lower(), p, 2) == int(hi) - int(lo) + 1, (op, b, proto)
    # the loop: 24 channels x 2 chunks x 4 steps x 512 KiB on 2 ranks, twice that on 4
    assert C.loop_bytes("all_reduce", 2) == 96 * 2**20 and C.loop_bytes("all_reduce", 4) == 192 * 2**20


def test_predicted_top_size_bandwidth_is_the_top_sizes_own():
    """Simple's bandwidth is the slope over the sizes past one loop, so the fit reproduces the busbw
    measured at the largest size instead of a compromise with the mid sizes (real 2x H200 data)."""
    d = pd.read_csv(REPO / "benchmarks/results/comm-predict-h200x4-2026-11-26/comm_summary.csv")
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        g = d[(d["op"] == op) & (d["timing"] == "graph") & (d["world_size"] == 2)].sort_values("size_bytes")
        cal = M.fit_calibrated(op, g["size_bytes"], g["time_us_median"], 2)
        top = g.iloc[-2:]
        slope = np.diff(top["time_us_median"].to_numpy()) / np.diff(top["size_bytes"].to_numpy())
        pred = cal.predict(top["size_bytes"].to_numpy(float), 2)["time_us"]
        assert np.diff(pred) / np.diff(top["size_bytes"].to_numpy()) == pytest.approx(slope, rel=1e-9)
        assert pred[-1] == pytest.approx(top["time_us_median"].iloc[-1], rel=0.01), op  # busbw within 1%


def test_nccl_model_and_selfcheck_stay_analysis_code():
    import ast

    for name in ("nccl_model", "nccl_tuning", "nccl_channels", "nccl_p2p", "node_fit", "selfcheck"):
        tree = ast.parse((REPO / "distbench/predict" / f"{name}.py").read_text())
        mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert all(m.split(".")[0] in ("__future__", "math", "re", "csv", "pathlib", "dataclasses", "numpy", "pandas")
                   or m.startswith(("distbench.core", "distbench.predict")) for m in mods), mods


def test_the_reports_prediction_uses_nccls_model_for_nccl_series_on_one_node():
    from distbench.predict import tables as T

    sizes = [2**k for k in range(3, 31)]
    tab = M.tuning_table(M.NcclTopo(2))
    a, p, t = M.nccl_choice(tab, "all_reduce", sizes)
    rows = [{"backend": b, "world_size": 2, "op": "all_reduce", "dtype": "float32", "nccl_env": "default",
             "timing": "graph", "inplace": False, "size_bytes": s, "time_us_median": ti + 5.0, "correct": True,
             "status": "ok"} for b in ("nccl", "gloo") for s, ti in zip(sizes, t)]
    comm = pd.DataFrame(rows)
    fits = T.fit_table(comm)
    pc = T.predict_cluster(fits, "nvlink4-ib400", sizes=[2**10, 2**30], gpu_counts=(8, 16), include_preset_intra=False,
                           comm_summary=comm)
    one = pc[(pc["gpus"] == 8) & (pc["backend"] == "nccl")]
    assert set(one["model"]) == {"nccl"} and set(one["nccl_proto"]) == {"LL", "Simple"}
    assert set(one[one["algorithm"] == "ring"]["nccl_algo"]) == {"ring"}
    assert set(one[one["algorithm"] == "tree"]["nccl_algo"]) == {"tree"}
    ring = one[(one["algorithm"] == "ring") & (one["size_bytes"] == 2**30)].iloc[0]
    cal = M.fit_calibrated("all_reduce", sizes, t + 5.0, 2, algorithms=("ring",))
    assert ring["time_us"] == pytest.approx(float(cal.predict([2**30], 8)["time_us"][0]))
    # across nodes and for Gloo: the envelope, no protocol
    other = pc[(pc["gpus"] == 16) | (pc["backend"] == "gloo")]
    assert set(other["model"]) == {"envelope"} and other["nccl_proto"].isna().all()
