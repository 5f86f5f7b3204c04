"""The largest-batch search and its confirm on the memory harness's ranks (distbench.memory.harness
says what a try is and how it stays bounded on several ranks; distbench.memory.search is the search's
arithmetic, torch-free): phase `search` rows, one per batch tried, then phase `confirm` rows, the
search's answer run again (CONFIRM_STEPS real steps) and, when that runs out of memory, the batch below,
at most CONFIRM_ATTEMPTS batches."""

from __future__ import annotations

from distbench.core.layout_spec import layout
from distbench.memory.rows import base_row, tried_row
from distbench.memory.search import predicted_largest_batch, search_largest_batch

# The confirm's real steps: a fresh wrapper's first two (harness.FRESH_STEPS) and one more after the
# rebuild, a training run's steady step.
CONFIRM_STEPS = 3
# The confirm steps down from the search's answer at most this many batches (each a few real steps).
CONFIRM_ATTEMPTS = 4


def search_guess(h, measured: list) -> int | None:
    """Where the search starts: the batch at which the measured batches' peak reserved memory would
    reach what this GPU can hold (free + what torch reserves now), the smallest over the ranks (all
    ranks must try the same batches); None (the search starts at the largest measured batch) when
    the measurements give no prediction. Only the number of tries depends on it, not the answer."""
    if len(measured) < 2:  # the same on every rank: each appends every measured row
        return None
    try:
        free, _ = h.torch.cuda.mem_get_info(h.device)
        mine = predicted_largest_batch(measured, free + h.torch.cuda.memory_reserved(h.device)) or 0
    except Exception:  # noqa: BLE001 - no prediction: the plain search
        mine = 0
    guesses = [int(v[0]) for v in h.gather_rows([float(mine)])]
    return min(guesses) if all(g > 0 for g in guesses) else None


def search_skipped(a, h) -> str | None:
    """Why this job has no largest-batch search (None: it has one)."""
    if not h.cuda:
        return "CPU: no device memory limit to search"
    if layout(a.strategy).sharded:
        return ("FSDP: a rank out of memory inside FSDP's all-gather would leave the others waiting; "
                "the search runs DDP configurations only")
    return None


def search(a, h, write, say, measured: list | None = None) -> None:
    """The largest batch at which real steps run (GPU, DDP): phase `search` rows, one per batch
    tried, then the `confirm` rows; on CPU or FSDP one `skipped` row saying why."""
    if not a.search:
        return
    why = search_skipped(a, h)
    if why:
        write([{**base_row(a, h), "phase": "search", "status": "skipped", "message": why}])
        return
    run_search(a, h, write, say, measured)


def run_search(a, h, write, say, measured: list | None = None) -> int | None:
    """The search and its confirm (search's arithmetic: distbench.memory.search), on whatever device
    (search() decides where it runs; tests drive this on CPU ranks). The confirmed batch, or None."""
    def attempt(b) -> bool | None:
        tried = h.try_batch(b)
        write([tried_row(a, h, "search", b, tried)])
        return None if tried.status == "failed" else tried.status == "ok"

    guess = search_guess(h, measured or [])
    found = search_largest_batch(a.batch_sizes[-1], a.search_max_batch, attempt, guess=guess)
    if found.failed or found.largest_fits is None:
        say(f"largest-batch search: {'a try failed' if found.failed else 'not even batch 1 ran'}")
        return None
    confirmed = confirm(a, h, write, found.largest_fits)
    started = f"the search started at {guess if guess else a.batch_sizes[-1]}{', the predicted limit' if guess else ''}"
    if confirmed is None:
        say(f"largest batch: the search found {found.largest_fits} ({started}), but no batch from it down to "
            f"{max(1, found.largest_fits - CONFIRM_ATTEMPTS + 1)} ran its confirm steps")
    else:
        say(f"largest batch that fits: {confirmed} per rank, confirmed by {CONFIRM_STEPS} real steps ({started})"
            + (f" (at least: the search stopped at its cap, {a.search_max_batch})"
               if found.capped and confirmed == found.largest_fits else ""))
    return confirmed


def confirm(a, h, write, batch: int) -> int | None:
    """The search's answer run again from a drained allocator (CONFIRM_STEPS real steps on a fresh
    wrapper), its row recording the peak at that batch; out of memory, the batch below, at most
    CONFIRM_ATTEMPTS batches. The largest batch that confirmed, or None."""
    for b in range(batch, max(0, batch - CONFIRM_ATTEMPTS), -1):
        tried = h.try_batch(b, steps=CONFIRM_STEPS)
        write([tried_row(a, h, "confirm", b, tried)])
        if tried.status == "ok":
            return b
        if tried.status == "failed":  # not a question of memory: stepping down would not answer it
            return None
    return None
