"""A cached job whose values are not this config's: never reused as if they were.

Snakemake reruns a job whose params changed by comparing them with its own record of them
(.snakemake/metadata). Without that record (the folder deleted to clear a lock, results copied
from another checkout, --drop-metadata) it only compares times, so a job measured with other
values (other sizes, another NCCL setting) is kept and reported as this config's: on a lent 2x H200,
after `.snakemake` was removed, the quick answer judged a job another config's sweep had made.

Every job's rule writes the values it ran with to its job.json (distbench.launch.job_record.Entry).
Once Snakemake's DAG is final, each job it is about to reuse is held against that file: values that
differ stop a run before its first job (a dry run says so), naming the job, the keys and the command
that reruns exactly those jobs. Torch-free.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from distbench.launch.job_record import JobRecordError, read_json_file

# The params of a job rule that are its values (rules/families.smk): what it measures, where its
# ranks run, and its entry point
COMPARED = ("job", "launch", "entry")


@dataclass(frozen=True)
class StaleJob:
    """A cached job whose job.json records other values than the ones its rule has now."""

    result: str  # the job's result file, as `--forcerun` takes it
    job_json: str
    keys: tuple[str, ...]  # the values that differ: "job.sizes", "launch.nodes"; "job.json" when unreadable


def _plain(value):
    """A value as job.json holds it (JSON's types: tuples are lists, keys are strings)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def changed_keys(recorded: dict, current: dict, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two JSON objects (one level into each mapping)."""
    out = []
    for key in sorted(set(recorded) | set(current)):
        a, b = recorded.get(key, KeyError), current.get(key, KeyError)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and not prefix:
            out.extend(changed_keys(a, b, f"{key}."))
        else:
            out.append(f"{prefix}{key}")
    return out


def stale_job(result: str, job_json: str, params: dict) -> StaleJob | None:
    """The job as stale if its job.json holds values other than `params` (its rule's, now); None when
    they agree or there is no job.json to compare (Snakemake's own triggers hold then)."""
    if not os.path.lexists(job_json):
        return None
    try:  # the job record's own reader: a regular file of at most 1 MiB (a FIFO there never blocks)
        recorded = read_json_file(job_json)
    except JobRecordError:
        return StaleJob(result, job_json, ("job.json",))
    recorded = recorded.get("params") if isinstance(recorded, dict) else None
    if not isinstance(recorded, dict):
        return StaleJob(result, job_json, ("job.json",))
    now = _plain({k: params[k] for k in COMPARED if k in params})
    keys = changed_keys({k: recorded.get(k, KeyError) for k in now}, now)
    return StaleJob(result, job_json, tuple(keys)) if keys else None


def stale_reused(planned: Iterable[tuple[object, bool]]) -> list[StaleJob]:
    """Of Snakemake's planned jobs ((job, runs): distbench.launch.dag_view.planned_jobs), those it
    reuses whose job.json records other values than their rule's params now."""
    out = []
    for job, runs in planned:
        if runs:
            continue
        job_json = getattr(job.output, "job_json", None)
        names = [n for n in COMPARED if hasattr(job.params, n)]
        if job_json is None or not names:
            continue
        result = next((str(f) for f in job.output if str(f) != str(job_json)), str(job_json))
        found = stale_job(result, str(job_json), {n: getattr(job.params, n) for n in names})
        if found is not None:
            out.append(found)
    return out


def stale_message(stale: list[StaleJob], targets: Iterable[str] = ()) -> str:
    """Why a run stops: each stale job, what differs, and the command that reruns exactly them."""
    if not stale:
        return ""
    lines = [f"distbench: {len(stale)} cached job(s) were measured with other values than this config gives, "
             "and Snakemake has no record of their values to notice it (.snakemake/metadata is missing or was "
             "made elsewhere), so it would reuse them as this config's:"]
    for s in stale[:10]:
        lines.append(f"  {s.result}: {', '.join(s.keys)} differ(s) from {s.job_json}")
    if len(stale) > 10:
        lines.append(f"  and {len(stale) - 10} more")
    command = " ".join(["snakemake --cores 1", *targets, "--forcerun", *(s.result for s in stale)])
    lines.append(f"Rerun them with this config's values: {command}")
    return "\n".join(lines)
