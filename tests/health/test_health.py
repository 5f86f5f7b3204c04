"""The hardware health check (distbench.health: readings, table, section): without NVML
every item is "not available here"; a fake NVML module returning degraded values (a downtrained x8
link, an inactive NVLink, a thermal throttle, a pending remap) reaches the report's Verdict, first,
and marks the other headlines (the GPU is named in its own row only); counters that moved between
the readings are differences; the stop setting stops a failing check before the benchmarks."""

import importlib.util
import sys

import pytest

from distbench.core.section import Headline, ReportInputs
from distbench.health import load as health_load, readings as health
from distbench.health.readings import DEGRADED, FAILING, GPU_ITEMS, NODE_ITEMS, NOT_AVAILABLE, OK, read_health
from distbench.health.section import HEALTH_SECTION, MARK, health_findings, health_headlines
from distbench.health.table import (
    HEALTH, HEALTH_DIFF, across_nodes, differences, read_diff, read_health_csv, stop_reason, write_diff,
    write_health,
)
from distbench.report.verdict import ordered
from tests.conftest import RUN, snakemake
from tests.fake_nvml import FakeNVMLError, fake_pynvml, healthy_state


@pytest.fixture
def no_dmesg(monkeypatch):
    """The kernel log as if unreadable (the test host's dmesg must not decide a test)."""
    monkeypatch.setattr(health, "_kernel_xid_row", lambda host: health.HealthRow(
        host, health.NODE, "xid_kernel_log", "", "0", NOT_AVAILABLE, "dmesg unreadable here"))


def reading(monkeypatch, state, expected_gpus=None):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    return read_health(expected_gpus, load_s=0, host="n1")


def row(rows, gpu, item):
    return next(r for r in rows if r.gpu == gpu and r.item == item)


def write_readings(tmp_path, before, after):
    write_health(tmp_path / "health_before.csv", before)
    write_health(tmp_path / "health_after.csv", after)
    write_diff(tmp_path / "health_diff.csv", differences(before, after))
    return ReportInputs({"health_diff": tmp_path / "health_diff.csv"}, config={"health": {"stop_on_failing": False}})


# ---------------------------------------------------------------------------------- without NVML
def test_without_nvml_every_item_is_not_available_and_the_report_says_so(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    rows = read_health(expected_gpus=4, load_s=5)
    assert {r.item for r in rows} == set(GPU_ITEMS) | set(NODE_ITEMS)
    assert {r.state for r in rows} == {NOT_AVAILABLE}
    assert all("pynvml" in r.reason for r in rows)
    inputs = write_readings(tmp_path, rows, rows)
    assert read_health_csv(tmp_path / "health_before.csv")["state"].eq(NOT_AVAILABLE).all()
    assert read_diff(tmp_path / "health_diff.csv")["state"].eq(NOT_AVAILABLE).all()
    assert health_headlines(inputs) == [] and health_findings(inputs) == []
    ctx = HEALTH_SECTION.build(inputs)
    assert "health.stop_on_failing was off" in ctx["note"] and ctx["not_ok"]["rows"] == []
    assert any("pynvml not importable" in n for n in ctx["not_available"])


def test_nvml_that_fails_to_start_is_not_available_too(monkeypatch):
    nv = fake_pynvml(healthy_state())

    def init():
        raise FakeNVMLError("Driver Not Loaded")
    nv.nvmlInit = init
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    rows = read_health(load_s=0)
    assert {r.state for r in rows} == {NOT_AVAILABLE} and "Driver Not Loaded" in rows[0].reason


def test_an_nvml_lacking_calls_leaves_those_items_not_available(monkeypatch, no_dmesg):
    nv_state = healthy_state(count=1)
    nv = fake_pynvml(nv_state)
    del nv.nvmlDeviceGetNvLinkState, nv.nvmlEventSetCreate, nv.nvmlDeviceGetRemappedRows
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    rows = read_health(load_s=0)
    for item in ("nvlink_active", "nvlink_crc_errors", "xid_events", "remap_pending"):
        assert row(rows, "0", item).state == NOT_AVAILABLE, item
    assert row(rows, "0", "pcie_link").state == OK


# ---------------------------------------------------------------------- degraded values (fake NVML)
def test_a_healthy_fake_gpu_is_ok_and_says_so_in_the_verdict(monkeypatch, tmp_path, no_dmesg):
    rows = reading(monkeypatch, healthy_state(), expected_gpus=2)
    # a GPU with row remapping retires no pages, the kernel log is left out here, and no matmul ran
    unread = {r.item for r in rows if r.state == NOT_AVAILABLE}
    assert unread == {"retired_pages", "retired_pages_pending", "xid_kernel_log", "matmul_vs_peers"}
    assert {r.state for r in rows if r.item not in unread} == {OK}
    assert row(rows, "node", "cuda_driver_version").value == "12.8"
    heads = health_headlines(write_readings(tmp_path, rows, rows))
    assert [(h.verdict, h.qualifies) for h in heads] == [("healthy", "")]


FAULTS = {
    "pcie_link": (lambda s: s["width"].update({1: 8}), "x8 of x16"),
    "nvlink_active": (lambda s: s["links"].update({1: [1] * 17 + [0]}), "link(s) 17 inactive"),
    "clock_throttle": (lambda s: s["throttle"].update({1: 0x40}), "hw_thermal_slowdown"),
    "remap_pending": (lambda s: s["remap"].update({1: (0, 1, 1, 0)}), "pending"),
}


@pytest.mark.parametrize("item", list(FAULTS))
def test_each_degraded_reading_opens_the_verdict_and_qualifies_the_other_headlines(monkeypatch, tmp_path, no_dmesg,
                                                                                  item):
    state = healthy_state()
    FAULTS[item][0](state)
    rows = reading(monkeypatch, state)
    r = row(rows, "1", item)
    assert r.state == DEGRADED and FAULTS[item][1] in f"{r.value} {r.reason}"
    assert row(rows, "0", item).state == OK  # the other GPU is not blamed
    inputs = write_readings(tmp_path, rows, rows)
    heads = health_headlines(inputs)
    assert [h.headline for h in heads] == ["GPU 1 (n1): degraded"]
    assert heads[0].verdict == "below expected" and item in heads[0].reason and heads[0].qualifies == MARK
    comm = Headline("communication", "NCCL all_reduce 1 GiB: 400 GB/s", "failing", "below 50% of the link peak")
    verdict = ordered([comm, *heads])  # health comes first even behind a failing benchmark headline
    assert verdict[0]["area"] == "hardware health" and verdict[0]["anchor"] == "verdict-health"
    # the other row carries only the mark linking to the GPU's row, not the GPU's items
    assert verdict[1]["reason"] == "below 50% of the link peak"
    assert verdict[1]["marks"] == [{"text": MARK, "anchor": "verdict-health"}]
    [finding] = health_findings(inputs)
    assert finding.startswith(MARK) and "GPU 1" not in finding
    ctx = HEALTH_SECTION.build(inputs)
    assert {(r[2], r[3]) for r in ctx["not_ok"]["rows"]} == {("1", item)}


def test_an_uncorrectable_error_or_a_missing_gpu_fails(monkeypatch, tmp_path, no_dmesg):
    state = healthy_state()
    state["ecc"][(0, 1, 0)] = 2  # GPU 0, uncorrected, volatile
    rows = reading(monkeypatch, state, expected_gpus=4)
    assert row(rows, "0", "ecc_volatile_uncorrected").state == FAILING
    assert row(rows, "node", "gpu_count").state == FAILING and row(rows, "node", "gpu_count").value == "2"
    heads = health_headlines(write_readings(tmp_path, rows, rows))
    assert {h.headline: h.verdict for h in heads} == {"GPU 0 (n1): failing": "failing",
                                                      "node n1: failing": "failing"}


def test_counters_that_moved_during_the_run_are_differences(monkeypatch, tmp_path, no_dmesg):
    before = reading(monkeypatch, healthy_state())
    state = healthy_state()
    state["nvlink_errors"][(1, 3, health.NVLINK_REPLAY)] = 5
    state["ecc"][(0, 0, 0)] = 7  # GPU 0 corrected volatile
    after = reading(monkeypatch, state)
    diff = {(d.gpu, d.item): d for d in differences(before, after)}
    assert (diff[("1", "nvlink_replay_errors")].delta, diff[("1", "nvlink_replay_errors")].state) == (5, DEGRADED)
    assert (diff[("0", "ecc_volatile_corrected")].delta, diff[("0", "ecc_volatile_corrected")].state) == (7, DEGRADED)
    assert diff[("0", "nvlink_replay_errors")].state == OK and diff[("0", "nvlink_replay_errors")].delta == 0
    inputs = write_readings(tmp_path, before, after)
    assert set(read_diff(tmp_path / "health_diff.csv").query("delta > 0")["item"]) == {
        "nvlink_replay_errors", "ecc_volatile_corrected"}
    ctx = HEALTH_SECTION.build(inputs)
    assert "2 moved during the run" in ctx["diff_note"]
    assert {(r[1], r[2], r[5]) for r in ctx["diff"]["rows"]} == {("1", "nvlink_replay_errors", "+5"),
                                                                 ("0", "ecc_volatile_corrected", "+7")}
    heads = {h.headline: h for h in health_headlines(inputs)}
    assert "GPU 1 nvlink_replay_errors (0 -> 5)" in heads["GPU 1 (n1): degraded"].reason


def test_time_throttled_during_the_run_is_a_difference_thermal_degrades_power_is_noted(monkeypatch, tmp_path, no_dmesg):
    # NVML's cumulative violation time (ns): the after reading needs no load of its own to see it
    before = reading(monkeypatch, healthy_state())
    state = healthy_state()
    state["violation_ns"] = {(0, health.PERF_POLICY_THERMAL): 2_500_000_000, (1, health.PERF_POLICY_POWER): 40_000_000_000}
    after = reading(monkeypatch, state)
    assert row(after, "0", "throttle_thermal_ms").value == "2500"
    diff = {(d.gpu, d.item): d for d in differences(before, after)}
    thermal, power = diff[("0", "throttle_thermal_ms")], diff[("1", "throttle_power_ms")]
    assert (thermal.delta, thermal.state) == (2500, DEGRADED)
    assert (power.delta, power.state) == (40000, OK) and "power limit" in power.reason
    # the section shows both moves, and only the thermal one makes its GPU a headline
    inputs = write_readings(tmp_path, before, after)
    ctx = HEALTH_SECTION.build(inputs)
    assert "2 moved during the run, 1 of them degraded or failing" in ctx["diff_note"]
    assert {(r[1], r[2]) for r in ctx["diff"]["rows"]} == {("0", "throttle_thermal_ms"), ("1", "throttle_power_ms")}
    assert [h.headline for h in health_headlines(inputs)] == ["GPU 0 (n1): degraded"]
    assert diff[("1", "throttle_thermal_ms")].state == OK and diff[("1", "throttle_thermal_ms")].delta == 0


def test_an_xid_delivered_while_sampled_degrades_its_gpu(monkeypatch, no_dmesg):
    state = healthy_state()
    state["xids"] = [(1, 79)]
    rows = reading(monkeypatch, state)
    assert row(rows, "1", "xid_events").state == DEGRADED and "79" in row(rows, "1", "xid_events").reason
    assert row(rows, "0", "xid_events").state == OK


def test_kernel_log_xids_are_counted():
    log = ("[  1.0] NVRM: loading\n[ 20.1] NVRM: Xid (PCI:0000:19:00): 79, pid=123, GPU has fallen off the bus.\n"
           "[ 30.0] NVRM: Xid (PCI:0000:3b:00): 48, pid=9, DBE\n")
    assert health.kernel_xids(log) == ["PCI:0000:19:00 79", "PCI:0000:3b:00 48"]


def test_nodes_on_different_drivers_are_named():
    def node(host, driver):
        return [health.HealthRow(host, "node", "driver_version", driver, "", OK, ""),
                health.HealthRow(host, "node", "cuda_driver_version", "12.8", "", OK, "")]
    rows = node("a", "570.1") + node("b", "570.1") + node("c", "550.9")
    out = {r.item: r for r in across_nodes(rows)}
    assert out["driver_version_across_nodes"].state == DEGRADED and "c differ" in out["driver_version_across_nodes"].reason
    assert out["cuda_driver_version_across_nodes"].state == OK
    assert across_nodes(node("a", "570.1")) == []


# ----------------------------------------------------------------------------- contracts, the stop
def test_the_csvs_follow_their_contracts(tmp_path, monkeypatch, no_dmesg):
    rows = reading(monkeypatch, healthy_state())
    write_readings(tmp_path, rows, rows)
    assert tuple(read_health_csv(tmp_path / "health_after.csv").columns) == HEALTH.names
    assert tuple(read_diff(tmp_path / "health_diff.csv").columns) == HEALTH_DIFF.names
    bad = (tmp_path / "health_before.csv").read_text().replace(",ok,", ",fine,", 1)
    (tmp_path / "bad.csv").write_text(bad)
    with pytest.raises(ValueError, match="unknown state"):
        read_health_csv(tmp_path / "bad.csv")


def test_a_failing_item_stops_the_run_only_with_the_setting_on(monkeypatch, no_dmesg):
    state = healthy_state()
    state["remap"][1] = (0, 2, 0, 1)  # a remap failed
    rows = reading(monkeypatch, state)
    assert row(rows, "1", "remap_pending").state == FAILING
    message = stop_reason(rows, stop_on_failing=True)
    assert "GPU 1 remap_pending" in message and "stop_on_failing" in message
    assert stop_reason(rows, stop_on_failing=False) is None
    assert stop_reason(reading(monkeypatch, healthy_state()), stop_on_failing=True) is None


def test_the_config_schema_takes_the_health_block():
    from distbench.pipeline.config import ConfigError, check_config

    assert check_config({})["health"] == {"enabled": True, "stop_on_failing": False, "load_s": 5,
                                           "after_load_s": 0}
    assert check_config({"health": {"stop_on_failing": True}})["health"]["stop_on_failing"] is True
    for bad in ({"stop_on_failing": "yes"}, {"load_s": -1}, {"after_load_s": -1}, {"stop_on_failing_typo": True}):
        with pytest.raises(ConfigError, match="health"):
            check_config({"health": bad})


def test_a_failing_check_stops_the_workflow_before_any_benchmark(workflow_dir):
    """A dry run with the stop on puts the gate before every benchmark job (off: no gate); a real run
    of the health rule alone on this CPU host writes its CSV, every item not available here."""
    (workflow_dir / "stop.yaml").write_text("health:\n  stop_on_failing: true\n")
    on = snakemake(workflow_dir, "-n", "--configfile", "stop.yaml")
    assert on.returncode == 0, on.stderr[-2000:]
    out = on.stdout + on.stderr
    assert "rule health_gate:" in out and "rule health_before:" in out and "rule health_after:" in out
    assert "health/gate.txt" in out.split("rule comm_job:")[1].split("rule ")[0]  # the job's input
    off = snakemake(workflow_dir, "-n")
    assert off.returncode == 0 and "rule health_gate:" not in off.stdout + off.stderr
    target = f"{RUN}/health/health_before.csv"
    r = snakemake(workflow_dir, target)
    assert r.returncode == 0, r.stderr[-2000:]
    df = read_health_csv(workflow_dir / target)
    if importlib.util.find_spec("pynvml") is None:
        assert df["state"].eq(NOT_AVAILABLE).all()
    assert not list(workflow_dir.glob(f"{RUN}/comm/*"))  # no benchmark ran


def test_the_rendered_report_opens_its_verdict_with_the_degraded_gpu(monkeypatch, tmp_path, no_dmesg):
    from distbench.core.section import Section
    from distbench.report.overview import FINDINGS, VERDICT
    from distbench.report.render import render_report

    state = healthy_state()
    state["width"][1] = 8
    rows = reading(monkeypatch, state)
    inputs = write_readings(tmp_path / "health", rows, rows)
    bench = Section("bench", "Bench", tmp_path, lambda _i: None, headlines=lambda _i: [
        Headline("communication", "all_reduce 1 GiB: 400 GB/s", "healthy", "90% of the link peak")])
    inputs.tables = {**inputs.tables, "comm_summary": tmp_path / "tables/comm_summary.csv"}
    render_report(inputs, tmp_path / "r.md", tmp_path / "r.html", sections=(VERDICT, FINDINGS, HEALTH_SECTION, bench))
    md = (tmp_path / "r.md").read_text()
    verdict = md.split("## Verdict")[1].split("##")[0].strip().splitlines()
    assert verdict[2].startswith('| hardware health | <a id="verdict-health"></a>GPU 1 (n1): degraded |')
    assert "communication" in verdict[3]
    assert verdict[3].endswith("| 90% of the link peak [†health](#verdict-health) |")
    assert "## Hardware health" in md and "x8 of x16" in md.split("## Hardware health")[1]
    assert md.count("GPU 1 (n1)") == 1 + md.split("## Hardware health")[1].count("GPU 1 (n1)")  # named once above
    assert "- [†health](#verdict-health) 1 GPU(s)" in md.split("## Findings")[1]
    html = (tmp_path / "r.html").read_text()
    assert '<tr id="verdict-health">' in html and '<a href="#verdict-health">†health</a>' in html
