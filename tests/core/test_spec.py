"""distbench.core.ops_spec is the one source of what each collective is: the torch ops, the harness, the
cost model, the config schema, the NCCL log names and summary.json all read it. Adding an op is one
spec plus its TorchOp (see the spec module's docstring); these tests fail when a reader disagrees."""

from dataclasses import replace

import pytest

from distbench.core import ops_spec as S
from distbench.pipeline.config import check_config, load_schema
from distbench.predict import model as P


def test_every_spec_has_a_torch_op_and_back():
    pytest.importorskip("torch")
    from distbench.comm.ops import TORCH_OPS

    assert tuple(TORCH_OPS) == S.OPS == tuple(S.SPECS)
    for name, t in TORCH_OPS.items():
        assert t.spec is S.SPECS[name], name
        # an in-place variant in torch exactly where the spec says nccl-tests has one
        assert (t.make_inplace is not None) == S.SPECS[name].has_inplace_variant, name


@pytest.mark.parametrize("n", range(2, 17))
def test_bus_factors_agree_for_ops_predict_and_the_harness(n):
    pytest.importorskip("torch")
    from distbench.comm.ops import TORCH_OPS

    for op in P.MODELLED_OPS:
        assert P.bus_factor(op, n) == TORCH_OPS[op].spec.bus_factor(n) == S.SPECS[op].bus_factor(n), (op, n)
    # nccl-tests doc/PERFORMANCE.md, written out once more on purpose: a wrong spec fails here
    expected = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
                "broadcast": 1.0, "all_to_all": (n - 1) / n, "all_to_all_v": (n - 1) / n, "send_recv": 1.0}
    assert {op: S.SPECS[op].bus_factor(n) for op in expected} == pytest.approx(expected)


def test_predict_follows_the_spec(monkeypatch):
    """No copy of a factor anywhere: change the spec and the cost model changes with it."""
    before = P.predict_collective("all_gather", [2**20], 4, P.Link(1.0, 100.0, 0.0))
    monkeypatch.setitem(S.SPECS, "all_gather", replace(S.SPECS["all_gather"], bus_factor=lambda n: 2.0))
    assert P.bus_factor("all_gather", 4) == 2.0
    after = P.predict_collective("all_gather", [2**20], 4, P.Link(1.0, 100.0, 0.0))
    assert (after != before).all()


def test_the_harness_table_follows_the_spec(monkeypatch):
    from distbench.comm.main import table_line

    row = {"size_bytes": 8, "count": 2, "dtype": "float32", "op": "broadcast", "timing": "host",
           "inplace": True, "status": "skipped", "message": "x"}
    assert table_line([row]).split()[3:5] == ["none", "0"]
    monkeypatch.setitem(S.SPECS, "broadcast", replace(S.SPECS["broadcast"], redop="max", root=3))
    assert table_line([row]).split()[3:5] == ["max", "3"]


def test_the_config_schema_takes_its_ops_from_the_spec():
    schema = load_schema()
    assert tuple(schema["definitions"]["op"]["enum"]) == S.OPS
    assert "enum" not in schema["properties"]["comm"]["properties"]["ops"]["items"]  # no second copy
    assert tuple(check_config({})["comm"]["ops"]) == S.OPS
    assert check_config({"comm": {"ops": ["barrier"]}})["comm"]["ops"] == ["barrier"]
    from distbench.pipeline.config import SCHEMA_PATH, family_schemas

    for path in (SCHEMA_PATH, *family_schemas().values()):  # the central file and each family's
        text = path.read_text()
        assert "all_to_all_v, send_recv" not in text and "reduce_scatter]" not in text  # the yaml lists no ops


def test_nccl_names_come_from_the_spec():
    from distbench.comm.analysis import diagnose

    assert S.NCCL_NAMES == {"AllReduce": "all_reduce", "AllGather": "all_gather",
                            "ReduceScatter": "reduce_scatter", "Broadcast": "broadcast"}
    assert diagnose.NCCL_NAMES is S.NCCL_NAMES
    assert not hasattr(diagnose, "NCCL_OP_NAMES")


def test_nccl_tests_names_redop_and_root():
    assert {s.name: s.nccl_tests_binary for s in S.SPECS.values() if s.nccl_tests_binary} == {
        "all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf", "reduce_scatter": "reduce_scatter_perf",
        "broadcast": "broadcast_perf", "all_to_all": "alltoall_perf", "send_recv": "sendrecv_perf"}
    assert {s.name for s in S.SPECS.values() if s.reduces} == {"all_reduce", "reduce_scatter"}
    assert all(s.redop == "sum" for s in S.SPECS.values() if s.reduces)
    assert {s.name: s.root for s in S.SPECS.values() if s.root != -1} == {"broadcast": 0}
    from distbench.core import choices

    for gone in ("OPS", "NCCL_TESTS_REDOP", "NCCL_TESTS_ROOT"):  # one source: not repeated in core
        assert not hasattr(choices, gone), gone


def test_summary_json_uses_the_spec():
    import inspect

    from distbench.comm.analysis import nccl_tests_json

    src = inspect.getsource(nccl_tests_json)
    assert "SPECS[op].redop" in src and "SPECS[op].root" in src


def test_the_spec_module_is_torch_free():
    import subprocess
    import sys

    code = "import sys, distbench.core.ops_spec, distbench.pipeline.config; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
