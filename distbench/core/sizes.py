"""Message sizes: human-readable parsing and nccl-tests style sweeps."""

from __future__ import annotations

import math
import re

from distbench.core.units import human_bytes  # noqa: F401 - where callers have long found it

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    # nccl-tests' -b/-e flags read K/M/G as binary; we follow that for bare letters.
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
# The largest size: 1 PiB, beyond any one host's memory (the largest hold tens of TiB), so no buffer
# of a valid config is refused by this bound, and every size stays a finite float and an int64 count.
MAX_SIZE_BYTES = 2**50


class SizeTooLarge(ValueError):
    pass


def parse_size(value) -> int:
    """'1MB' -> 1_000_000, '1MiB' -> 1_048_576, '1M' -> 1_048_576 (nccl-tests), 8 -> 8."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must be >= 0, got {value}")
        if value > MAX_SIZE_BYTES:
            raise SizeTooLarge(f"size {value} is above 1 PiB ({MAX_SIZE_BYTES} bytes), the largest allowed")
        return value
    m = _SIZE_RE.match(str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(
            f"not a size: {value!r} (use an integer number of bytes or a number with one of "
            "B, KB, MB, GB, TB (decimal), KiB, MiB, GiB, TiB or K, M, G, T (binary))"
        )
    n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not n <= MAX_SIZE_BYTES:  # also a number of 400 digits, which float() makes infinite
        raise SizeTooLarge(f"size {str(value)[:40]!r} is above 1 PiB ({MAX_SIZE_BYTES} bytes), the largest allowed")
    if n != int(n):
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(n)


# The most distinct sizes one job's sweep measures: the default sweep (8 B to 1 GiB, x2) has 28, nccl-tests'
# finest usual sweep (-f 1.1 over the same range) about 190 before rounding. A cap keeps planning, the
# params and the job's time bounded whatever the config says (a step_factor of 1.0000000001 would
# otherwise make ~10^11 sizes).
MAX_SIZES = 128


def sweep_count(lo: int, hi: int, step_factor: float) -> int:
    """How many sizes lo, lo*f, lo*f^2, ... <= hi there are, counted without building them."""
    if hi < lo:
        return 0
    if not math.isfinite(step_factor):
        return 1
    # the small epsilon keeps an exact power (8 -> 1 GiB by 2) from losing its last size to rounding
    return math.floor(math.log(hi / lo) / math.log(step_factor) + 1e-9) + 1


def min_step_factor(lo: int, hi: int, count: int = MAX_SIZES) -> float:
    """The smallest step_factor whose sweep from lo to hi has at most `count` sizes."""
    return (hi / lo) ** (1 / (count - 1)) if hi > lo and count > 1 else 2.0


def size_sweep(min_bytes, max_bytes, step_factor: float = 2) -> list[int]:
    """nccl-tests' -b/-e/-f: min, min*f, min*f^2, ... up to and including max, rounded down to whole
    bytes and without repeats (a factor near 1 rounds several steps to one size); at most MAX_SIZES."""
    lo, hi = parse_size(min_bytes), parse_size(max_bytes)
    if lo <= 0 or hi < lo:
        raise ValueError(f"need 0 < min_bytes <= max_bytes, got {lo} and {hi}")
    if not step_factor > 1:
        raise ValueError(f"step_factor must be > 1, got {step_factor}")
    n = sweep_count(lo, hi, step_factor)
    if n > MAX_SIZES:
        raise ValueError(f"step_factor {step_factor:g} makes {n:,} sizes from {lo} to {hi} bytes; at most "
                         f"{MAX_SIZES} are allowed (a step_factor of at least {min_step_factor(lo, hi):.4g} here)")
    out, s = [], lo
    for _ in range(n + 1):  # bounded even where float rounding makes the count one off
        if s > hi:
            break
        if not out or int(s) != out[-1]:
            out.append(int(s))
        s *= step_factor
    return out


def sizes_from_config(cfg: dict) -> list[int]:
    sizes = cfg["sizes"]
    if isinstance(sizes, dict):
        return size_sweep(sizes["min_bytes"], sizes["max_bytes"], sizes.get("step_factor", 2))
    out = sorted({parse_size(s) for s in sizes})
    if len(out) > MAX_SIZES:
        raise ValueError(f"{len(out)} distinct sizes; at most {MAX_SIZES} are allowed")
    return out
