"""Several configurations of one family in one launch (issue 25: time to an answer), each still its
own cached output.

Every training or memory job pays 9-12 s before it measures anything on a GPU host (`import torch`,
CUDA and NCCL set-up, DDP's import of torch._dynamo: benchmarks/results/time-to-answer-h200x2-2026-11-27).
The jobs of one family, backend and world size differ only in what they measure, so the first of
them that Snakemake runs measures all of them in one launch (one `python -m distbench.<family>
--batch FILE` per rank, one process group) and the others find their results waiting:

- Before the first job (the Snakefile's onstart) `write_manifest` lists the benchmark jobs this
  invocation will run, with their params (Snakemake's own view: `--until`, a target such as `quick`
  and cached jobs are all respected). No manifest (a dry run, `--no-hooks`, a cluster executor,
  config `batch_launch: false`): every job launches alone, as before.
- A job first looks for its result staged by an earlier launch (`adopt`): a directory keyed by the
  digest of its rule, wildcards and params (what Snakemake itself reruns a job for), complete only
  with its done.json, written after the configuration's CSV. Adopting moves the files into the
  job's outputs; nothing is measured again.
- Otherwise it launches itself first and the members of its group still to run after it; every
  configuration, its own included, is written to its staged directory.
- A configuration that does not finish (the launch failed, hung past that configuration's own
  time limit, or was interrupted) has no done.json: its job runs it alone, with the failure rows,
  statuses and messages a lone job gives, and a failed launch's unfinished members are never put in
  one launch again (`failed.json`), so a configuration that hangs is not retried in batch after batch.

Torch-free: the Snakefile and the rule scripts import it; the worker loop is distbench.launch.ranks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from distbench.core.io import atomic_write_json

# Under results/<label>/logs/: how this run's jobs were launched, not results (a run under a
# cluster executor, which shares no launch, leaves the same result files).
LAUNCHES = "logs/batch"
MANIFEST = f"{LAUNCHES}/manifest.json"
FAILED = f"{LAUNCHES}/failed.json"
STAGED = "staged"
DONE = "done.json"
BATCH_RULES = ("training_job", "memory_job")  # the families whose jobs share a launch


@dataclass(frozen=True)
class Entry:
    """One benchmark job of this invocation, as Snakemake will run it."""

    rule: str
    wildcards: dict
    params: dict
    output: dict  # output name -> path (csv, placement)
    log: str

    @property
    def digest(self) -> str:
        """What Snakemake reruns a job for (its rule, wildcards and params), hashed."""
        key = json.dumps({"rule": self.rule, "wildcards": self.wildcards, "params": self.params},
                         sort_keys=True, default=str)
        return hashlib.sha256(key.encode()).hexdigest()[:20]

    @property
    def group(self) -> str:
        """Jobs that can share one launch: one family's rule, backend, world size, environment
        and placement (everything that shapes the processes and their group, not the measurement)."""
        p = self.params
        env = {k: p.get(k) for k in ("launch", "nccl_env")}
        env["job_env"] = p.get("job", {}).get("job_env")
        return json.dumps([self.rule, self.wildcards.get("backend"), self.wildcards.get("world_size"), env],
                          sort_keys=True, default=str)

    @property
    def name(self) -> str:
        wc = self.wildcards  # in the plan's order (a manifest read back has its keys sorted)
        return f"{self.rule.removesuffix('_job')} " + "/".join(
            str(wc[k]) for k in ("backend", "model", "world_size", "config") if k in wc)


def entry_of(job) -> Entry:
    """An Entry from Snakemake's view of a job: a Job of the DAG (onstart) or a rule script's
    `snakemake` object (both have rule/name, wildcards, params, output, log)."""
    rule = job.rule if isinstance(job.rule, str) else job.rule.name
    return Entry(rule=rule, wildcards={k: str(v) for k, v in job.wildcards.items()},
                 params=json.loads(json.dumps(dict(job.params.items()), default=str)),
                 output={k: str(v) for k, v in job.output.items()}, log=str(job.log[0]))


def results_dir_of(output_path, template: str) -> Path:
    """results/<label>/ from a job's output path and its template under it (estimate.OUTPUTS)."""
    return Path(output_path).parents[len(Path(template).parts) - 1]


def batchable(entry: Entry) -> bool:
    """One node, no traces: a traced job (torch profiler, nsys around the launch) stays alone."""
    launch = entry.params.get("launch") or {}
    job = entry.params.get("job") or {}
    return int(launch.get("nodes", 1) or 1) == 1 and job.get("profile", "off") in ("off", None)


def write_manifest(results_dir, entries: list[Entry]) -> Path:
    path = Path(results_dir) / MANIFEST
    atomic_write_json(path, [asdict(e) for e in entries if e.rule in BATCH_RULES and batchable(e)])
    (Path(results_dir) / FAILED).unlink(missing_ok=True)  # a new invocation tries every group again
    return path


def clear_manifest(results_dir) -> None:
    (Path(results_dir) / MANIFEST).unlink(missing_ok=True)


def plan_shared_launches(workflow, results_dir, enabled: bool) -> None:
    """The Snakefile's onstart: the manifest of this invocation's training and memory jobs, read
    from Snakemake's DAG (workflow.dag, not a documented API: if reading it fails, every job
    launches alone, as without the manifest)."""
    clear_manifest(results_dir)
    if not enabled:
        return
    try:
        entries = [entry_of(j) for j in workflow.dag.needrun_jobs() if j.rule.name in BATCH_RULES]
    except Exception as e:  # noqa: BLE001 - shared launches save time; the jobs run alone without them
        print(f"distbench: no shared launches ({type(e).__name__}: {e})", file=sys.stderr)
        return
    write_manifest(results_dir, entries)


def read_manifest(results_dir) -> list[Entry]:
    try:
        return [Entry(**e) for e in json.loads((Path(results_dir) / MANIFEST).read_text())]
    except (OSError, ValueError, TypeError):
        return []


def _failed(results_dir) -> set[str]:
    try:
        return set(json.loads((Path(results_dir) / FAILED).read_text()))
    except (OSError, ValueError):
        return set()


def staged_dir(results_dir, entry: Entry) -> Path:
    return Path(results_dir) / STAGED / entry.rule / entry.digest


def staged_outputs(results_dir, entry: Entry) -> dict:
    """Where a batch launch writes this entry's outputs (same file names as the job's own)."""
    d = staged_dir(results_dir, entry)
    return {k: d / Path(v).name for k, v in entry.output.items()}


def done_record(results_dir, entry: Entry) -> dict | None:
    try:
        done = json.loads((staged_dir(results_dir, entry) / DONE).read_text())
    except (OSError, ValueError):
        return None
    return done if done.get("digest") == entry.digest else None


def adopt(results_dir, entry: Entry) -> dict | None:
    """Move a complete staged result into the job's outputs; its done record, or None."""
    done = done_record(results_dir, entry)
    if done is None:
        return None
    staged = staged_outputs(results_dir, entry)
    if not all(p.exists() for p in staged.values()):
        return None
    for key, src in staged.items():
        dst = Path(entry.output[key])
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    for extra in staged_dir(results_dir, entry).iterdir():  # e.g. a memory snapshot beside the CSV
        if extra.name != DONE:
            os.replace(extra, Path(entry.output["csv"]).with_name(extra.name))
    shutil.rmtree(staged_dir(results_dir, entry), ignore_errors=True)
    return done


def members(results_dir, me: Entry) -> list[Entry]:
    """The job itself first, then the jobs of its group this invocation still has to run."""
    failed = _failed(results_dir)
    if me.digest in failed:
        return [me]
    rest = [e for e in read_manifest(results_dir)
            if e.group == me.group and e.digest != me.digest and e.digest not in failed
            and not Path(e.output["csv"]).exists() and done_record(results_dir, e) is None]
    return [me, *rest]


@dataclass(frozen=True)
class Config:
    """One configuration of a batch launch, as the worker reads it (distbench.launch.ranks.run_configs)."""

    argv: list[str]
    done: str  # done.json to write once its outputs are complete
    digest: str
    name: str
    timeout_s: int  # this configuration's own time limit (the job's job_timeout_s)


def write_batch_file(path, configs: list[Config]) -> None:
    atomic_write_json(path, [asdict(c) for c in configs])


def read_batch_file(path) -> list[Config]:
    return [Config(**c) for c in json.loads(Path(path).read_text())]


def mark_done(config: Config, started: float) -> None:
    atomic_write_json(config.done, {"digest": config.digest, "name": config.name,
                                    "wall_s": round(time.time() - started, 2)})


def record_failed(results_dir, entries: list[Entry]) -> None:
    """The unfinished members of a launch that failed: each will run alone."""
    unfinished = {e.digest for e in entries if done_record(results_dir, e) is None}
    atomic_write_json(Path(results_dir) / FAILED, sorted(_failed(results_dir) | unfinished))


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
    if (done := adopt(results_dir, me)) is not None:
        _adopted_log(me, done)
        return f"ok (measured in one launch of {done.get('configurations')} configurations, started by {done.get('launched_by')})"
    group = members(results_dir, me)
    if len(group) == 1:
        return alone()
    launch_dir = results_dir / LAUNCHES / "launches" / me.digest
    shutil.rmtree(launch_dir, ignore_errors=True)
    launch_dir.mkdir(parents=True)
    configs = []
    for e in group:
        shutil.rmtree(staged_dir(results_dir, e), ignore_errors=True)
        staged_dir(results_dir, e).mkdir(parents=True)
        configs.append(Config(family.args(e, staged_outputs(results_dir, e)), str(staged_dir(results_dir, e) / DONE),
                              e.digest, e.name, int(family.timeout_s(e))))
    write_batch_file(launch_dir / "batch.json", configs)
    world_size = int(me.wildcards["world_size"])
    job = TorchrunJob(module=family.module, args=["--batch", str(launch_dir / "batch.json")], world_size=world_size,
                      env=family.env(me), timeout_s=sum(c.timeout_s for c in configs),
                      outputs=[staged_dir(results_dir, me) / DONE], placement_json=launch_dir / "placement.json",
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
            if (d := done_record(results_dir, e)) is not None:
                atomic_write_json(staged_dir(results_dir, e) / DONE,
                                  {**d, "launched_by": me.name, "configurations": len(group),
                                   "log": str(job.log_path), "started": started_at.isoformat(),
                                   "commands": commands})
    if outcome != "ok":
        record_failed(results_dir, group)
    done = adopt(results_dir, me)
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
