"""The collective registry: one small spec per op, in the spirit of nccl-tests' per-op files.

Each spec declares only what differs between collectives:
- how many elements the measured buffer holds for a requested size (nccl-tests' `size` column:
  the total buffer for all_gather / reduce_scatter / all_to_all),
- the bus-bandwidth factor (nccl-tests doc/PERFORMANCE.md),
- how to build rank-dependent inputs, run the op, and the expected output for the check.
The harness in distbench.comm owns warm-up, timing, checking and statistics.

Input values are small integers (`(i % 7) + rank + 1`), so every sum is exact in bf16/fp16 and a
wrong chunk order or a missing rank changes the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist


@dataclass
class Buffers:
    send: torch.Tensor | None
    recv: torch.Tensor | None
    expected: Callable[[], torch.Tensor] | None  # built lazily: only needed for the check


@dataclass(frozen=True)
class OpSpec:
    name: str
    bus_factor: Callable[[int], float]  # world size -> busbw / algbw
    split_across_ranks: bool  # buffer divided into world_size chunks: count rounds down
    make: Callable[["Ctx", int], Buffers]  # (ctx, count) -> buffers
    run: Callable[["Ctx", Buffers], None]
    inplace: bool = False  # torch's API is in-place for this op (output overwrites input)
    make_inplace: Callable[["Ctx", int], Buffers] | None = None  # nccl-tests' in-place variant, if any
    min_world_size: int = 1
    graph_capturable: bool = True
    moves_data: bool = True  # barrier: latency only, no algbw/busbw


@dataclass(frozen=True)
class Ctx:
    rank: int
    world_size: int
    device: torch.device
    dtype: torch.dtype
    backend: str


def pattern(ctx: Ctx, count: int, offset, start: int = 0) -> torch.Tensor:
    """(i % 7) + offset for i in [start, start+count): rank-dependent, exact in half precision."""
    # int32 indices where they fit: the temporary is then no larger than a float32 buffer.
    itype = torch.int32 if start + count < 2**31 else torch.int64
    idx = torch.arange(start, start + count, device=ctx.device, dtype=itype)
    return ((idx % 7) + offset).to(ctx.dtype)


# --- the ops ---------------------------------------------------------------------------------

def _all_reduce_make(ctx, count):
    n = ctx.world_size
    buf = pattern(ctx, count, ctx.rank + 1)
    # sum over ranks of (i%7)+r+1 = n*(i%7) + n(n+1)/2
    return Buffers(buf, buf, lambda: (pattern(ctx, count, 0).float() * n + n * (n + 1) // 2).to(ctx.dtype))


def _all_gather_make(ctx, count):
    n, chunk = ctx.world_size, count // ctx.world_size
    send = pattern(ctx, chunk, ctx.rank + 1)
    recv = torch.empty(count, dtype=ctx.dtype, device=ctx.device)
    return Buffers(send, recv, lambda: torch.cat([pattern(ctx, chunk, r + 1) for r in range(n)]))


def _reduce_scatter_make(ctx, count):
    n, chunk = ctx.world_size, count // ctx.world_size
    send = pattern(ctx, count, ctx.rank + 1)
    recv = torch.empty(chunk, dtype=ctx.dtype, device=ctx.device)
    start = ctx.rank * chunk
    return Buffers(send, recv,
                   lambda: (pattern(ctx, chunk, 0, start).float() * n + n * (n + 1) // 2).to(ctx.dtype))


def _all_gather_make_inplace(ctx, count):
    # nccl-tests in-place: each rank's input is its own chunk of the output buffer.
    n, chunk = ctx.world_size, count // ctx.world_size
    recv = torch.empty(count, dtype=ctx.dtype, device=ctx.device)
    send = recv.narrow(0, ctx.rank * chunk, chunk)
    send.copy_(pattern(ctx, chunk, ctx.rank + 1))
    return Buffers(send, recv, lambda: torch.cat([pattern(ctx, chunk, r + 1) for r in range(n)]))


def _reduce_scatter_make_inplace(ctx, count):
    # nccl-tests in-place: the output is this rank's chunk of the input buffer.
    b = _reduce_scatter_make(ctx, count)
    chunk = count // ctx.world_size
    return Buffers(b.send, b.send.narrow(0, ctx.rank * chunk, chunk), b.expected)


def _broadcast_make(ctx, count):
    buf = pattern(ctx, count, ctx.rank + 1)
    return Buffers(buf, buf, lambda: pattern(ctx, count, 1))  # root 0's values everywhere


def _a2a_values(ctx, count, src, dst_of_chunk) -> torch.Tensor:
    # value = (src*n + dst) % 64 + (i % 3): identifies sender, receiver and position.
    n, chunk = ctx.world_size, count // ctx.world_size
    idx = torch.arange(count, device=ctx.device)
    return (((src * n + dst_of_chunk(idx // chunk)) % 64) + (idx % 3)).to(ctx.dtype)


def _all_to_all_make(ctx, count):
    n, chunk = ctx.world_size, count // ctx.world_size
    send = _a2a_values(ctx, count, ctx.rank, lambda j: j)
    recv = torch.empty(count, dtype=ctx.dtype, device=ctx.device)

    def expected():
        idx = torch.arange(count, device=ctx.device)
        src, k = idx // chunk, idx % chunk
        return (((src * n + ctx.rank) % 64) + ((ctx.rank * chunk + k) % 3)).to(ctx.dtype)

    return Buffers(send, recv, expected)


def _send_recv_make(ctx, count):
    send = pattern(ctx, count, ctx.rank + 1)
    recv = torch.empty(count, dtype=ctx.dtype, device=ctx.device)
    src = (ctx.rank - 1) % ctx.world_size
    return Buffers(send, recv, lambda: pattern(ctx, count, src + 1))


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


OPS: dict[str, OpSpec] = {s.name: s for s in (
    OpSpec("all_reduce", lambda n: 2 * (n - 1) / n, False, _all_reduce_make,
           lambda c, b: dist.all_reduce(b.send), inplace=True),
    OpSpec("all_gather", lambda n: (n - 1) / n, True, _all_gather_make,
           lambda c, b: dist.all_gather_into_tensor(b.recv, b.send), make_inplace=_all_gather_make_inplace),
    OpSpec("reduce_scatter", lambda n: (n - 1) / n, True, _reduce_scatter_make,
           lambda c, b: dist.reduce_scatter_tensor(b.recv, b.send), make_inplace=_reduce_scatter_make_inplace),
    OpSpec("broadcast", lambda n: 1.0, False, _broadcast_make,
           lambda c, b: dist.broadcast(b.send, src=0), inplace=True),
    OpSpec("all_to_all", lambda n: (n - 1) / n, True, _all_to_all_make,
           lambda c, b: dist.all_to_all_single(b.recv, b.send)),
    OpSpec("send_recv", lambda n: 1.0, False, _send_recv_make, _send_recv_run, min_world_size=2),
    OpSpec("barrier", lambda n: float("nan"), False, lambda c, n: Buffers(None, None, None), _barrier_run,
           graph_capturable=False, moves_data=False),
)}


def placements(spec: OpSpec, requested: list[bool]) -> list[bool]:
    """The in-place variants to run: torch fixes all_reduce/broadcast in place; ops without an
    in-place form (all_to_all, send_recv, barrier) run out of place only."""
    if spec.inplace:
        return [True]
    if spec.make_inplace is None:
        return [False]
    return list(dict.fromkeys(requested)) or [False]


def element_count(spec: OpSpec, size_bytes: int, elem_bytes: int, world_size: int) -> int:
    """Elements in the measured buffer; split ops round down to a multiple of world_size (as nccl-tests)."""
    if not spec.moves_data:
        return 0
    count = size_bytes // elem_bytes
    if spec.split_across_ranks:
        count -= count % world_size
    return count
