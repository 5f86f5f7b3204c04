"""The training harness's three phases (step, compute_only, comm_alone: distbench.training.harness
says what each measures) on a built and wrapped TrainingHarness, and the CSV rows they become."""

from __future__ import annotations

import math
import statistics

from distbench.launch.ranks import failure_status, first_line, node_count
from distbench.training.contract import COMPILE_FAILED
from distbench.training.trainer import PhaseError, TrainingHarness, compile_failure
from distbench.core.layout_spec import REPLAY_FSDP_GROUPS, layout


def run_phase(h, phase: str) -> tuple[list[list[float]] | None, dict]:
    """Run one phase on every rank. Returns (per-rank vectors, extras) or raises PhaseError
    (the same on every rank)."""
    args = h.args
    spec = layout(args.strategy)
    err, result, extras = None, None, {}
    h.beacon.at(f"phase {phase}")
    h.reset_peak()
    try:
        if h.compile_error and phase != "comm_alone":
            # torch.compile failed in an earlier phase: it would fail again, at the same cost; the phases
            # that run the compiled model carry its status and reason (comm_alone runs no model)
            raise PhaseError(*h.compile_error)
        if phase == "step":
            if h.hook_error:
                raise PhaseError("skipped", h.hook_error)
            times, energy = h.timed(lambda: h.step(True), args.warmup_steps, args.steps,
                                    marks=bool(getattr(args, "inspect_dir", None)))
            result = times + energy + [h.compile_s]
        elif phase == "compute_only" and not spec.has_compute_only:
            raise PhaseError("skipped", f"{spec.name}: {spec.no_compute_only}, so no "
                                        "step of this layout is free of communication")
        elif phase == "compute_only" and spec.sharded:
            # No collective at all: the first warm-up step gathers the parameters, which then
            # stay gathered; gradients stay unreduced, so the optimizer (holding the shards)
            # has no gradients and skips its update: compute-only leaves the optimizer out.
            h.fsdp_comm(False)
            try:
                times, energy = h.timed(lambda: h.step(False), max(args.warmup_steps, 1), args.steps)
            finally:
                h.fsdp_comm(True)
            result = times + energy + [h.compile_s]
        elif phase == "compute_only":
            def step():
                with h.wrapped.no_sync():
                    h.step(False)
            times, energy = h.timed(step, args.warmup_steps, args.steps)
            result = times + energy + [h.compile_s]
        elif spec.replay is None:
            raise PhaseError("skipped", f"comm_alone replays FSDP's 1D gathers and reduce-scatters over every rank; "
                                        f"{spec.name}'s {len(spec.mesh)}D collectives (per mesh dim) are not replayed alone")
        elif spec.replay == REPLAY_FSDP_GROUPS:
            result, extras = fsdp_comm_alone(h)
        else:
            result, extras = comm_alone(h)
    except PhaseError as e:
        err = (e.status, e.message)
    except Exception as e:  # noqa: BLE001 - any failure is this phase's (oom or failed), recorded, not the job's
        why = compile_failure(e) if args.compile else None
        if why:  # torch.compile raised (lazily, at the first call): compile_failed with torch's reason
            err = h.compile_error = (COMPILE_FAILED, why)
        else:
            err = (failure_status(e), first_line(e))
    if err is not None:
        result = None
        if h.opt is not None:
            h.opt.zero_grad(set_to_none=True)
        h.release()
    ok = h.agree(err is None)
    if args.compile and not h.agree(h.compile_error is None) and h.compile_error is None:
        # every rank skips the compiled phases from here on, or none does (a rank that ran one alone would
        # wait in its collectives for peers that never come)
        h.compile_error = (COMPILE_FAILED, "torch.compile failed on another rank")
    if not ok:
        # A step cut short leaves DDP's reducer mid-iteration: the next phase gets a fresh
        # wrapper. The condition must be the same on every rank (the wrapper is collective).
        if phase != "comm_alone" and not (phase == "step" and h.hook_error) and not spec.sharded:
            h.wrap_ddp()
            h.set_forward()  # the step's forward is the new wrapper's (compiled again, unless compiling failed)
        raise PhaseError(*(err or ("failed", f"phase {phase} failed on another rank")))
    return h.gather_rows(result + h.peak()), extras

def fsdp_comm_alone(h) -> tuple[list[float], dict]:
    """FSDP's collectives of one step, alone: per group (root, then the blocks) an all-gather
    of its parameters in the gathered dtype, in forward order; the blocks' all-gathers again in
    reverse order (FSDP2 reshards the blocks after forward); then a reduce-scatter of each
    group's trainable gradients in fp32, in reverse order, root last. Each buffer is the group's
    size padded to a multiple of the world size, as FSDP pads its flat shards. Launched back to
    back asynchronously, then waited on. last_bucket_ms: the root's reduce-scatter alone (the
    last, after backward ends)."""
    torch, dist = h.torch, h.dist
    ws = h.world_size

    def padded(n):
        return -(-n // ws) * ws

    gathers = [torch.empty(padded(n), dtype=h.fsdp_param_dtype, device=h.device) for n, _ in h.fsdp_groups]
    shards = [torch.empty(g.numel() // ws, dtype=g.dtype, device=h.device) for g in gathers]
    reduces = [torch.empty(padded(t), dtype=torch.float32, device=h.device) if t else None for _, t in h.fsdp_groups]
    reduced = [torch.empty(r.numel() // ws, dtype=torch.float32, device=h.device) if r is not None else None
               for r in reduces]
    n_groups = len(gathers)
    order = ([("ag", i) for i in range(n_groups)] + [("ag", i) for i in reversed(range(1, n_groups))]
             + [("rs", i) for i in reversed(range(n_groups)) if reduces[i] is not None])

    def launch(kind, i):
        if kind == "ag":
            return dist.all_gather_into_tensor(gathers[i], shards[i], async_op=True)
        return dist.reduce_scatter_tensor(reduced[i], reduces[i], async_op=True)

    # Check once: shards of rank r hold r + 1 -> the gathered buffer is ranks in order; every
    # rank's gradients hold 1 -> the reduced shard holds the world size (exact).
    for s in shards:
        s.fill_(h.rank + 1)
    for r in reduces:
        if r is not None:
            r.fill_(1)
    for w in [launch(k, i) for k, i in order]:
        w.wait()
    h.sync()
    ok = all(bool((g.view(ws, -1) == torch.arange(1, ws + 1, device=h.device, dtype=g.dtype)[:, None]).all())
             for g in gathers)
    ok = ok and all(bool((r == ws).all()) for r in reduced if r is not None)
    for t in shards + [r for r in reduces if r is not None]:
        t.zero_()

    def all_collectives():
        for w in [launch(k, i) for k, i in order]:
            w.wait()

    last = next((("rs", i) for k, i in reversed(order) if k == "rs"), order[-1])
    times, energy = h.timed(all_collectives, h.args.warmup_steps, h.args.allreduce_trials)
    last_t, _ = h.timed(lambda: launch(*last).wait(), 1, h.args.allreduce_trials)
    elem = torch.empty((), dtype=h.fsdp_param_dtype).element_size()
    wire = sum(g.numel() * elem for g in gathers) + sum(g.numel() * elem for g in gathers[1:]) \
        + sum(r.numel() * 4 for r in reduces if r is not None)
    return times + energy + last_t + [1.0 if ok else 0.0], {"wire_bytes": wire}

def comm_alone(h) -> tuple[list[float], dict]:
    torch, dist, args = h.torch, h.dist, h.args
    wire = {"none": torch.float32, "bf16_compress": torch.bfloat16, "fp16_compress": torch.float16}[args.comm_hook]
    elem = torch.empty((), dtype=wire).element_size()
    # Gradients are float32 (4 bytes); a compression hook casts a bucket to its wire dtype.
    bufs = [torch.empty(b // 4, dtype=wire, device=h.device) for b in h.bucket_bytes]
    # Check once, before warm-up: every element is the sum of the ranks' values (exact in any
    # of these dtypes for small integers). Then zero them: sums of zeros stay finite.
    for b in bufs:
        b.fill_(h.rank + 1)
    for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
        w.wait()
    h.sync()
    expect = h.world_size * (h.world_size + 1) // 2
    correct = all(bool((b == expect).all()) for b in bufs)
    for b in bufs:
        b.zero_()

    def all_buckets():
        for w in [dist.all_reduce(b, async_op=True) for b in bufs]:
            w.wait()

    def last_bucket():
        dist.all_reduce(bufs[-1])

    times, energy = h.timed(all_buckets, args.warmup_steps, args.allreduce_trials)
    last, _ = h.timed(last_bucket, 1, args.allreduce_trials)
    return times + energy + last + [1.0 if correct else 0.0], {"wire_bytes": sum(h.bucket_bytes) // 4 * elem}


def window_lines(phase: str, rows: list[dict], every: int) -> list[str]:
    """One progress line per window of `every` measured steps: median step time, samples/s and
    (language models) tokens/s. Printed once the phase ends, since its steps run back to back with
    a single sync at the end (a per-step print would add host work inside the timed run)."""
    from distbench.core.units import human_time_us, sig3

    out = []
    for start in range(0, len(rows), max(1, every)):
        w = rows[start:start + max(1, every)]
        step_us = statistics.median(r["step_time_ms"] for r in w) * 1e3
        text = (f"{phase} phase, steps {w[0]['step']}-{w[-1]['step']}: step {human_time_us(step_us)}, "
                f"{sig3(statistics.median(r['samples_per_s'] for r in w))} samples/s")
        if w[0].get("tokens_per_s") is not None:
            text += f", {sig3(statistics.median(r['tokens_per_s'] for r in w))} tokens/s"
        out.append(text)
    return out


def base_row(args, h: TrainingHarness) -> dict:
    """A row's configuration columns (the workload's shape from the registry: args.shape) with
    every measured column empty."""
    return {
        "backend": args.backend, "world_size": h.world_size, "nodes": node_count(), "model": args.model, "strategy": args.strategy,
        "shard_size": args.shard_size if layout(args.strategy).group == "shard_size" else None,
        "tp_size": args.tp_size if layout(args.strategy).group == "tp_size" else None,
        **args.shape, "compile": args.compile, "compile_time_s": None, "batch_size": args.batch_size, "global_batch_size": args.global_batch_size,
        "scaling": args.scaling, "dtype": args.dtype, "optimizer": args.optimizer, "bucket_cap_mb": float(args.bucket_cap_mb),
        "gradient_as_bucket_view": args.gradient_as_bucket_view, "static_graph": args.static_graph,
        "broadcast_buffers": args.broadcast_buffers, "comm_hook": args.comm_hook, "grad_accum": args.grad_accum,
        "nccl_env": args.nccl_env_label, "config": args.config_label, "phase": None, "step": 0,
        "step_time_ms": None, "step_time_ms_rank_min": None, "step_time_ms_rank_max": None, "last_bucket_ms": None,
        "samples_per_s": None, "samples_per_s_per_device": None, "tokens_per_s": None, "tokens_per_s_per_device": None,
        "params_total": getattr(h, "counts", {}).get("total"), "params_trainable": getattr(h, "counts", {}).get("trainable"),
        "flops_per_sample": getattr(h, "flops_per_sample", None), "device_name": h.device_name,
        "attention_kernel": getattr(h, "attention_kernel", ""), "grad_bytes": h.grad_bytes,
        "n_buckets": h.n_buckets, "peak_mem_allocated_bytes": None, "peak_mem_reserved_bytes": None,
        "energy_j": None, "correct": None, "status": "ok", "message": "",
    }


def phase_rows(args, h: TrainingHarness, phase: str, per_rank, correct, message) -> list[dict]:
    n = args.allreduce_trials if phase == "comm_alone" else args.steps
    row = {**base_row(args, h), "phase": phase}
    peak_alloc = max(r[-2] for r in per_rank)
    peak_res = max(r[-1] for r in per_rank)
    rows = []
    for s in range(n):
        times = [r[s] for r in per_rank]
        energies = [r[n + s] for r in per_rank]
        t = max(times)
        out = {**row, "step": s, "step_time_ms": t, "step_time_ms_rank_min": min(times), "step_time_ms_rank_max": t,
               "energy_j": None if any(math.isnan(e) for e in energies) else sum(energies) / 1e3,
               "peak_mem_allocated_bytes": None if math.isnan(peak_alloc) else int(peak_alloc),
               "peak_mem_reserved_bytes": None if math.isnan(peak_res) else int(peak_res),
               "correct": correct, "status": "ok" if correct is not False else "wrong",
               "message": message or (getattr(h, "timed_note", "") if phase != "comm_alone" else "")}
        if phase == "comm_alone":
            out["last_bucket_ms"] = max(r[2 * n + s] for r in per_rank)
        else:
            # compile_time_s: the slowest rank's (the job waits for it); never in the step's time below
            compile_s = max(r[2 * n] for r in per_rank)
            out["compile_time_s"] = None if math.isnan(compile_s) else compile_s
            sps = args.global_batch_size / (t / 1e3)
            out.update(samples_per_s=sps, samples_per_s_per_device=sps / h.world_size)
            tokens = args.shape["seq_len"]  # tokens per sample: language models only
            if tokens is not None:
                out.update(tokens_per_s=sps * tokens, tokens_per_s_per_device=sps * tokens / h.world_size)
        rows.append(out)
    return rows


def status_rows(args, h: TrainingHarness, phase: str, status: str, message: str) -> list[dict]:
    n = args.allreduce_trials if phase == "comm_alone" else args.steps
    return [{**base_row(args, h), "phase": phase, "step": s, "status": status, "message": message} for s in range(n)]
