"""What the pipeline asks of the prediction besides its tables (its manifest names the function): the
config check its schema cannot state.
"""

from __future__ import annotations


def config_check(config: dict) -> list[str]:
    """predict.gpu_counts the prediction can place: whole nodes of the preset's GPUs per node, or
    fewer than one node (distbench.predict.cluster), known now rather than after every benchmark."""
    from distbench.predict.model import get_preset

    per_node = get_preset(config["predict"]["preset"]).gpus_per_node
    return [f"config key predict.gpu_counts[{i}]: {n} GPUs do not fill whole nodes of {per_node} (preset "
            f"{config['predict']['preset']}); use fewer than {per_node} or a multiple of {per_node}, e.g. "
            f"{n // per_node * per_node} or {-(-n // per_node) * per_node}"
            for i, n in enumerate(config["predict"]["gpu_counts"]) if n > per_node and n % per_node]
