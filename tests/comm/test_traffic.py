"""all_to_all_v and its traffic matrices: the split arithmetic, the exact check, a real 3-rank Gloo
run (uniform, Zipf, a matrix file, a file of another size) and the config check."""

import pandas as pd
import pytest
import torch

from distbench.comm.ops import TORCH_OPS, Ctx, a2av_counts
from distbench.core.ops_spec import element_count
from distbench.pipeline.config import ConfigError, check_config
from distbench.comm.contract import read_comm_csv, read_comm_ranks_csv
from distbench.comm.traffic import TrafficError, busiest, parse_traffic, read_matrix, split_counts
from tests.conftest import torchrun


def test_specs_parse_and_bad_ones_say_why():
    assert parse_traffic("uniform").label == "uniform"
    assert parse_traffic("zipf:1.2").exponent == 1.2
    assert parse_traffic("file:m.csv").path == "m.csv"
    for bad, text in [("gauss", "unknown pattern 'gauss'"), ("zipf:x", "needs a number"),
                      ("zipf:0", "positive"), ("file:", "needs a path"), ("uniform:2", "no argument")]:
        with pytest.raises(TrafficError, match=text):
            parse_traffic(bad)


@pytest.mark.parametrize("spec", ["uniform", "zipf:1.2", "zipf:3"])
@pytest.mark.parametrize("n,count", [(2, 10), (3, 999), (4, 262144), (8, 8)])
def test_splits_move_n_times_count_elements_exactly(spec, n, count):
    cells = split_counts(parse_traffic(spec), n, count)
    assert sum(map(sum, cells)) == n * count
    assert all(c >= 0 for row in cells for c in row)


def test_uniform_is_all_to_all_and_zipf_sends_most_to_rank_0():
    assert split_counts(parse_traffic("uniform"), 4, 8) == [[2] * 4] * 4
    z = split_counts(parse_traffic("zipf:1"), 4, 2500)
    # weights 1, 1/2, 1/3, 1/4 (sum 25/12): rank d gets 12/25/(d+1) of each sender's 2500
    assert z[0] == [1200, 600, 400, 300] and all(row == z[0] for row in z)
    load = busiest(z)
    assert load.rank == 0 and load.elements == 3 * 1200  # receives 1200 from each of 3 others


def test_matrix_files(tmp_path):
    good = tmp_path / "m.csv"
    good.write_text("# sender rows\n0,1\n3,0\n")
    assert read_matrix(good) == [[0, 1], [3, 0]]
    cells = split_counts(parse_traffic(f"file:{good}"), 2, 100)
    assert cells == [[0, 50], [150, 0]]
    # with 2 ranks what 1 sends is what 0 receives: a tie goes to the lower rank
    assert busiest(cells).rank == 0 and busiest(cells).elements == 150
    (tmp_path / "ragged.txt").write_text("1 2 3\n1 2\n1 2 3\n")
    (tmp_path / "neg.txt").write_text("1 -2\n1 2\n")
    (tmp_path / "words.txt").write_text("1 a\n1 2\n")
    for name, text in [("ragged.txt", r"row\(s\) \[2\] differ"), ("neg.txt", ">= 0"), ("words.txt", "line 1: not all numbers"),
                       ("missing.txt", "cannot be read")]:
        with pytest.raises(TrafficError, match=text):
            read_matrix(tmp_path / name)
    with pytest.raises(TrafficError, match="is 2x2; this job has 3 ranks"):
        split_counts(parse_traffic(f"file:{good}"), 3, 10)


def _reference_receives(bufs, cells, n):
    """What each rank must hold after all_to_all_v, computed from every rank's send buffer."""
    out = []
    for dst in range(n):
        parts = []
        for src in range(n):
            start = sum(cells[src][:dst])
            parts.append(bufs[src].send[start:start + cells[src][dst]])
        out.append(torch.cat(parts))
    return out


@pytest.mark.parametrize("spec", ["uniform", "zipf:1.2"])
@pytest.mark.parametrize("n", [2, 3, 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_expected_matches_a_reference_exchange(spec, n, dtype):
    spec_op = TORCH_OPS["all_to_all_v"]
    count = element_count(spec_op.spec, 4 * 1000, 4, n)
    ctxs = [Ctx(r, n, torch.device("cpu"), dtype, "gloo", spec) for r in range(n)]
    bufs = [spec_op.make(c, count) for c in ctxs]
    cells = a2av_counts(ctxs[0], count)
    ref = _reference_receives(bufs, cells, n)
    for r in range(n):
        assert bufs[r].splits == ([cells[s][r] for s in range(n)], cells[r])
        assert torch.equal(bufs[r].expected(), ref[r]), (spec, n, r)


def test_the_check_catches_an_exchange_with_the_wrong_splits():
    # The receiver reading Zipf traffic as if it were uniform (the same total) must fail the check.
    n, count = 3, 300
    z = [Ctx(r, n, torch.device("cpu"), torch.float32, "gloo", "zipf:1.2") for r in range(n)]
    zb = [TORCH_OPS["all_to_all_v"].make(c, count) for c in z]
    uniform = [[count // n] * n for _ in range(n)]
    wrong = _reference_receives(zb, uniform, n)
    assert not torch.equal(wrong[1], zb[1].expected())


@pytest.mark.heavy
def test_a_real_three_rank_exchange_of_each_matrix(tmp_path):
    m3 = tmp_path / "m3.txt"
    m3.write_text("0 1 1\n1 0 1\n6 6 0\n")  # rank 2 sends the most
    m2 = tmp_path / "m2.csv"
    m2.write_text("1,1\n1,1\n")
    out = tmp_path / "comm.csv"
    r = torchrun(["--backend", "gloo", "--ops", "all_to_all,all_to_all_v", "--sizes", "96,64KiB", "--warmup", "1",
                  "--iters", "2", "--trials", "2", "--traffic", "uniform", "--traffic", "zipf:1.2",
                  "--traffic", f"file:{m3}", "--traffic", f"file:{m2}", "--out", str(out)], nproc=3)
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_comm_csv(out)
    assert set(df.loc[df["op"] == "all_to_all", "traffic"]) == {"none"}
    v = df[df["op"] == "all_to_all_v"]
    ran = v[v["traffic"] != f"file:{m2}"]
    assert (ran["status"] == "ok").all() and ran["correct"].all(), ran[["traffic", "status", "message"]]
    assert set(ran["traffic"]) == {"uniform", "zipf:1.2", f"file:{m3}"}
    skipped = v[v["traffic"] == f"file:{m2}"]
    assert (skipped["status"] == "skipped").all() and skipped["message"].str.contains("is 2x2; this job has 3").all()
    big = ran[ran["size_bytes"] == 65532].set_index("traffic")  # 64 KiB rounded down to 3 ranks
    assert (big.loc["zipf:1.2", "busiest_rank"] == 0).all() and (big.loc[f"file:{m3}", "busiest_rank"] == 2).all()
    # file: rank 2 sends 12/16 of 3 x 16383 elements to the others
    assert (big.loc[f"file:{m3}", "busiest_rank_bytes"] == round(3 * 16383 * 12 / 16) * 4).all()
    # the busiest rank's time is its own, from the per-rank record
    ranks = read_comm_ranks_csv(tmp_path / "comm_ranks.csv")
    own = ranks[(ranks["op"] == "all_to_all_v") & (ranks["traffic"] == "zipf:1.2") & (ranks["rank"] == 0)]
    merged = own.merge(ran[ran["traffic"] == "zipf:1.2"], on=["size_bytes", "trial"])
    assert len(merged) == 4 and (merged["time_us_x"] == merged["busiest_rank_time_us"]).all()
    assert "all_to_all_v (traffic zipf:1.2)" in r.stdout  # the live table names the matrix


def test_config_reads_traffic_files_before_any_job(tmp_path):
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("1,2\n3\n")
    for traffic, text in [([f"file:{tmp_path / 'nope.csv'}"], "cannot be read"), ([f"file:{ragged}"], "differ"),
                          (["gauss"], "comm.traffic")]:
        with pytest.raises(ConfigError, match="comm.traffic") as e:
            check_config({"comm": {"traffic": traffic}})
        assert pd.Series([str(e.value)]).str.contains(text).all(), str(e.value)
    assert check_config({})["comm"]["traffic"] == ["uniform", "zipf:1.2"]


def test_a_matrix_file_is_read_once_for_every_buffer_set(tmp_path, monkeypatch):
    import distbench.comm.traffic as traffic_mod

    m = tmp_path / "m.txt"
    m.write_text("1 2\n3 4\n")
    reads = []
    real = traffic_mod.read_matrix
    monkeypatch.setattr(traffic_mod, "read_matrix", lambda p: reads.append(p) or real(p))
    ctx = Ctx(0, 2, torch.device("cpu"), torch.float32, "gloo", f"file:{m}")
    for _ in range(5):  # the harness makes one buffer set per rotation slot
        TORCH_OPS["all_to_all_v"].make(ctx, 1000)
    assert len(reads) == 1
