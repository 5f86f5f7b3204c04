"""How many benchmark jobs a run will start and about how long they will take, printed before the
first job (rules/common.smk), so a user knows whether to wait or to come back later: those of the
invocation's own targets (targets_plan: `snakemake quick` its 3 jobs, `snakemake comm` the comm jobs).

Each benchmark rule records its job's wall time with Snakemake's `benchmark:` directive (a tsv whose
column `s` is seconds) under results/<label>/benchmarks/ (BENCHMARKS). A job's estimate is the median
of those earlier times for the same job (any run label), else the median of its family and backend
in the history, else a stated default (DEFAULTS). The benchmark rules take all cores, so the jobs run
one after another and the run's time is their sum. Torch-free and pandas-free: the Snakefile calls
this on every parse, the no-op rerun included.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

# Where each family's rule writes its benchmark tsv (under results/<label>/); the rules use these
# templates, so the estimate reads exactly what they write.
BENCHMARKS = {
    "comm": "benchmarks/comm/{backend}/{dtype}/ws{world_size}/{nccl_env}.tsv",
    "training": "benchmarks/training/{backend}/{model}/ws{world_size}/{config}.tsv",
    "memory": "benchmarks/memory/{backend}/{model}/ws{world_size}/{config}.tsv",
    "probe": "benchmarks/probe/{backend}/ws{world_size}.tsv",
}
# A job's output that Snakemake finds in place when the job is cached (rules/common.smk's *_DIR).
OUTPUTS = {
    "comm": "comm/{backend}/{dtype}/ws{world_size}/{nccl_env}/comm.csv",
    "training": "training/{backend}/{model}/ws{world_size}/{config}/training.csv",
    "memory": "memory/{backend}/{model}/ws{world_size}/{config}/memory.csv",
    "probe": "probe/nccl.json",
}
FAMILIES = tuple(BENCHMARKS)


def probe_benchmark(world_size: int) -> str:
    """The NCCL probe job's benchmark tsv (under results/<label>/): the probe runs NCCL only."""
    return BENCHMARKS["probe"].format(backend="nccl", world_size=world_size)


@dataclass(frozen=True)
class Default:
    """A stated figure for a job nothing in the history matches: fixed seconds plus seconds per rank
    (per_rank_s only where measurements at several world sizes show the growth)."""

    seconds: float
    per_rank_s: float = 0.0
    source: str = ""

    def at(self, world_size: int) -> float:
        return self.seconds + self.per_rank_s * world_size


# Default per-job wall time, keyed by (host, family, backend); host is "gpu" when the plan has GPUs.
# Measured after one-node jobs started their ranks directly (distbench.launch.torchrun), default
# config, Snakemake's benchmark files (benchmarks/results/time-to-answer-h200x2-2026-11-27):
# gpu: 2x H200, 2026-11-27: memory jobs 14.4-23.8 s (median 20), training 10.1-21.9 s (median 19),
#   the NCCL comm job at 2 ranks 24.9 s, the Gloo comm job 16.3 / 19.0 / 19.4 s at 2 / 4 / 6 ranks
#   (32 cores: flat), the NCCL probe 10.8 s. Not scaled with world size (2 GPUs: too few sizes).
# cpu: the project's 2-core machine, unloaded, 2026-11-27: Gloo comm 12.3 / 25.3 / 44.7 s at 2 / 4 / 6
#   ranks (7.4 s per rank); training 2.9-4.0 s at 1 rank, 3.7-4.6 at 2, 6.5-9.6 at 4, 9.0-15.1 at 6
#   (1.3 s + 1.8 s per rank); memory 3.4-4.3 s at 1 rank, 4.2-5.9 at 2 (2.8 s + 1.0 s per rank); the NCCL
#   probe on a host without GPUs only writes why it did not run (0.1 s).
DEFAULTS = {
    ("gpu", "memory", "nccl"): Default(20.0, source="2x H200: 14-24 s"),
    ("gpu", "training", "nccl"): Default(19.0, source="2x H200: 10-22 s"),
    ("gpu", "comm", "nccl"): Default(25.0, source="2x H200, 2 ranks: 25 s"),
    ("gpu", "comm", "gloo"): Default(18.0, source="2x H200 host, 2-6 ranks: 16-19 s"),
    ("gpu", "probe", "nccl"): Default(11.0, source="2x H200: 10.8 s"),
    ("cpu", "comm", "gloo"): Default(0.0, per_rank_s=7.4, source="2 cores: 12/25/45 s at 2/4/6 ranks"),
    ("cpu", "training", "gloo"): Default(1.3, per_rank_s=1.8, source="2 cores: 3-4 s at 1 rank, 9-15 s at 6"),
    ("cpu", "memory", "gloo"): Default(2.8, per_rank_s=1.0, source="2 cores: 3-4 s at 1 rank, 4-6 s at 2"),
    ("cpu", "probe", "nccl"): Default(0.2, source="no GPU: the probe writes why it did not run"),
}
# With batch_launch (distbench.launch.batch) the training and memory jobs of one backend and world
# size share a launch: its first job pays the launch's fixed cost, the others only their own
# measurement, this much less than the default above. 2x H200, 2026-11-27
# (benchmarks/results/batch-launch-h200x2-2026-11-27): the first configuration of a launch took 14-18 s,
# the others 7-10 s (DDP) and 3 s (FSDP memory jobs, no search); 2 cores: about 1.5 s (import torch
# and the Gloo group) of a 3-5 s job.
LAUNCH_COST_S = {("gpu", "training"): 9.0, ("gpu", "memory"): 9.0, ("cpu", "training"): 1.5, ("cpu", "memory"): 1.5}
BATCHED = ("training", "memory")


@dataclass(frozen=True)
class JobKey:
    family: str
    backend: str
    world_size: int
    model: str = ""  # training, memory
    config: str = ""  # training/memory config label, or the comm job's NCCL settings label
    dtype: str = ""  # comm

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "world_size": self.world_size, "model": self.model,
                "config": self.config, "nccl_env": self.config, "dtype": self.dtype}


@dataclass(frozen=True)
class JobEstimate:
    key: JobKey
    cached: bool
    seconds: float  # 0 for a cached job
    source: str  # "job history", "family history", "default"; "cached" for a cached job


@dataclass(frozen=True)
class Estimate:
    jobs: tuple[JobEstimate, ...]

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
        """{family: (jobs to run, seconds)}, families with jobs to run only."""
        out: dict[str, tuple[int, float]] = {}
        for j in self.to_run:
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
        return head + "\ndistbench: to run: " + ", ".join(parts)


def human_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{round(seconds)} s"
    minutes = seconds / 60
    return f"{round(minutes)} min" if minutes < 120 else f"{minutes / 60:.1f} h"


@dataclass(frozen=True)
class TargetJobs:
    """What one target rule of the Snakefile runs of the plan's benchmark jobs."""

    families: tuple[str, ...]  # its families' jobs (the quick answer's own for `quick`)
    probe: bool  # the NCCL probe job (probe/nccl.json, which the comm tables' diagnosis reads)


JOB_FAMILIES = ("comm", "training", "memory")
# The Snakefile's target rules. `report` runs none: it renders from the cache (rules/report.smk).
TARGET_JOBS = {
    "all": TargetJobs(JOB_FAMILIES, True),
    "comm": TargetJobs(("comm",), True),
    "training": TargetJobs(("training",), False),
    "memory": TargetJobs(("memory",), False),
    "probes": TargetJobs((), True),
    "quick": TargetJobs(JOB_FAMILIES, True),
    "report": TargetJobs((), False),
}
DEFAULT_TARGET = "all"  # what Snakemake builds when no target is named


def targets_plan(plan: dict, quick: dict, targets) -> tuple[dict, bool] | None:
    """The part of `plan` this invocation's `targets` run (each a rule of TARGET_JOBS; none named:
    DEFAULT_TARGET), and whether the NCCL probe job is among it: what the estimate counts, so
    `snakemake quick` announces its 3 jobs, not the plan's 33. `quick`: the quick answer's jobs
    (distbench.pipeline.quick). None when no target runs a benchmark job or is one of these rules
    (`report`; a file: `snakemake -n` lists what it needs)."""
    picked: dict[str, list] = {f: [] for f in JOB_FAMILIES}
    probe = False
    for target in sorted(set(targets) or {DEFAULT_TARGET}):
        spec = TARGET_JOBS.get(target)
        if spec is None:
            continue
        probe |= spec.probe
        for family in spec.families:
            jobs = (quick if target == "quick" else plan).get(f"{family}_jobs", [])
            picked[family] += [j for j in jobs if all(j is not k for k in picked[family])]
    if not probe and not any(picked.values()):
        return None
    return {**plan, **{f"{f}_jobs": jobs for f, jobs in picked.items()}}, probe


def plan_keys(plan: dict, probe_world_size: int = 0) -> list[JobKey]:
    """Every benchmark job of the plan (make_plan's output), and the NCCL probe where it launches one
    (probe_world_size >= 2: nccl_probe_params)."""
    keys = [JobKey("comm", j.backend, j.world_size, config=j.nccl_env_label, dtype=j.dtype)
            for j in plan["comm_jobs"]]
    for family in ("training", "memory"):
        keys += [JobKey(family, j.backend, j.world_size, model=j.model, config=j.config_label)
                 for j in plan.get(f"{family}_jobs", [])]
    if probe_world_size >= 2:
        keys.append(JobKey("probe", "nccl", probe_world_size))
    return keys


def read_seconds(tsv: Path) -> float | None:
    """The mean of a Snakemake benchmark tsv's `s` column (one row per repeat); None if unreadable."""
    try:
        lines = tsv.read_text().splitlines()
        col = lines[0].split("\t").index("s")
        values = [float(line.split("\t")[col]) for line in lines[1:] if line.strip()]
    except (OSError, ValueError, IndexError):
        return None
    return sum(values) / len(values) if values else None


def key_of(family: str, rel: tuple[str, ...]) -> JobKey | None:
    """A job's key from its tsv's path below benchmarks/<family>/ (BENCHMARKS), or None."""
    if family == "probe" and len(rel) == 2:
        backend, ws = rel[0], rel[1].removesuffix(".tsv")
        middle, last = "", ""
    elif family != "probe" and len(rel) == 4:
        backend, middle, ws, last = rel[0], rel[1], rel[2], rel[3].removesuffix(".tsv")
    else:
        return None
    if not (ws.startswith("ws") and ws[2:].isdigit()):
        return None
    if family == "comm":
        return JobKey(family, backend, int(ws[2:]), config=last, dtype=middle)
    return JobKey(family, backend, int(ws[2:]), model=middle, config=last)


def history(results_dir: Path) -> dict[JobKey, list[float]]:
    """Every recorded job time under results/*/benchmarks/ (any run label), by job key."""
    out: dict[JobKey, list[float]] = defaultdict(list)
    for family in FAMILIES:
        for tsv in sorted(Path(results_dir).glob(f"*/benchmarks/{family}/**/*.tsv")):
            rel = tsv.relative_to(results_dir).parts[3:]  # below <label>/benchmarks/<family>/
            key, seconds = key_of(family, rel), read_seconds(tsv)
            if key is not None and family in BATCHED:
                # measured in a shared launch: the Snakemake job only adopted it (or launched the
                # whole group): the configuration's own time is in its placement file
                seconds = batch_seconds(results_dir / tsv.relative_to(results_dir).parts[0], key) or seconds
            if key is not None and seconds is not None:
                out[key].append(seconds)
    return out


def batch_seconds(label_dir: Path, key: JobKey) -> float | None:
    """A job's own seconds in a shared launch (placement.json provenance.batch.wall_s), or None."""
    placement = label_dir / Path(OUTPUTS[key.family].format(**key.wildcards)).with_name("placement.json")
    try:
        return float(json.loads(placement.read_text())["provenance"]["batch"]["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def default_seconds(key: JobKey, gpus: int) -> float:
    """The stated figure of the job's host, family and backend; for a pair the table lacks (e.g. Gloo
    training on a GPU host), the slowest figure of that host: a guess, counted among the defaults."""
    host = "gpu" if gpus else "cpu"
    d = DEFAULTS.get((host, key.family, key.backend))
    if d is not None:
        return d.at(key.world_size)
    return max(d.at(key.world_size) for (h, _, _), d in DEFAULTS.items() if h == host)


def estimate(plan: dict, results_dir: str | Path, label: str, probe_world_size: int = 0,
             batch: bool = True) -> Estimate:
    """The plan's benchmark jobs, which are cached under results/<label>/, and the time of the rest.
    batch: training and memory jobs share a launch per backend and world size (config batch_launch):
    a default figure then counts the launch's fixed cost once per group."""
    results_dir = Path(results_dir)
    past = history(results_dir)
    # The family's history at the job's own world size: a job's time grows with its ranks (7 s per
    # Gloo rank on 2 cores), so another world size's history would mislead (a quick run's 2-rank jobs
    # once made a full run's estimate 2 min for 4.5 min of jobs). Without it, the default, which scales.
    by_family: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for key, times in past.items():
        by_family[(key.family, key.backend, key.world_size)] += times
    jobs = []
    for key in plan_keys(plan, probe_world_size):
        same_size = by_family.get((key.family, key.backend, key.world_size))
        if (results_dir / label / OUTPUTS[key.family].format(**key.wildcards)).exists():
            jobs.append(JobEstimate(key, True, 0.0, "cached"))
        elif past.get(key):
            jobs.append(JobEstimate(key, False, statistics.median(past[key]), "job history"))
        elif same_size:
            jobs.append(JobEstimate(key, False, statistics.median(same_size), "family history"))
        else:
            jobs.append(JobEstimate(key, False, default_seconds(key, plan["gpus"]), "default"))
    if batch:
        jobs = shared_launches(jobs, plan["gpus"])
    return Estimate(tuple(jobs))


def shared_launches(jobs: list[JobEstimate], gpus: int) -> list[JobEstimate]:
    """Default figures of jobs that share a launch: all but the first of each group (family, backend,
    world size) without the launch's fixed cost."""
    host = "gpu" if gpus else "cpu"
    seen: set[tuple] = set()
    out = []
    for j in jobs:
        group = (j.key.family, j.key.backend, j.key.world_size)
        saved = LAUNCH_COST_S.get((host, j.key.family), 0.0)
        if not j.cached and j.source == "default" and j.key.family in BATCHED:
            if group in seen:
                j = JobEstimate(j.key, False, max(1.0, j.seconds - saved), "default")
            seen.add(group)
        out.append(j)
    return out
