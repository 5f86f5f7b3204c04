"""How every number is written for people: the report, the console and the findings use these,
so a figure reads the same wherever it appears. (CSV and JSON files keep full precision.)

- sizes in binary units: 8 B, 1.5 KiB, 128 MiB, 1 GiB;
- times in the unit that fits, three significant digits: 4.12 µs, 412 µs, 15.3 ms, 2.05 s;
- bandwidth in GB/s (10^9 bytes/s, as nccl-tests), three significant digits: 0.125, 41.2, 353;
- fractions as percentages: 0.874 -> 87%.
"""

from __future__ import annotations

import math


def sig3(x: float) -> str:
    """Three significant digits, no exponent: 4.12, 41.2, 412, 4120, 0.000191."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    if abs(x) >= 999.5:
        return f"{x:.0f}"
    # the decimal exponent after rounding to three digits (9.996 rounds to 10.0: two decimals, not three);
    # a fixed-point format then, never the exponent form '2.00e-06' that '.3g' gives below 0.0001
    exponent = int(f"{x:.2e}".split("e")[1])
    return f"{x:.{max(0, 2 - exponent)}f}"


def human_bytes(n) -> str:
    """Binary units: 8 B, 1.5 KiB, 976.6 KiB, 128 MiB, 1 GiB. The unit is chosen after rounding, so
    a size just under a unit (1 MiB rounded down to a multiple of 6 ranks, 1048560 B) reads "1 MiB"
    as 1048576 B does, never "1024 KiB"."""
    n = int(n)
    if abs(n) < 2**10:
        return f"{n} B"
    for unit, scale in (("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40)):
        text = f"{n / scale:.1f}"
        if abs(float(text)) < 2**10 or unit == "TiB":
            return text.removesuffix(".0") + f" {unit}"
    raise AssertionError("unreachable")


def human_time_us(us) -> str:
    """A time given in µs, in µs, ms or s: 4.12 µs, 412 µs, 15.3 ms, 2.05 s."""
    us = float(us)
    if abs(us) < 999.5:
        return f"{sig3(us)} µs"
    if abs(us) < 999.5e3:
        return f"{sig3(us / 1e3)} ms"
    return f"{sig3(us / 1e6)} s"


def human_gbps(gbps) -> str:
    """A bandwidth in GB/s (10^9 B/s), three significant digits: '353 GB/s'."""
    return f"{sig3(gbps)} GB/s"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 22nd, 101st, 111th."""
    n = int(n)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def every_nth(n: int, noun: str) -> str:
    """'every size' (1), 'every other size' (2), 'every 3rd size', 'every 21st size'."""
    n = int(n)
    return f"every {noun}" if n == 1 else f"every other {noun}" if n == 2 else f"every {ordinal(n)} {noun}"


def count_noun(n, noun: str) -> str:
    """'1 rank', '2 ranks', '0 jobs': a count and its noun in the number it takes (a plain 's' plural)."""
    n = int(n)
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def counts_noun(values, noun: str, last: str = ", ") -> str:
    """'1 rank', '1, 2 ranks', with last=' and ': '4 and 6 ranks': distinct counts, ascending, and their noun
    in the number they take."""
    vals = [str(v) for v in sorted({int(v) for v in values})]
    if len(vals) == 1:
        return count_noun(vals[0], noun)
    return f"{', '.join(vals[:-1])}{last}{vals[-1]} {noun}s"


def pct(fraction, digits: int = 0) -> str:
    """A fraction as a percentage: pct(0.874) == "87%", pct(0.874, 1) == "87.4%"."""
    return f"{100 * float(fraction):.{digits}f}%"
