"""NCCL all_reduce with both GPUs driven by ONE process (as nccl-tests' -g 2 / -t 2 run without
MPI), captured into CUDA graphs the same way as our harness does, for the small-message latency
comparison: is the gap to nccl-tests ours, torch's, or the process layout's?

    python3 benchmarks/investigations/graph-latency/one_process_nccl.py          # prints us/op per size for 1 and 10 replays

Per size: one communicator per GPU from ncclCommInitAll; 20 all_reduces per GPU captured into
one torch.cuda.graph per GPU (ncclGroupStart/End around the two GPUs' calls, as nccl-tests -g 2),
after warm-up; timed with CUDA events on each GPU around 1 or 10 replays, 10 trials; median over
trials of the mean over the two GPUs.
"""

import ctypes
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed  # noqa: F401 - loads torch's libnccl into the process

sys.path.insert(0, str(Path(__file__).parent))
from raw_nccl_baseline import NCCL_FLOAT32, NCCL_SUM  # noqa: E402

OPS, TRIALS, WARMUP, SIZES = 20, 10, 5, [8, 1024, 65536, 2**20]


def main():
    n = torch.cuda.device_count()
    assert n >= 2, "needs 2 GPUs"
    n = 2
    torch.ones(1, device="cuda:0")
    with open("/proc/self/maps") as maps:
        path = sorted({ln.split()[-1] for ln in maps if "libnccl" in ln and ln.split()[-1].startswith("/")})
    if not path:  # torch loads libnccl lazily: find it beside torch's libs
        import glob
        import os
        base = os.path.dirname(torch.__file__)
        path = sorted(glob.glob(os.path.join(base, "..", "nvidia", "nccl", "lib", "libnccl.so*")))
    lib = ctypes.CDLL(path[0])
    comms = (ctypes.c_void_p * n)()
    devs = (ctypes.c_int * n)(*range(n))
    assert lib.ncclCommInitAll(comms, n, devs) == 0
    streams = [torch.cuda.Stream(torch.device("cuda", d)) for d in range(n)]
    print("size_bytes replays us_per_op(mean over GPUs, median over trials)")
    for size in SIZES:
        count = size // 4
        bufs = [torch.ones(count, device=f"cuda:{d}") for d in range(n)]

        def one_op():
            lib.ncclGroupStart()
            for d in range(n):
                lib.ncclAllReduce(ctypes.c_void_p(bufs[d].data_ptr()), ctypes.c_void_p(bufs[d].data_ptr()),
                                  ctypes.c_size_t(count), NCCL_FLOAT32, NCCL_SUM, comms[d],
                                  ctypes.c_void_p(streams[d].cuda_stream))
            lib.ncclGroupEnd()

        for _ in range(WARMUP):
            one_op()
        for d in range(n):
            torch.cuda.synchronize(d)
        graphs = [torch.cuda.CUDAGraph() for _ in range(n)]
        # both GPUs' streams capture at once, as nccl-tests -g 2 does
        for d in range(n):
            with torch.cuda.device(d), torch.cuda.stream(streams[d]):
                graphs[d].capture_begin(capture_error_mode="relaxed")
        for _ in range(OPS):
            one_op()
        for d in range(n):
            with torch.cuda.device(d), torch.cuda.stream(streams[d]):
                graphs[d].capture_end()
        for replays in (1, 10):
            per_trial = []
            for _ in range(TRIALS):
                for d in range(n):
                    torch.cuda.synchronize(d)
                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
                for d in range(n):
                    with torch.cuda.device(d):
                        ev[d][0].record(streams[d])
                for _ in range(replays):
                    for d in range(n):
                        with torch.cuda.device(d), torch.cuda.stream(streams[d]):
                            graphs[d].replay()
                for d in range(n):
                    with torch.cuda.device(d):
                        ev[d][1].record(streams[d])
                for d in range(n):
                    ev[d][1].synchronize()
                per_trial.append(statistics.mean(ev[d][0].elapsed_time(ev[d][1]) * 1e3 / (OPS * replays) for d in range(n)))
            print(size, replays, round(statistics.median(per_trial), 2))
        del graphs
    for d in range(n):
        lib.ncclCommDestroy(comms[d])


if __name__ == "__main__":
    main()
