"""The gate's rules on recorded readings (distbench.gate.rules): health states from the health check's
own rows (a fake NVML reading with vendor-cited limits), the collective against the published table
and the link peak, the node's own baseline by its noise, the one line; the reference table's new
rows (distbench.core.references) and the Prometheus file, parsed by prometheus_client's own parser."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from distbench.core.references import EXPECTED, TWO_NODE_TREE, expected_for, latency_for, missing_reference
from distbench.gate import prom, rules
from distbench.gate.points import baseline_points, points_from_csv
from distbench.gate.rules import FAIL, INFO, PASS, WARN, Point
from distbench.health.readings import read_health
from tests.fake_nvml import fake_pynvml, healthy_state

GiB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"
NVLINK4 = {"peak_gbps": 450.0, "link": "NVLink4 x18"}
A100 = "NVIDIA A100-SXM4-80GB"
NVLINK3 = {"peak_gbps": 300.0, "link": "NVLink3 x12"}


def reading(monkeypatch, **over):
    state = healthy_state()
    state.update(over)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    return read_health(2, 0.0, host="n1")


def big(bw, ws=2, backend="nccl", trials=5, spread=0.0):
    vals = tuple(bw * (1 + spread * ((i % 3) - 1)) for i in range(trials))
    return Point(backend, ws, "all_reduce", GiB, "events", "NCCL_GRAPH_MIXING_SUPPORT=0", vals,
                 tuple(2 * GiB / (v * 1e3) for v in vals))


def small(us, ws=2, spread=0.0, env="NCCL_GRAPH_MIXING_SUPPORT=0"):
    vals = tuple(us * (1 + spread * ((i % 3) - 1)) for i in range(5))
    return Point("nccl", ws, "all_reduce", 8, "graph", env, (0.0,) * 5, vals)


# ---------------------------------------------------------------------------------------- health
def test_a_healthy_reading_passes_and_each_failing_item_fails_with_its_limit(monkeypatch):
    ok = rules.health_checks(reading(monkeypatch))
    assert rules.verdict(ok) == PASS
    # a volatile double-bit ECC error: DCGM fails any (MonitorMemVolatileDbes); the health check says failing
    bad = rules.health_checks(reading(monkeypatch, ecc={(1, 1, 0): 2}))
    assert rules.verdict(bad) == FAIL
    why = rules.reason(bad, FAIL, [])
    assert why.startswith("GPU 1 ecc_volatile_uncorrected: 2 uncorrectable memory error(s)"), why
    # a GPU missing of the two expected fails; a power cap (degraded) only warns
    assert rules.verdict(rules.health_checks(reading(monkeypatch, count=1))) == FAIL
    capped = rules.health_checks(reading(monkeypatch, limit_mw=500_000))
    assert rules.verdict(capped) == WARN and "power capped" in rules.reason(capped, WARN, [])


def test_no_nvml_is_not_a_failure(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    rows = read_health(None, 0.0, host="cpu")
    assert rules.verdict(rules.health_checks(rows)) == PASS
    assert rules.health_summary(rows).startswith("health not read here (pynvml not importable")


# ------------------------------------------------------------------------------------ collective
def test_busbw_against_the_published_figure_and_the_link_peak():
    # 8x H100 NVLS off: the published 360-370 (nccl-tests#212): from 0.9 x 360 passes, under half fails
    assert rules.busbw_check(big(350, ws=8), H100, NVLINK4, False)[-1].state == PASS
    warn = rules.busbw_check(big(300, ws=8), H100, NVLINK4, False)[-1]
    assert warn.state == WARN and "below the published 360-370 GB/s for 8x H100" in warn.reason
    assert rules.busbw_check(big(150, ws=8), H100, NVLINK4, False)[-1].state == FAIL
    # 2x H100: the figure we measured (322-332 GB/s, the gate on 2x H100, 2026-11-27), named as ours
    two = rules.busbw_check(big(330), H100, NVLINK4, False)[-1]
    assert two.state == PASS and "we measured for 2x H100" in two.reason and "not a publication" in two.reason
    assert rules.busbw_check(big(280), H100, NVLINK4, False)[-1].state == WARN  # under 0.9 x 322
    assert rules.busbw_check(big(100), H100, NVLINK4, False)[-1].state == FAIL  # a lost NVLink: PCIe speeds
    # 2x A100: no row: the link peak (half of it healthy), and the table says what it lacks
    a100 = rules.busbw_check(big(200), A100, NVLINK3, False)[-1]
    assert a100.state == PASS and "67% of the 300 GB/s NVLink3 x12 peak" in a100.reason
    assert "no reference figure for 2x A100 all_reduce at 1 GiB" in a100.reason
    assert rules.busbw_check(big(100), A100, NVLINK3, False)[-1].state == FAIL  # under half of 80% of 300


def test_gloo_is_measured_never_a_gpu_verdict():
    checks = rules.busbw_check(big(0.7, backend="gloo"), None, None, None)
    assert {c.state for c in checks} == {INFO} and "not a GPU verdict" in checks[-1].reason


def test_latency_against_our_8_byte_figure_then_nccl_1259():
    # 8 B, graph mixing off: the gate's own point, measured on 2x H100 (5.41 µs); above 8 B up to 64 KiB
    # the published ~6 µs (NVIDIA/nccl#1259)
    ok = rules.latency_check(small(5.2), H100)[-1]
    assert ok.state == PASS and "gate-h100x2-2026-11-27" in ok.reason and "not a publication" in ok.reason
    assert latency_for(H100, 2, "all_reduce", 1024)["source"] == "https://github.com/NVIDIA/nccl/issues/1259"
    slow = rules.latency_check(small(11.0), H100)[-1]
    assert slow.state == WARN  # latency warns, never fails
    assert rules.latency_check(small(5.0, ws=4), H100)[-1].state == INFO  # no 4-GPU figure


def test_a_failed_or_wrong_collective_fails():
    wrong = Point("nccl", 2, "all_reduce", GiB, "events", "x", (), (), "wrong", "result differs")
    checks = rules.comm_checks([wrong], "ok", H100, NVLINK4, False, None, GiB, 8)
    assert rules.verdict(checks) == FAIL and "wrong: result differs" in rules.reason(checks, FAIL, [])
    checks = rules.comm_checks([], "job killed after 40 s (job time limit)", H100, NVLINK4, False, None, GiB, 8)
    assert rules.verdict(checks) == FAIL and "job killed" in checks[0].reason


# -------------------------------------------------------------------------------------- baseline
def runs(*medians, spread=0.004):
    """A baseline of several runs, as baseline_points pools them."""
    one = [big(m, spread=spread) for m in medians]
    return replace(one[0], busbw_gbps=tuple(v for p in one for v in p.busbw_gbps),
                   run_busbw_gbps=tuple(medians))


def test_the_baseline_judges_by_its_own_noise_and_says_by_how_much():
    base = runs(360, 357, 363, spread=0.004)  # runs within ±0.8% of their median, each one's trials ±0.4%
    assert rules.spread(base.run_busbw_gbps) == pytest.approx(3 / 360)
    assert rules.spread(base.busbw_gbps) == pytest.approx(363 * 1.004 / 360 - 1)  # pooled: ±1.2%
    assert rules.baseline_check(big(352), base, "busbw_gbps").state == PASS  # -2.2%: within 3x its noise
    warn = rules.baseline_check(big(340), base, "busbw_gbps")  # -5.6%: beyond 3x, not material
    assert warn.state == WARN and "beyond 3x its noise (±1.2%, its 3 runs'" in warn.reason
    fail = rules.baseline_check(big(300), base, "busbw_gbps")  # -16.7%
    assert fail.state == FAIL
    assert fail.reason == ("300 GB/s, 16.7% worse than the baseline's 360 GB/s: beyond 3x its noise (±1.2%, its 3 "
                           "runs' and their trials' largest deviation from their median; so 3.7%) and the 10% that "
                           "fails, by 6.7 points")
    # the same drop on noisy runs (±10%) is within 3x their noise: the noise decides, not only a percentage
    assert rules.baseline_check(big(300), runs(360, 324, 396), "busbw_gbps").state == PASS
    # latency: higher is worse
    lat = replace(small(5.0, spread=0.02), run_time_us=(5.0, 4.95, 5.05))
    assert rules.baseline_check(small(8.0), lat, "latency_us").state == FAIL
    assert rules.baseline_check(small(4.0), lat, "latency_us").state == PASS


def test_a_healthy_nodes_drift_never_fails():
    # the control on 2x H100 (benchmarks/results/gate-h100x2-2026-11-27/noise.txt): three launches at
    # 331.6, 331.4, 331.7 GB/s (trials ±0.3%), a later healthy launch at 328.3: at most a warning
    base = runs(331.6, 331.4, 331.7, spread=0.003)
    assert rules.baseline_check(big(328.3), base, "busbw_gbps").state in (PASS, WARN)
    # and one run with tight trials, the same drift: no failure either
    assert rules.baseline_check(big(328.3), big(331.6, spread=0.002), "busbw_gbps").state == WARN
    # a lost NVLink against the same baseline does fail
    assert rules.baseline_check(big(150), base, "busbw_gbps").state == FAIL


def test_gloo_against_its_baseline_is_compared_not_judged():
    c = rules.baseline_check(big(0.5, backend="gloo"), runs(1.1, 1.0, 1.2), "busbw_gbps")
    assert c.state == INFO and "worse than the baseline's" in c.reason and "not judged" in c.reason


def test_several_baseline_runs_are_pooled(tmp_path):
    for i, bw in enumerate((358, 362)):
        rows = ["backend,world_size,op,size_bytes,timing,nccl_env,inplace,trial,time_us,busbw_gbps,status,message"]
        rows += [f"nccl,2,all_reduce,1073741824,events,default,True,{t},3000,{bw + t},ok," for t in range(3)]
        (tmp_path / f"r{i}").mkdir()
        (tmp_path / f"r{i}" / "gate_comm.csv").write_text("\n".join(rows) + "\n")
    base, where, notes = baseline_points([str(tmp_path / "r0"), str(tmp_path / "r1")])
    (p,) = base.values()
    assert p.run_busbw_gbps == (359.0, 363.0) and len(p.busbw_gbps) == 6 and "r1" in where and notes == []


def test_the_baseline_point_must_match_and_its_graph_mixing_too(tmp_path):
    b = {1: small(5.0, env="default"), 2: big(360)}
    checks = rules.comm_checks([big(361), small(5.1)], "ok", H100, NVLINK4, False, b, GiB, 8)
    by = {(c.check, c.subject.split()[-1]): c for c in checks}
    assert by[("baseline", "busbw_gbps")].state == PASS
    assert by[("baseline", "latency_us")].state == INFO  # 8 B under another graph mixing: not compared


def test_points_and_baselines_from_a_comm_csv(tmp_path):
    rows = ["backend,world_size,op,size_bytes,timing,nccl_env,inplace,trial,time_us,busbw_gbps,status,message"]
    rows += [f"nccl,2,all_reduce,1073741824,events,default,True,{t},{3000 + t},{358 + t},ok," for t in range(3)]
    rows += [f"nccl,2,all_reduce,8,graph,default,True,{t},{5 + t / 10},0,ok," for t in range(3)]
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "comm.csv").write_text("\n".join(rows) + "\n")
    pts = points_from_csv(tmp_path / "tables" / "comm.csv")
    assert [(p.size_bytes, p.timing, p.busbw_gbps) for p in pts][0] == (GiB, "events", (358.0, 359.0, 360.0))
    base, where, _ = baseline_points(str(tmp_path))
    assert where.endswith("tables/comm.csv") and len(base) == 2
    none, why, _ = baseline_points(str(tmp_path / "nothing"))
    assert none is None and "no gate_comm.csv" in why


def test_the_line():
    assert rules.line(FAIL, "node1", "GPU 0 temperature_c:\n at the shutdown threshold") == (
        "distbench gate: FAIL node1: GPU 0 temperature_c: at the shutdown threshold")


# ------------------------------------------------------------------------------ reference table
def test_the_reference_table_has_the_figures_users_ask_for():
    # every published row is a public address that docs/fixtures.md lists; every row of ours names the
    # committed run it came from
    fixtures = (Path(__file__).parents[2] / "docs/fixtures.md").read_text()
    published = [r for r in EXPECTED if r["kind"] == "published"]
    assert all(r["source"].startswith("https://github.com/") and r["source"] in fixtures for r in published)
    assert all("benchmarks/results/" in r["source"] for r in EXPECTED if r["kind"] == "ours")
    assert len(EXPECTED) >= 20
    # issue 48's nodes: 2, 4 and 8x H100 and H200 at 1 GiB for the three ops, 8x A100's all_reduce
    for gpu, n, op in [(g, n, op) for g in ("H100", "H200") for n in (2, 4, 8)
                       for op in ("all_reduce", "all_gather", "reduce_scatter")] + [("A100", 8, "all_reduce")]:
        assert expected_for(f"NVIDIA {gpu}", n, op, GiB) is not None, (gpu, n, op)
    assert expected_for(H100, 8, "all_gather", GiB)["expected_busbw_gbps_high"] == 370.0
    assert expected_for(H100, 8, "reduce_scatter", GiB, nvls=True)["source"].endswith("issues/212")
    assert expected_for("NVIDIA H200", 8, "all_reduce", GiB, nvls=False)["expected_busbw_gbps_high"] == 370.0
    # PCIe-only parts: their own rows; an SXM row never applies to a PCIe card
    assert expected_for("NVIDIA GeForce RTX 5090", 8, "all_reduce", 2 * GiB)["source"].endswith("nccl/issues/1639")
    assert expected_for("NVIDIA H100 PCIe", 8, "all_reduce", 2 * GiB) is None
    # two nodes over NDR: 46-48 GB/s per NIC with NCCL_ALGO=RING, scaled by the NICs; Tree is refused
    two = expected_for(H100, 16, "all_reduce", GiB, node_count=2, nics=8, algo="Ring")
    assert (two["expected_busbw_gbps_low"], two["expected_busbw_gbps_high"]) == (368.0, 384.0)
    assert expected_for(H100, 16, "all_reduce", GiB, node_count=2, nics=8) is None
    assert TWO_NODE_TREE[0] in missing_reference(H100, 16, "all_reduce", GiB, node_count=2, nics=8)
    assert latency_for(H100, 2, "all_reduce", 8)["expected_latency_us"] == 5.41
    assert latency_for(H100, 2, "all_reduce", 64 << 10)["expected_latency_us"] == 6.0
    assert latency_for(H100, 2, "all_reduce", 1 << 20) is None


# ----------------------------------------------------------------------------------- prometheus
def test_the_prom_file_parses_with_prometheus_client(tmp_path, monkeypatch):
    from prometheus_client.parser import text_string_to_metric_families

    samples = [("distbench_gate_status", {"node": 'n"1'}, 2.0)]
    samples += prom.health_samples("n1", reading(monkeypatch, temp=95))
    samples += prom.comm_sample("n1", "all_reduce", GiB, "nccl", 2, "events", 361.5, 5940.0, "2x NVIDIA H100 80GB HBM3")
    samples += prom.comm_sample("n1", "all_reduce", 8, "nccl", 2, "graph", 0.0, 5.2, "2x NVIDIA H100 80GB HBM3")
    samples.append(prom.timestamp("n1", "gate"))
    path = prom.write(tmp_path, samples)
    assert path.name == prom.GATE_FILE and not list(tmp_path.glob("*.tmp*"))  # renamed into place
    fams = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    assert set(fams) == {"distbench_gate_status", "distbench_health_item_ok", "distbench_comm_busbw_gbps",
                         "distbench_comm_latency_us", "distbench_run_timestamp_seconds"}
    assert fams["distbench_gate_status"].samples[0].labels == {"node": 'n"1', "source": "gate"}
    hot = [s for s in fams["distbench_health_item_ok"].samples if s.labels["item"] == "temperature_c"]
    assert {s.labels["gpu"]: s.value for s in hot} == {"0": 0.0, "1": 0.0}
    bw = fams["distbench_comm_busbw_gbps"].samples
    assert [(s.labels["size_bytes"], s.labels["backend"], s.labels["world_size"], s.value) for s in bw] == [
        ("1073741824", "nccl", "2", 361.5)]
    assert len(fams["distbench_comm_latency_us"].samples) == 2


def test_a_full_runs_prom_file_from_its_tables(tmp_path):
    """config prometheus_dir: a finished run's tables as metrics (rules/gate.smk's onsuccess), one series
    per training configuration (a tuning sweep's configs are not collapsed into one), parsed by
    prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / "comm_summary.csv").write_text(
        "op,size_bytes,backend,world_size,timing,nccl_env,inplace,dtype,busbw_gbps_median,time_us_median,status\n"
        "all_reduce,1073741824,nccl,2,events,default,False,float32,331.5,6477.1,ok\n"
        "all_reduce,8,nccl,2,graph,default,False,float32,0.0,5.4,ok\n")
    (tables / "training_summary.csv").write_text(
        "model,strategy,config,backend,world_size,step_time_ms_median,mfu\n"
        "gpt,ddp,plain,nccl,2,178.5,0.393\nmlp,ddp,plain,nccl,2,11.6,0.547\nmlp,ddp,bucket_cap_mb=100,nccl,2,11.2,\n")
    said = prom.write_run_metrics(tmp_path / "prom", tmp_path, "n1")
    path = tmp_path / "prom" / prom.RUN_FILE
    assert said == f"distbench: metrics written to {path}"
    fams = {f.name: f for f in text_string_to_metric_families(path.read_text())}
    steps = {(s.labels["model"], s.labels["config"]): s.value for s in fams["distbench_training_step_time_ms"].samples}
    assert steps == {("gpt", "plain"): 178.5, ("mlp", "plain"): 11.6, ("mlp", "bucket_cap_mb=100"): 11.2}
    assert {s.labels["model"]: s.value for s in fams["distbench_training_mfu"].samples} == {"gpt": 0.393, "mlp": 0.547}
    bw = {int(s.labels["size_bytes"]): s.value for s in fams["distbench_comm_busbw_gbps"].samples}
    assert bw[1073741824] == 331.5
    assert "distbench_run_timestamp_seconds" in fams
    # a directory that cannot be written is said, and the run's results stand
    (tmp_path / "file").write_text("")
    assert prom.write_run_metrics(tmp_path / "file", tmp_path, "n1").startswith("distbench: no metrics written to ")


def test_a_failed_points_line_says_its_status_once():
    """The launcher's message for a job killed at its limit opens with its status ('timeout: killed
    after 33 s ...'); the gate's line said 'timeout: timeout: ...' on 2x H200 with NCCL forced onto sockets
    (benchmarks/results/gate-transport-h200x2-2026-11-29). A message without it gets the status in front."""
    from distbench.gate.rules import Point, failed_checks

    def point(status, message):
        return Point("nccl", 2, "all_reduce", 2**30, "events", "", (), (), status=status, message=message)

    killed = "timeout: killed after 33 s (job time limit) while still progressing: 21 collectives in the last 3.0 s"
    checks = failed_checks([point("timeout", killed), point("failed", "rank 1 exited with code 1")], "ok")
    assert [c.reason for c in checks] == [killed, "failed: rank 1 exited with code 1"]
