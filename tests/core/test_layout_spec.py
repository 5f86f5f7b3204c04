"""The parallel layouts' registry (distbench.core.layout_spec): what each layout is, written once, and
no module beyond the spec and the layouts' torch side (distbench.workloads.layouts) deciding anything by
comparing a layout's name. The scan reads the code itself (every module under distbench/), and is
checked against deliberately broken code too, so a scan that stopped finding anything fails here."""

import ast
import subprocess
import sys

import pytest
import yaml

from distbench.core import layout_spec
from distbench.core.layout_spec import (BASELINE, LAYOUTS, SPECS, Collective, LayoutSpec, MeshDim, _registry,
                                        layout, layout_of, layout_title)
from distbench.core.ops_spec import OPS
from tests.conftest import REPO

PACKAGE = REPO / "distbench"
# the spec, and the torch side keyed by the spec's name (a dispatch table there)
MAY_COMPARE = {"distbench/core/layout_spec.py", "distbench/workloads/layouts.py"}
# WorkloadSpec.block names a config block, one of which is spelled as DDP's layout: not a layout
NOT_A_LAYOUT_ATTRS = {"block"}


def _names_in(node: ast.AST, names: set[str]) -> list[str]:
    """The layout names a comparison operand holds: a string constant, or the constants of a tuple, list
    or set (`x in ("fsdp", "hsdp")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names_in(e, names)]
    return []


def name_comparisons(source: str, names) -> list[tuple[int, str]]:
    """(line, name) of each place `source` decides by a layout's name: a comparison (==, !=, in, not in)
    against a layout name or a literal collection of them, or a lookup in a dict literal keyed by them
    (`{"ddp": ..., "fsdp": ...}.get(strategy)`, `{...}[strategy]`)."""
    names = set(names)
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Attribute) and o.attr in NOT_A_LAYOUT_ATTRS for o in operands):
                continue
            hits += [(node.lineno, n) for o in operands for n in _names_in(o, names)]
        looked_up = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            looked_up = node.func.value
        elif isinstance(node, ast.Subscript):
            looked_up = node.value
        if isinstance(looked_up, ast.Dict):
            hits += [(node.lineno, n) for k in looked_up.keys if k is not None for n in _names_in(k, names)]
    return hits


def package_comparisons(root=REPO, names=LAYOUTS) -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted((root / "distbench").rglob("*.py")):
        hits = name_comparisons(path.read_text(), names)
        if hits:
            out[path.relative_to(root).as_posix()] = hits
    return out


def test_only_the_spec_and_the_torch_side_compare_layout_names():
    found = package_comparisons()
    outside = {f: hits for f, hits in found.items() if f not in MAY_COMPARE}
    assert not outside, ("read the layout's spec (distbench.core.layout_spec) instead of comparing its name:\n"
                         + "\n".join(f"{f}:{line}: {n!r}" for f, hits in outside.items() for line, n in hits))
    assert len(MAY_COMPARE) <= 2


@pytest.mark.parametrize("line,caught", [
    ('if args.strategy == "ddp":\n    pass', True),
    ('ok = strategy != "fsdp_tp"', True),
    ('two_d = args.strategy in ("hsdp", "fsdp_tp")', True),
    ('x = s[s["strategy"].fillna("ddp") != "fsdp"]', True),
    ('who = {"ddp": "DDP", "fsdp": "FSDP"}.get(strategy)', True),
    ('who = {"hsdp": 1}[strategy]', True),
    ('if spec.block == "ddp":\n    pass', False),  # a workload's config block, not a layout
    ('label = "ddp+gbv" if gbv else "ddp"', False),  # a label, written not compared
    ('if layout(strategy).sharded:\n    pass', False),
    ('if config == "plain":\n    pass', False),
])
def test_the_scan_catches_a_layout_name_compared(line, caught):
    assert bool(name_comparisons(line, LAYOUTS)) == caught


def test_a_name_comparison_put_back_is_caught(tmp_path):
    """The whole scan over a copy of the package with one comparison put back."""
    import shutil

    shutil.copytree(PACKAGE, tmp_path / "distbench", ignore=shutil.ignore_patterns("__pycache__"))
    phases = tmp_path / "distbench/training/phases.py"
    phases.write_text(phases.read_text() + '\n\ndef _is_ddp(args):\n    return args.strategy == "ddp"\n')
    found = package_comparisons(tmp_path)
    assert set(found) - MAY_COMPARE == {"distbench/training/phases.py"}


def test_the_registry_refuses_duplicates_and_unknown_parts():
    ddp = SPECS[BASELINE]
    with pytest.raises(ValueError, match="twice"):
        _registry(ddp, ddp)
    with pytest.raises(ValueError, match="not an op"):
        _registry(ddp, LayoutSpec("x", "X", "X", (MeshDim("shard", "shard"),), (Collective("scatter", "float32", "shard"),),
                                  sharded=True))
    with pytest.raises(ValueError, match="not an op"):
        _registry(ddp, LayoutSpec("x", "X", "X", (MeshDim("shard", "shard"),), (Collective("all_gather", "float32", "tp"),),
                                  sharded=True))
    with pytest.raises(ValueError, match="2D mesh"):
        _registry(ddp, LayoutSpec("x", "X", "X", (MeshDim("a", "replicate"), MeshDim("b", "shard")), (), sharded=True))
    with pytest.raises(ValueError, match="baseline"):
        _registry(SPECS["fsdp"])
    with pytest.raises(ValueError, match="unknown layout"):
        layout("zero3")


def test_the_facts_as_the_report_and_the_phases_had_them():
    assert LAYOUTS == ("ddp", "fsdp", "hsdp", "fsdp_tp") and BASELINE == "ddp"
    assert {n: s.title for n, s in SPECS.items()} == {"ddp": "DDP", "fsdp": "FSDP2 full shard", "hsdp": "HSDP",
                                                      "fsdp_tp": "2D (FSDP2 + TP)"}
    assert [layout_title("hsdp", 2), layout_title("fsdp_tp", 4), layout_title("fsdp_tp", float("nan"))] == \
        ["HSDP (shard 2)", "2D (TP 4)", "2D (FSDP2 + TP)"]
    assert layout_title(None) == "DDP" and layout_title("other") == "other" and layout_of("other") is None
    assert [n for n, s in SPECS.items() if s.sharded] == ["fsdp", "hsdp", "fsdp_tp"]
    assert [n for n, s in SPECS.items() if not s.has_compute_only] == ["fsdp_tp"]
    assert [n for n, s in SPECS.items() if s.replay is None] == ["hsdp", "fsdp_tp"]
    assert [n for n, s in SPECS.items() if s.min_world_size == 2] == ["hsdp", "fsdp_tp"]
    assert all(c.op in OPS for s in SPECS.values() for c in s.collectives)


def test_group_sizes_and_collectives_follow_the_mesh():
    hsdp, tp = layout("hsdp"), layout("fsdp_tp")
    assert hsdp.degrees(8, 4) == {"replicate": 2, "shard": 4} and tp.degrees(8, 2) == {"dp": 4, "tp": 2}
    assert sorted(hsdp.collectives_at(8, 4, "bfloat16")) == [("all_gather", "bfloat16", 4), ("all_reduce", "float32", 2),
                                                            ("reduce_scatter", "float32", 4)]
    assert hsdp.collectives_at(4, 4) == [("all_gather", "float32", 4), ("reduce_scatter", "float32", 4)]  # one replica
    assert sorted(tp.collectives_at(4, 2, "bfloat16")) == [("all_gather", "bfloat16", 2), ("all_reduce", "bfloat16", 2),
                                                          ("all_reduce", "float32", 2), ("reduce_scatter", "float32", 2)]
    assert layout("ddp").collectives_at(4) == [("all_reduce", "float32", 4)]


def test_the_torch_side_has_every_sharded_layout():
    from distbench.workloads import layouts

    assert set(layouts.SHARD) == {n for n, s in SPECS.items() if s.sharded}
    assert set(layouts.CHECKS) <= {n for n, s in SPECS.items() if s.group}
    assert layouts.TWO_D == ("hsdp", "fsdp_tp") and layouts.SHARDED == ("fsdp", "hsdp", "fsdp_tp")


def test_the_config_schema_takes_its_layouts_from_the_spec():
    """The config's strategy enum is the spec's registry, filled in when the schema is built (as the op
    enum is from the op specs): a layout added to the spec is a value the config accepts, with no data
    file to edit, and no fragment lists layouts of its own."""
    from distbench.pipeline.config import load_schema

    schema = load_schema()
    assert schema["definitions"]["layout"]["enum"] == list(LAYOUTS)
    strategies = schema["properties"]["training"]["properties"]["lm"]["properties"]["strategies"]
    assert strategies["items"] == {"$ref": "#/definitions/layout"}

    def enums(x):
        if isinstance(x, dict):
            yield from ([x["enum"]] if isinstance(x.get("enum"), list) else [])
            for v in x.values():
                yield from enums(v)
        elif isinstance(x, list):
            for v in x:
                yield from enums(v)

    for path in (REPO / "distbench").glob("*/config.schema.yaml"):
        listed = [e for e in enums(yaml.safe_load(path.read_text())) if set(e) & set(LAYOUTS) - {"ddp", "fsdp"}]
        assert not listed, f"{path} lists layouts itself: {listed}"


def test_the_spec_module_is_torch_free():
    code = "import sys, distbench.core.layout_spec; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    assert layout_spec.__file__.endswith("distbench/core/layout_spec.py")


def test_each_layout_names_its_collectives_and_bookkeeping_in_words():
    from distbench.core.layout_spec import layout
    assert layout("ddp").collectives_words == "the all-reduce"
    assert layout("fsdp").collectives_words == "the all-gathers and reduce-scatters"
    assert layout("hsdp").collectives_words == "the all-gathers, reduce-scatters and all-reduces"
    assert layout("fsdp").other_words == "host-bound or idle time, FSDP bookkeeping"
