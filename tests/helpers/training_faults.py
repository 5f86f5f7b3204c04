"""A torchrun entry point for the training harness with a fault injected (FAULT env var):
- diverge: after every synced DDP step, rank 1 nudges one parameter, so the replicas differ
  after phase step; the harness must mark those rows wrong and name the parameter.
- oom:     every rank runs out of memory in phase compute_only's first step; that phase's rows
  must be oom, the others ok, and the job must exit 0.
- no_fsdp: fully_shard raises NotImplementedError (as for a backend or device FSDP2 does not
  support): every row must be skipped with the reason, and the job must exit 0.
- die:     rank 1 dies (as if killed) at its first step: the launcher must record the phase in
  progress as failed and the others as not_run."""
import os
import sys

import torch

from distbench.training import harness

fault = os.environ["FAULT"]
rank = int(os.environ["RANK"])
original_step = harness.TrainingHarness.step


def step(self, sync_grads):
    if fault == "die" and rank == 1:
        os._exit(17)
    if fault == "oom" and not sync_grads:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
    original_step(self, sync_grads)
    if fault == "diverge" and sync_grads and rank == 1:
        with torch.no_grad():
            self.model[0].bias.add_(1e-3)


def no_fsdp(*args, **kwargs):
    raise NotImplementedError("fully_shard: this device is not supported (injected)")


if fault == "no_fsdp":
    import torch.distributed.fsdp

    torch.distributed.fsdp.fully_shard = no_fsdp
harness.TrainingHarness.step = step
sys.exit(harness.main(sys.argv[1:]))
