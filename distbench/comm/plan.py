"""The comm family's jobs: from a validated config (and the GPUs on this host) to the list of comm
jobs, and each job's params (torch-free: the Snakefile plans without importing torch).

Each job's output path carries every config key that selects it (backend, dtype, world size, NCCL
settings), so Snakemake's own bookkeeping is the cache. Another family that sets its measurements beside
the comm family's standalone figures states the collectives it needs as the plan's fact WANTED (e.g.
the in-step collectives of inspected FSDP jobs: bfloat16 all_gathers); the comm plan, planned after
the families that state facts (distbench.pipeline.plan.family_plans), measures those too
(wanted_jobs), with NCCL's defaults. Values that tune a job without selecting it
(sizes, iters) reach the rule through `params:`, which makes Snakemake rerun exactly the jobs they
change.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
from dataclasses import dataclass, field

from distbench.core.choices import DTYPES
from distbench.core.manifest import FamilyPlan
from distbench.core.ops_spec import OPS
from distbench.core.plan_facts import (FAMILY_DISABLED, NO_GPU_FOR_NCCL, STANDALONE_COLLECTIVES, NcclProbeWorkload,
                                       PlanFacts, SkippedPart)
from distbench.core.sizes import human_bytes, parse_size, sizes_from_config
from distbench.core.units import every_nth
from distbench.launch.planning import nccl_env_label, placeable, profile_params, world_sizes as top_world_sizes


@dataclass(frozen=True)
class CommJob:
    backend: str
    dtype: str
    world_size: int
    nccl_env_label: str
    nccl_env: dict = field(hash=False, compare=False)
    # the ops it measures where they are not comm.ops' (wanted_jobs: what another family wants measured
    # standalone); () : comm.ops as the config gives them
    ops: tuple[str, ...] = field(default=(), hash=False, compare=False)

    @property
    def wildcards(self) -> dict:
        return {"backend": self.backend, "dtype": self.dtype, "world_size": self.world_size,
                "nccl_env": self.nccl_env_label}


def comm_jobs(config: dict, gpus: int, gpus_source: str) -> tuple[list[CommJob], list[dict], dict[str, list[int]]]:
    """The comm jobs, what was skipped (and why), and the world sizes run per backend."""
    comm = config["comm"]
    skipped, jobs, world_sizes = [], [], {}
    gloo_cap = parse_size(comm["gloo"]["max_bytes"])
    # the world sizes NCCL comm jobs run at here: on a GPU host Gloo runs beside them (gloo_world_sizes)
    top = top_world_sizes(config, gpus)  # world_sizes: auto follows the node's GPUs
    nccl_sizes = (placeable(config, "nccl", gpus, top, "")[0]
                  if "nccl" in config["backends"] and gpus > 0 else [])
    for backend in config["backends"]:
        if backend == "nccl" and gpus == 0:
            skipped.append(SkippedPart("backend nccl", f"no GPU on this host ({gpus_source})", NO_GPU_FOR_NCCL))
            continue
        if backend == "gloo" and not any(s <= gloo_cap for s in sizes_from_config(comm)):
            # a Gloo job with no size would measure nothing (and its pairs no size either)
            skipped.append({"what": "gloo comm jobs",
                            "why": f"every size of comm.sizes is above comm.gloo.max_bytes ({human_bytes(gloo_cap)}): "
                                   "nothing to measure; add a smaller size or raise comm.gloo.max_bytes"})
            continue
        sizes, why = placeable(config, backend, gpus, top, f"{backend} world sizes")
        skipped += why
        if backend == "gloo":
            sizes, why = gloo_world_sizes(config, gpus, sizes, nccl_sizes)
            skipped += why
            asked = config["comm"]["gloo"]["world_sizes"]
            absent = [ws for ws in asked if ws not in top] if asked != "auto" else []
            if absent:  # world_sizes: auto chose the sizes (config.py checks an explicit list)
                skipped.append({"what": f"gloo world sizes {absent}",
                                "why": f"not in world_sizes (auto on gpus={gpus}: {top})"})
        envs = comm["nccl_env"] if backend == "nccl" else [{}]
        world_sizes[backend] = sizes
        for dtype in comm["dtypes"]:
            for ws in sizes:
                for env in _unique_envs(envs):
                    jobs.append(CommJob(backend, dtype, ws, nccl_env_label(env), {k: str(v) for k, v in env.items()}))
    skipped += graph_skipped(comm, world_sizes)
    skipped += gloo_ops_skipped(comm, world_sizes)
    if "gloo" in world_sizes:
        cap = gloo_cap
        above = [s for s in sizes_from_config(comm) if s > cap]
        if above:
            skipped.append({"what": f"gloo sizes above {human_bytes(cap)} ({len(above)} sizes up to {human_bytes(max(above))})",
                            "why": "comm.gloo.max_bytes keeps CPU runs short"})
        within = [s for s in sizes_from_config(comm) if s <= cap]
        between = [s for s in within if s not in strided(within, gloo_stride(comm))]
        if between:
            skipped.append({"what": f"gloo sizes between those measured ({len(between)} of {len(within)} up to "
                                    f"{human_bytes(cap)}, e.g. {human_bytes(between[0])})",
                            "why": f"comm.gloo.size_stride {comm['gloo']['size_stride']} measures "
                                   f"{every_nth(comm['gloo']['size_stride'], 'size')} to keep CPU runs short; a full run: "
                                   "--config comm='{gloo: {size_stride: 1}}'"})
    return jobs, skipped, world_sizes


# the plan's fact another family states: the collectives it sets beside the comm family's standalone
# figures, [{"backend", "world_size", "op", "dtype"}]
WANTED = STANDALONE_COLLECTIVES


def wanted_jobs(config: dict, jobs: list[CommJob], world_sizes: dict, wanted) -> tuple[list[CommJob], list[dict]]:
    """The comm jobs with every wanted collective measured (the fact WANTED), NCCL's defaults: an op
    the job of its dtype does not measure joins that job's ops; a dtype of no comm job gets a job of
    its own that measures the wanted ops only. A collective at a backend or world size the comm family
    does not run is named as skipped, not planned."""
    comm = config["comm"]
    by_key = {(j.backend, j.dtype, j.world_size): j for j in jobs if j.nccl_env_label == "default"}
    missing: dict[tuple[str, str, int], list[str]] = {}
    skipped = []
    for w in wanted or []:
        backend, ws, op, dtype = str(w["backend"]), int(w["world_size"]), str(w["op"]), str(w["dtype"])
        what = f"standalone {dtype} {op} at {ws} ranks ({backend})"
        if op not in OPS or dtype not in DTYPES:
            skipped.append({"what": what, "why": "not a collective or dtype the comm family measures"})
            continue
        if ws not in world_sizes.get(backend, []):
            skipped.append({"what": what, "why": f"the comm family runs no {backend} job at {ws} ranks: nothing "
                                                 "to set beside the in-step figure"})
            continue
        job = by_key.get((backend, dtype, ws))
        measured = _measured_ops(comm, job, world_sizes) if job is not None else []
        if op not in measured and op not in missing.setdefault((backend, dtype, ws), []):
            missing[(backend, dtype, ws)].append(op)
    out = list(jobs)
    for (backend, dtype, ws), ops in missing.items():
        if not ops:
            continue
        job = by_key.get((backend, dtype, ws))
        if job is not None:  # its dtype is measured: the wanted op joins its ops
            out[out.index(job)] = CommJob(backend, dtype, ws, job.nccl_env_label, job.nccl_env,
                                          tuple(_measured_ops(comm, job, world_sizes)) + tuple(ops))
        else:
            out.append(CommJob(backend, dtype, ws, nccl_env_label({}), {}, tuple(ops)))
    return out, skipped


def _measured_ops(comm: dict, job: CommJob, world_sizes: dict) -> list[str]:
    """The ops a comm job measures (job_params' choice)."""
    if job.ops:
        return list(job.ops)
    return gloo_ops(comm, bool(world_sizes.get("nccl"))) if job.backend == "gloo" else list(comm["ops"])


def graph_skipped(comm: dict, world_sizes: dict) -> list[dict]:
    """The sizes graph timing leaves to events timing alone (comm.graph_max_bytes), named in the plan."""
    cap = parse_size(comm["graph_max_bytes"])
    above = [s for s in sizes_from_config(comm) if s > cap]
    if not (world_sizes.get("nccl") and "graph" in comm["timing"] and above):
        return []
    return [{"what": f"graph timing above {human_bytes(cap)} ({len(above)} sizes up to {human_bytes(max(above))})",
             "why": "events timing alone there: graph and events agree within 1% from 16 MiB up (comm.graph_max_bytes); "
                    "every size: --config comm='{graph_max_bytes: 1GiB}'"}]


def gloo_ops(comm: dict, beside_nccl: bool) -> list[str]:
    """comm.gloo.ops: a list as given (each also in comm.ops); `auto` is all_reduce alone where NCCL
    comm jobs run beside Gloo (the comparison the report makes: "NCCL is N x faster than Gloo for
    all_reduce"), else comm.ops (Gloo is then the comm family). Gloo's other ops on a GPU host cost
    ~12 s of the default run and answer nothing asked of that host."""
    chosen = comm["gloo"].get("ops", "auto")
    if chosen != "auto":
        return [op for op in comm["ops"] if op in chosen]
    if not beside_nccl:
        return list(comm["ops"])
    return ["all_reduce"] if "all_reduce" in comm["ops"] else list(comm["ops"][:1])


def gloo_ops_skipped(comm: dict, world_sizes: dict) -> list[dict]:
    """The ops Gloo leaves out (comm.gloo.ops), named in the plan with the line that measures them."""
    if not world_sizes.get("gloo"):
        return []
    kept = gloo_ops(comm, bool(world_sizes.get("nccl")))
    left = [op for op in comm["ops"] if op not in kept]
    if not left:
        return []
    if comm["gloo"].get("ops", "auto") != "auto":
        return [{"what": f"gloo ops {', '.join(left)}", "why": "not in comm.gloo.ops"}]
    return [{"what": f"gloo ops {', '.join(left)}",
             "why": f"on a GPU host Gloo measures {', '.join(kept)} beside NCCL, the comparison "
                    f"(comm.gloo.ops: auto); every op: --config comm='{{gloo: {{ops: [{', '.join(comm['ops'])}]}}}}'"}]


def gloo_world_sizes(config: dict, gpus: int, placed: list[int], nccl: list[int]) -> tuple[list[int], list[dict]]:
    """comm.gloo.world_sizes: an explicit list keeps the placeable sizes it names; `auto` keeps, where
    NCCL comm jobs run (`nccl`: their world sizes), only the smallest of them. There Gloo is the side-by-side
    comparison (the same ops and ranks over the CPU path), and a Gloo job with no NCCL job beside it
    measures CPU processes on a GPU host, which answers nothing asked of that host (39 s of a 2-GPU
    default run's 6 minutes). Without NCCL jobs (no GPU, or no nccl) Gloo is the comm family: every
    size runs."""
    chosen = config["comm"]["gloo"]["world_sizes"]
    if chosen != "auto":
        kept = [ws for ws in placed if ws in chosen]
        left = [ws for ws in placed if ws not in chosen]
        return kept, ([{"what": f"gloo world sizes {left}", "why": "not in comm.gloo.world_sizes"}] if left else [])
    # One comparison is enough to show the CPU path against NCCL: at NCCL's smallest world size. Each
    # Gloo job adds ~20 s, and on an 8-GPU node (NCCL at 2, 4, 8) all three left the default run
    # past its 5-minute budget.
    kept = [ws for ws in placed if ws == min(nccl)] if nccl else placed
    left = [ws for ws in placed if ws not in kept]
    if not left:
        return kept, []
    return kept, [{"what": f"gloo world sizes {left}",
                   "why": f"on a GPU host (gpus={gpus}) Gloo runs beside NCCL at NCCL's smallest world size, "
                          f"the comparison (comm.gloo.world_sizes: auto); every size: "
                          f"--config comm='{{gloo: {{world_sizes: {sorted(set(placed))}}}}}'"}]


def _unique_envs(envs: list[dict]) -> list[dict]:
    seen, out = set(), []
    for env in envs:
        label = nccl_env_label(env)
        if label not in seen:
            seen.add(label)
            out.append(env)
    return out


def gloo_stride(comm: dict) -> int:
    """comm.gloo.size_stride for a generated sweep; 1 for an explicit list of sizes, which is kept whole."""
    return comm["gloo"]["size_stride"] if isinstance(comm["sizes"], dict) else 1


def strided(sizes: list[int], stride: int) -> list[int]:
    """Every `stride`-th size from the smallest, and the largest always (comm.gloo.size_stride)."""
    keep = sizes[::stride]
    return keep + ([sizes[-1]] if sizes and keep[-1] != sizes[-1] else [])


def job_params(config: dict, backend: str, nccl_env: str = "default", world_size: int | None = None,
               beside_nccl: bool = False, ops: tuple[str, ...] = ()) -> dict:
    """The values that shape a job's measurements (a change reruns the job via Snakemake's params trigger).
    With the job's world size, a `file:` traffic matrix reaches them by content too (traffic_digests).
    `beside_nccl`: NCCL comm jobs run in this plan too (comm.gloo.ops: auto). `ops`: the job's own
    (CommJob.ops: another family's wanted collectives), else comm.ops."""
    comm = config["comm"]
    sizes = sizes_from_config(comm)
    own = tuple(ops)
    ops = list(own) or (comm["ops"] if nccl_env == "default" else comm.get("nccl_env_ops") or comm["ops"])
    p = {"ops": list(ops), "warmup": comm["warmup"], "iters": comm["iters"], "trials": comm["trials"],
         "timing": list(comm["timing"]), "inplace": list(comm["inplace"]),
         "graph_launches": comm["graph_launches"], "rank_agg": comm["rank_agg"],
         "rotate_bytes": parse_size(comm["rotate_bytes"]),
         "op_timeout_s": config["op_timeout_s"], "job_timeout_s": comm["job_timeout_s"],
         "job_env": {k: str(v) for k, v in config["job_env"].items()}}
    pairs = [parse_size(s) for s in comm["pairs_sizes"]]
    if backend == "gloo":
        g = comm["gloo"]
        cap = parse_size(g["max_bytes"])
        sizes = strided([s for s in sizes if s <= cap], gloo_stride(comm))
        pairs = [min(s, cap) for s in pairs]
        p.update(warmup=g["warmup"], iters=g["iters"], trials=g["trials"], timing=["host"],
                 ops=list(own) or gloo_ops(comm, beside_nccl))
        ops = p["ops"]
    elif "graph" in p["timing"]:  # only then: a change of the cap reruns no job without graph timing
        p["graph_max_bytes"] = parse_size(comm["graph_max_bytes"])
    p["sizes"] = sizes
    if "all_to_all_v" in ops:  # only then: a traffic change reruns no job that does not measure it
        p["traffic"] = list(comm["traffic"])
        if world_size is not None and any(t.startswith("file:") for t in p["traffic"]):
            p["traffic_digest"] = traffic_digests(p["traffic"], int(world_size))
    p.update(profile_params(config, "comm"))
    # the pair matrix's sizes; the plan turns it on for one job per backend (pairs_job)
    p.update(pairs_sizes=sorted(set(pairs)), pairs_iters=comm["pairs_iters"], pairs_trials=comm["pairs_trials"],
             pairs=False)
    return p


def pairs_job(config: dict, plan: dict, job: CommJob) -> bool:
    """Whether this comm job also measures the GPU-pair matrix (comm.pairs): the job at its
    backend's largest world size, with NCCL's defaults and the first dtype."""
    sizes = plan["world_sizes"].get(job.backend) or []
    return bool(config["comm"]["pairs"] and sizes and job.world_size == max(sizes) and job.world_size > 1
                and job.nccl_env_label == "default" and job.dtype == config["comm"]["dtypes"][0])


def traffic_digests(traffic: list[str], world_size: int) -> dict:
    """{'file:PATH': digest} for a job of `world_size` ranks: 'sha256:<hex>' of the file's content when
    the matrix is world_size x world_size (the job measures it), else 'not measured: <n>x<n>' (jobs of
    another world size skip the file). So editing the file reruns exactly the jobs that measure it,
    and a change of its shape the jobs it enters or leaves; read at plan time."""
    return {t: _file_digest(t.removeprefix("file:"), world_size) for t in traffic if t.startswith("file:")}


def _file_digest(path: str, world_size: int) -> str:
    from distbench.comm.traffic import TrafficError, read_matrix

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # a device or a pipe: never read here (the config check refuses it)
            return "not a regular file"
        digest = _sha256(path, st.st_mtime_ns, st.st_size)
    except OSError as e:
        return f"unreadable: {e.strerror or type(e).__name__}"
    try:
        n = _matrix_size(path, st.st_mtime_ns, st.st_size, read_matrix)
    except TrafficError:  # the config check names the problem; the digest alone then decides
        return digest
    return digest if n == world_size else f"not measured: {n}x{n}"


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int, size: int) -> str:  # noqa: ARG001 - mtime and size key the cache
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"sha256:{h.hexdigest()}"


@functools.lru_cache(maxsize=64)
def _matrix_size(path: str, mtime_ns: int, size: int, read) -> int:  # noqa: ARG001 - mtime and size key the cache
    return len(read(path))


def plan_family(config: dict, gpus: int, gpus_source: str, facts: dict | None = None) -> FamilyPlan:
    """The comm family's plan (its manifest's `plan`): its jobs, and the world sizes per backend and the
    backends it runs, which the report's plan section and the NCCL probe read. `facts`: the other
    families' (distbench.pipeline.plan.family_plans): the collectives one wants measured standalone
    (WANTED) are planned too (wanted_jobs). With comm.enabled false: no job, and still the NCCL probe's
    workload and time limit, which the probe takes from comm's settings whichever family runs NCCL."""
    probe = job_params(config, "nccl")  # the NCCL probe logs NCCL's choices for these (distbench.probes)
    workload = NcclProbeWorkload(tuple(probe["ops"]), tuple(probe["sizes"]), dict(probe["job_env"]))
    if not config["comm"]["enabled"]:
        return FamilyPlan((), (SkippedPart("comm jobs", "comm.enabled is false", FAMILY_DISABLED),),
                          PlanFacts(nccl_probe=workload, probe_timeout_s=config["comm"]["job_timeout_s"]))
    jobs, skipped, world_sizes = comm_jobs(config, gpus, gpus_source)
    jobs, why = wanted_jobs(config, jobs, world_sizes, (facts or {}).get(WANTED))
    skipped += why
    return FamilyPlan(tuple(jobs), tuple(skipped),
                      PlanFacts(world_sizes=world_sizes, backends_run=sorted({j.backend for j in jobs}),
                                nccl_probe=workload,
                                # the probes run NCCL's collectives as a comm job does: its time limit
                                probe_timeout_s=config["comm"]["job_timeout_s"]))


def rule_params(config: dict, plan: dict, job: CommJob) -> dict:
    """A comm job's parameters (the manifest's job_params): what shapes its measurements, its NCCL
    settings, and whether it also measures the GPU-pair matrix."""
    p = job_params(config, job.backend, job.nccl_env_label, job.world_size,
                   beside_nccl=bool(plan["world_sizes"].get("nccl")), ops=job.ops)
    return {**p, "nccl_env": job.nccl_env, "pairs": pairs_job(config, plan, job)}
