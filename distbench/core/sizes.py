"""Message sizes: human-readable parsing and nccl-tests style sweeps."""

from __future__ import annotations

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


def parse_size(value) -> int:
    """'1MB' -> 1_000_000, '1MiB' -> 1_048_576, '1M' -> 1_048_576 (nccl-tests), 8 -> 8."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size must be >= 0, got {value}")
        return value
    m = _SIZE_RE.match(str(value))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(
            f"not a size: {value!r} (use an integer number of bytes or a number with one of "
            "B, KB, MB, GB, TB (decimal), KiB, MiB, GiB, TiB or K, M, G, T (binary))"
        )
    n = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if n != int(n):
        raise ValueError(f"size {value!r} is not a whole number of bytes")
    return int(n)


def size_sweep(min_bytes, max_bytes, step_factor: float = 2) -> list[int]:
    """nccl-tests' -b/-e/-f: min, min*f, min*f^2, ... up to and including max."""
    lo, hi = parse_size(min_bytes), parse_size(max_bytes)
    if lo <= 0 or hi < lo:
        raise ValueError(f"need 0 < min_bytes <= max_bytes, got {lo} and {hi}")
    if step_factor <= 1:
        raise ValueError(f"step_factor must be > 1, got {step_factor}")
    out, s = [], lo
    while s <= hi:
        out.append(int(s))
        s *= step_factor
    return out


def sizes_from_config(comm_cfg: dict) -> list[int]:
    sizes = comm_cfg["sizes"]
    if isinstance(sizes, dict):
        return size_sweep(sizes["min_bytes"], sizes["max_bytes"], sizes.get("step_factor", 2))
    return sorted({parse_size(s) for s in sizes})
