"""A training step split that adds up (issue 24, part 2): compute, exposed communication never more
than the collectives alone, and the rest, named as neither; and a bounds check whose allowance is
the compared phases' measured noise, so that it can fail.

The worked example is the issue's: gpt 350m-like numbers on 2 ranks, step 90.5 ms, compute-only
69.4 ms, gradient all-reduce alone 5.7 ms: 5.7 ms exposed communication and 15.4 ms other.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from distbench.training.analysis import plots
from distbench.training.analysis.findings import bottleneck, training_findings
from distbench.training.analysis.section import SUMMARY_FIELDS, training_headlines
from distbench.training.analysis.summary import (
    NOISE_MIN_FRACTION, SUMMARY_COLUMNS, check_bounds, noise_allowance_ms, step_split,
)
from tests.training.test_scaling import job, one, summary

# p5-p95 of five evenly spread values v ± 2d (linear interpolation) is 2 × (2d − 0.2 d) = 3.6 d
SPREAD_1MS = 1 / 3.6


def spread(median: float, d: float = SPREAD_1MS) -> list[float]:
    """Five values around `median`: p5-p95 spread 3.6 × d (1 ms by default)."""
    return [median - 2 * d, median - d, median, median + d, median + 2 * d]


def phased_job(ws, *, steps, computes, comms, last=1.0) -> list[dict]:
    """job(), with each phase's five times given (the helper gives the phases one time each)."""
    rows = job(ws, steps=steps, compute=computes[0], allreduce=comms[0], last=last, n=len(steps))
    times = {"step": iter(steps), "compute_only": iter(computes), "comm_alone": iter(comms)}
    for r in rows:
        t = next(times[r["phase"]])
        r.update(step_time_ms=t, step_time_ms_rank_min=t, step_time_ms_rank_max=t)
    return rows


# the issue's step: wide (14 ms p5-p95, host jitter), its phases tight (1 ms each)
ISSUE_STEPS = [83.0, 85.0, 90.5, 96.0, 98.0]


def issue_summary(**kw) -> pd.DataFrame:
    return summary(phased_job(2, steps=ISSUE_STEPS, computes=spread(69.4), comms=spread(5.7), **kw))


# ---------------------------------------------------------------- 1. the split
def test_the_issue_example_splits_into_compute_capped_comm_and_other():
    r = one(issue_summary(), 2)
    assert r["step_time_ms_median"] == pytest.approx(90.5)
    assert r["exposed_comm_ms"] == pytest.approx(21.1)  # raw step − compute, kept
    assert r["exposed_comm_capped_ms"] == pytest.approx(5.7)  # never more than the collectives alone
    assert r["other_ms"] == pytest.approx(15.4)
    assert r["compute_only_ms_median"] + r["exposed_comm_capped_ms"] + r["other_ms"] == pytest.approx(90.5)
    assert r["tail_comm_ms"] == pytest.approx(1.0)  # the last bucket
    assert r["exposed_comm_other_buckets_ms"] == pytest.approx(4.7)
    assert r["compute_only_ms_p95"] - r["compute_only_ms_p5"] == pytest.approx(1.0)
    assert r["comm_alone_ms_p95"] - r["comm_alone_ms_p5"] == pytest.approx(1.0)


def test_exposed_comm_below_the_collectives_alone_is_all_communication():
    s = step_split(10.9, 9.3, 1.8, 0.9, 2)  # 1.6 ms beyond compute, less than the 1.8 ms all-reduce
    assert (s.exposed_comm, s.other, s.tail) == pytest.approx((1.6, 0.0, 0.9))
    faster = step_split(8.9, 9.0, 1.8, 0.9, 2)  # the step beats compute alone: noise, nothing exposed
    assert faster.exposed_comm == 0.0 and faster.other == pytest.approx(-0.1) and faster.tail == 0.0
    unknown = step_split(10.9, 9.3, None, None, 2)  # no all-reduce time: the split is unknown, not guessed
    assert math.isnan(unknown.exposed_comm) and math.isnan(unknown.other)


def test_one_rank_has_no_exposed_communication_and_the_rest_is_other():
    r = one(summary(job(1, step=10.0, compute=9.2, allreduce=2.0, last=0.5)), 1)
    assert r["exposed_comm_capped_ms"] == 0.0 and r["tail_comm_ms"] == 0.0
    assert r["other_ms"] == pytest.approx(0.8)
    label, text = bottleneck(r)
    assert label == "compute-bound"
    assert "800 µs (8%) that is neither compute nor communication" in text and "bookkeeping" in text


# ---------------------------------------------------------------- 2. findings and figure name the rest
def test_findings_name_the_rest_and_never_compute_slowed_by_nccl():
    s = issue_summary()
    lines = training_findings(s)
    text = " ".join(lines)
    assert "5.70 ms of each 90.5 ms step is exposed communication" in text
    assert ("15.4 ms of the step is neither compute nor the collectives: host-bound or idle time, "
            "DDP bookkeeping") in text
    assert "21.1 ms" not in text and "slowed" not in text
    label, why = bottleneck(one(s, 2))
    assert label == "host-bound" and "15.4 ms more than compute alone" in why and "slowed" not in why
    assert "compute_slowdown_ms" not in SUMMARY_COLUMNS  # no column claims what nothing measured


def test_a_rest_within_noise_is_said_to_be_within_it():
    # step 11.15 = compute 9 + the whole 2 ms all-reduce + 0.15 ms that is neither
    lines = training_findings(summary(job(2, step=11.15, compute=9.0, allreduce=2.0)))
    assert "150 µs of the step is neither compute nor the collectives" in lines[0]
    assert "within the 223 µs noise allowance" in lines[0]  # 2% of 11.15, the phases exact


def test_headline_counts_only_the_capped_exposed_communication():
    h = training_headlines(issue_summary())[0]
    assert "5.70 ms exposed communication of a 90.5 ms step" in h.headline, h.headline
    assert "21.1" not in h.headline + h.reason


def _bars(fig) -> tuple[dict, np.ndarray]:
    """{legend label: heights} of the step-breakdown figure, and the stacked totals per world size."""
    ax = fig.axes[0]
    heights = {c.get_label(): np.array([p.get_height() for p in c.patches]) for c in ax.containers}
    return heights, sum(heights.values())


def test_step_breakdown_figure_splits_the_step_and_names_the_rest():
    s = summary(job(1, step=10.0, compute=9.2, allreduce=2.0),
                phased_job(2, steps=ISSUE_STEPS, computes=spread(69.4), comms=spread(5.7)))
    heights, totals = _bars(plots.fig_step_breakdown(s[s["status"] == "ok"]))
    other = next(k for k in heights if k.startswith("other: neither compute nor the collectives"))
    assert heights[other] == pytest.approx([0.8, 15.4])  # one GPU: the 0.8 ms is "other", not exposed comm
    exposed = [k for k in heights if k.startswith("exposed comm")]
    assert sum(heights[k] for k in exposed) == pytest.approx([0.0, 5.7])
    assert totals == pytest.approx([10.0, 90.5])  # the parts add up to the measured step
    assert not any("slowed" in k for k in heights)


# ---------------------------------------------------------------- 3. a bounds check that can fail
def test_allowance_is_the_phases_spreads_in_quadrature_plus_a_floor():
    assert noise_allowance_ms(100.0, 3.0, 4.0) == pytest.approx(5.0 + NOISE_MIN_FRACTION * 100)
    assert noise_allowance_ms(100.0) == pytest.approx(NOISE_MIN_FRACTION * 100)  # spreads unknown: the floor


def test_a_step_15_percent_over_compute_plus_comm_with_tight_spreads_fails():
    c, r = 50.0, 10.0
    over = 1.15 * (c + r)  # 69 ms
    tight = noise_allowance_ms(over, 0.1, 0.1)
    ok, note = check_bounds(over, c, r, tight, 2)
    assert ok is False and "neither compute nor the collectives" in note
    # the same step against noisy phases (10 ms spreads each) is within their noise
    assert check_bounds(over, c, r, noise_allowance_ms(over, 10.0, 10.0), 2)[0] is True
    # through the summary: a step 15% over with 1 ms phase spreads fails, however wide its own spread
    s = summary(phased_job(2, steps=[60.0, 65.0, over, 72.0, 78.0], computes=spread(c), comms=spread(r)))
    assert bool(one(s, 2)["bounds_ok"]) is False


def test_a_step_within_the_phases_noise_passes():
    s = summary(phased_job(2, steps=spread(61.0), computes=spread(50.0), comms=spread(10.0)))
    r = one(s, 2)  # 1 ms over compute + comm alone; allowance √2 + 2% × 61 = 2.63 ms
    assert r["bounds_allowance_ms"] == pytest.approx(math.sqrt(2) + 1.22)
    assert bool(r["bounds_ok"]) is True and r["bounds_note"] == ""


def test_the_issue_example_fails_the_bounds_check():
    r = one(issue_summary(), 2)
    # the old allowance, 2 × the step's 14.2 ms spread = 28.4 ms, let 15.4 ms through; the phases' is 3.2 ms
    assert r["bounds_allowance_ms"] == pytest.approx(math.sqrt(2) + NOISE_MIN_FRACTION * 90.5)
    assert bool(r["bounds_ok"]) is False
    assert "exceeds compute alone plus the all-reduce alone" in r["bounds_note"]


# ---------------------------------------------------------------- summary.json
def test_summary_json_fields_are_summary_columns_and_carry_the_split():
    assert set(SUMMARY_FIELDS) - {"model", "strategy", "config", "backend", "world_size", "batch_size", "dtype",
                                  "efficiency_vs_plain_1gpu"} <= set(SUMMARY_COLUMNS)
    assert {"exposed_comm_capped_ms", "other_ms"} <= set(SUMMARY_FIELDS)


def test_an_fsdp_row_names_its_own_collectives_and_bookkeeping():
    # FSDP2's collectives-alone phase replays all-gathers and reduce-scatters, not an all-reduce, and the
    # rest of its step is FSDP's bookkeeping: the row's sentences say so in its layout's words
    fsdp = job(2, "fsdp", step=69.0, compute=50.0, allreduce=10.0)
    for r in fsdp:
        r["strategy"] = "fsdp"
    s = summary(job(1), fsdp)
    note = one(s, 2, "fsdp")["bounds_note"]
    assert "exceeds compute alone plus the all-gathers and reduce-scatters alone (50.0 ms + 10.0 ms" in note, note
    text = " ".join(training_findings(s))
    assert "neither compute nor the collectives: host-bound or idle time, FSDP bookkeeping" in text, text
    assert "DDP bookkeeping" not in text
    ddp = " ".join(training_findings(summary(job(1), job(2, step=69.0, compute=50.0, allreduce=10.0))))
    assert "DDP bookkeeping" in ddp and "FSDP" not in ddp  # the baseline keeps its words


def test_one_rank_rows_claim_no_scaling_efficiency():
    # one GPU has no scaling: the baseline says nothing of it, another layout its throughput against the baseline's
    lm = dict(model="gpt", seq_len=1024, n_heads=16, vocab_size=50304)
    ddp = [{**r, **lm} for r in job(1, step=10.0)]
    fsdp = [{**r, **lm, "strategy": "fsdp"} for r in job(1, "fsdp", step=12.5, compute=12.0, allreduce=None)]
    text = " ".join(training_findings(summary(ddp, fsdp)))
    assert "80.0% of plain DDP's throughput on 1 GPU" in text, text
    assert "scaling efficiency" not in text
