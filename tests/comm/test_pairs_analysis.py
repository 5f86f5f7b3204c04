"""The GPU-pair matrix's analysis and figure (distbench.comm.analysis.pairs, distbench.comm.analysis.pairs_plots) on
synthetic pairs.csv tables built per the PAIRS contract: 4 ranks on one host, NV18 between every
two GPUs (the h200x2 probe's JSON shape), rank r on GPU 3-r so that GPU names differ from ranks."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from distbench.comm.analysis import pairs as pa
from distbench.comm.analysis.pairs_plots import fig_pairs, plt, write_pairs_figures
from distbench.comm.contract import PAIRS_COLUMN_NAMES, read_pairs_csv

SMALL, LARGE = 8, 256 * 2**20
N = 4
UUID = {g: f"GPU-0000000{g}-aaaa-bbbb-cccc-dddddddddddd" for g in range(N)}


def gpu_of(rank: int) -> int:
    return N - 1 - rank


def topology(raw_between=None) -> dict:
    """The probe's JSON for GPU0..GPU3; every link NV18 unless raw_between({a, b}) says otherwise."""
    links = []
    for a in range(N):
        for b in range(a + 1, N):
            raw = (raw_between or (lambda ab: None))({a, b}) or "NV18"
            links.append({"a": f"GPU{a}", "b": f"GPU{b}", "raw": raw, "type": raw[:2] if raw.startswith("NV") else raw,
                          "nvlinks": int(raw[2:]) if raw.startswith("NV") else 0})
    return {"available": True, "reason": None,
            "topology": {"available": True, "gpus": [f"GPU{g}" for g in range(N)],
                         "gpu_uuids": {f"GPU{g}": UUID[g] for g in range(N)}, "links": links}}


def raw_pairs(bw=lambda s, d: 365.0, lat=lambda s, d: 13.0, bi_bw=720.0, hosts=("h0",) * N, gpus=None,
              status=lambda s, d, size, trial: "ok", trials=3) -> pd.DataFrame:
    """Rows of pairs.csv: every ordered pair one way, every pair src < dst both ways, at 8 B and
    256 MiB; bw (GB/s) and lat (µs) per ordered pair, +-1% over the trials."""
    gpus = gpus or [UUID[gpu_of(r)] for r in range(N)]
    rows = []
    for mode in ("uni", "bi"):
        for s in range(N):
            for d in range(N):
                if s == d or (mode == "bi" and s > d):
                    continue
                for size in (SMALL, LARGE):
                    for t in range(trials):
                        jitter = 1 + 0.01 * (t - 1)
                        moved = size * (2 if mode == "bi" else 1)
                        if size == SMALL:
                            time_us = lat(s, d) * jitter
                        else:
                            gbps = bw(s, d) if mode == "uni" else bi_bw
                            time_us = moved / (gbps * 1e3) * jitter
                        st = status(s, d, size, t)
                        ok = st == "ok"
                        rows.append({
                            "backend": "nccl", "world_size": N, "nodes": len(set(hosts)), "dtype": "float32",
                            "mode": mode, "src": s, "dst": d, "src_host": hosts[s], "dst_host": hosts[d],
                            "src_gpu": gpus[s], "dst_gpu": gpus[d], "size_bytes": size, "trial": t, "iters": 20,
                            "time_us": time_us if ok else None, "algbw_gbps": moved / (time_us * 1e3) if ok else None,
                            "correct": ok, "status": st, "message": "" if ok else "NCCL timeout"})
    return pd.DataFrame(rows, columns=list(PAIRS_COLUMN_NAMES))


def table(raw: pd.DataFrame, topo: dict | None) -> pd.DataFrame:
    return pa.add_link_classes(pa.summarize_pairs(raw), topo)


# ---------------------------------------------------------------- summary
def test_summary_has_one_row_per_point_with_trial_statistics_and_the_worst_status():
    raw = raw_pairs(status=lambda s, d, size, t: "failed" if (s, d, size, t) == (1, 3, LARGE, 2) else "ok")
    s = pa.summarize_pairs(raw)
    assert len(s) == (12 + 6) * 2 and list(s.columns) == list(pa.SUMMARY_COLUMNS)
    r = s[(s["mode"] == "uni") & (s["src"] == 0) & (s["dst"] == 1) & (s["size_bytes"] == SMALL)].iloc[0]
    assert r["n_trials"] == 3 and r["time_us_median"] == pytest.approx(13.0)
    assert r["time_us_p5"] < 13.0 < r["time_us_p95"]
    assert r["status"] == "ok" and bool(r["correct"]) and r["src_gpu"] == UUID[3]
    bad = s[(s["mode"] == "uni") & (s["src"] == 1) & (s["dst"] == 3) & (s["size_bytes"] == LARGE)].iloc[0]
    # one failed trial of three: the point is failed, not correct, its statistics over the two ok trials
    assert bad["status"] == "failed" and not bool(bad["correct"]) and bad["n_trials"] == 2
    assert bad["message"] == "NCCL timeout" and bad["algbw_gbps_median"] == pytest.approx(365.0, rel=0.01)


# ---------------------------------------------------------------- link classes
def test_link_classes_come_from_the_topology_by_uuid_with_net_cpu_and_unknown():
    topo = topology(lambda ab: "SYS" if ab == {0, 1} else None)
    s = table(raw_pairs(), topo)
    uni = s[(s["mode"] == "uni") & (s["size_bytes"] == LARGE)].set_index(["src", "dst"])
    # ranks 2 and 3 sit on GPU1 and GPU0, whose cell is SYS; every other pair NV18
    assert uni.loc[(2, 3), "link_class"] == "SYS" and uni.loc[(3, 2), "link_class"] == "SYS"
    assert (uni.drop([(2, 3), (3, 2)])["link_class"] == "NV18").all()
    assert uni.loc[(2, 3), "src_gpu_name"] == "GPU1" and uni.loc[(2, 3), "dst_gpu_name"] == "GPU0"

    net = table(raw_pairs(hosts=("h0", "h0", "h1", "h1")), topo)
    cls = net[net["mode"] == "uni"].set_index(["src", "dst"])["link_class"]
    assert cls[(0, 2)].iloc[0] == "NET" and cls[(3, 1)].iloc[0] == "NET" and cls[(0, 1)].iloc[0] == "NV18"

    cpu = table(raw_pairs(gpus=["cpu"] * N), topo)
    assert set(cpu["link_class"]) == {"cpu"}

    assert set(table(raw_pairs(), None)["link_class"]) == {"unknown"}
    assert set(table(raw_pairs(), {"available": False, "reason": "no nvidia-smi"})["link_class"]) == {"unknown"}
    # a GPU the probe did not see (another host's): unknown, not a guess
    other = table(raw_pairs(gpus=[f"GPU-other-{r}" for r in range(N)]), topo)
    assert set(other["link_class"]) == {"unknown"} and set(other["src_gpu_name"]) == {""}


# ---------------------------------------------------------------- slow pairs and sentences
def test_a_slow_pair_is_flagged_with_a_sentence_naming_its_gpus_and_link():
    fast = {(s, d): 360.0 + 10 * ((s + d) % 2) for s in range(N) for d in range(N)}  # 360 or 370 GB/s
    bw = lambda s, d: 41.0 if (s, d) == (2, 3) else fast[(s, d)]
    s = table(raw_pairs(bw=bw), topology())
    slow = pa.slow_pairs(s)
    flagged = slow[slow["flagged"]]
    assert len(flagged) == 1
    r = flagged.iloc[0]
    assert (r["check"], r["src"], r["dst"], r["link_class"]) == ("bandwidth", 2, 3, "NV18")
    others = [v for k, v in fast.items() if k[0] != k[1] and k != (2, 3)]
    assert r["class_lo_gbps"] == pytest.approx(min(others), rel=1e-3)
    assert r["class_hi_gbps"] == pytest.approx(max(others), rel=1e-3)
    assert r["ratio"] < 0.7

    lines = pa.pair_findings(s)
    assert len(lines) == 1
    assert lines[0] == ("GPU-pair matrix (NCCL, 4 ranks): rank 2 -> rank 3 (GPU1 -> GPU0) moves 41 GB/s at 256 MiB, "
                        "the other NV18 pairs 360-370 GB/s: check that link (nvidia-smi nvlink -s, nvidia-smi topo -m).")


def test_a_link_slow_both_ways_gives_two_sentences_against_the_healthy_pairs():
    bw = lambda s, d: 40.0 if {s, d} == {2, 3} else 365.0
    lines = pa.pair_findings(table(raw_pairs(bw=bw), topology()))
    assert len(lines) == 2
    assert "rank 2 -> rank 3" in lines[0] and "rank 3 -> rank 2" in lines[1]
    assert all("the other NV18 pairs 365 GB/s" in line for line in lines)  # not "40-365"


def test_a_slow_latency_pair_is_flagged_and_without_topology_named_by_host():
    lat = lambda s, d: 50.0 if (s, d) == (0, 1) else 12.0 + (s + d) % 4
    s = table(raw_pairs(lat=lat), None)
    slow = pa.slow_pairs(s)
    flagged = slow[slow["flagged"]]
    assert list(zip(flagged["check"], flagged["src"], flagged["dst"])) == [("latency", 0, 1)]
    lines = pa.pair_findings(s)
    assert len(lines) == 1
    assert lines[0].startswith("GPU-pair matrix (NCCL, 4 ranks): rank 0 -> rank 1 (both on h0) takes 50.0 µs per 8 B "
                               "transfer, the other pairs 12.0-15.0 µs: check the path")


def test_a_slow_pair_across_hosts_is_named_by_its_hosts_with_network_advice():
    same_host = lambda s, d: (s < 2) == (d < 2)
    bw = lambda s, d: 365.0 if same_host(s, d) else (20.0 if (s, d) == (0, 3) else 45.0)
    lines = pa.pair_findings(table(raw_pairs(hosts=("h0", "h0", "h1", "h1"), bw=bw), topology()))
    assert lines == [("GPU-pair matrix (NCCL, 4 ranks on 2 nodes): rank 0 -> rank 3 (h0 -> h1) moves 20 GB/s at 256 MiB, "
                      "the other NET pairs 45 GB/s: check the network between the two hosts (ibstat or ethtool, and "
                      "NCCL_DEBUG=INFO for the transport NCCL chose).")]


def test_pairs_are_compared_within_their_link_class():
    # the two SYS pairs (4 ordered) move 50 GB/s, the NV18 pairs 365: nothing is slow for its path
    topo = topology(lambda ab: "SYS" if ab in ({0, 1}, {2, 3}) else None)
    bw = lambda s, d: 50.0 if {gpu_of(s), gpu_of(d)} in ({0, 1}, {2, 3}) else 365.0
    s = table(raw_pairs(bw=bw), topo)
    slow = pa.slow_pairs(s)
    assert not slow["flagged"].any()
    bw_checks = slow[slow["check"] == "bandwidth"]
    assert set(bw_checks[bw_checks["link_class"] == "SYS"]["class_median_gbps"].round()) == {50}


def test_no_flag_when_all_pairs_are_alike_gives_one_summary_sentence():
    bw = lambda s, d: 355.0 + 16 * ((s * N + d) % 2)  # 355 or 371 GB/s
    lat = lambda s, d: 12.0 + 3 * ((s + d) % 2)  # 12 or 15 µs
    s = table(raw_pairs(bw=bw, lat=lat), topology())
    assert not pa.slow_pairs(s)["flagged"].any()
    assert pa.pair_findings(s) == [
        ("GPU-pair matrix (NCCL, 4 ranks, 12 ordered pairs): 355-371 GB/s one way at 256 MiB (NV18: all pairs within "
         "30% of their class median), 720 GB/s both ways, latency at 8 B 12.0-15.0 µs.")]


def test_a_pair_that_did_not_run_ok_is_reported():
    raw = raw_pairs(status=lambda s, d, size, t: "failed" if (s, d, size) == (3, 1, LARGE) else "ok")
    lines = pa.pair_findings(table(raw, topology()))
    assert lines[0] == ("GPU-pair matrix (NCCL, 4 ranks): 1 of 36 pair measurements did not run ok: "
                        "rank 3 -> rank 1 at 256 MiB one way failed (NCCL timeout).")
    assert "11 ordered pairs" in lines[1]


# ---------------------------------------------------------------- table and figure
def _write_csv(path, df):
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return path


def test_write_pairs_table_skips_files_without_rows_and_reads_the_topology(tmp_path):
    bw = lambda s, d: 41.0 if (s, d) == (2, 3) else 365.0
    measured = _write_csv(tmp_path / "a" / "pairs.csv", raw_pairs(bw=bw))
    header_only = tmp_path / "b" / "pairs.csv"
    header_only.parent.mkdir()
    header_only.write_text(",".join(PAIRS_COLUMN_NAMES) + "\n")
    empty = tmp_path / "c" / "pairs.csv"
    empty.parent.mkdir()
    empty.write_text("")
    assert len(read_pairs_csv(measured)) == (12 + 6) * 2 * 3
    topo = tmp_path / "probe" / "topology.json"
    topo.parent.mkdir()
    topo.write_text(json.dumps(topology()))

    out = tmp_path / "tables" / "pairs.csv"
    t = pa.write_pairs_table([header_only, measured, empty], topo, out)
    assert len(t) == 36 and set(t["link_class"]) == {"NV18"}
    back = pa.read_pairs_table(out)
    assert list(back.columns) == list(pa.TABLE_COLUMNS) and len(back) == 36
    assert "rank 2 -> rank 3 (GPU1 -> GPU0) moves 41 GB/s" in pa.pair_findings(back)[0]
    assert pa.pair_findings(pd.read_csv(out)) == pa.pair_findings(back)  # as the report reads it: empty cells NaN

    # no topology file: the same table with unknown classes
    assert set(pa.write_pairs_table([measured], tmp_path / "missing.json", out)["link_class"]) == {"unknown"}

    # nothing measured: the columns and no rows
    t = pa.write_pairs_table([header_only, empty], None, out)
    assert len(t) == 0 and out.read_text().strip() == ",".join(pa.TABLE_COLUMNS)
    assert pa.pair_findings(pa.read_pairs_table(out)) == []


def test_heat_map_is_written_with_values_link_classes_and_a_blank_diagonal(tmp_path):
    bw = lambda s, d: 41.0 if (s, d) == (2, 3) else 365.0
    csv = tmp_path / "pairs.csv"
    s = table(raw_pairs(bw=bw), topology())
    s.to_csv(csv, index=False)

    fig = fig_pairs(pa.read_pairs_table(csv), "nccl", N)
    one_way, both_ways = [ax for ax in fig.axes if ax.images]  # two panels (colour bars have no images)
    texts = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in one_way.texts}
    assert texts[(2, 3)] == "41\nNV18" and texts[(0, 1)] == "365\nNV18"
    assert len(texts) == 12 and all((i, i) not in texts for i in range(N))
    assert one_way.images[0].get_array().mask[[0, 1, 2, 3], [0, 1, 2, 3]].all()
    both = {(round(t.get_position()[1]), round(t.get_position()[0])) for t in both_ways.texts}
    assert both == {(i, j) for i in range(N) for j in range(i + 1, N)}  # upper triangle
    plt.close(fig)

    paths = write_pairs_figures(csv, tmp_path / "figures")
    assert sorted(p.name for p in paths) == ["pairs_bandwidth_nccl_ws4.png", "pairs_bandwidth_nccl_ws4.svg"]
    assert paths[0].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    # no ok one-way pair: no figure, no directory
    failed = s.assign(status="failed")
    failed.to_csv(csv, index=False)
    assert write_pairs_figures(csv, tmp_path / "none") == [] and not (tmp_path / "none").exists()


def test_torch_and_nvidia_smi_spellings_of_a_uuid_match():
    """torch's placement records '0cab...' where the topology probe (nvidia-smi/NVML) has 'GPU-0cab...'."""
    from distbench.comm.analysis.pairs import link_classes

    topo = {"available": True, "topology": {"gpu_uuids": {"GPU0": "GPU-0CAB-1", "GPU1": "GPU-80e0-2"},
                                            "links": [{"a": "GPU0", "b": "GPU1", "raw": "NV18", "type": "NV"}]}}
    row = pd.DataFrame([{"src_host": "h", "dst_host": "h", "src_gpu": "0cab-1", "dst_gpu": "80e0-2"}])
    assert list(link_classes(row, topo)) == ["NV18"]
