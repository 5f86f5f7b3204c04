"""How many benchmark jobs a run will start and about how long they will take, printed before the
first job (rules/common.smk), so a user knows whether to wait or to come back later.

Which jobs, and which of them run, is Snakemake's own answer, not a walk of its own: the benchmark
jobs of this invocation's DAG and its rerun decisions (distbench.launch.dag_view: a missing output,
changed params (a config value a job reads), a changed input such as a `file:` traffic matrix, `--until`, a
target such as `quick`), read once the DAG is final, in a dry run as in a real run.

Each benchmark rule records its job's wall time with Snakemake's `benchmark:` directive (a tsv whose
column `s` is seconds) under results/<label>/benchmarks/ (BENCHMARKS). A job's estimate is the median
of those earlier times for the same job (any run label), else the median of its family and backend
in the history, else a stated default (each family's manifest's estimate_defaults: DEFAULTS). The benchmark rules take all cores, so the jobs run
one after another and the run's time is their sum. A job counts as it launches: in a shared launch
(batch_launch, a family that shares launches) all but the first of a group without the launch's fixed
cost; alone (a traced, inspected or multi-node job: launches_alone, the launcher's own rule; every job
without shared launches) with it, added to a time measured in a shared launch. The history is read
from regular files at the templates' own depth only (no symlink followed, capped in entries and bytes:
it runs before every run), and a time that is not finite, not positive or beyond a week is ignored and named.
Torch-free and pandas-free.
"""

from __future__ import annotations

import json
import math
import os
import re
import string
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from distbench.core.manifest import EstimateDefault
from distbench.pipeline.families import manifests
from distbench.pipeline.recorded_times import MAX_FILE_BYTES, job_seconds, read_seconds, read_small

# The families the estimate counts (their manifests say `estimated`: distbench.core.manifest), each
# under the name of its directory below benchmarks/ (a family's own name, or its job's): where its rule
# writes its benchmark tsv (under results/<label>/), the result Snakemake finds in place when the job is
# cached, and its rule. The rules use the same manifests, so the estimate reads exactly what they write.
_ESTIMATED = {Path(m.benchmark).parts[1]: m for m in manifests() if m.estimated}
BENCHMARKS = {name: m.benchmark for name, m in _ESTIMATED.items()}
OUTPUTS = {name: m.job_file() for name, m in _ESTIMATED.items()}
FAMILIES = tuple(BENCHMARKS)
# Snakemake's benchmark rules and the family each measures: the DAG's jobs of these rules are the
# estimate's jobs.
RULE_FAMILIES = {m.job_rule: name for name, m in _ESTIMATED.items()}
# What the history may cost before a run: directory entries looked at under results/ in all (and the
# bytes of one file: distbench.pipeline.recorded_times.MAX_FILE_BYTES).
MAX_ENTRIES = 20_000


# The one job of an estimated family without a plan (the NCCL probe: no wildcards of a job, one per
# run): it runs NCCL only, at the world size the rules give it (probe_world_size).
SINGLE_JOB_BACKEND = "nccl"
SINGLE_JOBS = tuple(name for name, m in _ESTIMATED.items() if not m.plan)


def probe_benchmark(world_size: int) -> str:
    """The benchmark tsv (under results/<label>/) of the one job of a family without a plan (the NCCL
    probe): it runs NCCL only."""
    return BENCHMARKS[SINGLE_JOBS[0]].format(backend=SINGLE_JOB_BACKEND, world_size=world_size)


def _fields(template: str) -> tuple[str, ...]:
    return tuple(f for _, f, _, _ in string.Formatter().parse(template) if f)


# Each family's benchmark tsv below benchmarks/<name>/, as a pattern of its wildcards (a world size
# is digits), and its wildcards besides backend and world size, in the template's order: a job's key.
_BELOW = {name: "/".join(Path(tsv).parts[2:]) for name, tsv in BENCHMARKS.items()}
_PATTERNS = {name: re.compile("".join(re.escape(lit) + (f"(?P<{f}>[0-9]+)" if f == "world_size" else
                                                         f"(?P<{f}>[^/]+)" if f else "")
                                      for lit, f, _, _ in string.Formatter().parse(below)))
             for name, below in _BELOW.items()}
KEY_FIELDS = {name: tuple(f for f in _fields(below) if f not in ("backend", "world_size"))
              for name, below in _BELOW.items()}


# Default per-job wall time, keyed by (host, family, backend); host is "gpu" when the plan has GPUs:
# each family's manifest states its own (estimate_defaults), with where each figure came from
# (measured after one-node jobs started their ranks directly: distbench.launch.torchrun).
DEFAULTS: dict[tuple[str, str, str], EstimateDefault] = {
    (host, name, backend): d for name, m in _ESTIMATED.items() for (host, backend), d in m.estimate_defaults.items()}
# With batch_launch (distbench.launch.batch) the jobs of a family that shares launches, of one backend
# and world size, share a launch: its first job pays the launch's fixed cost, the others only their
# own measurement, this much less than the default above ({(host, family): seconds}: each family's
# manifest states its launch_cost_s).
LAUNCH_COST_S = {(host, name): s for name, m in _ESTIMATED.items() for host, s in m.launch_cost_s.items()}
BATCHED = tuple(name for name, m in _ESTIMATED.items() if m.shares_launches)


@dataclass(frozen=True)
class JobKey:
    """A job as the estimate knows it: its family, backend, world size and its other wildcards, in the
    order of its family's benchmark template (KEY_FIELDS)."""

    family: str
    backend: str
    world_size: int
    rest: tuple[str, ...] = ()

    @classmethod
    def of(cls, family: str, wildcards) -> JobKey:
        """The key of a job of `family` (the estimate's name) from its wildcards."""
        return cls(family, str(wildcards["backend"]), int(wildcards["world_size"]),
                   tuple(str(wildcards[f]) for f in KEY_FIELDS[family]))

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "world_size": self.world_size,
                **dict(zip(KEY_FIELDS[self.family], self.rest))}


@dataclass(frozen=True)
class JobEstimate:
    key: JobKey
    cached: bool
    seconds: float  # 0 for a cached job
    source: str  # "job history", "family history", "default"; "cached" for a cached job
    # it launches alone though its family shares launches (launches_alone): it pays the launch's fixed cost
    alone: bool = False


@dataclass(frozen=True)
class Estimate:
    jobs: tuple[JobEstimate, ...]
    ignored: tuple[str, ...] = ()  # recorded times not used, each "<file>: <why>" (History.ignored)

    @property
    def to_run(self) -> list[JobEstimate]:
        return [j for j in self.jobs if not j.cached]

    @property
    def cached(self) -> int:
        return sum(j.cached for j in self.jobs)

    @property
    def seconds(self) -> float:
        """Sequential: every benchmark rule takes all cores, so its jobs never overlap."""
        return sum(j.seconds for j in self.to_run)

    @property
    def from_history(self) -> int:
        return sum(j.source in ("job history", "family history") for j in self.to_run)

    @property
    def from_defaults(self) -> int:
        return sum(j.source == "default" for j in self.to_run)

    def per_family(self) -> dict[str, tuple[int, float]]:
        """{family: (jobs to run, seconds)}, families with jobs to run only, in FAMILIES' order."""
        out: dict[str, tuple[int, float]] = {}
        for j in sorted(self.to_run, key=lambda j: FAMILIES.index(j.key.family)):
            n, s = out.get(j.key.family, (0, 0.0))
            out[j.key.family] = (n + 1, s + j.seconds)
        return out

    def message(self) -> str:
        total = len(self.jobs)
        head = f"distbench: {total} benchmark jobs planned, {self.cached} cached, {len(self.to_run)} to run"
        if not self.to_run:
            return head + "."
        head += (f", about {human_duration(self.seconds)} one after another ({self.from_history} from earlier "
                 f"runs, {self.from_defaults} by default figures)")
        parts = [f"{fam} {n} ({human_duration(s)})" for fam, (n, s) in self.per_family().items()]
        return head + "\ndistbench: to run: " + ", ".join(parts) + self.ignored_note()

    def ignored_note(self) -> str:
        if not self.ignored:
            return ""
        shown = "; ".join(self.ignored[:5]) + (f"; and {len(self.ignored) - 5} more" if len(self.ignored) > 5 else "")
        return (f"\ndistbench: {len(self.ignored)} recorded job time(s) not used for the estimate (a time is a finite "
                f"number of seconds above 0 and below a week, read from a regular file of at most "
                f"{MAX_FILE_BYTES // 1024} KiB): {shown}")


def human_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "an unknown time"
    if seconds < 90:
        return f"{round(seconds)} s"
    minutes = seconds / 60
    return f"{round(minutes)} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def job_key(rule: str, wildcards, probe_world_size: int = 0) -> JobKey | None:
    """The estimate's key of one of Snakemake's jobs (its rule and wildcards), or None for a job that
    is no benchmark job: another rule, or the one job of a family without a plan (the NCCL probe)
    where it launches nothing (probe_world_size below 2: nccl_probe_params)."""
    family = RULE_FAMILIES.get(rule)
    if family is None:
        return None
    if family in SINGLE_JOBS:
        return JobKey(family, SINGLE_JOB_BACKEND, probe_world_size) if probe_world_size >= 2 else None
    return JobKey.of(family, wildcards)


def launches_alone(job) -> bool:
    """Whether one of Snakemake's jobs (of the DAG) launches alone although its family shares launches:
    a traced, inspected or multi-node job, as distbench.launch.batch.batchable
    decides for the launcher itself. False for a family that never shares launches (its jobs always
    launch alone: their defaults and history hold the launch) and where the job's params cannot be
    read (the estimate then counts it as sharing, its family's usual way)."""
    rule = job.rule if isinstance(job.rule, str) else getattr(job.rule, "name", "")
    if RULE_FAMILIES.get(rule) not in BATCHED:
        return False
    from distbench.launch.batch import batchable, entry_of

    try:
        return not batchable(entry_of(job))
    except (AttributeError, KeyError, TypeError, ValueError):
        return False


def key_of(family: str, rel: tuple[str, ...]) -> JobKey | None:
    """A job's key from its tsv's path below benchmarks/<family>/ (its BENCHMARKS template), or None."""
    found = _PATTERNS[family].fullmatch("/".join(rel))
    return JobKey.of(family, found.groupdict()) if found else None


def _tsv_files(results_dir: Path, budget: list[int]) -> Iterable[tuple[str, tuple[str, ...], Path]]:
    """(family, parts below <label>/benchmarks/<family>/, path) of every regular .tsv at its template's
    depth (BENCHMARKS), walking real directories only, at most budget[0] entries in all."""

    def entries(d: Path):
        try:
            with os.scandir(d) as it:
                for e in it:
                    if budget[0] <= 0:
                        return
                    budget[0] -= 1
                    yield e
        except OSError:
            return

    def walk(d: Path, depth: int, rel: tuple[str, ...]):
        for e in entries(d):
            if depth > 1 and e.is_dir(follow_symlinks=False):
                yield from walk(Path(e.path), depth - 1, (*rel, e.name))
            elif depth == 1 and e.name.endswith(".tsv") and e.is_file(follow_symlinks=False):
                yield (*rel, e.name), Path(e.path)

    for label in entries(Path(results_dir)):
        if not label.is_dir(follow_symlinks=False):
            continue
        for family in FAMILIES:
            top = Path(label.path) / "benchmarks" / family
            if top.is_dir() and not top.is_symlink() and not top.parent.is_symlink():
                depth = len(Path(BENCHMARKS[family]).parts) - 2  # below benchmarks/<family>/
                for rel, path in walk(top, depth, ()):
                    yield family, rel, path


@dataclass
class History:
    """Every usable recorded job time under results/*/benchmarks/ (any run label), by job key, and
    what was not used, each named."""

    times: dict
    ignored: list[str]
    # {key: [whether each of times[key] was measured in a shared launch (without the launch's fixed cost)]}
    shared: dict = field(default_factory=dict)
    # {key: [each of times[key]'s job weight (its family's estimate_weight of the params its job.json
    # records; None where unread)]}: a time is scaled to the job estimated (scaled_seconds)
    weights: dict = field(default_factory=dict)

    def seconds(self, key: JobKey, launch_cost_s: float) -> list[float]:
        """The job's recorded times as a job that launches alone takes them: a time measured in a shared
        launch with the launch's fixed cost added (0: as recorded)."""
        flags = self.shared.get(key) or [False] * len(self.times.get(key, []))
        return [t + launch_cost_s if in_launch else t for t, in_launch in zip(self.times.get(key, []), flags)]

    def scaled_seconds(self, key: JobKey, launch_cost_s: float, weight: float, fixed_s: float) -> list[float]:
        """seconds(), each scaled to a job of `weight` (job_weight): the part beyond the launch's fixed
        cost (fixed_s) by weight / the recorded job's weight, as default_seconds scales a default (a
        compiled job after an eager one's time, gpt 2.7b after 1.3b's). A time whose job's weight is
        unknown (no job.json) is taken as measured at weight 1."""
        recorded = self.weights.get(key) or [None] * len(self.times.get(key, []))
        out = []
        for t, w in zip(self.seconds(key, launch_cost_s), recorded):
            ratio = weight / (w or 1.0)
            fixed = min(fixed_s, t)
            out.append(fixed + (t - fixed) * ratio)
        return out


def history(results_dir: Path) -> History:
    out: dict[JobKey, list[float]] = defaultdict(list)
    shared: dict[JobKey, list[bool]] = defaultdict(list)
    weights: dict[JobKey, list[float | None]] = defaultdict(list)
    ignored: list[str] = []
    budget = [MAX_ENTRIES]
    for family, rel, tsv in _tsv_files(Path(results_dir), budget):
        key, seconds = key_of(family, rel), read_seconds(tsv, ignored)
        label_dir = Path(results_dir) / tsv.relative_to(results_dir).parts[0]
        if key is not None and seconds is not None:
            # Snakemake's time includes any wait for the host lock (distbench.launch.hostlock): not the job's
            seconds = max(seconds - lock_wait_seconds(label_dir, key), 1e-3)
        own = None
        if key is not None and family in BATCHED:
            # measured in a shared launch: the Snakemake job only adopted it (or launched the
            # whole group): the configuration's own time is in its placement file
            own = batch_seconds(label_dir, key, ignored)
            seconds = own or seconds
        if key is not None and seconds is not None:
            out[key].append(seconds)
            shared[key].append(own is not None)
            weights[key].append(recorded_weight(label_dir, key))
    if budget[0] <= 0:
        ignored.append(f"{results_dir}: more than {MAX_ENTRIES} entries; the rest not read")
    return History(out, ignored, shared, weights)


def _placement_of(label_dir: Path, key: JobKey) -> Path:
    return label_dir / Path(OUTPUTS[key.family].format(**key.wildcards)).with_name("placement.json")


def _job_file_value(label_dir: Path, key: JobKey, file: str, *names: str):
    """[names...] of a small JSON file in the job's directory (placement.json, job.json), or None; read
    only inside the run's own directory (no directory on the way may be a link elsewhere) and only a
    small regular file."""
    path = _placement_of(label_dir, key).with_name(file)
    rel = path.parent.relative_to(label_dir).parts
    inside = os.path.realpath(path.parent) == os.path.join(os.path.realpath(label_dir), *rel)
    data = read_small(path) if inside else None
    try:
        value = json.loads(data) if data else None
        for name in names:
            value = value[name] if value is not None else None
    except (ValueError, KeyError, TypeError):
        return None
    return value


def _provenance_value(label_dir: Path, key: JobKey, *names: str):
    """provenance[names...] of a job's placement file, or None (_job_file_value)."""
    return _job_file_value(label_dir, key, "placement.json", "provenance", *names)


def recorded_weight(label_dir: Path, key: JobKey) -> float | None:
    """The weight (params_weight) of the job a recorded time measured, from the params its job.json
    records; None where there is none to read (a job from before job.json, an unreadable file)."""
    record = _job_file_value(label_dir, key, "job.json")
    try:
        return params_weight(key.family, record["wildcards"], record["params"].get("job") or {})
    except (KeyError, TypeError, AttributeError):
        return None


def lock_wait_seconds(label_dir: Path, key: JobKey) -> float:
    """How long the job waited for the host lock before it started (provenance.host_lock.waited_s), or 0."""
    seconds = job_seconds(_provenance_value(label_dir, key, "host_lock", "waited_s"))
    return seconds or 0.0


def batch_seconds(label_dir: Path, key: JobKey, ignored: list[str] | None = None) -> float | None:
    """A job's own seconds in a shared launch (placement.json provenance.batch.wall_s), or None."""
    placement = _placement_of(label_dir, key)
    value = _provenance_value(label_dir, key, "batch", "wall_s")
    if value is None:
        return None
    seconds = job_seconds(value)
    if seconds is None and ignored is not None:
        ignored.append(f"{placement}: batch wall_s {str(value)[:24]}")
    return seconds


def default_seconds(key: JobKey, gpus: int, weight: float = 1.0) -> float:
    """The stated figure of the job's host, family and backend; for a pair the table lacks (e.g. Gloo
    jobs of a family that states only NCCL's on a GPU host), the slowest figure of that host: a guess,
    counted among the defaults. `weight` (job_weight) scales the part beyond the launch's fixed cost."""
    host = "gpu" if gpus else "cpu"
    d = DEFAULTS.get((host, key.family, key.backend))
    seconds = (d.at(key.world_size) if d is not None
               else max(d.at(key.world_size) for (h, _, _), d in DEFAULTS.items() if h == host))
    launch = min(LAUNCH_COST_S.get((host, key.family), 0.0), seconds)
    return launch + (seconds - launch) * weight


def params_weight(family: str, wildcards: dict, job_params: dict) -> float:
    """A job's weight from its wildcards and its job params: its family's estimate_weight
    (distbench.core.manifest), 1 where the family states none or the params cannot be read."""
    m = _ESTIMATED.get(family)
    if m is None or not m.estimate_weight:
        return 1.0
    from distbench.pipeline.hooks import resolve

    try:
        weight = float(resolve(m.estimate_weight)({**wildcards, **job_params}))
    except (AttributeError, KeyError, TypeError, ValueError):
        return 1.0
    return weight if math.isfinite(weight) and weight > 0 else 1.0


def job_weight(job) -> float:
    """One of Snakemake's jobs (of the DAG): params_weight of its wildcards and params."""
    family = RULE_FAMILIES.get(job.rule if isinstance(job.rule, str) else getattr(job.rule, "name", ""))
    if family is None:
        return 1.0
    from distbench.launch.batch import entry_of

    try:
        entry = entry_of(job)
    except (AttributeError, KeyError, TypeError, ValueError):
        return 1.0
    return params_weight(family, entry.wildcards, entry.params.get("job") or {})


def estimate(jobs: Iterable[tuple], results_dir: str | Path, gpus: int, batch: bool = True) -> Estimate:
    """The seconds of the jobs to run. jobs: (key, runs), (key, runs, alone) or (key, runs, alone, weight)
    of every benchmark job of this invocation, runs as Snakemake decided it (job_key,
    distbench.launch.dag_view.planned_jobs); a job that does not run is cached; alone: it launches alone
    though its family shares launches (launches_alone); weight: job_weight, for a default figure. batch: the jobs of a family that shares launches share one per backend and
    world size (config batch_launch, a local executor): a default figure then counts the launch's
    fixed cost once per group. A job that launches alone (alone, or batch false) counts it in full:
    its default as stated, a time measured in a shared launch with the launch's fixed cost added."""
    past = history(Path(results_dir))
    host = "gpu" if gpus else "cpu"
    # The family's history at the job's own world size: a job's time grows with its ranks (7 s per
    # Gloo rank on 2 cores), so another world size's history would mislead (a quick run's 2-rank jobs
    # once made a full run's estimate 2 min for 4.5 min of jobs). Without it, the default, which scales.
    # It is also the same kind of job: the same wildcards but the last (a configuration label, NCCL
    # settings): one workload's or dtype's time says little of another's (a quick run's 12 s MLP jobs
    # once made a GPT 1.3b layouts run's estimate 2 min for 4 min 15 s of jobs).
    by_family: dict[tuple, list[JobKey]] = defaultdict(list)
    for key in past.times:
        by_family[(key.family, key.backend, key.world_size, key.rest[:-1])].append(key)
    out = []
    for key, runs, *more in jobs:
        alone = bool(more and more[0]) and key.family in BATCHED
        weight = more[1] if len(more) > 1 else 1.0
        # a job that launches alone pays the launch's fixed cost a shared launch's time leaves out
        cost = LAUNCH_COST_S.get((host, key.family), 0.0) if (alone or not batch) else 0.0
        launch = LAUNCH_COST_S.get((host, key.family), 0.0)
        same_size = [t for k in by_family.get((key.family, key.backend, key.world_size, key.rest[:-1]), [])
                     for t in past.scaled_seconds(k, cost, weight, launch)]
        if not runs:
            out.append(JobEstimate(key, True, 0.0, "cached", alone))
        elif past.times.get(key):
            out.append(JobEstimate(key, False, statistics.median(past.scaled_seconds(key, cost, weight, launch)),
                                   "job history", alone))
        elif same_size:
            out.append(JobEstimate(key, False, statistics.median(same_size), "family history", alone))
        else:
            out.append(JobEstimate(key, False, default_seconds(key, gpus, weight), "default", alone))
    if batch:
        out = shared_launches(out, gpus)
    return Estimate(tuple(out), tuple(past.ignored))


def shared_launches(jobs: list[JobEstimate], gpus: int) -> list[JobEstimate]:
    """Default figures of jobs that share a launch: all but the first of each group (family, backend,
    world size) without the launch's fixed cost. A job that launches alone (JobEstimate.alone) is in
    no group: its own launch, its default in full."""
    host = "gpu" if gpus else "cpu"
    seen: set[tuple] = set()
    out = []
    for j in jobs:
        group = (j.key.family, j.key.backend, j.key.world_size)
        saved = LAUNCH_COST_S.get((host, j.key.family), 0.0)
        if not j.cached and j.source == "default" and j.key.family in BATCHED and not j.alone:
            if group in seen:
                j = JobEstimate(j.key, False, max(1.0, j.seconds - saved), "default")
            seen.add(group)
        out.append(j)
    return out
