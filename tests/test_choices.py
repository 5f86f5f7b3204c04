"""Each allowed-value list has one source (distbench.core.choices, and distbench.comm.spec for the ops);
everything that must repeat one is tied to it here, so adding a dtype, timing or backend is one edit
plus what this test names (an op: see distbench.comm.spec and tests/test_spec.py)."""

import re

from distbench.comm.spec import OPS
from distbench.core import choices
from distbench.pipeline.config import load_schema
from tests.conftest import REPO


def _comm(schema):
    return schema["properties"]["comm"]["properties"]


def test_the_config_schema_allows_exactly_the_choices():
    schema = load_schema()
    comm = _comm(schema)
    assert tuple(schema["properties"]["backends"]["items"]["enum"]) == choices.BACKENDS
    op_enum = schema["definitions"]["op"]["enum"]
    assert comm["ops"]["items"] == comm["nccl_env_ops"]["items"] == {"$ref": "#/definitions/op"}
    assert tuple(op_enum) == OPS
    assert tuple(comm["ops"]["default"]) == OPS
    assert tuple(comm["dtypes"]["items"]["enum"]) == choices.DTYPES
    assert tuple(comm["timing"]["items"]["enum"]) == choices.TIMINGS
    assert tuple(comm["rank_agg"]["enum"]) == choices.RANK_AGGS
    assert tuple(schema["properties"]["cluster"]["properties"]["launcher"]["enum"]) == choices.LAUNCHERS
    from distbench.predict.model import PRESETS

    assert sorted(schema["properties"]["predict"]["properties"]["preset"]["enum"]) == sorted(PRESETS)


def test_the_registry_and_the_harness_command_line_use_the_choices():
    import torch

    from distbench.comm.cli import parse_args
    from distbench.comm.ops import TORCH_OPS

    assert tuple(TORCH_OPS) == OPS
    for dtype in choices.DTYPES:
        assert isinstance(getattr(torch, dtype), torch.dtype)
    args = parse_args(["--backend", "gloo", "--ops", ",".join(OPS), "--out", "x.csv"])
    assert tuple(args.ops) == OPS


def test_the_rules_take_wildcard_constraints_from_the_choices():
    common = (REPO / "rules/common.smk").read_text()
    assert 'backend="|".join(BACKENDS)' in common and 'dtype="|".join(DTYPES)' in common
    assert 'backend="nccl' not in common and 'dtype="[' not in common


def test_the_readme_names_every_choice():
    readme = (REPO / "README.md").read_text()
    for name in (*OPS, *choices.DTYPES, *choices.TIMINGS, *choices.BACKENDS, *choices.RANK_AGGS):
        assert f"`{name}`" in readme or re.search(rf"\b{name}\b", readme), name


def test_the_training_lists_match_the_schema():
    schema = load_schema()
    tr = schema["properties"]["training"]["properties"]
    assert tuple(tr["dtype"]["enum"]) == choices.TRAINING_DTYPES
    assert tuple(tr["optimizer"]["enum"]) == choices.OPTIMIZERS
    assert tuple(tr["scaling"]["enum"]) == choices.SCALINGS
    assert tuple(schema["definitions"]["ddp"]["properties"]["comm_hook"]["enum"]) == choices.COMM_HOOKS
    assert tuple(tr["tune_space"]["properties"]["comm_hook"]["items"]["enum"]) == choices.COMM_HOOKS


def test_the_workload_registry_is_the_one_list_of_training_models():
    from distbench.workloads.registry import WORKLOADS

    schema = load_schema()
    names = tuple(WORKLOADS)
    assert names == ("mlp", "gpt", "lora")
    # both model lists take the one workload enum, filled in from the registry
    assert schema["properties"]["training"]["properties"]["models"]["items"] == {"$ref": "#/definitions/workload"}
    memory_lists = [alt for alt in schema["properties"]["memory"]["properties"]["models"]["oneOf"] if "items" in alt]
    assert [alt["items"] for alt in memory_lists] == [{"$ref": "#/definitions/workload"}]
    assert tuple(schema["definitions"]["workload"]["enum"]) == names
    assert "mlp" not in (REPO / "distbench/pipeline/config.schema.yaml").read_text().split("definitions:")[1].split("workload:")[1].split("\n  ")[0]
    assert not hasattr(choices, "TRAINING_MODELS")
    common = (REPO / "rules/common.smk").read_text()
    assert 'model="|".join(WORKLOADS)' in common
