"""What the workloads add to a job's record (distbench.launch.job_record), shared by every family
that trains a workload (training and memory: no family imports another):

- `config_schema`: the config schema as the pipeline checks a config with it
  (distbench.core.config_schema.build_config_schema), its workload enum this registry's names (any
  DISTBENCH_WORKLOAD_MODULES extension loaded first). Every family's ranks check their job.json
  against it, so a value the config refuses is refused in the ranks too.
- `workload_fields`: every workload's shape arguments as job values, bounded by the config
  schema's nodes for them.

Torch-free: the ranks' argument parsing and the rule scripts import it.
"""

from __future__ import annotations

import functools

from distbench.core.config_schema import build_config_schema
from distbench.launch.job_record import Field, resolve_pointer
from distbench.workloads.registry import WORKLOADS, all_args, load_extensions


def config_schema() -> dict:
    """The config schema with this registry's workloads (the same object while they stay the same:
    the job records cache their schemas by it)."""
    load_extensions()
    return _config_schema(tuple(WORKLOADS))


@functools.lru_cache(maxsize=4)
def _config_schema(workloads: tuple[str, ...]) -> dict:
    return build_config_schema(list(workloads))


# The config schema's node for each built-in workload argument's job key (the largest of the
# backends' blocks: gpu and cpu share the bounds); an extension's argument is checked by its type only
# (its spec's own `check` runs in the ranks).
WORKLOAD_KEYS = {
    "hidden_dim": "training.gpu.hidden_dim", "num_layers": "training.gpu.num_layers",
    "seq_len": "training.lm.gpu.seq_len", "vocab_size": "training.lm.gpu.vocab_size", "size": "training.lm.gpu.size",
    "layers": "training.lm.gpu.layers", "heads": "training.lm.gpu.heads", "dim": "training.lm.gpu.dim",
    "lora_rank": "training.lm.lora_rank", "lora_alpha": "training.lm.lora_alpha",
}
_JSON_TYPES = {int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string", "maxLength": 4096}}


def workload_fields() -> tuple[Field, ...]:
    """Every workload's shape arguments as job values (an extension's included: load_extensions)."""
    load_extensions()
    return tuple(Field(a.param, (lambda c, k=a.param: _without_default(c, WORKLOAD_KEYS[k])) if a.param in WORKLOAD_KEYS
                       else _JSON_TYPES.get(a.type, {}), a.flag, required=False)
                 for a in all_args() if a.param)


def _without_default(config_schema: dict, path: str) -> dict:
    return {k: v for k, v in resolve_pointer(config_schema, path).items() if k != "default"}
