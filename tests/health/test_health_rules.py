"""The health check's counter rules (distbench.health.rules), fed through the fake NVML
(tests/fake_nvml.py) with the reading times set by the clock seam (health.reading_time): NVLink CRC
errors are a rate against DCGM's 100/s (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR), so the +108 in 240 s of
issue 34's healthy H200 and the +5,849 in 360 s of its 4x H100 are "moved, within limits" while 250/s
degrades; replay errors and uncorrectable ECC are counts (any move). In the report, a degraded GPU is
named in one Verdict row; the other rows and the Findings carry only the mark linking to it, and
"Items not ok" lists the counter the differences mark degraded."""

import sys

import pytest

from distbench.core.contract import markdown_table
from distbench.core.section import Headline, ReportInputs, Section
from distbench.health import load as health_load, readings as health
from distbench.health.readings import DEGRADED, FAILING, NOT_AVAILABLE, OK, read_health
from distbench.health.section import HEALTH_SECTION, MARK, health_findings, health_headlines
from distbench.health.table import (HEALTH, HEALTH_DIFF, differences, read_diff, read_health_csv, write_diff,
                                    write_health)
from tests.conftest import REPO
from tests.fake_nvml import fake_pynvml, healthy_state

T0 = "2026-11-27T10:00:00.000+00:00"


def at(seconds: float) -> str:
    """The ISO time `seconds` after T0."""
    from datetime import datetime, timedelta
    return (datetime.fromisoformat(T0) + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


@pytest.fixture
def no_dmesg(monkeypatch):
    monkeypatch.setattr(health, "_kernel_xid_row", lambda host: health.HealthRow(
        host, health.NODE, "xid_kernel_log", "", "0", NOT_AVAILABLE, "dmesg unreadable here"))


def reading(monkeypatch, state, when_s: float):
    """One reading of the fake NVML's `state`, taken `when_s` seconds after T0."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(state))
    monkeypatch.setattr(health_load, "IDLE_SAMPLE_S", 0.0)
    monkeypatch.setattr(health, "reading_time", lambda: at(when_s))
    return read_health(None, load_s=0, host="vm")


def crc_state(count: int, crc: dict[int, int]):
    """A healthy fake NVML whose GPUs' NVLink CRC counters are split over two links (FLIT on link 0,
    DATA on link 1: the check sums both kinds over every link)."""
    state = healthy_state(count)
    for gpu, n in crc.items():
        state["nvlink_errors"][(gpu, 0, health.NVLINK_CRC_FLIT)] = n - n // 3
        state["nvlink_errors"][(gpu, 1, health.NVLINK_CRC_DATA)] = n // 3
    return state


def run(monkeypatch, before_state, after_state, seconds):
    before = reading(monkeypatch, before_state, 0)
    after = reading(monkeypatch, after_state, seconds)
    return before, after, {(d.gpu, d.item): d for d in differences(before, after)}


def write_readings(tmp_path, before, after):
    write_health(tmp_path / "health_before.csv", before)
    write_health(tmp_path / "health_after.csv", after)
    write_diff(tmp_path / "health_diff.csv", differences(before, after))
    return ReportInputs({"health_diff": tmp_path / "health_diff.csv"}, config={"health": {"stop_on_failing": False}})


# ------------------------------------------------------------------------------- rates (NVLink CRC)
def test_the_issues_healthy_gpu_moved_within_limits(monkeypatch, tmp_path, no_dmesg):
    """Issue 34: GPU 0's CRC counter 7,367 -> 7,475 (+108) in 240 s at full load is 0.45/s, about 200x
    under DCGM's 100/s: ok, listed as moved within limits, and the Verdict says healthy."""
    before, after, diff = run(monkeypatch, crc_state(2, {0: 7367}), crc_state(2, {0: 7475}), 240)
    assert {r.read_at for r in before} == {T0} and {r.read_at for r in after} == {at(240)}
    d = diff[("0", "nvlink_crc_errors")]
    assert (d.before, d.after, d.delta, d.interval_s) == (7367, 7475, 108, 240)
    assert d.state == OK and d.rate_per_s == pytest.approx(0.45)
    assert d.reason.startswith("moved, within limits: +108 in 240 s = 0.45/s") and "100/s" in d.reason
    assert "DCGM_LIMIT_MAX_NVLINK_CRC_ERROR" in d.reason
    inputs = write_readings(tmp_path, before, after)
    [head] = health_headlines(inputs)
    assert (head.verdict, head.qualifies) == ("healthy", "")
    assert "moved, within limits during the run: GPU 0 nvlink_crc_errors +108 (0.45/s)" in head.reason
    assert health_findings(inputs) == []
    ctx = HEALTH_SECTION.build(inputs)
    assert ctx["not_ok"]["rows"] == []  # and the counters' table agrees: the one mover is ok
    [moved] = ctx["diff"]["rows"]
    assert moved[2] == "nvlink_crc_errors" and moved[6:8] == ["0.45/s", OK]
    # the rate comes back from the CSV as written
    written = read_diff(tmp_path / "health_diff.csv").query("gpu == '0' and item == 'nvlink_crc_errors'")
    assert written[["interval_s", "rate_per_s"]].values.tolist() == [[240, 0.45]]


def test_four_h100_like_gpus_at_15_errors_per_s_are_ok(monkeypatch, tmp_path, no_dmesg):
    moves = {0: 5463, 1: 5601, 2: 5720, 3: 5849}  # issue 34's 4x H100, 6-minute run
    start = {g: 20_000 + 1_000 * g for g in moves}
    end = {g: start[g] + m for g, m in moves.items()}
    before, after, diff = run(monkeypatch, crc_state(4, start), crc_state(4, end), 360)
    for g, m in moves.items():
        d = diff[(str(g), "nvlink_crc_errors")]
        assert (d.delta, d.state) == (m, OK) and d.rate_per_s == pytest.approx(m / 360)
    assert diff[("3", "nvlink_crc_errors")].reason.startswith("moved, within limits: +5849 in 360 s = 16.2/s")
    [head] = health_headlines(write_readings(tmp_path, before, after))
    assert head.verdict == "healthy" and head.headline == "4 GPU(s): every item ok"


def test_a_crc_rate_over_dcgms_limit_degrades(monkeypatch, tmp_path, no_dmesg):
    before, after, diff = run(monkeypatch, crc_state(2, {0: 7367}), crc_state(2, {0: 67_367}), 240)
    d = diff[("0", "nvlink_crc_errors")]
    assert d.state == DEGRADED and d.rate_per_s == pytest.approx(250)
    assert d.reason.startswith("+60000 in 240 s = 250/s, at or over DCGM's limit: 100/s")
    # the same move over a long enough run is under the rate: the interval decides, not the count
    *_, slow = run(monkeypatch, crc_state(2, {0: 7367}), crc_state(2, {0: 67_367}), 1200)
    assert slow[("0", "nvlink_crc_errors")].state == OK
    inputs = write_readings(tmp_path, before, after)
    [head] = health_headlines(inputs)
    assert head.headline == "GPU 0 (vm): degraded" and "nvlink_crc_errors" in head.reason


def test_readings_without_a_time_leave_the_rate_unjudged(monkeypatch, no_dmesg):
    """A health_before.csv from before read_at: the move is shown, its rate is not known, no alarm."""
    before, after, _ = run(monkeypatch, crc_state(2, {0: 7367}), crc_state(2, {0: 67_367}), 240)
    old = [health.HealthRow(**{**vars(r), "read_at": ""}) for r in before]
    d = {(x.gpu, x.item): x for x in differences(old, after)}[("0", "nvlink_crc_errors")]
    assert (d.delta, d.interval_s, d.rate_per_s, d.state) == (60_000, None, None, NOT_AVAILABLE)
    assert "rate is unknown" in d.reason


# ---------------------------------------------------------------------------------------- counts
def test_replay_errors_and_uncorrectable_ecc_are_counts(monkeypatch, no_dmesg):
    """DCGM fails any NVLink replay or recovery error (DCGM_LIMIT_MAX_NVLINK_ERROR 1) and any volatile
    double-bit ECC error: one in an hour is a fault, however slow the rate."""
    after_state = crc_state(2, {0: 7367})
    after_state["nvlink_errors"][(1, 2, health.NVLINK_REPLAY)] = 1
    after_state["nvlink_errors"][(1, 2, health.NVLINK_RECOVERY)] = 1
    after_state["ecc"][(0, health.ECC_UNCORRECTED, health.ECC_VOLATILE)] = 1
    *_, diff = run(monkeypatch, crc_state(2, {0: 7367}), after_state, 3600)
    for item in ("nvlink_replay_errors", "nvlink_recovery_errors"):
        d = diff[("1", item)]
        assert (d.delta, d.state, d.rate_per_s) == (1, DEGRADED, None)
        assert "DCGM_LIMIT_MAX_NVLINK_ERROR" in d.reason
    ecc = diff[("0", "ecc_volatile_uncorrected")]
    assert (ecc.delta, ecc.state) == (1, FAILING) and "double-bit" in ecc.reason
    assert diff[("0", "nvlink_replay_errors")].state == OK


def test_dcgms_memory_totals_judge_each_reading(monkeypatch, no_dmesg):
    """DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE (512 rows remapped for uncorrectable errors) warns."""
    state = healthy_state()
    state["remap"][1] = (3, health.MAX_ROW_REMAP_UNCORRECTABLE, 0, 0)
    rows = {(r.gpu, r.item): r for r in reading(monkeypatch, state, 0)}
    assert rows[("1", "remapped_rows")].state == DEGRADED
    assert "DCGM_LIMIT_MAX_ROW_REMAP_UNCORRECTABLE" in rows[("1", "remapped_rows")].reason
    assert rows[("0", "remapped_rows")].state == OK


# -------------------------------------------------------------------------------------- the report
def test_a_degraded_gpu_is_named_once_and_the_other_rows_carry_its_mark(monkeypatch, tmp_path, no_dmesg):
    from distbench.report.overview import FINDINGS, VERDICT
    from distbench.report.render import render_report

    before, after, _ = run(monkeypatch, crc_state(2, {0: 7367}), crc_state(2, {0: 67_367}), 240)
    inputs = write_readings(tmp_path / "health", before, after)
    heads = [Headline("communication", "all_reduce 1 GiB: 400 GB/s", "healthy", "90% of the link peak"),
             Headline("training", "DDP 2 ranks: 1.9x", "healthy", "95% efficient")]
    bench = Section("bench", "Bench", tmp_path, lambda _i: None, headlines=lambda _i: heads,
                    findings=lambda _i: ["all_reduce reaches 90% of the link peak"])
    inputs.tables = {**inputs.tables, "comm_summary": tmp_path / "tables/comm_summary.csv"}
    render_report(inputs, tmp_path / "r.md", tmp_path / "r.html", sections=(VERDICT, FINDINGS, HEALTH_SECTION, bench))
    md = (tmp_path / "r.md").read_text()
    verdict = [ln for ln in md.split("## Verdict")[1].split("##")[0].splitlines() if ln.startswith("| ")][2:]
    assert [ln for ln in verdict if "GPU 0" in ln] == [verdict[0]]  # named in exactly one row
    assert verdict[0].startswith('| hardware health | <a id="verdict-health"></a>GPU 0 (vm): degraded |')
    assert verdict[1:] == [f"| {h.area} | {h.headline} | **healthy** | {h.reason} [{MARK}](#verdict-health) |"
                           for h in heads]
    findings = md.split("## Findings")[1].split("##")[0]
    assert "GPU 0" not in findings and f"- [{MARK}](#verdict-health) 1 GPU(s) or node(s) degraded" in findings
    # the health section's lists agree: the degraded counter is an item not ok
    section = md.split("## Hardware health")[1]
    not_ok = section.split("Items not ok:")[1].split("Counters during the run")[0]
    assert "_None._" not in not_ok and "| during the run | vm | 0 | nvlink_crc_errors | 7367 → 67367 |" in not_ok
    assert "| 250/s | degraded |" in section.split("Counters during the run")[1]
    html = (tmp_path / "r.html").read_text()
    assert html.count('<a href="#verdict-health">†health</a>') == 3 and html.count('id="verdict-health"') == 1


# ------------------------------------------------------------------------------------ the contracts
def test_the_docs_show_the_health_contracts_as_written_in_code(monkeypatch, tmp_path, no_dmesg):
    docs = (REPO / "docs/csv-schema.md").read_text()
    for contract in (HEALTH, HEALTH_DIFF):
        assert markdown_table(contract.columns) in docs, contract.name
    # a health_before.csv written before the read_at column still reads, with no time
    rows = reading(monkeypatch, healthy_state(), 0)
    write_health(tmp_path / "h.csv", rows).drop(columns=["read_at"]).to_csv(tmp_path / "old.csv", index=False)
    assert read_health_csv(tmp_path / "old.csv")["read_at"].eq("").all()
