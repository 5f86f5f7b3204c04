"""distbench.predict.nccl_p2p: NCCL 2.28.9's p2p channel split against its log, the 4- and 8-rank
plans it implies, the fit on a sweep the model itself generated, and the 2 -> 4 rank error on the
committed sweeps (H200 and H100, graph timing)."""

import re

import numpy as np
import pytest

from distbench.predict import nccl_p2p as P
from tests.conftest import REPO

H200X2_LOG = REPO / "benchmarks/results/comm-fidelity-h200x2-2026-11-26/probe/nccl_logs/nccl.vm.2189.log"
H200 = REPO / "benchmarks/results/comm-predict-h200x4-2026-11-26/comm_summary.csv"
H100 = REPO / "benchmarks/results/report-h100x4-2026-11-26/run-h100x4/tables/comm_summary.csv"
MiB = 1 << 20
SIZES = [8 * 4**k for k in range(14)]  # the committed sweeps' sizes, 8 B - 512 MiB by 4x


def test_p2p_channels_match_the_2_rank_log():
    text = H200X2_LOG.read_text()
    m = re.search(r"(\d+) coll channels, \d+ collnet channels, \d+ nvls channels, (\d+) p2p channels, "
                  r"(\d+) p2p channels per peer", text)
    coll, p2p, per_peer = (int(g) for g in m.groups())
    path_bw = float(re.search(r"GPU/0-70 \(2/([\d.]+)/NVL\)", text).group(1))
    assert (coll, p2p, per_peer) == (24, 32, 32)
    assert P.p2p_channels(coll, path_bw) == (p2p, per_peer)
    assert (P.P2P_CHANNELS, P.P2P_CHANNELS_PER_PEER) == (32, 32)
    chunk = int(re.search(r"P2P Chunksize set to (\d+)", text).group(1))
    assert chunk == P.P2P_NVL_CHUNKSIZE == 512 << 10
    # ncclTopoComputeP2pChannels' arithmetic elsewhere: power-of-two rounding, the per-peer minimum
    assert P.p2p_channels(16) == (16, 16)
    assert P.p2p_channels(12) == (16, 16)
    assert P.p2p_channels(24, path_bw=2 * 20.6) == (32, 4)  # 2 links to a peer: 2 x 2 channels
    assert P.p2p_channels(24, max_p2p=8) == (8, 8)


def test_channels_per_peer_at_2_4_and_8_ranks():
    assert [P.channel_bounds(n) for n in (2, 4, 8)] == [(16, 32), (8, 32), (4, 32)]
    # send_recv: the channels of the one peer, 1 MiB - 512 MiB
    got = {n: [P.p2p_plan("send_recv", s, n).peer.channels for s in (MiB << k for k in range(10))] for n in (2, 4, 8)}
    assert got[2] == [16] * 9 + [32]  # 512 MiB: S/16 = 32 MiB > 32 x 512 KiB -> doubled
    assert got[4] == [8] * 8 + [16, 32]  # 128 MiB on 8 x 16 MiB; 512 MiB on 32 x 16 MiB, as at 2 ranks
    assert got[8] == [4] * 7 + [8, 16, 32]
    for n in (2, 4):
        p = P.p2p_plan("send_recv", 512 * MiB, n)
        assert (p.peer.channels, p.max_load, p.busy_channels) == (32, 16 * MiB, 32)
    assert P.p2p_plan("send_recv", 128 * MiB, 4).max_load == 2 * P.p2p_plan("send_recv", 128 * MiB, 2).max_load


def test_all_to_all_rounds_take_disjoint_channel_blocks():
    assert [P.channel_base(r) for r in range(8)] == [0, 16, 8, 24, 4, 20, 12, 28]
    for n in (2, 4, 8):
        p = P.p2p_plan("all_to_all", 128 * MiB, n)
        chans = [c for _, cs in p.rounds for c in cs]
        assert len(chans) == len(set(chans)) == 32 - 32 // n
        assert p.busy_channels == 32 - 32 // n and p.works_per_channel == 1
        assert p.max_load == 128 * MiB // 32 and p.egress == 128 * MiB * (n - 1) // n
    # past 16 MiB a part the blocks double and overlap: two works per channel
    p = P.p2p_plan("all_to_all", 1024 * MiB, 4)
    assert p.peer.channels == 16 and p.works_per_channel == 2 and p.busy_channels == 32


def test_protocol_and_steps():
    assert P.peer_transfer(512 << 10, 4).protocol == "LL"  # <= 32 x 16 KiB
    assert P.peer_transfer((512 << 10) + 1, 4).protocol == "Simple"
    assert P.peer_transfer(64 << 10, 2, self_copy=True).protocol == "Simple"
    ll = P.peer_transfer(512 << 10, 4)
    assert (ll.step, ll.step_data, ll.channels, ll.part, ll.steps_per_part) == (64 << 10, 32 << 10, 8, 64 << 10, 2)
    # at 2 ranks no LL part exceeds one step: 16 channels x 32 KiB is the LL limit
    assert max(P.peer_transfer(s, 2).steps_per_part for s in SIZES if P.peer_transfer(s, 2).protocol == "LL") == 1
    assert P.p2p_plan("all_to_all", 2 * MiB, 4).protocol == "LL"
    assert P.p2p_plan("all_to_all", 2 * MiB, 2).protocol == "Simple"
    s = P.peer_transfer(3 * MiB + 5, 2)  # parts rounded up to 4 KiB
    assert s.part % 4096 == 0 and s.part * (s.channels - 1) < 3 * MiB + 5 <= s.part * s.channels


@pytest.mark.parametrize("op", P.P2P_OPS)
def test_fit_recovers_the_parameters_of_a_sweep_it_generated(op):
    true = P.P2pFit(op, 2, startup_us=17.0, chan_gbps=19.0, fill=0.5, link_gbps=360.0, ll_startup_us=12.0)
    t = true.predict(SIZES, 2)
    got = P.fit_p2p(op, SIZES, t, 2, link_gbps=None if op == "send_recv" else 360.0)
    for name in ("startup_us", "chan_gbps", "fill", "link_gbps", "ll_startup_us"):
        assert getattr(got, name) == pytest.approx(getattr(true, name), rel=1e-6), name
    np.testing.assert_allclose(got.predict(SIZES, 4), true.predict(SIZES, 4), rtol=1e-6)
    if op == "all_to_all":  # its 2-rank sweep never reaches the link: B only when given
        assert P.fit_p2p(op, SIZES, t, 2).link_gbps is None


def test_the_fit_sees_the_link_only_where_channels_exceed_it():
    true = P.P2pFit("send_recv", 2, 17.0, 19.0, 0.5, 360.0, 12.0)
    t = true.predict(SIZES, 2)
    # 16 x 19 < 360: the 16-channel sizes are channel-bound, 512 MiB (32 channels) link-bound
    assert true.channel_gbps(P.p2p_plan("send_recv", 128 * MiB, 2)) == 19.0
    assert true.channel_gbps(P.p2p_plan("send_recv", 512 * MiB, 2)) == pytest.approx(360.0 / 32)
    # without the 512 MiB size there is nothing to fit B on
    assert P.fit_p2p("send_recv", SIZES[:-1], t[:-1], 2).link_gbps is None


# measured max |error| of the 2 -> 4 rank prediction (graph timing), >= 1 MiB and < 1 MiB; each
# bound is the measured figure plus about 2 points (the measured: H200 send_recv 28.1 / 29.3,
# all_to_all 39.8 / 26.1; H100 send_recv 10.6 / 37.8, all_to_all 31.3 / 17.3)
BOUNDS = {("h200", "send_recv"): (0.30, 0.31), ("h200", "all_to_all"): (0.42, 0.28),
          ("h100", "send_recv"): (0.125, 0.40), ("h100", "all_to_all"): (0.33, 0.19)}


@pytest.mark.parametrize("name,op", sorted(BOUNDS))
def test_2_to_4_rank_error_on_the_committed_sweeps(name, op):
    r = P.prediction_errors(H200 if name == "h200" else H100, op)
    big = r["sizes"] >= MiB
    err = np.abs(r["rel_err"])
    assert big.sum() == 5 and (~big).sum() >= 8
    hi, lo = BOUNDS[(name, op)]
    assert err[big].max() <= hi
    assert err[~big].max() <= lo
    # outside the three effects the source cannot give (docstring), within the 15% goal
    simple_big = big & np.array([P.p2p_plan(op, int(s), 4).protocol == "Simple" for s in r["sizes"]])
    if name == "h200" and op == "send_recv":
        simple_big &= r["sizes"] != 2 * MiB
    assert err[simple_big].max() <= 0.125
    # the fit itself reproduces its own 2-rank sweep at >= 1 MiB
    s0, t0 = P.load_sweep(H200 if name == "h200" else H100, op, 2)
    assert np.abs(r["fit"].predict(s0[s0 >= MiB], 2) / t0[s0 >= MiB] - 1).max() <= 0.06
    assert 15.0 < r["fit"].chan_gbps < 25.0 and 330.0 < r["fit"].link_gbps < 400.0


@pytest.mark.parametrize("path", [H200, H100])
def test_send_recv_catch_up_at_512_mib_is_the_channel_doubling(path):
    r = P.prediction_errors(path, "send_recv")
    at = dict(zip(r["sizes"].astype(int), zip(r["measured"], r["predicted"])))
    meas, pred = at[512 * MiB]
    assert pred == pytest.approx(meas, rel=0.02)
    # 4 ranks over 2 ranks: ~1.8x at 128 MiB (8 vs 16 channels), ~1 at 512 MiB (32 and 32)
    s2, t2 = P.load_sweep(path, "send_recv", 2)
    t2 = dict(zip(s2.astype(int), t2))
    assert at[128 * MiB][0] / t2[128 * MiB] > 1.6 and at[128 * MiB][1] / t2[128 * MiB] > 1.6
    assert at[512 * MiB][0] / t2[512 * MiB] == pytest.approx(1.0, abs=0.02)
