"""Where a CUDA-graph all_reduce's small-message time goes: torch.distributed (c10d) against raw
NCCL captured into the same kind of graph, and what each graph contains.

    torchrun --standalone --nproc_per_node=2 benchmarks/investigations/graph-latency/graph_anatomy.py OUT_DIR

For each size and API (`c10d`: dist.all_reduce; `raw_nccl`: ncclAllReduce through ctypes on a
communicator of its own, from the libnccl torch loaded), 20 ops are captured with
torch.cuda.graph after warm-up on the capture stream, then timed with CUDA events around 1 and 10
replays (after an eager op, a device sync and a Gloo barrier), 10 trials; rank 0 writes
OUT_DIR/graph_anatomy.csv (every rank's time) and OUT_DIR/graph_nodes.txt (each 20-op graph's nodes
by type and its kernels by name, read with the CUDA runtime's graph API).
"""

import collections
import csv
import ctypes
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).parent))
from raw_nccl_baseline import NCCL_FLOAT32, NCCL_SUM, setup  # noqa: E402
from raw_nccl_ctypes import NODE_TYPES  # noqa: E402 - one table of CUDA graph node types

OPS, TRIALS, WARMUP = 20, 10, 5
SIZES = [8, 1024, 65536, 2**20]


def _loaded(name: str) -> ctypes.CDLL:
    with open("/proc/self/maps") as maps:
        paths = sorted({ln.split()[-1] for ln in maps if name in ln and ln.split()[-1].startswith("/")})
    return ctypes.CDLL(paths[0])


def node_types(graph: torch.cuda.CUDAGraph) -> dict:
    """Count a captured graph's nodes by type, and its kernels by name (CUDA runtime API via ctypes)."""
    rt = _loaded("libcudart")
    handle = ctypes.c_void_p(graph.raw_cuda_graph())
    num = ctypes.c_size_t(0)
    assert rt.cudaGraphGetNodes(handle, None, ctypes.byref(num)) == 0
    nodes = (ctypes.c_void_p * num.value)()
    assert rt.cudaGraphGetNodes(handle, nodes, ctypes.byref(num)) == 0
    kinds, kernels = collections.Counter(), collections.Counter()

    drv = _loaded("libcuda.so")

    class KernelParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2 (driver API)
        _fields_ = [("func", ctypes.c_void_p), ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                    ("shmem", ctypes.c_uint), ("args", ctypes.c_void_p), ("extra", ctypes.c_void_p),
                    ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]

    for node in nodes:
        t = ctypes.c_int(-1)
        rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t))
        kinds[NODE_TYPES.get(t.value, str(t.value))] += 1
        if t.value == 0:
            p, name = KernelParams(), ctypes.c_char_p()
            ok = drv.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(p)) == 0
            if ok and p.func and drv.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(p.func)) == 0:
                kernels[name.value.decode()[:60]] += 1
            elif ok and p.kern and drv.cuKernelGetName(ctypes.byref(name), ctypes.c_void_p(p.kern)) == 0:
                kernels[name.value.decode()[:60]] += 1
            else:
                kernels["?"] += 1
    rt.cudaGetLastError()  # a failed lookup must not leave a sticky error for torch's next call
    return {"nodes": num.value, "by_type": dict(kinds), "kernels": dict(kernels.most_common(5))}


def main():
    out_dir = Path(sys.argv[1])
    dev, rank, n, ctrl, lib, comm = setup()

    out_dir.mkdir(parents=True, exist_ok=True)
    rows, nodes = [], []
    for size in SIZES:
        count = size // 4
        buf = torch.ones(count, device=dev)
        side = torch.cuda.Stream(dev)

        def c10d():
            dist.all_reduce(buf)

        def raw():
            s = torch.cuda.current_stream()
            lib.ncclAllReduce(buf.data_ptr(), buf.data_ptr(), count, NCCL_FLOAT32, NCCL_SUM, comm, s.cuda_stream)

        for api, fn in (("c10d", c10d), ("raw_nccl", raw)):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(WARMUP):
                    fn()
            torch.cuda.synchronize()
            try:
                g = torch.cuda.CUDAGraph(keep_graph=True)  # keep the cudaGraph_t to inspect its nodes
            except TypeError:  # torch < 2.8
                g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=side):
                for _ in range(OPS):
                    fn()
            if size == SIZES[0] and rank == 0:
                try:
                    nodes.append({"api": api, "ops": OPS, **node_types(g)})
                except Exception as e:  # noqa: BLE001 - inspection is a bonus; timing goes on
                    nodes.append({"api": api, "error": repr(e)})
            if hasattr(g, "instantiate"):
                g.instantiate()
            g.replay()
            torch.cuda.synchronize()
            for replays in (1, 10):
                for trial in range(TRIALS):
                    fn()
                    torch.cuda.synchronize()
                    dist.barrier(group=ctrl)
                    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    s.record()
                    for _ in range(replays):
                        g.replay()
                    e.record()
                    e.synchronize()
                    t = torch.tensor([s.elapsed_time(e) * 1e3 / (OPS * replays)], dtype=torch.float64)
                    got = [torch.empty_like(t) for _ in range(n)]
                    dist.all_gather(got, t, group=ctrl)
                    rows += [[api, size, replays, trial, r, round(x.item(), 3)] for r, x in enumerate(got)]
            del g
    if rank == 0:
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "graph_anatomy.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["api", "size_bytes", "replays", "trial", "rank", "time_us_per_op"])
            w.writerows(rows)
        with open(out_dir / "graph_nodes.txt", "w") as f:
            for rec in nodes:
                f.write(f"{rec}\n")
        import pandas as pd
        d = pd.DataFrame(rows, columns=["api", "size_bytes", "replays", "trial", "rank", "t"])
        per_trial = d.groupby(["api", "size_bytes", "replays", "trial"])["t"].agg(["max", "mean"])
        print(per_trial.groupby(["api", "size_bytes", "replays"]).median().unstack("api").round(2).to_string())
        for rec in nodes:
            print(rec)
    lib.ncclCommDestroy(comm)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
