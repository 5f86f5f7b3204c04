"""Issue 40 groundwork: a few NCCL all_reduces at 1, 16 and 256 MiB under torchrun, to see what NCCL's
Inspector plugin records (the plugin is loaded by the environment the run script sets)."""
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
for mib in (1, 16, 256):
    x = torch.ones(mib * 2**20 // 4, device="cuda")
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(20):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t) / 20
    if rank == 0:
        n = dist.get_world_size()
        print(f"{mib} MiB: {dt * 1e6:.1f} us per all_reduce, busbw {2 * (n - 1) / n * x.numel() * 4 / dt / 1e9:.1f} GB/s",
              flush=True)
dist.destroy_process_group()
