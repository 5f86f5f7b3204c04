"""The largest-batch search's arithmetic, apart from the GPU: from the batch the measured batches'
memory predicts (predicted_largest_batch), stepping away from it until the answer changes, or
without a prediction doubling from a start batch until a step runs out of memory or the cap
(memory.search_max_batch) fits, then halving (when even the start did not fit) or bisection. Torch-free, so that it is tested with a made-up `fits` (tests/
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


def search_largest_batch(start: int, cap: int, fits: Callable[[int], bool | None],
                         guess: int | None = None) -> SearchResult:
    """The largest batch <= cap for which `fits(batch)` is True, trying batches in the harness's
    order: `start` (clamped to the cap), doubling (the last step clamped to the cap, so the cap itself
    is tried), then bisection between the last fit and the first out-of-memory. `fits` returns None
    for a try that failed for another reason, which stops the search.

    With a `guess` (the batch the measured batches' memory predicts: predicted_largest_batch), the
    search starts there instead and gallops away from it (steps of guess/16, doubling) until the
    answer changes, then bisects: the same answer for a memory that grows with the batch, in a few
    tries when the guess is close (a 1.3B GPT's limit of 49 per rank from a guess of 47: 5 tries instead of 9; an MLP
    whose limit is past the cap: 1 instead of 7)."""
    if cap < 1 or start < 1:
        raise ValueError(f"the search needs start >= 1 and cap >= 1, got start={start}, cap={cap}")
    if guess is not None and guess >= 1:
        return _search_from(max(min(int(guess), cap), min(start, cap)), cap, fits)
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


def _search_from(guess: int, cap: int, fits: Callable[[int], bool | None]) -> SearchResult:
    """search_largest_batch from a guess: up from it while batches fit, down while they do not,
    each step twice the last (from guess/16), then bisection."""
    fit, fail = 0, None
    ok = fits(guess)
    if ok is None:
        return SearchResult(None, None, False, failed=True)
    step = max(1, guess // 16)
    if ok:
        fit = guess
        while True:
            if reached_cap(fit, cap, True):
                return SearchResult(fit, None, True)
            b = min(fit + step, cap)
            ok = fits(b)
            if ok is None:
                return SearchResult(fit, None, False, failed=True)
            if not ok:
                fail = b
                break
            fit, step = b, step * 2
    else:
        fail = guess
        while fail > 1:
            b = max(fail - step, 1)
            ok = fits(b)
            if ok is None:
                return SearchResult(None, fail, False, failed=True)
            if ok:
                fit = b
                break
            fail, step = b, step * 2
    while fit and fail - fit > 1:
        mid = (fit + fail) // 2
        ok = fits(mid)
        if ok is None:
            return SearchResult(fit, fail, False, failed=True)
        fit, fail = (mid, fail) if ok else (fit, mid)
    return SearchResult(fit or None, fail, False)


def predicted_largest_batch(measured: list[tuple[int, float]], limit_bytes: float) -> int | None:
    """The batch whose memory reaches `limit_bytes`, on the line through the two largest measured
    (batch, peak reserved bytes) points; None when they do not give a rising line."""
    points = sorted((int(b), float(p)) for b, p in measured if b and p and p == p)
    if len(points) < 2 or not limit_bytes or limit_bytes != limit_bytes:
        return None
    (b1, p1), (b2, p2) = points[-2], points[-1]
    if b2 <= b1 or p2 <= p1:
        return None
    return max(1, int(b2 + (limit_bytes - p2) * (b2 - b1) / (p2 - p1)))
