"""Training benchmark harness: one torchrun job measures one DDP (or FSDP2) configuration of a
workload of distbench.workloads.registry (the synthetic MLP by default) in three phases, on the
same model and optimizer. This module is the job's command line and main loop; the rank's model,
wrapping and step are in distbench.training.trainer, the phases and their rows in
distbench.training.phases.

Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.training --backend gloo \
        --hidden-dim 256 --num-layers 2 --batch-size 32 --out training.csv --placement-out placement.json

Phases (CSV column `phase`), each `--warmup-steps` un-timed then `--steps` timed (all-reduce:
`--allreduce-trials` timed):
- step:            the real step: forward, loss, backward (DDP all-reduces the gradient buckets
                   while backward runs), optimizer.step, zero_grad(set_to_none=True). With
                   --grad-accum N the rank's batch is N micro-batches, all but the last under
                   no_sync. Afterwards every rank's parameters are compared exactly (`correct`).
- compute_only:    the same steps inside ddp_model.no_sync(): no gradient communication at all.
- comm_alone: the gradient bytes DDP syncs per step, all-reduced alone in DDP's bucket layout
                   (one flat tensor per bucket, in the order DDP reduces them: the bucket holding
                   the last layers first, the first layers' bucket last), launched back to back
                   asynchronously as DDP's reducer does, then waited on; with a compression hook
                   in its wire dtype (bf16/fp16: half the bytes). `last_bucket_ms` is the last
                   bucket alone, timed in separate trials: it is the part of DDP's communication
                   that cannot overlap backward.
step - compute_only is the communication the step exposes; comm_alone is what it would cost
with no overlap at all.

Timing: after warm-up the ranks are aligned once (an un-timed small all-reduce and a sync), then
the measured steps run back to back, as in training. GPU: a CUDA event is recorded between steps
and the host syncs after the last one, so a step's time is the gap between its events (no host
work between steps, no late start of another rank inside a step). CPU: the host clock between
steps. Each rank times its own steps; the row's `step_time_ms` is the slowest rank's (a
synchronous job runs at its pace), with the fastest and slowest in `step_time_ms_rank_min` /
`_rank_max`. (The first GPU run, 2026-11-26, timed each step between an alignment and a sync with
NVML reads inside the window; another rank's late start then landed in the step: see
benchmarks/results/training-h200x2-2026-11-26.)

Compiled (`--compile true`, training.lm.compile): torch.compile compiles lazily, at the first calls, so a
compiled phase warms up for at least one step and then for as long as any rank's last warm-up step still
compiled something (at most COMPILE_EXTRA_WARMUP more, distbench.training.trainer); the timed steps follow,
and a compilation during them is said in the rows' message. `compile_time_s` is the warm-up's wall time
beyond as many steady steps (trainer.compile_seconds), beside the steps and never in them. A compiler
failure (dynamo or inductor raising) is status compile_failed with torch's reason; the phases that run the
compiled model are then not run again (comm_alone, which runs no model, still is).

Energy (`energy_j`): NVML's total-energy counter (millijoules) read before and after a phase's
measured steps on every rank's GPU, divided evenly over the steps and summed over ranks (the
counter updates too coarsely for one step); empty when pynvml is missing or any rank's counter
cannot be read (never estimated).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from distbench.core.choices import BACKENDS, DDP_HOOKS, OPTIMIZERS, SCALINGS
from distbench.core.choices import MODEL_DTYPES as TRAIN_DTYPES
from distbench.training.contract import COMPILE_FAILED, TRAINING_COLUMN_NAMES, TRAINING_PHASES
from distbench.launch.ranks import failure_status, finish_config, first_line, ranks_text
from distbench.launch.timeline import mark
from distbench.training.phases import phase_rows, run_phase, status_rows, window_lines
from distbench.training.trainer import DDP_DEFAULT_BUCKET_CAP_MB, PhaseError, TrainingHarness, compile_failure
from distbench.workloads.cli import add_model_args, resolve_model_args
from distbench.workloads.layouts import LAYOUTS, SHARDED, dp_batch
from distbench.workloads.registry import workload


def _flag(name: str):
    def parse(v: str) -> bool:
        flags = {"false": False, "true": True}
        if v.lower() not in flags:
            raise argparse.ArgumentTypeError(f"{name}: expected false or true, got {v!r}")
        return flags[v.lower()]
    return parse


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.training", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", help="a job's job.json, as its rule writes it: its values, read as JSON "
                                    "(distbench.training.job.TRAINING_RECORD); only the outputs come from flags")
    p.add_argument("--backend", choices=BACKENDS)
    add_model_args(p, LAYOUTS)
    p.add_argument("--compile", type=_flag("--compile"), default=False, metavar="{false,true}",
                   help="wrap the (DDP/FSDP) model in torch.compile; warm-up absorbs the compilation")
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank per optimizer step (weak scaling)")
    p.add_argument("--scaling", choices=SCALINGS, default="weak",
                   help="weak: --batch-size per rank; strong: --global-batch-size split over the ranks")
    p.add_argument("--global-batch-size", type=int, help="strong scaling: samples per optimizer step over all ranks (ignored for weak)")
    p.add_argument("--dtype", choices=TRAIN_DTYPES, default="float32", help="bfloat16: torch.autocast; parameters stay float32")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd")
    p.add_argument("--bucket-cap-mb", type=float, default=DDP_DEFAULT_BUCKET_CAP_MB,
                   help="DDP bucket_cap_mb (25, DDP's default, is left to DDP: its first bucket is then capped at 1 MiB)")
    p.add_argument("--gradient-as-bucket-view", type=_flag("--gradient-as-bucket-view"), default=False, metavar="{false,true}")
    p.add_argument("--static-graph", type=_flag("--static-graph"), default=False, metavar="{false,true}")
    p.add_argument("--broadcast-buffers", type=_flag("--broadcast-buffers"), default=True, metavar="{false,true}")
    p.add_argument("--comm-hook", choices=DDP_HOOKS, default="none",
                   help="DDP communication hook from torch.distributed.algorithms.ddp_comm_hooks.default_hooks")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (no_sync on all but the last)")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--log-every", type=int, default=10,
                   help="print one line per this many measured steps (after the phase: the steps are timed back to back)")
    p.add_argument("--allreduce-trials", type=int, default=10)
    p.add_argument("--config-label", default="plain", help="label written to the config column")
    p.add_argument("--nccl-env-label", default="default", help="label written to the nccl_env column")
    p.add_argument("--op-timeout-s", type=int, default=300, help="process-group timeout per collective")
    p.add_argument("--out", required=True, help="CSV to write (rank 0); atomically renamed when complete")
    p.add_argument("--placement-out", help="JSON with every rank's GPU placement")
    p.add_argument("--profile-dir", help="after the timed phases, profile --profile-steps more training steps with "
                                         "torch.profiler and write each rank's Chrome trace here (distbench.launch.profiling)")
    p.add_argument("--profile-steps", type=int, default=3, help="steps recorded by --profile-dir")
    p.add_argument("--inspect-dir", help="training.inspect: mark phase step's timed steps for NCCL's Inspector and, "
                                         "after the timed phases, trace --inspect-steps real and compute-only steps "
                                         "here (distbench.training.inspect)")
    p.add_argument("--inspect-steps", type=int, default=5, help="steps of each kind traced by --inspect-dir")
    args = p.parse_args(argv)
    if args.params:  # checked against the training record, then set as typed: nothing parsed again
        from distbench.launch.job_record import read_for_ranks
        from distbench.launch.job_values import apply
        from distbench.training.job import TRAINING_RECORD
        from distbench.workloads.job_fields import config_schema

        apply(args, read_for_ranks(args.params, TRAINING_RECORD, config_schema()).arguments(TRAINING_RECORD))
    elif not args.backend:
        p.error("--backend (or --params) is required")

    for name in ("batch_size", "grad_accum", "steps", "allreduce_trials", "log_every", "inspect_steps"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup_steps < 0:
        p.error("--warmup-steps must be >= 0")
    if args.bucket_cap_mb <= 0:
        p.error("--bucket-cap-mb must be > 0")
    resolve_model_args(p, args)
    if args.strategy in SHARDED and args.comm_hook != "none":
        p.error("--comm-hook is a DDP option; FSDP reduces in fp32 (bf16 parameters under --dtype bfloat16)")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        args.batch_size, args.global_batch_size = workload(args.model).per_rank_batch(
            args.scaling, args.batch_size, args.global_batch_size, world_size)
    except ValueError as e:
        p.error(str(e))
    # fsdp_tp: a TP group's ranks share one batch of tp_size x batch_size sequences (the global
    # batch, batch_size x world_size sequences per step, is every layout's)
    args.batch_size = dp_batch(args.strategy, args.batch_size, args.tp_size)
    if args.batch_size % args.grad_accum:
        p.error(f"the per-rank batch {args.batch_size} is not divisible by --grad-accum {args.grad_accum}")
    return args


def profile_steps(h: TrainingHarness, args) -> None:
    """Traces on request: a few more real steps (gradients synced) under torch.profiler, after every
    timed phase, so no measured row is taken under the profiler. A failure costs the trace only."""
    from distbench.launch.profiling import profile_pass

    try:
        path = profile_pass(h.torch, lambda: h.step(sync_grads=True), args.profile_steps, args.profile_dir, h.rank,
                            h.cuda, h.sync)
        h.say(f"profile: {args.profile_steps} step(s) traced, rank {h.rank}: {path}")
    except RuntimeError as e:  # torch.OutOfMemoryError included: the measured rows are already written
        h.say(f"profile: no trace on rank {h.rank}: {first_line(e)}")


def main(argv=None, keep_groups: bool = False) -> int:
    from distbench.core.io import PartialCsvs

    args = parse_args(argv)
    h = TrainingHarness(args)
    if not h.placement_ok(args.placement_out):
        return 3
    writer = PartialCsvs([(Path(args.out), TRAINING_COLUMN_NAMES)]) if h.rank == 0 else None
    say = h.say

    # grad_bytes: what DDP all-reduces per optimizer step on each rank (the wire dtype's bytes).
    h.grad_bytes = h.n_buckets = None
    build_err = None
    wrapping = f"sharding it ({args.strategy})" if args.strategy in SHARDED else "wrapping it in DDP"
    for what, build in (("building the model and its data", h.build), (wrapping, h.wrap_model)):
        try:
            build()
        except PhaseError as e:
            build_err = (e.status, e.message)
        except RuntimeError as e:  # torch.OutOfMemoryError included
            why = compile_failure(e) if args.compile else None  # torch.compile refused the wrapped model outright
            build_err = (COMPILE_FAILED, f"{what}: {why}") if why else (failure_status(e), f"{what}: {first_line(e)}")
        if not h.agree(build_err is None):
            build_err = build_err or ("failed", f"another rank failed {what}")
            break
    mark("measure_start")  # the model is built and wrapped: the phases (their warm-up included) begin
    if getattr(h, "param_bytes", None):
        h.grad_bytes = sum(h.param_bytes) // (2 if args.comm_hook != "none" else 1)
    if build_err:
        for phase in TRAINING_PHASES:
            if writer:
                writer.write(0, status_rows(args, h, phase, *build_err))
        say(f"{build_err[0]}: {build_err[1]}")
    else:
        for phase in TRAINING_PHASES:
            shape = f"{args.model} (" + ", ".join(f"{k} {v}" for k, v in args.shape.items() if v is not None) + ")"
            say(f"measuring {phase}: {shape} {args.strategy}, batch {args.batch_size}/rank, "
                f"{h.world_size} rank(s), {args.dtype}, {args.optimizer}, comm hook {args.comm_hook}, "
                f"compile {args.compile}, config {args.config_label}")
            correct, message = None, ""
            try:
                per_rank, extras = run_phase(h, phase)
            except PhaseError as e:
                per_rank, error = None, e
            if phase == "step":
                # The layout DDP settled on (after its bucket rebuild), for every row and for
                # phase comm_alone; computed the reducer's way when phase step did not run.
                h.bucket_bytes, source = h.bucket_layout()
                h.n_buckets = len(h.bucket_bytes)
                say(f"{h.n_buckets} gradient bucket(s) ({source} layout), in reduction order: {h.bucket_bytes} B")
            if per_rank is None:
                if writer:
                    writer.write(0, status_rows(args, h, phase, error.status, error.message))
                say(f"{phase}: {error.status}: {error.message}")
                continue
            if phase == "step":
                correct, message = h.replicas_agree()
            elif phase == "comm_alone":
                bad = [r for r, v in enumerate(per_rank) if v[-3] == 0]
                correct = not bad
                if bad:
                    message = f"all-reduced buckets differ from the expected sum on rank(s) {ranks_text(bad)}"
            rows = phase_rows(args, h, phase, [v[:-3] + v[-2:] if phase == "comm_alone" else v for v in per_rank],
                              correct, message)
            if writer:
                writer.write(0, rows)
            if phase != "comm_alone":
                for line in window_lines(phase, rows, args.log_every):
                    say(line)
            med = statistics.median(r["step_time_ms"] for r in rows)
            tail = (f", {statistics.median(r['samples_per_s'] for r in rows):.1f} samples/s"
                    + (f", {statistics.median(r['tokens_per_s'] for r in rows):.0f} tokens/s" if args.shape["seq_len"] else "")
                    if phase != "comm_alone"
                    else f", last bucket {statistics.median(r['last_bucket_ms'] for r in rows):.3f} ms, "
                         f"{extras['wire_bytes']} B in {h.n_buckets} bucket(s)")
            say(f"{phase}: median step {med:.3f} ms{tail}{'' if correct is not False else ' WRONG: ' + message}")
            if rows[0].get("compile_time_s") is not None:  # beside the steps, never in them
                say(f"{phase}: compile {rows[0]['compile_time_s']:.1f} s in {h.warmup_calls} warm-up step(s), not in "
                    "the timed steps"
                    + (f"; {rows[0]['message']}" if rows[0]["message"] else ""))
    # after a failed torch.compile there is no compiled step to trace (it would only fail again)
    traceable = not build_err and h.compile_error is None
    if args.profile_dir and traceable:
        profile_steps(h, args)
    if args.inspect_dir and traceable:
        from distbench.training.inspect import inspect_pass

        inspect_pass(h, args)
    return finish_config(h, writer, keep_groups)  # a batch launch's next configuration reuses its groups


if __name__ == "__main__":
    sys.exit(main())
