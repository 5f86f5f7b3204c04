"""A raw-NCCL baseline on the same machine: all_reduce through libnccl directly (ctypes, the
library torch loaded), next to torch.distributed, both timed the same way.

nccl-tests itself cannot be built on the offline GPU machines; this gives the same measurement
(NCCL called from C-speed bindings on one stream, CUDA events around N back-to-back ops, or one
CUDA graph of them) so the cost that torch.distributed adds can be read off directly.

    torchrun --standalone --nproc_per_node=2 benchmarks/investigations/graph-latency/raw_nccl_baseline.py > raw_nccl.csv
"""

import csv
import ctypes
import os
import sys

import torch
import torch.distributed as dist

N, TRIALS, WARMUP = 20, 7, 5
SIZES = [8, 2**16, 2**20, 2**22, 2**24, 2**26, 2**30]
NCCL_FLOAT32, NCCL_SUM = 7, 0


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def libnccl() -> ctypes.CDLL:
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libnccl" in line and line.split()[-1].startswith("/")}
    if not paths:
        raise SystemExit("libnccl is not loaded in this process")
    lib = ctypes.CDLL(sorted(paths)[0])
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    return lib


def setup():
    """torch.distributed (NCCL + a Gloo group) and a raw NCCL communicator of its own, for this rank:
    (device, rank, world size, gloo group, libnccl, communicator)."""
    local = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, n = dist.get_rank(), dist.get_world_size()
    ctrl = dist.new_group(backend="gloo")
    dist.all_reduce(torch.ones(1, device=dev))  # loads libnccl in this process
    lib = libnccl()
    uid = UniqueId()
    if rank == 0:
        assert lib.ncclGetUniqueId(ctypes.byref(uid)) == 0
    box = [bytes(uid.internal)]
    dist.broadcast_object_list(box, src=0, group=ctrl)
    ctypes.memmove(uid.internal, box[0], 128)
    comm = ctypes.c_void_p()
    assert lib.ncclCommInitRank(ctypes.byref(comm), n, uid, rank) == 0
    return dev, rank, n, ctrl, lib, comm


def main():
    dev, rank, n, ctrl, lib, comm = setup()

    rows = []
    for size in SIZES:
        count = size // 4
        send = torch.full((count,), float(rank + 1), device=dev)
        recv = torch.empty_like(send)
        stream = torch.cuda.current_stream()

        def raw():
            lib.ncclAllReduce(send.data_ptr(), recv.data_ptr(), count, NCCL_FLOAT32, NCCL_SUM, comm, stream.cuda_stream)

        def torch_api():
            dist.all_reduce(send)

        raw()
        torch.cuda.synchronize()
        assert torch.all(recv == n * (n + 1) / 2), "raw NCCL all_reduce gave a wrong sum"
        for api, fn in (("raw_nccl", raw), ("torch", torch_api)):
            for _ in range(WARMUP):
                fn()
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                cap = torch.cuda.current_stream()
                if api == "raw_nccl":
                    for _ in range(N):
                        lib.ncclAllReduce(send.data_ptr(), recv.data_ptr(), count, NCCL_FLOAT32, NCCL_SUM, comm,
                                          cap.cuda_stream)
                else:
                    for _ in range(N):
                        fn()
            g.replay()
            torch.cuda.synchronize()
            for trial in range(TRIALS):
                for timing in ("events", "graph"):
                    fn()
                    torch.cuda.synchronize()
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    if timing == "graph":
                        g.replay()
                    else:
                        for _ in range(N):
                            fn()
                    e.record()
                    e.synchronize()
                    t = torch.tensor([s.elapsed_time(e) * 1e3 / N], dtype=torch.float64)
                    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctrl)
                    us = t.item()
                    rows.append([api, timing, size, trial, round(us, 3), round(size / us / 1e3 * 2 * (n - 1) / n, 3)])
            del g
    if rank == 0:
        w = csv.writer(sys.stdout)
        w.writerow(["api", "timing", "size_bytes", "trial", "time_us", "busbw_gbps"])
        w.writerows(rows)
    lib.ncclCommDestroy(comm)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
