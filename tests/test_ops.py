"""The op registry: nccl-tests bus factors, and each op's expected output against a reference
computed from every rank's inputs (no process group needed)."""

import math

import pytest
import torch

from distbench.comm import bandwidths
from distbench.ops import OPS, Ctx, element_count


@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 2, 0.5), ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 0.75),
    ("all_to_all", 4, 0.75), ("broadcast", 8, 1.0), ("send_recv", 2, 1.0),
])
def test_bus_factors_match_nccl_tests(op, n, factor):
    assert OPS[op].bus_factor(n) == pytest.approx(factor)


def test_barrier_reports_latency_only():
    assert math.isnan(OPS["barrier"].bus_factor(4)) and not OPS["barrier"].moves_data
    algbw, busbw = bandwidths(0, 12.0, float("nan"))
    assert math.isnan(algbw) and math.isnan(busbw)


def test_bandwidth_definitions():
    # 1 GB in 1000 us -> 1000 GB/s algbw; all_reduce on 4 ranks -> busbw 1.5x.
    algbw, busbw = bandwidths(10**9, 1e6, OPS["all_reduce"].bus_factor(4))
    assert algbw == pytest.approx(1.0) and busbw == pytest.approx(1.5)


def test_element_count_rounds_split_ops_to_world_size():
    assert element_count(OPS["all_gather"], 40, 4, 3) == 9
    assert element_count(OPS["all_reduce"], 40, 4, 3) == 10
    assert element_count(OPS["all_to_all"], 8, 4, 6) == 0  # too small: the harness skips it


def _ranks(n, dtype=torch.float32):
    return [Ctx(r, n, torch.device("cpu"), dtype, "gloo") for r in range(n)]


def _reference(op, bufs, n):
    sends = [b.send for b in bufs]
    if op == "all_reduce":
        total = sum(s.double() for s in sends)
        return [total for _ in range(n)]
    if op == "all_gather":
        return [torch.cat(sends).double() for _ in range(n)]
    if op == "reduce_scatter":
        total = sum(s.double() for s in sends)
        return list(total.chunk(n))
    if op == "broadcast":
        return [sends[0].double() for _ in range(n)]
    if op == "all_to_all":
        chunks = [s.double().chunk(n) for s in sends]
        return [torch.cat([chunks[src][dst] for src in range(n)]) for dst in range(n)]
    if op == "send_recv":
        return [sends[(r - 1) % n].double() for r in range(n)]
    raise AssertionError(op)


@pytest.mark.parametrize("n", [2, 3, 4, 8])
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_expected_matches_reference(op, n, dtype):
    spec = OPS[op]
    count = element_count(spec, 4 * 1000, 4, n)
    ctxs = _ranks(n, dtype)
    bufs = [spec.make(c, count) for c in ctxs]
    ref = _reference(op, bufs, n)
    for r in range(n):
        assert torch.equal(bufs[r].expected().double(), ref[r]), f"{op} rank {r} of {n}"


def test_inputs_differ_between_ranks():
    # With equal inputs a broken op (e.g. returning its own input) would pass the check.
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        a, b = (OPS[op].make(c, 12) for c in _ranks(2))
        assert not torch.equal(a.send, b.send), op


def test_check_catches_a_wrong_chunk_order():
    spec = OPS["all_gather"]
    bufs = [spec.make(c, 12) for c in _ranks(2)]
    swapped = torch.cat([bufs[1].send, bufs[0].send])
    assert not torch.equal(swapped, bufs[0].expected())


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("n", [2, 3])
def test_inplace_variants_alias_their_buffers_and_expect_the_same(op, n):
    spec = OPS[op]
    count = element_count(spec, 4 * 96, 4, n)
    for c in _ranks(n):
        a, b = spec.make(c, count), spec.make_inplace(c, count)
        assert torch.equal(a.send, b.send) and torch.equal(a.expected(), b.expected())
        chunk_of_the_other = b.send if op == "all_gather" else b.recv
        whole = b.recv if op == "all_gather" else b.send
        assert chunk_of_the_other.data_ptr() == whole.data_ptr() + c.rank * (count // n) * 4


def test_placements():
    from distbench.ops import placements
    assert placements(OPS["all_reduce"], [False]) == [True]  # torch: in place only
    assert placements(OPS["all_to_all"], [False, True]) == [False]
    assert placements(OPS["all_gather"], [False, True]) == [False, True]
