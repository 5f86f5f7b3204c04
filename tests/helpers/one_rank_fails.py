"""A torchrun entry point where the 4 KiB point fails: only rank 1 cannot allocate its buffers
(FAIL=oom), or the op raises on every rank (FAIL=error, as NCCL does for an op it has no algorithm
for under NCCL_ALGO=Tree). Every rank must agree on the point's status and go on."""
import os
import sys
from dataclasses import replace

from distbench.comm import main as cli, ops

spec = ops.TORCH_OPS["all_reduce"]
fail = os.environ["FAIL"]
rank = int(os.environ["RANK"])


def make(ctx, count):
    if fail == "oom" and rank == 1 and count * 4 == 4096:
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 4096 bytes")
    return spec.make(ctx, count)


def run(ctx, b):
    if fail == "error" and b.send.numel() * 4 == 4096:
        raise RuntimeError(f"injected failure on rank {rank}")
    return spec.run(ctx, b)


ops.TORCH_OPS["all_reduce"] = replace(spec, make=make, run=run)
sys.exit(cli.main(sys.argv[1:]))
