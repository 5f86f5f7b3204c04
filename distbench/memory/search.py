"""The largest-batch search's arithmetic, apart from the GPU: doubling from a start batch until a step
runs out of memory or the cap (memory.search_max_batch) fits, then halving (when even the start did
not fit) or bisection. Torch-free, so that it is tested with a made-up `fits` (tests/
test_memory_search_cap.py); distbench.memory.harness supplies the real one (a step on every rank).

A search that stops at the cap has not found the limit: the largest batch that fits is then at
least the cap, which is why the cap is recorded (memory.csv `search_capped`) and reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# config.schema.yaml's memory.search_max_batch default; the harness's when run alone
DEFAULT_SEARCH_MAX_BATCH = 2**16


@dataclass(frozen=True)
class SearchResult:
    largest_fits: int | None  # None: not even batch 1 fits (or the first try failed)
    first_oom: int | None  # the smallest batch that ran out of memory above largest_fits; None if none did
    capped: bool  # the cap fit, so the search stopped there: the largest batch that fits is at least the cap
    failed: bool = False  # a try failed (not out of memory): the search stopped where it was


def reached_cap(batch: int, cap: int, ok: bool) -> bool:
    """Whether a try that fit ends the search at its cap (the harness marks that row)."""
    return ok and batch >= cap


def search_largest_batch(start: int, cap: int, fits: Callable[[int], bool | None]) -> SearchResult:
    """The largest batch <= cap for which `fits(batch)` is True, trying batches in the harness's
    order: `start` (clamped to the cap), doubling (the last step clamped to the cap, so the cap itself
    is tried), then bisection between the last fit and the first out-of-memory. `fits` returns None
    for a try that failed for another reason, which stops the search."""
    if cap < 1 or start < 1:
        raise ValueError(f"the search needs start >= 1 and cap >= 1, got start={start}, cap={cap}")
    fit, fail = 0, None

    def stopped() -> SearchResult:
        return SearchResult(fit or None, fail, False, failed=True)

    b = min(start, cap)
    while True:  # double until a batch runs out of memory or the cap fits
        ok = fits(b)
        if ok is None:
            return stopped()
        if not ok:
            fail = b
            break
        fit = b
        if reached_cap(b, cap, ok):
            return SearchResult(fit, None, True)
        b = min(b * 2, cap)
    while fit == 0 and fail > 1:  # even the start ran out of memory: halve until one fits
        ok = fits(fail // 2)
        if ok is None:
            return stopped()
        if ok:
            fit = fail // 2
        else:
            fail //= 2
    while fit and fail - fit > 1:  # bisect between the last fit and the first out-of-memory
        mid = (fit + fail) // 2
        ok = fits(mid)
        if ok is None:
            return stopped()
        fit, fail = (mid, fail) if ok else (fit, mid)
    return SearchResult(fit or None, fail, False)
