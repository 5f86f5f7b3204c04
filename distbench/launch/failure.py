"""The rows a job's launcher writes for the planned points its torchrun job did not finish (no
torch: the launcher runs outside the ranks). Every family's `write_failure_rows` keeps the rows
the job finished and adds these: the point in progress `failed` with the job's reason, every later
point `not_run` (not reached), so each planned point has a row that says what became of it."""

from __future__ import annotations

from typing import Iterable, Sequence

# What a rank's error says when this host cannot run the job at all (no CUDA, too few GPUs:
# distbench.launch.ranks.RankContext), as opposed to a measurement that failed. The launcher keeps
# no result of such a job (distbench.launch.torchrun.HostCannotRun), so a capable host runs it again.
HOST_UNFIT = "this host cannot run this job"


def host_unfit_reason(log_text: str) -> str | None:
    """The rank's reason, when a job's log says this host cannot run it (else None)."""
    for line in log_text.splitlines():
        if f"distbench error: {HOST_UNFIT}" in line:
            return line[line.index(HOST_UNFIT):][:400]
    return None


def not_reached(message: str) -> str:
    """The `message` of a point the job never reached."""
    return f"not reached: the job ended early ({message})"


def unreached_rows(points: Iterable[Sequence[dict]], message: str, *, in_progress: bool = True,
                   status: str = "failed", not_run_message: str | None = None) -> list[dict]:
    """Each point's rows (its trials or steps, without status and message) with their outcome, in
    plan order: the first `status` (failed, or oom) with `message` when it was in progress
    (in_progress=False: it never started, e.g. the pair sweep after an unfinished op sweep), every
    other `not_run` with `not_run_message` (default: not_reached(message))."""
    later = not_run_message if not_run_message is not None else not_reached(message)
    rows = []
    for i, point in enumerate(points):
        outcome = (status, message) if i == 0 and in_progress else ("not_run", later)
        rows += [{**row, "status": outcome[0], "message": outcome[1]} for row in point]
    return rows
