"""In-step collectives and compute slowdown, the harness's side (config `training.inspect: true`).
With `--inspect-dir DIR` a training job

1. brackets phase `step`'s timed steps with two marker all-reduces on the data-parallel group (outside
   the timing: the start marker before the ranks are aligned, the end marker after the last step's
   sync), so the collectives of exactly the timed steps can be picked out of NCCL's Inspector output
   by sequence number (distbench.training.analysis.instep). Inspector itself is loaded by the
   launcher's environment for this job only (distbench.training.job.inspector_env): NCCL reads it
   when the communicator starts, the harness cannot turn it on;
2. after every timed phase, traces `--inspect-steps` more real steps and as many compute-only steps
   (DDP: under no_sync; FSDP and HSDP: with its collectives off, as phase compute_only runs them;
   fsdp_tp has none: tensor parallel communicates inside forward) with
   torch.profiler: DIR/step/trace_rank<r>.json.gz and DIR/compute_only/trace_rank<r>.json.gz. The
   compute kernels of the two are compared (distbench.traces.split) and, where Inspector did not
   load, the real steps' NCCL kernels (or Gloo's collectives on CPU) are the in-step record;
3. writes DIR/inspect.json (rank 0): what was recorded and how.

Markers: all-reduces of MARK_START_ELEMS and MARK_END_ELEMS float32 elements, sizes no model bucket
is likely to have, above Inspector's default 8 KiB floor (NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES)."""

from __future__ import annotations

import json
import os
from pathlib import Path

MARK_START_ELEMS = 4099  # 16,396 B
MARK_END_ELEMS = 4111  # 16,444 B
MANIFEST = "inspect.json"
INSPECTOR_SUBDIR = "inspector"  # NCCL_INSPECTOR_DUMP_DIR under the job's inspect directory
PHASE_DIRS = ("step", "compute_only")


def marker(h, elems: int) -> None:
    """One all-reduce of `elems` float32 on the data-parallel (default) group, waited for; nothing at
    world size 1 (no communicator)."""
    if h.world_size < 2:
        return
    t = h.torch.ones(elems, dtype=h.torch.float32, device=h.device)
    h.dist.all_reduce(t)
    h.sync()


def inspector_requested() -> str:
    """The Inspector plugin this process was started with ('' when none): NCCL loads it from
    NCCL_PROFILER_PLUGIN when NCCL_INSPECTOR_ENABLE=1."""
    plugin = os.environ.get("NCCL_PROFILER_PLUGIN", "")
    return plugin if plugin and os.environ.get("NCCL_INSPECTOR_ENABLE") == "1" else ""


def inspect_pass(h, args) -> None:
    """Step 2 and 3 of the module docstring. A failure costs the traces only (said in the manifest)."""
    from distbench.core.layout_spec import layout
    from distbench.launch.profiling import profile_pass
    from distbench.launch.ranks import first_line

    out = Path(args.inspect_dir)
    notes = []
    spec = layout(args.strategy)
    fsdp = spec.sharded  # FSDP2 over a 1D or a 2D mesh: its collectives turn off alike

    def compute_only():
        if fsdp:
            h.step(False)
        else:
            with h.wrapped.no_sync():
                h.step(False)

    for phase, fn in (("step", lambda: h.step(True)), ("compute_only", compute_only)):
        if phase == "compute_only" and not spec.has_compute_only:
            # as phase compute_only (distbench.training.phases): tensor parallel's all-reduces sit inside
            # forward and backward, so no step of this layout runs without communication. The step's
            # trace alone is split (distbench.traces.split.rank_split): exposed communication is read
            # off its GPU timeline, the compute slowdown is not separable
            notes.append(f"no compute_only trace: {spec.name}'s tensor-parallel all-reduces run inside forward and backward"
                         if spec.tensor_parallel else f"no compute_only trace: {spec.name}: {spec.no_compute_only}")
            continue
        try:
            if phase == "compute_only" and fsdp:
                h.fsdp_comm(False)
            try:
                profile_pass(h.torch, fn, args.inspect_steps, out / phase, h.rank, h.cuda, h.sync)
            finally:
                if phase == "compute_only" and fsdp:
                    h.fsdp_comm(True)
        except RuntimeError as e:  # torch.OutOfMemoryError included: the measured rows are already written
            notes.append(f"no {phase} trace on rank {h.rank}: {first_line(e)}")
            h.say(f"inspect: {notes[-1]}")
    if h.rank == 0:
        manifest = {
            "backend": args.backend, "world_size": h.world_size, "strategy": args.strategy, "model": args.model,
            "dtype": args.dtype, "device_name": h.device_name, "traced_steps": args.inspect_steps,
            "timed_steps": args.steps, "inspector_plugin": inspector_requested() if args.backend == "nccl" else "",
            "marks": {"start_bytes": MARK_START_ELEMS * 4, "end_bytes": MARK_END_ELEMS * 4, "dtype": "float32"},
            "notes": notes,
        }
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
        tmp.replace(out / MANIFEST)
