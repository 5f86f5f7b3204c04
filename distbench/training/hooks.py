"""What the pipeline asks of the training family besides its plan (its manifest names each function):
the config check its schema cannot state and the jobs the quick answer runs. Torch-free.
"""

from __future__ import annotations

from distbench.launch.planning import nccl_env_label_problems, quick_world_size

# The quick answer's workload: seed 004's MLP, plain DDP: the cheapest that judges scaling.
QUICK_MODEL = "mlp"
QUICK_CONFIG = "plain"


def config_check(config: dict) -> list[str]:
    """The NCCL settings of the tuning space (each one's label names a job directory), and the 2D
    layouts of training.lm.strategies that can run at none of the world sizes the config names."""
    return (nccl_env_label_problems("training.tune_space.nccl_env", config["training"]["tune_space"]["nccl_env"])
            + layout_problems(config))


def layout_problems(config: dict) -> list[str]:
    """A 2D layout (hsdp, fsdp_tp) in training.lm.strategies that divides none of the world sizes
    the config lists (training.lm.world_sizes, else training.world_sizes, else the top-level
    world_sizes) would run nowhere: refused here, naming the key, the element and the allowed
    values. Where the sizes are `auto` (resolved on the host) or some size fits, the plan skips the
    sizes that do not fit, each with the reason (distbench.training.plan.layout_skipped); the heads
    depend on the backend's shape (lm.gpu or lm.cpu), so the plan checks them too."""
    from distbench.workloads.layouts import TWO_D, layout_problem
    from distbench.workloads.registry import workload

    tr = config["training"]
    lm = tr.get("lm") or {}
    strategies = lm.get("strategies") or []
    models = [m for m in tr.get("models") or [] if workload(m).block == "lm"]
    if not models or not any(s in TWO_D for s in strategies):
        return []
    sizes = lm.get("world_sizes", "auto")
    if sizes == "auto":
        sizes = tr.get("world_sizes") or config.get("world_sizes")
    if not isinstance(sizes, list) or not [ws for ws in sizes if ws > 1]:
        return []  # auto (resolved on the host) or one rank only: the plan says what runs
    out = []
    for i, strategy in enumerate(strategies):
        if strategy not in TWO_D:
            continue
        whys = [layout_problem(strategy, ws, lm.get("shard_size"), lm.get("tp_size"), None, m)
                for m in models for ws in sizes if ws > 1]
        if all(whys):
            out.append(f"config key training.lm.strategies[{i}] ({strategy!r}) runs at none of the world sizes "
                       f"{sorted(w for w in sizes if w > 1)}: {'; '.join(dict.fromkeys(whys))}")
    return out


def quick(config: dict, plan: dict, cores: int) -> list:
    """The training jobs of the quick answer (the manifest's quick): one workload (QUICK_MODEL, plain
    DDP) at one rank (the efficiency baseline) and at the world size the Verdict judges."""
    jobs = [j for j in plan["jobs"].get("training") or [] if j.config_label == QUICK_CONFIG]
    if not jobs:
        return []
    model = QUICK_MODEL if any(j.model == QUICK_MODEL for j in jobs) else jobs[0].model
    of = [j for j in jobs if j.model == model]
    multi = sorted({j.world_size for j in of if j.world_size > 1})
    sizes = {1, quick_world_size(config, plan, of[0].backend, multi, cores)} if multi else {1}
    return [j for j in of if j.world_size in sizes]
