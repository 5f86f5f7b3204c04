"""One way to write numbers for people (distbench.core.units), used by the report, the console and the findings."""

import pytest

from distbench.core.units import human_bytes, human_gbps, human_time_us, sig3


@pytest.mark.parametrize("us,text", [(4.123, "4.12 µs"), (412.3, "412 µs"), (999.4, "999 µs"), (999.6, "1.00 ms"),
                                     (15321, "15.3 ms"), (2.05e6, "2.05 s"), (3.6e9, "3600 s")])
def test_times_in_the_unit_that_fits(us, text):
    assert human_time_us(us) == text


@pytest.mark.parametrize("x,text", [(8.0, "8.00"), (412.0, "412"), (0.000191, "0.000191"), (2405.2, "2405"), (0, "0")])
def test_three_significant_digits_without_exponents(x, text):
    assert sig3(x) == text


def test_sizes_and_bandwidth():
    assert [human_bytes(n) for n in (8, 1536, 2**27, 2**30)] == ["8 B", "1.5 KiB", "128 MiB", "1 GiB"]
    assert human_gbps(353.2) == "353 GB/s"


def test_report_console_and_findings_agree():
    # the same figure through each path that shows it to people
    from distbench.comm.main import table_line
    from distbench.comm.analysis.findings import human_time_us as findings_time
    from distbench.core.section import time_cell as _time

    row = dict(size_bytes=2**30, count=2**28, dtype="float32", op="all_reduce", timing="events", inplace=True,
               status="ok", message="", correct=True, time_us=7170.3, algbw_gbps=149.7, busbw_gbps=149.7)
    assert _time(7170.3) == findings_time(7170.3) == "7.17 ms" and "7.17 ms" in table_line([row])


def test_a_count_takes_its_noun_in_the_number_it_is():
    from distbench.core.units import count_noun

    assert [count_noun(n, "rank") for n in (0, 1, 2)] == ["0 ranks", "1 rank", "2 ranks"]
    assert count_noun(1.0, "comm job") == "1 comm job"


def test_several_counts_take_one_plural_noun():
    from distbench.core.units import counts_noun

    assert counts_noun([1], "rank") == "1 rank" and counts_noun({2}, "rank") == "2 ranks"
    assert counts_noun([4, 1, 2, 2], "rank") == "1, 2, 4 ranks"
    assert counts_noun([6, 4], "rank", last=" and ") == "4 and 6 ranks"
