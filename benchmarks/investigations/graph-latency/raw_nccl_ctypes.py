"""The control for our small-message graph timing: all_reduce through libnccl and the CUDA runtime
directly (ctypes), in a process that does NOT import torch unless asked, launched one process per
GPU by torchrun or by mpiexec, timed the way nccl-tests times.

    torchrun --standalone --nproc_per_node=2 raw_nccl_ctypes.py --nccl-lib L --cudart-lib C --out DIR --label L
    mpiexec -n 2 python3 raw_nccl_ctypes.py ... (rank from PMI_RANK / MPI_LOCALRANKID)

What it does per size (8 B .. 1 MiB, float32 sum, out of place, cudaMalloc'd buffers as nccl-tests):
- `graph`: 20 ncclAllReduce captured on ONE non-blocking stream (cudaStreamCaptureModeGlobal, no
  event records, no second stream), the graph launched 10 times back to back: nccl-tests -G 10.
- `eager`: 20 ncclAllReduce issued back to back from Python (ctypes): nccl-tests -G 0, plus the
  host's issue time per call (what one ctypes->NCCL call costs the host).
Each trial starts after one un-timed all_reduce and a stream sync (aligns the ranks, as the
harness does; nccl-tests uses an MPI barrier). Time: host clock from the first launch to the end
of cudaStreamSynchronize (nccl-tests' method) and CUDA events on the stream (our harness's), both
per op. Every rank writes its own CSV (DIR/<label>_rank<r>.csv); the result is checked once per
size (every element == sum of the ranks' values).

`--with-torch` imports torch, creates torch's NCCL process group and runs one torch all_reduce
first (the communicator and allocator our harness has in its process), then measures the same
raw ops: the difference between that and the plain run is what torch's presence costs NCCL. It
adds mode `torch_graph`: the same 20 raw ncclAllReduce captured by torch.cuda.graph on a torch
side stream (how our harness captures) and replayed with CUDAGraph.replay(), 10 replays per trial:
the difference between `graph` and `torch_graph` is what torch's capture and replay cost.
"""

import argparse
import csv
import ctypes
import os
import statistics
import time
from pathlib import Path

SIZES = [8, 1024, 65536, 2**20]
OPS, LAUNCHES, TRIALS, WARMUP = 20, 10, 10, 5
NCCL_FLOAT32, NCCL_SUM = 7, 0
MEMCPY_H2D, MEMCPY_D2H = 1, 2


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_byte * 128)]


def ranks() -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's or MPICH hydra's environment."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
    rank = int(os.environ["PMI_RANK"])
    return rank, int(os.environ["PMI_SIZE"]), int(os.environ.get("MPI_LOCALRANKID", rank))


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} returned {rc}")


class Cuda:
    def __init__(self, path):
        self.rt = ctypes.CDLL(path)

    def __getattr__(self, name):
        fn = getattr(self.rt, name)

        def call(*args):
            check(fn(*args), name)
        return call


NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "child_graph", 5: "empty", 6: "wait_event",
              7: "event_record", 8: "ext_sem_signal", 9: "ext_sem_wait", 10: "mem_alloc", 11: "mem_free",
              12: "batch_mem_op", 13: "conditional"}


def graph_nodes(rt, graph) -> dict:
    """A captured cudaGraph_t's nodes counted by type (CUDA runtime graph API)."""
    num = ctypes.c_size_t(0)
    check(rt.cudaGraphGetNodes(graph, None, ctypes.byref(num)), "cudaGraphGetNodes")
    nodes = (ctypes.c_void_p * num.value)()
    check(rt.cudaGraphGetNodes(graph, nodes, ctypes.byref(num)), "cudaGraphGetNodes")
    kinds = {}
    for node in nodes:
        t = ctypes.c_int(-1)
        rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(t))
        kinds[NODE_TYPES.get(t.value, str(t.value))] = kinds.get(NODE_TYPES.get(t.value, str(t.value)), 0) + 1
    return kinds


def exchange_uid(lib, rank: int, rdzv: Path) -> UniqueId:
    """Rank 0 writes NCCL's unique id to a file (atomically); the others poll for it."""
    uid, path = UniqueId(), rdzv / "nccl_uid.bin"
    if rank == 0:
        check(lib.ncclGetUniqueId(ctypes.byref(uid)), "ncclGetUniqueId")
        tmp = rdzv / f".uid.{os.getpid()}"
        tmp.write_bytes(bytes(uid.internal))
        tmp.replace(path)
    else:
        deadline = time.time() + 60
        while not path.exists():
            if time.time() > deadline:
                raise SystemExit("no NCCL unique id from rank 0 within 60 s")
            time.sleep(0.01)
        time.sleep(0.05)
        ctypes.memmove(uid.internal, path.read_bytes(), 128)
    return uid


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nccl-lib", required=True)
    ap.add_argument("--cudart-lib", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--label", required=True)
    ap.add_argument("--with-torch", action="store_true")
    a = ap.parse_args()
    rank, n, local = ranks()
    a.out.mkdir(parents=True, exist_ok=True)
    rdzv = a.out / f".rdzv_{a.label}"
    rdzv.mkdir(exist_ok=True)

    torch = None
    if a.with_torch:  # torch's own NCCL communicator and allocator live in this process too
        import torch
        import torch.distributed as dist
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        os.environ.setdefault("RANK", str(rank))
        os.environ.setdefault("WORLD_SIZE", str(n))
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        dist.all_reduce(torch.ones(1, device="cuda"))
        torch.cuda.synchronize()

    cuda = Cuda(a.cudart_lib)
    lib = ctypes.CDLL(a.nccl_lib)
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
    lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_void_p, ctypes.c_void_p]
    lib.ncclAllReduce.restype = ctypes.c_int
    cuda.rt.cudaEventElapsedTime.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
    for name in ("cudaGraphLaunch", "cudaStreamSynchronize", "cudaEventRecord", "cudaEventSynchronize",
                 "cudaStreamBeginCapture", "cudaGraphInstantiateWithFlags", "cudaMemcpy", "cudaMalloc"):
        getattr(cuda.rt, name).restype = ctypes.c_int
    cuda.rt.cudaGraphLaunch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    cuda.rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    cuda.rt.cudaEventRecord.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    cuda.rt.cudaEventSynchronize.argtypes = [ctypes.c_void_p]
    cuda.rt.cudaStreamBeginCapture.argtypes = [ctypes.c_void_p, ctypes.c_int]
    cuda.rt.cudaStreamEndCapture.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    cuda.rt.cudaGraphInstantiateWithFlags.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                                       ctypes.c_ulonglong]
    cuda.rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    cuda.rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]

    cuda.cudaSetDevice(local)
    stream = ctypes.c_void_p()
    cuda.cudaStreamCreateWithFlags(ctypes.byref(stream), 1)  # cudaStreamNonBlocking, as nccl-tests
    uid = exchange_uid(lib, rank, rdzv)
    comm = ctypes.c_void_p()
    check(lib.ncclCommInitRank(ctypes.byref(comm), n, uid, rank), "ncclCommInitRank")
    version = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(version))
    ev0, ev1 = ctypes.c_void_p(), ctypes.c_void_p()
    cuda.cudaEventCreate(ctypes.byref(ev0))
    cuda.cudaEventCreate(ctypes.byref(ev1))

    def allreduce(send, recv, count):
        check(lib.ncclAllReduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM, comm, stream), "ncclAllReduce")

    rows, node_lines = [], []
    mixing = os.environ.get("NCCL_GRAPH_MIXING_SUPPORT", "default")
    for size in SIZES:
        count = size // 4
        send, recv = ctypes.c_void_p(), ctypes.c_void_p()
        cuda.cudaMalloc(ctypes.byref(send), size)
        cuda.cudaMalloc(ctypes.byref(recv), size)
        host = (ctypes.c_float * count)(*([float(rank + 1)] * count))
        cuda.cudaMemcpy(send, host, size, MEMCPY_H2D)
        for _ in range(WARMUP):
            allreduce(send, recv, count)
        cuda.cudaStreamSynchronize(stream)
        got = (ctypes.c_float * count)()
        cuda.cudaMemcpy(got, recv, size, MEMCPY_D2H)
        correct = all(x == n * (n + 1) / 2 for x in got)

        graph, exe = ctypes.c_void_p(), ctypes.c_void_p()
        cuda.cudaStreamBeginCapture(stream, 0)  # cudaStreamCaptureModeGlobal
        for _ in range(OPS):
            allreduce(send, recv, count)
        cuda.cudaStreamEndCapture(stream, ctypes.byref(graph))
        if size == SIZES[0]:
            node_lines.append(f"{a.label} rank {rank} graph (cudaStreamBeginCapture, {OPS} ops): {graph_nodes(cuda.rt, graph)}")
        cuda.cudaGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0)
        cuda.cudaGraphLaunch(exe, stream)
        cuda.cudaStreamSynchronize(stream)
        modes = ["graph", "eager"]
        if a.with_torch:
            side = torch.cuda.Stream()
            try:
                tgraph = torch.cuda.CUDAGraph(keep_graph=True)  # keep the cudaGraph_t to count its nodes
            except TypeError:  # torch < 2.8
                tgraph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(tgraph, stream=side):
                for _ in range(OPS):
                    check(lib.ncclAllReduce(send, recv, count, NCCL_FLOAT32, NCCL_SUM, comm, side.cuda_stream),
                          "ncclAllReduce (torch capture)")
            if size == SIZES[0] and hasattr(tgraph, "raw_cuda_graph"):
                try:
                    node_lines.append(f"{a.label} rank {rank} torch_graph (torch.cuda.graph, {OPS} ops): "
                                      f"{graph_nodes(cuda.rt, ctypes.c_void_p(tgraph.raw_cuda_graph()))}")
                except Exception as e:  # noqa: BLE001 - counting nodes is a bonus; the timing goes on
                    node_lines.append(f"{a.label} rank {rank} torch_graph nodes: {e!r}")
            if hasattr(tgraph, "instantiate"):
                tgraph.instantiate()
            tgraph.replay()
            torch.cuda.synchronize()
            modes.append("torch_graph")

        for trial in range(TRIALS):
            for mode in modes:
                allreduce(send, recv, count)  # aligns the ranks before the clock starts
                cuda.cudaStreamSynchronize(stream)
                t0 = time.perf_counter()
                cuda.cudaEventRecord(ev0, stream)
                if mode == "graph":
                    for _ in range(LAUNCHES):
                        cuda.cudaGraphLaunch(exe, stream)
                    ops = OPS * LAUNCHES
                elif mode == "torch_graph":  # replays on torch's current stream, as the harness does
                    with torch.cuda.stream(torch.cuda.ExternalStream(stream.value)):
                        for _ in range(LAUNCHES):
                            tgraph.replay()
                    ops = OPS * LAUNCHES
                else:
                    for _ in range(OPS):
                        allreduce(send, recv, count)
                    ops = OPS
                t_issue = time.perf_counter()
                cuda.cudaEventRecord(ev1, stream)
                cuda.cudaStreamSynchronize(stream)
                t1 = time.perf_counter()
                ms = ctypes.c_float()
                cuda.cudaEventElapsedTime(ctypes.byref(ms), ev0, ev1)
                rows.append({"label": a.label, "graph_mixing": mixing, "launcher": "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "mpiexec",
                             "with_torch": a.with_torch, "nccl_version": version.value, "rank": rank, "world_size": n,
                             "size_bytes": size, "mode": mode, "trial": trial, "ops": ops,
                             "host_clock_us": (t1 - t0) / ops * 1e6, "events_us": ms.value * 1e3 / ops,
                             "host_issue_us": (t_issue - t0) / ops * 1e6, "correct": correct})
        if a.with_torch:
            del tgraph
        cuda.cudaGraphExecDestroy(exe)
        cuda.cudaGraphDestroy(graph)
        cuda.cudaFree(send)
        cuda.cudaFree(recv)

    path = a.out / f"{a.label}_rank{rank}.csv"
    with open(path.with_suffix(".tmp"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    path.with_suffix(".tmp").replace(path)
    for line in node_lines:
        print(f"raw_nccl[{a.label}] nodes: {line}", flush=True)
    (a.out / f"{a.label}_rank{rank}_nodes.txt").write_text("\n".join(node_lines) + "\n")
    for size in SIZES:
        for mode in sorted({r["mode"] for r in rows}):
            vals = [r["host_clock_us"] for r in rows if r["size_bytes"] == size and r["mode"] == mode]
            ev = [r["events_us"] for r in rows if r["size_bytes"] == size and r["mode"] == mode]
            print(f"raw_nccl[{a.label}] rank {rank} {size:>8} B {mode:5}: host clock {statistics.median(vals):7.2f} us/op, "
                  f"events {statistics.median(ev):7.2f} us/op", flush=True)
    lib.ncclCommDestroy(comm)
    if a.with_torch:
        import torch.distributed as dist
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
