"""The GPU-pair matrix (comm.pairs): send/recv between every ordered pair of ranks, one pair at a
time while the other ranks wait, at a small size (latency) and a large one (bandwidth), and both
directions at once for every unordered pair. A slow NVLink, PCIe switch or NIC shows as one cell
of the matrix well below the others of its link class (nccl-tests PR 376 asks for this).

Timing as the collectives': `warmup` transfers, then per trial `iters` back-to-back transfers
between a start and an end CUDA event (host clock on CPU), on both ranks of the pair; the pair's
time is the slower rank's. The receiver checks it got exactly the sender's values after timing.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from distbench.comm.ops import Ctx, data_values, periodic, poison


@dataclass(frozen=True)
class PairPoint:
    mode: str  # uni: src -> dst; bi: src <-> dst at once
    src: int
    dst: int
    size_bytes: int


def plan_pairs(world_size: int, sizes: list[int]) -> list[PairPoint]:
    """Every ordered pair one way, then every unordered pair both ways, per size (in order)."""
    points = []
    for size in sizes:
        points += [PairPoint("uni", s, d, size) for s in range(world_size) for d in range(world_size) if s != d]
        points += [PairPoint("bi", s, d, size) for s in range(world_size) for d in range(s + 1, world_size)]
    return points


def pair_row(args, records: list[dict], p: PairPoint, elem_bytes: int) -> dict:
    """The row of one pair point, without its measurement (what the failure rows reuse too)."""
    def host(r):
        return (records[r] or {}).get("hostname") if records else None

    def gpu(r):
        return ((records[r] or {}).get("uuid") or "cpu") if records else None

    count = max(1, p.size_bytes // elem_bytes)
    return {"backend": args.backend, "world_size": args.world_size, "nodes": args.nodes, "dtype": args.dtype,
            "mode": p.mode, "src": p.src, "dst": p.dst, "src_host": host(p.src), "dst_host": host(p.dst),
            "src_gpu": gpu(p.src), "dst_gpu": gpu(p.dst), "size_bytes": count * elem_bytes, "trial": 0,
            "iters": args.pairs_iters, "time_us": math.nan, "algbw_gbps": math.nan, "correct": None,
            "status": "ok", "message": ""}


def measure_pair(h, p: PairPoint, records, emit) -> None:
    """All ranks call it (the bookkeeping is collective); only p.src and p.dst transfer."""
    torch, dist, args = h.torch, h.dist, h.args
    row = pair_row(args, records, p, h.elem_bytes)
    count = row["size_bytes"] // h.elem_bytes
    me = h.rank if h.rank in (p.src, p.dst) else None
    peer = None if me is None else (p.dst if me == p.src else p.src)
    ctx = Ctx(h.rank, h.world_size, h.device, h.dtype, args.backend)
    times, ok, err = [0.0] * args.pairs_trials, None, None
    h.dist.barrier(group=h.ctrl)  # the previous pair is done everywhere: this one runs alone
    if me is not None:
        try:
            send = periodic(ctx, data_values(h.rank, h.dtype), count)
            recv = torch.empty(count, dtype=h.dtype, device=h.device)
            poison(recv)

            def transfer():
                ops = []
                if p.mode == "bi" or me == p.src:
                    ops.append(dist.P2POp(dist.isend, send, peer))
                if p.mode == "bi" or me == p.dst:
                    ops.append(dist.P2POp(dist.irecv, recv, peer))
                for req in dist.batch_isend_irecv(ops):
                    req.wait()

            for _ in range(args.warmup):
                transfer()
            h.sync()
            for t in range(args.pairs_trials):
                times[t] = _timed(h, transfer, args.pairs_iters)
            receives = p.mode == "bi" or me == p.dst
            ok = bool(torch.equal(recv, periodic(ctx, data_values(peer, h.dtype), count))) if receives else None
            del send, recv
        except torch.OutOfMemoryError as e:
            err = ("oom", str(e).splitlines()[0])
        except RuntimeError as e:
            err = ("failed", str(e).splitlines()[0][:300])
    if not h.agree(err is None):
        h._release()
        # this rank's own error, or (on the others) that one of the pair failed
        status, message = err or ("failed", f"rank {p.src} or {p.dst} failed this transfer")
        emit([{**row, "trial": t, "status": status, "message": message} for t in range(args.pairs_trials)])
        return
    code = {None: -1.0, True: 1.0, False: 0.0}
    per_rank = h.gather_rows([code[ok], *times])
    verdicts = [per_rank[r][0] for r in (p.src, p.dst) if per_rank[r][0] >= 0]
    correct = all(v == 1.0 for v in verdicts) if verdicts else None
    moved = row["size_bytes"] * (2 if p.mode == "bi" else 1)
    rows = []
    for t in range(args.pairs_trials):
        time_us = max(per_rank[p.src][1 + t], per_rank[p.dst][1 + t])
        rows.append({**row, "trial": t, "time_us": time_us, "algbw_gbps": moved / (time_us * 1e3),
                     "correct": correct, "status": "ok" if correct is not False else "wrong",
                     "message": "" if correct is not False else "the receiver got other values than the sender's"})
    emit(rows)


def _timed(h, transfer, iters: int) -> float:
    """This rank's time per transfer (µs) over `iters` back-to-back transfers."""
    if not h.cuda:
        t0 = time.perf_counter()
        for _ in range(iters):
            transfer()
        return (time.perf_counter() - t0) / iters * 1e6
    start, end = h.torch.cuda.Event(enable_timing=True), h.torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        transfer()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters
