"""Several configurations of one family in one launch (a shorter time to an answer), each still its
own cached output.

Every training or memory job pays 9-12 s before it measures anything on a GPU host (`import torch`,
CUDA and NCCL set-up, DDP's import of torch._dynamo: benchmarks/results/time-to-answer-h200x2-2026-11-27).
The jobs of one family, backend and world size differ only in what they measure, so the first of
them that Snakemake runs measures all of them in one launch (one `python -m distbench.<family>
--batch FILE` per rank, one process group) and the others find their results waiting:

- Before the first job (the Snakefile's onstart) `write_manifest` lists the benchmark jobs this
  invocation will run, with their params (Snakemake's own view, distbench.launch.dag_view: `--until`,
  a target such as `quick` and cached jobs are all respected). No manifest (a dry run, `--no-hooks`, a
  cluster executor, config `batch_launch: false`): every job launches alone.
- Everything shared belongs to one Snakemake invocation (`begin_invocation`: the main process's pid and
  start time, in the environment its jobs inherit): the manifest, the failed list and the staged
  results carry its id, and no other invocation uses them. A manifest left by an earlier run (read by a
  run with `--no-hooks`, which writes none) is ignored; staged results an earlier run measured but never
  adopted are discarded at the next onstart, each named (`discard_stale`). Deleting a job's output thus
  always reruns that job: no result measured before this invocation started is adopted.
- A job first looks for its result staged by an earlier launch of this invocation (`adopt`): a
  directory keyed by the digest of its rule, wildcards and params (what Snakemake itself reruns a job
  for), complete only with its done.json, written after the configuration's CSV, which also records the
  code that measured it (`code_version`). Adopted only when digest and code both match this job's;
  anything else is discarded and named in the job's log. Adopting moves the files into the job's
  outputs; nothing is measured again.
- Otherwise it launches itself first and the members of its group still to run after it; every
  configuration, its own included, is written to its staged directory.
- A configuration that does not finish (the launch failed, hung past that configuration's own
  time limit, or was interrupted) has no done.json: its job runs it alone, with the failure rows,
  statuses and messages a lone job gives, and a failed launch's unfinished members are never put in
  one launch again (`failed.json`), so a configuration that hangs is not retried in batch after batch.

Torch-free: the Snakefile and the rule scripts import it; the worker loop is distbench.launch.ranks.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from distbench.core.io import atomic_write_json
from distbench.launch import job_record
from distbench.launch.invocation import code_version, current_invocation, invocation_alive
from distbench.launch.job_record import Entry  # a job as its rule wrote it: job_record owns job.json's format

# Under results/<label>/logs/: how this run's jobs were launched, not results (a run under a
# cluster executor, which shares no launch, leaves the same result files).
LAUNCHES = "logs/batch"
MANIFEST = f"{LAUNCHES}/manifest.json"
FAILED = f"{LAUNCHES}/failed.json"
STAGED = "staged"
DONE = "done.json"


def entry_of(job) -> Entry:
    """An Entry from Snakemake's view of a job: a Job of the DAG (onstart) or a rule script's
    `snakemake` object (both have rule/name, wildcards, params, output, log)."""
    rule = job.rule if isinstance(job.rule, str) else job.rule.name
    return Entry(rule=rule, wildcards={k: str(v) for k, v in job.wildcards.items()},
                 params=json.loads(json.dumps(dict(job.params.items()), default=str)),
                 output={k: str(v) for k, v in job.output.items()}, log=str(job.log[0]))


def read_entry(job_json) -> Entry:
    """The job as its rule wrote it to job.json (distbench.pipeline.run_rules.run_family_job); the
    format is distbench.launch.job_record's."""
    return job_record.read_entry(job_json)


def results_dir_of(output_path, template: str) -> Path:
    """results/<label>/ from a job's output path and its template under it (estimate.OUTPUTS)."""
    return Path(output_path).parents[len(Path(template).parts) - 1]


def batchable(entry: Entry) -> bool:
    """One node, no traces: a traced job (torch profiler, nsys around the launch) stays alone, and so
    does an inspected one (training.inspect: its NCCL environment is its own, read when the
    communicator starts)."""
    launch = entry.params.get("launch") or {}
    job = entry.params.get("job") or {}
    return (int(launch.get("nodes", 1) or 1) == 1 and job.get("profile", "off") in ("off", None)
            and not job.get("inspect"))


def write_manifest(results_dir, entries: list[Entry], invocation: str | None = None) -> Path:
    """The manifest of this invocation's jobs that may share a launch (`entries`: the jobs of the
    families that share launches; a traced or multi-node one is left out)."""
    path = Path(results_dir) / MANIFEST
    atomic_write_json(path, {"invocation": invocation or current_invocation(),
                             "entries": [asdict(e) for e in entries if batchable(e)]})
    (Path(results_dir) / FAILED).unlink(missing_ok=True)  # a new invocation tries every group again
    return path


def clear_manifest(results_dir) -> None:
    (Path(results_dir) / MANIFEST).unlink(missing_ok=True)


def plan_shared_launches(workflow, results_dir, enabled: bool, rules) -> None:
    """The Snakefile's onstart: staged results no running invocation will adopt are discarded, then
    the manifest of this invocation's jobs of `rules` (the families that share launches), read from
    Snakemake's DAG
    (distbench.launch.dag_view: if reading it fails, every job launches alone, as without it)."""
    from distbench.launch.dag_view import planned_jobs

    clear_manifest(results_dir)
    discard_stale(results_dir, current_invocation())
    if not enabled:
        return
    try:
        entries = [entry_of(j) for j, runs in planned_jobs(workflow, tuple(rules)) if runs]
    except Exception as e:  # noqa: BLE001 - shared launches save time; the jobs run alone without them
        print(f"distbench: no shared launches ({type(e).__name__}: {e})", file=sys.stderr)
        return
    write_manifest(results_dir, entries)


def read_manifest(results_dir, invocation: str | None = None) -> list[Entry]:
    """This invocation's manifest; [] when there is none or it is another invocation's."""
    try:
        data = json.loads((Path(results_dir) / MANIFEST).read_text())
        if not isinstance(data, dict) or data.get("invocation") != (invocation or current_invocation()):
            return []
        return [Entry(**e) for e in data["entries"]]
    except (OSError, ValueError, TypeError, KeyError):
        return []


def _failed(results_dir, invocation: str | None = None) -> set[str]:
    try:
        data = json.loads((Path(results_dir) / FAILED).read_text())
        if not isinstance(data, dict) or data.get("invocation") != (invocation or current_invocation()):
            return set()
        return set(data["digests"])
    except (OSError, ValueError, TypeError, KeyError):
        return set()


def staged_dir(results_dir, entry: Entry, invocation: str | None = None) -> Path:
    """Where this invocation's launches stage the entry's result: staged/<invocation>/<rule>/<digest>."""
    return Path(results_dir) / STAGED / (invocation or current_invocation()) / entry.rule / entry.digest


def discard_stale(results_dir, invocation: str) -> list[str]:
    """Remove the staged results of every invocation but this one and those still running (one in
    another terminal on the same results), naming each on stderr: a result measured before this
    invocation started is never adopted (a deleted output is measured again). Returns the names."""
    root = Path(results_dir) / STAGED
    try:
        owners = sorted(root.iterdir())
    except OSError:
        return []
    named = []
    for owner in owners:
        if owner.name == invocation or (owner.is_dir() and not owner.is_symlink() and invocation_alive(owner.name)):
            continue
        named += [f"{_staged_name(d)} ({_staged_state(d)})" for d in _leaf_dirs(owner)]
        if owner.is_dir() and not owner.is_symlink():
            shutil.rmtree(owner, ignore_errors=True)
        else:
            owner.unlink(missing_ok=True)
    if named:
        shown = ", ".join(named[:6]) + (f" and {len(named) - 6} more" if len(named) > 6 else "")
        print(f"distbench: discarded {len(named)} staged result(s) left by an earlier invocation, never adopted "
              f"(only the run that measured a result adopts it): {shown}", file=sys.stderr)
    return named


def _leaf_dirs(top: Path) -> list[Path]:
    """The result directories (those holding files) under one invocation's staged tree (no symlink followed)."""
    if not top.is_dir() or top.is_symlink():
        return []
    return [Path(d) for d, _, files in os.walk(top) if files]


def _read_done(d: Path) -> dict | None:
    try:
        done = json.loads((d / DONE).read_text())
    except (OSError, ValueError):
        return None
    return done if isinstance(done, dict) else None


def _staged_name(d: Path) -> str:
    done = _read_done(d)
    return str(done["name"]) if done and done.get("name") else f"{d.parent.name} {d.name}"


def _staged_state(d: Path) -> str:
    return "measured" if _read_done(d) else "unfinished"


# The outputs a job's rule writes itself before the job runs (its job.json: distbench.pipeline.run_rules),
# never measured, so never staged by a launch.
RULE_WRITTEN = ("job_json",)
JOB_JSON = "job.json"  # a configuration's values in its staged directory (run_job)


def staged_outputs(results_dir, entry: Entry, invocation: str | None = None) -> dict:
    """Where a batch launch writes this entry's outputs (same file names as the job's own)."""
    d = staged_dir(results_dir, entry, invocation)
    return {k: d / Path(v).name for k, v in entry.output.items() if k not in RULE_WRITTEN}


def done_record(results_dir, entry: Entry, invocation: str | None = None) -> dict | None:
    done = _read_done(staged_dir(results_dir, entry, invocation))
    return done if done is not None and done.get("digest") == entry.digest else None


def _unusable(results_dir, entry: Entry, invocation: str, code: dict) -> str | None:
    """Why the entry's staged result may not be adopted, or None."""
    done = _read_done(staged_dir(results_dir, entry, invocation))
    if done is None:
        return "unfinished: its launch ended before it was done"
    if done.get("digest") != entry.digest:
        return f"measured for other params (digest {done.get('digest')}, this job's {entry.digest})"
    then = done.get("code") if isinstance(done.get("code"), dict) else {}
    if then != code:
        changed = [f"{k} {then.get(k)} then, {code.get(k)} now" for k in sorted(set(then) | set(code))
                   if then.get(k) != code.get(k)]
        return f"measured by other code ({'; '.join(changed)})"
    missing = [p.name for p in staged_outputs(results_dir, entry, invocation).values() if not p.exists()]
    return f"incomplete: {', '.join(missing)} missing" if missing else None


def adopt(results_dir, entry: Entry, invocation: str | None = None, code: dict | None = None) -> dict | None:
    """Move a complete staged result of this invocation into the job's outputs, when it was measured
    for this job's digest by this code; its done record, or None. One that may not be adopted is
    discarded and named (stdout: the job's launcher log)."""
    invocation = invocation or current_invocation()
    d = staged_dir(results_dir, entry, invocation)
    if not d.exists():
        return None
    why = _unusable(results_dir, entry, invocation, code or code_version())
    if why is not None:
        print(f"distbench: discarded the staged result of {entry.name} ({d}): {why}; measured again", flush=True)
        _remove_staged(d)
        return None
    done = _read_done(d)
    for key, src in staged_outputs(results_dir, entry, invocation).items():
        dst = Path(entry.output[key])
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    for extra in d.iterdir():  # e.g. a memory snapshot beside the CSV
        if extra.name != DONE:
            os.replace(extra, Path(entry.output["csv"]).with_name(extra.name))
    _remove_staged(d)
    return done


def _remove_staged(d: Path) -> None:
    shutil.rmtree(d, ignore_errors=True)
    for parent in (d.parent, d.parent.parent):  # the rule's and the invocation's, once empty
        try:
            parent.rmdir()
        except OSError:
            break


def members(results_dir, me: Entry, invocation: str | None = None) -> list[Entry]:
    """The job itself first, then the jobs of its group this invocation still has to run."""
    failed = _failed(results_dir, invocation)
    if me.digest in failed:
        return [me]
    rest = [e for e in read_manifest(results_dir, invocation)
            if e.group == me.group and e.digest != me.digest and e.digest not in failed
            and not Path(e.output["csv"]).exists() and done_record(results_dir, e, invocation) is None]
    return [me, *rest]


@dataclass(frozen=True)
class Config:
    """One configuration of a batch launch, as the worker reads it (distbench.launch.ranks.run_configs)."""

    argv: list[str]
    done: str  # done.json to write once its outputs are complete
    digest: str
    name: str
    timeout_s: int  # this configuration's own time limit (the job's job_timeout_s)
    code: dict = field(default_factory=dict)  # code_version() of the launch: an adopting job compares it


def write_batch_file(path, configs: list[Config]) -> None:
    atomic_write_json(path, [asdict(c) for c in configs])


def read_batch_file(path) -> list[Config]:
    return [Config(**c) for c in json.loads(Path(path).read_text())]


def mark_done(config: Config, started: float) -> None:
    atomic_write_json(config.done, {"digest": config.digest, "name": config.name, "code": config.code,
                                    "wall_s": round(time.time() - started, 2)})


def record_failed(results_dir, entries: list[Entry], invocation: str | None = None) -> None:
    """The unfinished members of a launch that failed: each will run alone (in this invocation)."""
    invocation = invocation or current_invocation()
    unfinished = {e.digest for e in entries if done_record(results_dir, e, invocation) is None}
    atomic_write_json(Path(results_dir) / FAILED,
                      {"invocation": invocation, "digests": sorted(_failed(results_dir, invocation) | unfinished)})


@dataclass(frozen=True)
class Family:
    """What the runner needs from a family: its module, and for one entry the harness's arguments
    (writing to the given outputs), the job's environment and its time limit."""

    module: str
    args: Callable[[Entry, dict], list[str]]
    env: Callable[[Entry], dict]
    timeout_s: Callable[[Entry], int]


def run_job(me: Entry, results_dir, family: Family, alone) -> str:
    """Run the job `me` (its outputs exist afterwards, as `alone()` leaves them): adopt its staged
    result, or launch it with the rest of its group, or, where neither gives a result, `alone()`."""
    from distbench.launch.cluster import Launch
    from distbench.launch.torchrun import TorchrunJob, run_torchrun_job

    results_dir = Path(results_dir)
    invocation = current_invocation()
    if (done := adopt(results_dir, me, invocation)) is not None:
        _adopted_log(me, done)
        return f"ok (measured in one launch of {done.get('configurations')} configurations, started by {done.get('launched_by')})"
    group = members(results_dir, me, invocation)
    if len(group) == 1:
        return alone()
    launch_dir = results_dir / LAUNCHES / "launches" / me.digest
    shutil.rmtree(launch_dir, ignore_errors=True)
    launch_dir.mkdir(parents=True)
    configs = []
    for e in group:
        staged = staged_dir(results_dir, e, invocation)
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        # each configuration's values as its rule would write them (its own job.json may not exist yet):
        # the ranks read them from JSON (--params), not from flags
        outputs = {**staged_outputs(results_dir, e, invocation), "job_json": staged / JOB_JSON}
        job_record.write_job_json(outputs["job_json"], e)
        configs.append(Config(family.args(e, outputs), str(staged / DONE),
                              e.digest, e.name, int(family.timeout_s(e)), code_version()))
    write_batch_file(launch_dir / "batch.json", configs)
    world_size = int(me.wildcards["world_size"])
    job = TorchrunJob(module=family.module, args=["--batch", str(launch_dir / "batch.json")], world_size=world_size,
                      env=family.env(me), timeout_s=sum(c.timeout_s for c in configs),
                      outputs=[staged_dir(results_dir, me, invocation) / DONE],
                      placement_json=launch_dir / "placement.json",
                      log_path=launch_dir / "launch.log", write_failure=lambda message, status: None,
                      launch=Launch.from_params(me.params.get("launch"), world_size))
    started_at = datetime.now(timezone.utc)
    try:
        outcome = run_torchrun_job(job)
    finally:
        # the launch's command lines (its placement file's provenance): every configuration measured
        # in it lists them as its own, so the report's appendix shows the launch (once, by its log)
        commands = _launch_commands(job.placement_json)
        for e in group:  # what each finished configuration says of itself (read when its job adopts it)
            if (d := done_record(results_dir, e, invocation)) is not None:
                atomic_write_json(staged_dir(results_dir, e, invocation) / DONE,
                                  {**d, "launched_by": me.name, "configurations": len(group),
                                   "log": str(job.log_path), "started": started_at.isoformat(),
                                   "commands": commands})
    if outcome != "ok":
        record_failed(results_dir, group, invocation)
    done = adopt(results_dir, me, invocation)
    if done is None:  # it did not finish in the shared launch: measured alone, with a lone job's failure rows
        return alone()
    _adopted_log(me, done, _launch_timeline(launch_dir / "placement.json"))
    return f"ok (measured first of {len(group)} configurations in one launch)" + (
        "" if outcome == "ok" else f"; the launch then failed ({outcome}): its unfinished configurations run alone")


def _launch_commands(placement_json: Path) -> list[str]:
    try:
        return list(json.loads(Path(placement_json).read_text())["provenance"].get("commands") or [])
    except (OSError, ValueError, KeyError, TypeError):
        return []


def _launch_timeline(placement_json: Path) -> dict | None:
    try:
        return json.loads(placement_json.read_text())["provenance"].get("timeline")
    except (OSError, ValueError, KeyError):
        return None


def _provenance_extra(placement_json, done: dict, timeline: dict | None) -> None:
    path = Path(placement_json)
    data = json.loads(path.read_text())
    prov = data.setdefault("provenance", {})
    prov["batch"] = {k: done.get(k) for k in ("launched_by", "configurations", "wall_s", "log")}
    prov["commands"] = list(done.get("commands") or [])  # the shared launch's, as a shell reads them
    if timeline is not None:
        prov["timeline"] = timeline
    atomic_write_json(path, data)


def _adopted_log(me: Entry, done: dict, timeline: dict | None = None) -> None:
    """The adopted job's provenance (its placement file) and log: where it was measured, then that
    launch's log (every configuration's lines)."""
    from distbench.launch.torchrun import record_provenance

    started = datetime.fromisoformat(done["started"]) if done.get("started") else datetime.now(timezone.utc)
    record_provenance(me.output["placement"], started, float(done.get("wall_s") or 0.0), "ok")
    _provenance_extra(me.output["placement"], done, timeline)
    source = Path(done.get("log", ""))
    text = source.read_text(errors="replace") if source.is_file() else ""
    Path(me.log).parent.mkdir(parents=True, exist_ok=True)
    Path(me.log).write_text(
        f"# distbench: measured in one launch of {done.get('configurations')} configurations started by job "
        f"{done.get('launched_by')} ({done.get('wall_s')} s for this one); that launch's log ({source}) follows\n" + text)
