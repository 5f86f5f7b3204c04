"""The op registry: nccl-tests bus factors, and each op's expected output against a reference
computed from every rank's inputs (no process group needed)."""

import math

import pytest
import torch

from distbench.comm.harness import bandwidths
from distbench.comm import ops as distbench_ops
from distbench.comm.ops import TORCH_OPS, Ctx
from distbench.core.ops_spec import SPECS, element_count, placements


@pytest.mark.parametrize("op,n,factor", [
    ("all_reduce", 2, 1.0), ("all_reduce", 4, 1.5), ("all_reduce", 8, 1.75),
    ("all_gather", 2, 0.5), ("all_gather", 8, 7 / 8), ("reduce_scatter", 4, 0.75),
    ("all_to_all", 4, 0.75), ("broadcast", 8, 1.0), ("send_recv", 2, 1.0),
])
def test_bus_factors_match_nccl_tests(op, n, factor):
    assert SPECS[op].bus_factor(n) == pytest.approx(factor)


def test_barrier_reports_latency_only():
    assert math.isnan(SPECS["barrier"].bus_factor(4)) and not SPECS["barrier"].moves_data
    algbw, busbw = bandwidths(0, 12.0, float("nan"))
    assert math.isnan(algbw) and math.isnan(busbw)


def test_bandwidth_definitions():
    # 1 GB in 1000 us -> 1000 GB/s algbw; all_reduce on 4 ranks -> busbw 1.5x.
    algbw, busbw = bandwidths(10**9, 1e6, SPECS["all_reduce"].bus_factor(4))
    assert algbw == pytest.approx(1.0) and busbw == pytest.approx(1.5)


def test_element_count_rounds_split_ops_to_world_size():
    assert element_count(SPECS["all_gather"], 40, 4, 3) == 9
    assert element_count(SPECS["all_reduce"], 40, 4, 3) == 10
    assert element_count(SPECS["all_to_all"], 8, 4, 6) == 0  # too small: the harness skips it


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
    spec = TORCH_OPS[op]
    count = element_count(spec.spec, 4 * 1000, 4, n)
    ctxs = _ranks(n, dtype)
    bufs = [spec.make(c, count) for c in ctxs]
    ref = _reference(op, bufs, n)
    for r in range(n):
        assert torch.equal(bufs[r].expected().double(), ref[r]), f"{op} rank {r} of {n}"


def test_inputs_differ_between_ranks():
    # With equal inputs a broken op (e.g. returning its own input) would pass the check.
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        a, b = (TORCH_OPS[op].make(c, 12) for c in _ranks(2))
        assert not torch.equal(a.send, b.send), op


def test_check_catches_a_wrong_chunk_order():
    spec = TORCH_OPS["all_gather"]
    bufs = [spec.make(c, 12) for c in _ranks(2)]
    swapped = torch.cat([bufs[1].send, bufs[0].send])
    assert not torch.equal(swapped, bufs[0].expected())


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
@pytest.mark.parametrize("n", [2, 3])
def test_inplace_variants_alias_their_buffers_and_expect_the_same(op, n):
    spec = TORCH_OPS[op]
    count = element_count(spec.spec, 4 * 96, 4, n)
    for c in _ranks(n):
        a, b = spec.make(c, count), spec.make_inplace(c, count)
        assert torch.equal(a.send, b.send) and torch.equal(a.expected(), b.expected())
        chunk_of_the_other = b.send if op == "all_gather" else b.recv
        whole = b.recv if op == "all_gather" else b.send
        assert chunk_of_the_other.data_ptr() == whole.data_ptr() + c.rank * (count // n) * 4


def test_placements():
    assert placements(SPECS["all_reduce"], [False]) == [True]  # torch: in place only
    assert placements(SPECS["all_to_all"], [False, True]) == [False]
    assert placements(SPECS["all_gather"], [False, True]) == [False, True]


# --- exact checks at any world size ------------------------------------------------------------

def _sequential_sum(inputs, order):
    """Sum the ranks' inputs one at a time, rounding to the dtype after every step (as a ring does)."""
    acc = inputs[order[0]].clone()
    for r in order[1:]:
        acc = (acc.double() + inputs[r].double()).to(acc.dtype)
    return acc


@pytest.mark.parametrize("dtype,sizes", [
    (torch.bfloat16, [2, 17, 18, 20, 36, 37, 100, 128, 129, 256, 257, 300, 1024]),
    (torch.float16, [2, 60, 61, 100, 1024, 2048, 2049]),
    (torch.float32, [2, 1024]),
    (torch.int32, [2, 1024]),
])
def test_sum_inputs_stay_exact_in_any_order_at_any_world_size(dtype, sizes):
    import random

    rng = random.Random(0)
    for n in sizes:
        count = 3 * len(distbench_ops.reduce_weights(n, dtype)) + 1
        inputs = [TORCH_OPS["all_reduce"].make(Ctx(r, n, torch.device("cpu"), dtype, "gloo"), count).send for r in range(n)]
        expected = TORCH_OPS["all_reduce"].make(Ctx(0, n, torch.device("cpu"), dtype, "gloo"), count).expected()
        exact = sum(i.double() for i in inputs)
        assert torch.equal(expected.double(), exact), (dtype, n)
        shuffled = list(range(n))
        rng.shuffle(shuffled)
        for order in (list(range(n)), list(reversed(range(n))), shuffled):
            assert torch.equal(_sequential_sum(inputs, order), expected), (dtype, n, order[:3])
        # a missing rank changes the result somewhere (every rank contributes in every period)
        assert not torch.equal(_sequential_sum(inputs, list(range(n - 1))), expected), (dtype, n)


def test_the_old_inputs_were_not_exact_beyond_17_bfloat16_ranks():
    # (i % 7) + rank + 1, the inputs before this check was made exact: a sequential bf16 sum rounds.
    n = 20
    idx = torch.arange(7)
    inputs = [((idx % 7) + r + 1).to(torch.bfloat16) for r in range(n)]
    exact = n * (idx % 7) + n * (n + 1) // 2
    assert not torch.equal(_sequential_sum(inputs, list(range(n))).double(), exact.double())


def test_init_rewrites_inputs_and_poisons_outputs():
    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"):
        for maker in (TORCH_OPS[op].make, TORCH_OPS[op].make_inplace):
            if maker is None:
                continue
            b = maker(Ctx(1, 2, torch.device("cpu"), torch.float32, "gloo"), 8)
            original = b.send.clone()
            b.recv.fill_(123.0)  # a stale result of an earlier run
            b.send.fill_(7.0) if b.send.data_ptr() != b.recv.data_ptr() else None
            b.init()
            assert torch.equal(b.send, original), op
            if b.recv.data_ptr() != b.send.data_ptr() or b.recv.numel() != b.send.numel():
                # out of place, or in place where the input is only part of the output: no stale value survives
                assert not (b.recv == 123.0).any(), op


def test_int32_poison_and_limits():
    assert distbench_ops.exact_limit(torch.bfloat16) == 256 and distbench_ops.exact_limit(torch.float16) == 2048
    assert distbench_ops.exact_limit(torch.float32) == 2**24 and distbench_ops.exact_limit(torch.int32) == 2**31 - 1
    t = torch.zeros(3, dtype=torch.int32)
    distbench_ops.poison(t)
    assert (t == -1).all()
