"""Which rows a verdict can judge: one rule for the quick answer's choice of jobs
(distbench.pipeline.quick, when the DAG is built) and for the Verdict's headlines of every family
(the full report and report/quick.md alike), so both judge the same world size of the same data.

Torch-free and pandas-free: the Snakefile reaches it on every parse. distbench.core.section
re-exports both functions for the families.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping


def oversubscribed(ranks_per_host: int, backend: str, env: Mapping) -> str | None:
    """'6 ranks on 2 cores' when a Gloo job put more ranks on a host than it has cores (env.json's
    cpu_count), else None (and None when env.json does not give the count).

    Such ranks time-share the cores, so their throughput and communication time say how busy the CPU
    was, not how the job scales: the run is a smoke test. NCCL is not checked here: the planner gives
    each rank its own GPU (world sizes above the GPUs are skipped) and the placement check fails a job
    whose ranks share one, so no NCCL row of shared GPUs reaches a report; and env.json's gpu_count is
    what the probe saw, which need not be what a job was given."""
    if str(backend) == "nccl":
        return None
    try:
        cores, ranks = int(env.get("cpu_count")), int(ranks_per_host)
    except (TypeError, ValueError):
        return None
    if cores <= 0 or ranks <= cores:
        return None
    return f"{ranks} ranks on {cores} core{'s' if cores > 1 else ''}"


def judged_world_size(world_sizes: Iterable[int], crowded: Callable[[int], str | None]) -> int | None:
    """The world size a Verdict judges among `world_sizes`: the largest whose ranks each have a core
    of their own (crowded(ws) is None, as `oversubscribed` says; always so under NCCL), else the
    smallest (a smoke test either way, and the cheapest to run). None when there is none.

    A larger oversubscribed world size is not judged: its figures measure the host's contention
    (see `oversubscribed`), so a headline taken there would only ever read "measured", while the
    quick answer, which never runs it, judged the size below: the same data, two verdicts."""
    sizes = sorted({int(ws) for ws in world_sizes})
    if not sizes:
        return None
    fits = [ws for ws in sizes if crowded(ws) is None]
    return max(fits) if fits else min(sizes)


def node_gpus(plan: Mapping | None, env: Mapping | None = None) -> int | None:
    """The GPUs of one node of this run: the plan's `gpus` (what every family planned its world sizes
    for: declared, or found when the DAG was built), else env.json's `gpu_count` (what the probe saw);
    None when neither says. 0 is a CPU-only host.

    The Verdict judges each node shape on what it can answer (docs/report.md, "Node shapes"): a
    CPU-only host on Gloo; one GPU on what that GPU does alone (a language model's tokens/s and MFU,
    then memory), since there is no collective between GPUs to measure; two or more on NCCL first."""
    for source, key in ((plan, "gpus"), (env, "gpu_count")):
        try:
            value = (source or {}).get(key)
            if value is not None and not isinstance(value, bool):
                return max(int(value), 0)
        except (TypeError, ValueError):
            continue
    return None


def one_gpu_node(plan: Mapping | None, env: Mapping | None = None) -> bool:
    """Whether this run's node has exactly one GPU (node_gpus)."""
    return node_gpus(plan, env) == 1
