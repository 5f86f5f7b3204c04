"""Why `events` timing trails nccl-tests at small and mid sizes: host launch cost per op.

Run under torchrun on 2 GPUs (see benchmarks/runs/gpu_run.sh). For all_reduce at a few sizes it
measures, per op: the host time to enqueue N ops (no sync), the CUDA-event time of those N ops,
and the CUDA-graph replay time; through the public API (dist.all_reduce) and through the process
group object directly (pg.allreduce, which skips torch.distributed's Python wrapper). When the
enqueue time exceeds the graph (device) time, events timing measures the launch rate, not NCCL.
"""

import csv
import os
import sys
import time

import torch
import torch.distributed as dist

N, TRIALS = 200, 5
SIZES = [8, 2**16, 2**20, 2**22, 2**24]


def main():
    local = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    pg = dist.distributed_c10d._get_default_group()
    opts = dist.AllreduceOptions()
    apis = {
        "dist.all_reduce": lambda t: dist.all_reduce(t),
        "pg.allreduce": lambda t: pg.allreduce([t], opts).wait(),
    }
    rows = []
    for api, fn in apis.items():
        for size in SIZES:
            t = torch.ones(size // 4, device=dev)
            for _ in range(20):
                fn(t)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(N):
                    fn(t)
            g.replay()
            torch.cuda.synchronize()
            for trial in range(TRIALS):
                dist.barrier(device_ids=[local])
                torch.cuda.synchronize()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                h0 = time.perf_counter()
                for _ in range(N):
                    fn(t)
                enqueue_us = (time.perf_counter() - h0) / N * 1e6
                e.record()
                e.synchronize()
                events_us = s.elapsed_time(e) * 1e3 / N
                s.record()
                g.replay()
                e.record()
                e.synchronize()
                graph_us = s.elapsed_time(e) * 1e3 / N
                vals = torch.tensor([enqueue_us, events_us, graph_us], device=dev, dtype=torch.float64)
                dist.all_reduce(vals, op=dist.ReduceOp.MAX)
                rows.append([os.environ.get("VARIANT", "default"), api, size, trial, *[round(v, 3) for v in vals.tolist()]])
            del g
    if dist.get_rank() == 0:
        w = csv.writer(sys.stdout)
        w.writerow(["variant", "api", "size_bytes", "trial", "enqueue_us", "events_us", "graph_us"])
        w.writerows(rows)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
