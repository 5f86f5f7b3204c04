"""Each allowed-value list has one source (distbench.core.choices, distbench.core.ops_spec for the ops,
distbench.workloads.registry for the workloads); everything that must repeat one is tied to it here,
so adding a dtype, timing or backend is one edit plus what this test names. Adding an op or a
workload needs no edit here nor in the documentation: the schema's enums are filled from the spec and
the registry, and the documentation points at them (tests/core/test_spec.py, tests/core/test_recipes.py)."""

import re

from distbench.core import choices
from distbench.core.ops_spec import OPS
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

    from distbench.comm.main import parse_args
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


def _documentation() -> str:
    return "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])


def test_the_documentation_names_every_choice():
    docs = _documentation()
    for name in (*choices.DTYPES, *choices.TIMINGS, *choices.BACKENDS, *choices.RANK_AGGS):
        assert f"`{name}`" in docs or re.search(rf"\b{name}\b", docs), name


def test_the_ops_and_workloads_are_documented_by_their_one_list():
    """The ops and the workloads are not listed by hand in the documentation (a new one would need an
    edit there): it names the spec and the registry that list them."""
    docs = _documentation()
    assert "distbench/core/ops_spec.py" in docs and "distbench/workloads/registry.py" in docs


def test_the_training_lists_match_the_schema():
    schema = load_schema()
    tr = schema["properties"]["training"]["properties"]
    assert tuple(tr["dtype"]["enum"]) == choices.MODEL_DTYPES
    assert tuple(tr["optimizer"]["enum"]) == choices.OPTIMIZERS
    assert tuple(tr["scaling"]["enum"]) == choices.SCALINGS
    assert tuple(schema["definitions"]["ddp"]["properties"]["comm_hook"]["enum"]) == choices.DDP_HOOKS
    assert tuple(tr["tune_space"]["properties"]["comm_hook"]["items"]["enum"]) == choices.DDP_HOOKS


def test_the_workload_registry_is_the_one_list_of_training_models():
    from distbench.workloads.registry import WORKLOADS

    schema = load_schema()
    names = tuple(WORKLOADS)
    assert {"mlp", "gpt", "lora"} <= set(names)  # the built-in ones; a recipe's new one adds itself
    # both model lists take the one workload enum, filled in from the registry
    assert schema["properties"]["training"]["properties"]["models"]["items"] == {"$ref": "#/definitions/workload"}
    memory_lists = [alt for alt in schema["properties"]["memory"]["properties"]["models"]["oneOf"] if "items" in alt]
    assert [alt["items"] for alt in memory_lists] == [{"$ref": "#/definitions/workload"}]
    assert tuple(schema["definitions"]["workload"]["enum"]) == names
    workload_def = (REPO / "distbench/pipeline/config.schema.yaml").read_text().split("definitions:")[1].split(
        "workload:")[1].split("\n  ")[0]
    assert not any(n in workload_def for n in names)  # the enum is filled in, never written there
    assert not hasattr(choices, "TRAINING_MODELS")
    common = (REPO / "rules/common.smk").read_text()
    assert 'model="|".join(WORKLOADS)' in common
