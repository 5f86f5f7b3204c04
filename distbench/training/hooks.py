"""What the pipeline asks of the training family besides its plan (its manifest names each function):
the config check its schema cannot state and the jobs the quick answer runs. Torch-free.
"""

from __future__ import annotations

from distbench.launch.planning import nccl_env_label_problems, quick_world_size

# The quick answer's workload: seed 004's MLP, plain DDP: the cheapest that judges scaling.
QUICK_MODEL = "mlp"
QUICK_CONFIG = "plain"


def config_check(config: dict) -> list[str]:
    """The NCCL settings of the tuning space: each one's label names a job directory."""
    return nccl_env_label_problems("training.tune_space.nccl_env", config["training"]["tune_space"]["nccl_env"])


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
