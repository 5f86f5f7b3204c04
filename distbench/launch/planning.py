"""What every family's planner shares (torch-free, below the families so each may use it): the label
of an NCCL environment, the world sizes a job can be placed at, the backend a one-backend family
runs on, and a family's profiling params.
"""

from __future__ import annotations

from distbench.launch.cluster import job_layout


# An NCCL setting's label is a directory name (comm/.../<label>/) and part of a training config label
# (bucket=100+hook=bf16_compress+<label>, the DDP part at most ~80 bytes); a path component holds 255.
MAX_NCCL_LABEL_BYTES = 160


def nccl_env_label(env: dict) -> str:
    """{} -> 'default'; {NCCL_ALGO: Ring, NCCL_PROTO: Simple} -> 'NCCL_ALGO=Ring+NCCL_PROTO=Simple'."""
    if not env:
        return "default"
    return "+".join(f"{k}={env[k]}" for k in sorted(env))


def nccl_env_label_problems(key: str, entries: list[dict]) -> list[str]:
    """The NCCL settings of config key `key` (a list) whose label would name a job directory longer
    than MAX_NCCL_LABEL_BYTES: one problem each (distbench.pipeline.config.check_config)."""
    from distbench.core.shown import shown

    problems = []
    for i, env in enumerate(entries):
        n = len(nccl_env_label(env).encode())
        if n > MAX_NCCL_LABEL_BYTES:
            problems.append(f"config key {key}[{i}]: these settings name a job directory of {n:,} bytes "
                            f"({shown(nccl_env_label(env))}); at most {MAX_NCCL_LABEL_BYTES} bytes are "
                            "allowed (a path component holds 255): list fewer or shorter values")
    return problems


def quick_world_size(config: dict, plan: dict, backend: str, sizes: list[int], cores: int) -> int | None:
    """The world size of `sizes` a Verdict judges on a host of `cores` cores: the rule its headlines
    apply to the full run's tables (distbench.core.judged), so the quick answer's jobs
    (distbench.pipeline.quick) and the full report judge the same rows."""
    from distbench.core.judged import judged_world_size, oversubscribed

    env = {"cpu_count": cores}  # what the probe's env.json will say of this host

    def crowded(ws: int) -> str | None:
        layout, why = job_layout(ws, backend, plan["gpus"], config["cluster"])
        if layout is None:  # the plan only holds placeable jobs
            raise ValueError(why)
        return oversubscribed(layout.ranks_per_node, backend, env)

    return judged_world_size(sizes, crowded)


# world_sizes: auto on a host with no GPU (and fewer than 2): seed 001's grid, the CPU quick start's
CPU_WORLD_SIZES = (2, 4, 6)


def auto_world_sizes(gpus: int, nodes: int = 1) -> list[int]:
    """world_sizes: auto. On `gpus` GPUs per node (times cluster.nodes): the powers of two from 2
    below that count, and the count itself, so the whole node (cluster) is measured: 2 -> [2],
    4 -> [2, 4], 6 -> [2, 4, 6], 8 -> [2, 4, 8]. Fewer than 2 GPUs: CPU_WORLD_SIZES (Gloo's CPU
    processes; NCCL's are dropped and named, as for any size above gpus)."""
    total = gpus * max(nodes, 1)
    if total < 2:
        return list(CPU_WORLD_SIZES)
    sizes, p = [], 2
    while p < total:
        sizes.append(p)
        p *= 2
    return sizes + [total]


def world_sizes(config: dict, gpus: int) -> list[int]:
    """The top-level world sizes of this plan: an explicit list as given, `auto` from the GPUs where
    NCCL runs (without nccl in backends, Gloo's CPU processes: CPU_WORLD_SIZES)."""
    chosen = config["world_sizes"]
    if chosen == "auto":
        return auto_world_sizes(gpus if "nccl" in config["backends"] else 0, config["cluster"]["nodes"])
    return list(chosen)


def placeable(config: dict, backend: str, gpus: int, sizes: list[int], what: str) -> tuple[list[int], list[dict]]:
    """The world sizes a job can be placed at (distbench.launch.cluster.job_layout), and a skipped entry
    naming the others and why."""
    kept, dropped, whys = [], [], []
    for ws in sizes:
        layout, why = job_layout(ws, backend, gpus, config["cluster"])
        if layout is None:
            dropped.append(ws)
            whys.append(why)
        else:
            kept.append(ws)
    if not dropped:
        return kept, []
    if backend == "nccl" and config["cluster"]["nodes"] == 1 and config["cluster"]["ranks_per_node"] == "auto":
        why = f"above gpus={gpus}: NCCL needs one GPU per rank (cluster.nodes is 1)"
    else:
        why = "; ".join(dict.fromkeys(whys))
    return kept, [{"what": f"{what} {dropped}", "why": why}]


def family_backend(config: dict, family: str, gpus: int) -> tuple[str | None, dict | None]:
    """The backend a one-backend family (training, memory) runs on: NCCL where GPUs exist and
    nccl is configured, else Gloo; or None and why the family does not run."""
    if not config[family]["enabled"]:
        return None, {"what": f"{family} family", "why": f"{family}.enabled is false"}
    if "nccl" in config["backends"] and gpus > 0:
        return "nccl", None
    if "gloo" in config["backends"]:
        return "gloo", None
    return None, {"what": f"{family} family", "why": f"backend nccl needs a GPU and gloo is not in backends (gpus={gpus})"}


def profile_params(config: dict, family: str) -> dict:
    """profile / profile_steps for a family's jobs, only when on: a run that never profiles keeps
    the params it had (turning profiling on or off reruns the family's jobs once)."""
    from distbench.launch.profiling import family_mode

    mode = family_mode(config, family)
    return {} if mode == "off" else {"profile": mode, "profile_steps": config["profile_steps"]}
