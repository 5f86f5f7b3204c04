"""A torchrun entry point for tests/memory/test_memory_real_step.py: the memory harness's largest-batch
search on CPU ranks (Gloo), where no device limits memory, so a made-up one does: a forward pre-hook on
the model raises torch.OutOfMemoryError, as CUDA's allocator would, for a batch above `limit` on the
ranks named (a rank alone, to see that no other rank is left waiting in a collective).

Every DDP wrapper the harness makes all-reduces through a counting comm hook (the default all-reduce,
counted), so the test can see what a try synchronizes.

    torchrun --nproc_per_node=2 tests/memory/real_step_ranks.py OUT.json OUT.csv LIMIT OOM_RANKS

OOM_RANKS: comma-separated ranks that run out of memory above LIMIT ("all": every rank). Rank 0 writes
OUT.json (the try at batch 8: what it all-reduced, whether its wrapper is fresh and rebuilt its buckets,
whether the replicas agree afterwards) and OUT.csv (the search's and confirm's rows)."""
import json
import sys

import torch
import torch.nn.parallel
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from distbench.core.io import csv_text
from distbench.memory import harness, largest
from distbench.memory.contract import MEMORY_COLUMN_NAMES

ALLREDUCED = {"calls": 0, "bytes": 0}


def counting_allreduce(process_group, bucket):
    """DDP's default all-reduce (sum, divided by the world size), counted."""
    buf = bucket.buffer()
    ALLREDUCED["calls"] += 1
    ALLREDUCED["bytes"] += buf.numel() * buf.element_size()
    return default_hooks.allreduce_hook(process_group, bucket)


class CountingDDP(torch.nn.parallel.DistributedDataParallel):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register_comm_hook(None, counting_allreduce)


# the harness imports DDP from torch.nn.parallel when it wraps, so every wrapper it makes counts
torch.nn.parallel.DistributedDataParallel = CountingDDP


def replicas_agree(h) -> bool:
    """Every rank's parameters equal rank 0's (DDP averaged the ranks' different gradients)."""
    mine = [float(p.detach().double().sum()) for p in h.model.parameters()]
    return all(other == mine for other in h.gather_rows(mine))


def main(out_json: str, out_csv: str, limit: int, oom_ranks: str) -> None:
    a = harness.parse_args(["--backend", "gloo", "--model", "mlp", "--hidden-dim", "32", "--num-layers", "2",
                            "--batch-sizes", "2,4", "--search-max-batch", "64", "--op-timeout-s", "30",
                            "--out", out_csv])
    h = harness.MemoryHarness(a)
    h.build()
    h.measure(a.batch_sizes[0])  # the warm-up main() runs: the optimizer state exists

    before = h.wrapped
    ALLREDUCED.update(calls=0, bytes=0)
    tried = h.try_batch(8)
    report = {"status": tried.status, "allreduced_bytes": ALLREDUCED["bytes"], "allreduce_calls": ALLREDUCED["calls"],
              "grad_bytes": 4 * h.n_trainable, "fresh_wrapper": h.wrapped is not before,
              "rebuilt_buckets": bool(getattr(h.wrapped, "_has_rebuilt_buckets", False)),
              "replicas_agree": replicas_agree(h)}

    failing = set(range(h.world_size)) if oom_ranks == "all" else {int(r) for r in oom_ranks.split(",")}

    def made_up_limit(module, inputs):
        if h.rank in failing and inputs[0].shape[0] > limit:
            raise torch.OutOfMemoryError(f"CUDA out of memory (made up: batch {inputs[0].shape[0]} > {limit})")

    h.model.register_forward_pre_hook(made_up_limit)
    rows: list[dict] = []
    report["confirmed"] = largest.run_search(a, h, rows.extend, lambda _: None, measured=[])
    if h.rank == 0:
        with open(out_csv, "w") as f:
            f.write(csv_text(rows, MEMORY_COLUMN_NAMES))
        with open(out_json, "w") as f:
            json.dump(report, f)
    h.dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
