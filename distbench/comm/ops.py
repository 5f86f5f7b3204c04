"""The torch side of each collective: one `TorchOp` per spec of distbench.core.ops_spec (which holds
what an op is, torch-free: its bus factor, buffer split, nccl-tests and NCCL names, in-place forms).

Each TorchOp says how to allocate its buffers, (re)write rank-dependent inputs into them, run the
op, and the expected output for the check.
The harness in distbench.comm.harness owns warm-up, timing, checking and statistics.

Exact checks at any world size and dtype
----------------------------------------
Inputs are small non-negative integers, laid out periodically (`periodic`). A sum of such values
is exact in a floating-point type, in any order and with any partial sums (ring, tree, NCCL's
LL/LL128/Simple protocols), as long as every partial sum stays within the range in which that
type represents every integer: 2^8 for bfloat16, 2^11 for float16, 2^24 for float32, 2^53 for
float64, 2^31 - 1 for int32 (`exact_limit`). For a sum over n ranks, `reduce_weights` picks the
inputs so that the largest possible sum is <= that limit:
- n <= limit: rank r holds ((i + r) mod m) + 1 at index i, with m = min(7, limit // n), so every
  sum is <= n * m <= limit (bfloat16: m = 7 up to 36 ranks, m = 2 at 100 ranks, m = 1 from 129);
- n > limit (bfloat16 beyond 256 ranks, float16 beyond 2048): rank r holds 1 where
  (i + r) mod K == 0 and 0 elsewhere, K = ceil(n / limit), so each sum counts at most
  ceil(n / K) <= limit ranks.
Every rank contributes a non-zero value somewhere in every period, so a missing or doubled rank
changes the result, and m > 1 makes the values depend on the position. Because exact inputs exist
for every (n, dtype), the check is always an exact comparison: no tolerance is needed, and none
could hide a real error. The earlier inputs ((i % 7) + rank + 1) were not exact beyond 17 ranks in
bfloat16 (tests/core/test_ops.py shows it). Ops that only move data (gather, broadcast, send/recv,
all_to_all) need each single value to be exact: they stay below the same limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from distbench.core.ops_spec import SPECS, OpSpec


@dataclass
class Buffers:
    send: torch.Tensor | None
    recv: torch.Tensor | None
    init: Callable[[], None]  # (re)writes the inputs in place and poisons an output that is not an input
    expected: Callable[[], torch.Tensor] | None  # built lazily: only needed for the check
    splits: tuple[list[int], list[int]] | None = None  # all_to_all_v: (receive, send) elements per rank


@dataclass(frozen=True)
class TorchOp:
    spec: OpSpec  # what the op is (distbench.core.ops_spec); this class only says how torch runs it
    make: Callable[["Ctx", int], Buffers]  # (ctx, count) -> buffers holding the inputs
    run: Callable[["Ctx", Buffers], None]
    make_inplace: Callable[["Ctx", int], Buffers] | None = None  # nccl-tests' in-place variant (spec.has_inplace_variant)


@dataclass(frozen=True)
class Ctx:
    rank: int
    world_size: int
    device: torch.device
    dtype: torch.dtype
    backend: str
    traffic: str = "none"  # all_to_all_v's traffic spec (distbench.comm.traffic)


# --- exact integer inputs ----------------------------------------------------------------------

def exact_limit(dtype: torch.dtype) -> int:
    """Largest L such that every integer in [0, L] is exactly representable in dtype."""
    if dtype.is_floating_point:
        # eps = 2^-(mantissa bits); with the implicit bit every integer up to 2^(bits+1) is exact
        return 2 ** (round(-math.log2(torch.finfo(dtype).eps)) + 1)
    return torch.iinfo(dtype).max


def reduce_weights(world_size: int, dtype: torch.dtype) -> list[int]:
    """One period of the inputs of a sum over world_size ranks (see the module docstring)."""
    limit = exact_limit(dtype)
    if world_size <= limit:
        m = min(7, limit // world_size)
        return [k + 1 for k in range(m)]
    period = math.ceil(world_size / limit)
    return [1] + [0] * (period - 1)


def reduce_sums(world_size: int, dtype: torch.dtype) -> list[int]:
    """Exact sum over ranks at each phase of the period (rank r holds weights[(i + r) % P])."""
    w = reduce_weights(world_size, dtype)
    p = len(w)
    sums = [sum(w[(a + r) % p] for r in range(world_size)) for a in range(p)]
    assert max(sums) <= exact_limit(dtype), "inputs would round: see distbench.comm.ops docstring"
    return sums


def data_values(rank: int, dtype: torch.dtype) -> list[int]:
    """One period (7) of rank-identifying values for ops that move data without reducing it."""
    span = min(exact_limit(dtype), 2**20) - 1
    return [(k + rank) % span + 1 for k in range(7)]


def periodic(ctx: Ctx, values: list[int], count: int, start: int = 0) -> torch.Tensor:
    """x[j] = values[(start + j) % len(values)] for j < count, in ctx.dtype on ctx.device.

    Built by repeating one period: no index tensor as large as the buffer is needed."""
    p = len(values)
    rolled = [values[(start + k) % p] for k in range(p)]
    period = torch.tensor(rolled, dtype=ctx.dtype, device=ctx.device)
    return period.repeat(-(-count // p))[:count]


def poison(t: torch.Tensor) -> None:
    """Fill an output with a value no correct result contains (NaN, or -1 for integers)."""
    t.fill_(float("nan") if t.dtype.is_floating_point else -1)


def _reduce_input(ctx: Ctx, count: int) -> torch.Tensor:
    w = reduce_weights(ctx.world_size, ctx.dtype)
    return periodic(ctx, w, count, start=ctx.rank % len(w))


def _reduce_expected(ctx: Ctx, count: int, start: int = 0) -> torch.Tensor:
    return periodic(ctx, reduce_sums(ctx.world_size, ctx.dtype), count, start)


def _empty(ctx, count):
    return torch.empty(count, dtype=ctx.dtype, device=ctx.device)


# --- the ops -----------------------------------------------------------------------------------

def _all_reduce_make(ctx, count):
    buf = _empty(ctx, count)
    b = Buffers(buf, buf, lambda: buf.copy_(_reduce_input(ctx, count)), lambda: _reduce_expected(ctx, count))
    b.init()
    return b


def _gathered(ctx, chunk):
    return torch.cat([periodic(ctx, data_values(r, ctx.dtype), chunk) for r in range(ctx.world_size)])


def _all_gather_make(ctx, count):
    chunk = count // ctx.world_size
    send, recv = _empty(ctx, chunk), _empty(ctx, count)

    def init():
        send.copy_(periodic(ctx, data_values(ctx.rank, ctx.dtype), chunk))
        poison(recv)
    b = Buffers(send, recv, init, lambda: _gathered(ctx, chunk))
    b.init()
    return b


def _all_gather_make_inplace(ctx, count):
    # nccl-tests in-place: each rank's input is its own chunk of the output buffer.
    chunk = count // ctx.world_size
    recv = _empty(ctx, count)
    send = recv.narrow(0, ctx.rank * chunk, chunk)

    def init():
        poison(recv)
        send.copy_(periodic(ctx, data_values(ctx.rank, ctx.dtype), chunk))
    b = Buffers(send, recv, init, lambda: _gathered(ctx, chunk))
    b.init()
    return b


def _reduce_scatter_make(ctx, count, inplace=False):
    chunk = count // ctx.world_size
    send = _empty(ctx, count)
    # nccl-tests in-place: the output is this rank's chunk of the input buffer.
    recv = send.narrow(0, ctx.rank * chunk, chunk) if inplace else _empty(ctx, chunk)

    def init():
        send.copy_(_reduce_input(ctx, count))
        if not inplace:
            poison(recv)
    b = Buffers(send, recv, init, lambda: _reduce_expected(ctx, chunk, start=ctx.rank * chunk))
    b.init()
    return b


def _broadcast_make(ctx, count):
    buf = _empty(ctx, count)
    # root 0's values everywhere; every other rank starts from its own, different values
    b = Buffers(buf, buf, lambda: buf.copy_(periodic(ctx, data_values(ctx.rank, ctx.dtype), count)),
                lambda: periodic(ctx, data_values(0, ctx.dtype), count))
    b.init()
    return b


def _a2a_values(ctx, count, src, dst_of_chunk) -> torch.Tensor:
    # value = (src*n + dst) % 64 + (i % 3): identifies sender, receiver and position (<= 66: exact in bf16).
    n, chunk = ctx.world_size, count // ctx.world_size
    idx = torch.arange(count, device=ctx.device)
    return (((src * n + dst_of_chunk(idx // chunk)) % 64) + (idx % 3)).to(ctx.dtype)


def _all_to_all_make(ctx, count):
    n, chunk = ctx.world_size, count // ctx.world_size
    send, recv = _empty(ctx, count), _empty(ctx, count)

    def init():
        send.copy_(_a2a_values(ctx, count, ctx.rank, lambda j: j))
        poison(recv)

    def expected():
        idx = torch.arange(count, device=ctx.device)
        src, k = idx // chunk, idx % chunk
        return (((src * n + ctx.rank) % 64) + ((ctx.rank * chunk + k) % 3)).to(ctx.dtype)

    b = Buffers(send, recv, init, expected)
    b.init()
    return b


def a2av_counts(ctx, count) -> list[list[int]]:
    """all_to_all_v: elements rank s sends to rank d (row s), n x count in all (distbench.comm.traffic)."""
    from distbench.comm.traffic import parse_traffic, split_counts

    return split_counts(parse_traffic(ctx.traffic), ctx.world_size, count)


def _a2av_chunk(ctx, src: int, dst: int, n_elems: int) -> torch.Tensor:
    # value = (src*n + dst) % 64 + (k % 3), k the position in the chunk: names the sender, the
    # receiver and the offset (<= 66: exact in every dtype), so a chunk of the wrong size,
    # place or origin fails the check.
    k = torch.arange(n_elems, device=ctx.device)
    return (((src * ctx.world_size + dst) % 64) + (k % 3)).to(ctx.dtype)


def _all_to_all_v_make(ctx, count):
    n, me = ctx.world_size, ctx.rank
    cells = a2av_counts(ctx, count)
    send_splits = cells[me]
    recv_splits = [cells[s][me] for s in range(n)]
    send, recv = _empty(ctx, sum(send_splits)), _empty(ctx, sum(recv_splits))

    def init():
        send.copy_(torch.cat([_a2av_chunk(ctx, me, d, send_splits[d]) for d in range(n)]))
        poison(recv)

    b = Buffers(send, recv, init, lambda: torch.cat([_a2av_chunk(ctx, s, me, recv_splits[s]) for s in range(n)]),
                splits=(recv_splits, send_splits))
    b.init()
    return b


def _all_to_all_v_run(ctx, b):
    recv_splits, send_splits = b.splits
    dist.all_to_all_single(b.recv, b.send, output_split_sizes=recv_splits, input_split_sizes=send_splits)


def _send_recv_make(ctx, count):
    send, recv = _empty(ctx, count), _empty(ctx, count)
    src = (ctx.rank - 1) % ctx.world_size

    def init():
        send.copy_(periodic(ctx, data_values(ctx.rank, ctx.dtype), count))
        poison(recv)
    b = Buffers(send, recv, init, lambda: periodic(ctx, data_values(src, ctx.dtype), count))
    b.init()
    return b


def _send_recv_run(ctx, b):
    # nccl-tests' sendrecv: every rank sends to rank+1 and receives from rank-1 at the same time.
    n = ctx.world_size
    reqs = dist.batch_isend_irecv([
        dist.P2POp(dist.isend, b.send, (ctx.rank + 1) % n),
        dist.P2POp(dist.irecv, b.recv, (ctx.rank - 1) % n),
    ])
    for r in reqs:
        r.wait()


def _barrier_run(ctx, b):
    if ctx.backend == "nccl":
        dist.barrier(device_ids=[ctx.device.index])
    else:
        dist.barrier()


TORCH_OPS: dict[str, TorchOp] = {t.spec.name: t for t in (
    TorchOp(SPECS["all_reduce"], _all_reduce_make, lambda c, b: dist.all_reduce(b.send)),
    TorchOp(SPECS["all_gather"], _all_gather_make, lambda c, b: dist.all_gather_into_tensor(b.recv, b.send),
            make_inplace=_all_gather_make_inplace),
    TorchOp(SPECS["reduce_scatter"], _reduce_scatter_make, lambda c, b: dist.reduce_scatter_tensor(b.recv, b.send),
            make_inplace=lambda c, n: _reduce_scatter_make(c, n, inplace=True)),
    TorchOp(SPECS["broadcast"], _broadcast_make, lambda c, b: dist.broadcast(b.send, src=0)),
    TorchOp(SPECS["all_to_all"], _all_to_all_make, lambda c, b: dist.all_to_all_single(b.recv, b.send)),
    TorchOp(SPECS["all_to_all_v"], _all_to_all_v_make, _all_to_all_v_run),
    TorchOp(SPECS["send_recv"], _send_recv_make, _send_recv_run),
    TorchOp(SPECS["barrier"], lambda c, n: Buffers(None, None, lambda: None, None), _barrier_run),
)}
assert tuple(TORCH_OPS) == tuple(SPECS), "distbench.core.ops_spec.SPECS and TORCH_OPS must list the same ops, in order"
