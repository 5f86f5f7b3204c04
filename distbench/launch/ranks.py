"""What every benchmark family's ranks share: the device, the process group under test, a
separate Gloo group for bookkeeping, and the votes and gathers done on it. Runs inside the
torchrun ranks; each family's harness builds on it."""

from __future__ import annotations

import datetime as dt
import gc
import os
import sys
import threading
import time

from distbench.launch.failure import HOST_UNFIT


def ranks_text(ranks: list[int]) -> str:
    """'0, 1, 2' for a message; at most 8 ranks named, then how many more."""
    return ", ".join(map(str, ranks[:8])) + (f" and {len(ranks) - 8} more" if len(ranks) > 8 else "")


def first_line(e: BaseException, limit: int = 300) -> str:
    """'OutOfMemoryError: CUDA out of memory. Tried to ...': an exception's type and first line,
    for a CSV message."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:limit]


def failure_status(e: BaseException) -> str:
    """'oom' for an allocation failure (torch.OutOfMemoryError, or a RuntimeError from the CPU
    allocator or CUDA outside it), else 'failed'. A collective that timed out first has every rank
    write its Flight Recorder dump (distbench.launch.fr_watch.dump_on_timeout)."""
    import torch

    from distbench.launch.fr_watch import dump_on_timeout

    dump_on_timeout(e, int(os.environ.get("WORLD_SIZE", 1)))
    if isinstance(e, torch.OutOfMemoryError):
        return "oom"
    msg = str(e).lower()
    alloc = "out of memory" in msg or "can't allocate" in msg or ("alloc" in msg and "memory" in msg)
    return "oom" if isinstance(e, RuntimeError) and alloc else "failed"


def node_count() -> int:
    """Nodes of this torchrun job: torchrun starts LOCAL_WORLD_SIZE ranks per agent, one agent
    per node (distbench.launch.cluster keeps every node's share equal)."""
    world, local = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_WORLD_SIZE", 0) or 0)
    return max(1, world // local) if local else 1


# Tests only: rank 1 exits (as if killed) when the batch launch reaches the configuration so named.
TEST_EXIT_ENV = "DISTBENCH_TEST_BATCH_EXIT"
# The groups a batch launch keeps from one configuration to the next (cleared with the process group).
_KEPT_GROUPS: dict = {}


def end_groups(keep: bool) -> None:
    """The end of a configuration: the process groups go, unless a batch launch has more to run."""
    import torch.distributed as dist

    if not keep and dist.is_initialized():
        dist.destroy_process_group()
        _KEPT_GROUPS.clear()


def finish_config(h, writer, keep_groups: bool) -> int:
    """The end of a training or memory configuration, once every rank measured: the rows written
    (writer: the rank's PartialCsvs, or None), the model, its DDP/FSDP wrapping and optimizer dropped
    (DDP's reducer holds Gloo/NCCL work) before the process groups go, so nothing of them is torn down
    at interpreter exit; the groups kept for a batch launch's next configuration. `h` is the family's
    harness: dist, ctrl (its bookkeeping group), wrapped, model, opt."""
    from distbench.launch.timeline import mark

    h.dist.barrier(group=h.ctrl)
    mark("measure_end")
    if writer is not None:
        writer.close()
    mark("written")
    h.wrapped = h.model = h.opt = None
    gc.collect()
    h.dist.barrier(group=h.ctrl)
    end_groups(keep_groups)
    return 0


def exit_rank(code: int) -> None:
    """How a family's `python -m distbench.<family>` ends, its results written and renamed and its
    process groups destroyed: this rank's phase marks (distbench.launch.timeline: os._exit runs no
    atexit), the streams flushed, then out without the interpreter's teardown. That teardown cost
    about a second per job, and with Gloo a background thread of torch's occasionally aborts the
    process there ("terminate called without an active exception", exit -6), which would turn a
    complete job into a failed one."""
    from distbench.launch.timeline import finish

    finish()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_configs(main, argv: list[str]) -> int:
    """A family's entry point: `--batch FILE` runs every configuration FILE lists
    (distbench.launch.batch), one after another in this process and its groups, each writing its
    own outputs and then its done.json; otherwise the one configuration argv describes. A
    configuration past its own time limit ends the rank (exit 124): the launcher then ends the
    launch, and the configurations not done run alone."""
    if not argv or argv[0] != "--batch":
        return main(argv, keep_groups=False)
    from distbench.launch.batch import mark_done, read_batch_file

    rank = int(os.environ.get("RANK", 0))
    code = 0
    for config in read_batch_file(argv[1]):
        started = time.time()
        fuse = threading.Timer(config.timeout_s, _time_limit, args=(config,))
        fuse.daemon = True
        fuse.start()
        if rank == 0:
            print(f"distbench: batch launch: {config.name}{_allocated_note()}", file=sys.stderr, flush=True)
        if rank == 1 and os.environ.get(TEST_EXIT_ENV) == config.name:  # tests only: a rank lost mid-launch
            os._exit(17)
        code = main(config.argv, keep_groups=True)
        fuse.cancel()
        if code != 0:
            break
        if rank == 0:
            mark_done(config, started)
        _release()
    end_groups(keep=False)
    return code


def _time_limit(config) -> None:
    # hung or slow is judged when the configuration runs alone (the launcher's progress readings); here
    # only what this rank knows of itself
    from distbench.launch import progress

    b = progress.beacon()
    since = f"{(time.time_ns() - b.updated_ns) / 1e9:.1f} s ago in {b.where}" if b.updated_ns else "never"
    print(f"distbench error: {config.name}: job killed after {config.timeout_s} s (job time limit) in a batch "
          f"launch; this rank last made progress {since}", file=sys.stderr, flush=True)
    os._exit(124)


def _release() -> None:
    """Between two configurations: nothing of the last one stays allocated or counted in the next one's peaks."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def _allocated_note() -> str:
    """What is still allocated on this rank's GPU before a configuration starts (0 B expected)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return ""
    return f" (GPU memory allocated before it: {torch.cuda.memory_allocated()} B)"


class RankContext:
    def __init__(self, backend: str, op_timeout_s: int, ctrl_on_gloo_too: bool = False, progress_unit: str = "collectives"):
        from distbench.launch import progress
        from distbench.launch.timeline import mark

        # where this rank is and what it completed, for the launcher (distbench.launch.progress)
        self.beacon = progress.beacon(int(os.environ.get("RANK", 0)), progress_unit)
        self.beacon.at("setup: import torch, process group")

        mark("torch_import")
        import torch
        import torch.distributed as dist

        mark("torch_imported")

        self.torch, self.dist = torch, dist
        self.rank = int(os.environ.get("RANK", 0))
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.world_size = int(os.environ.get("WORLD_SIZE", 1))
        if backend == "nccl":
            if not torch.cuda.is_available():
                raise SystemExit(f"distbench error: {HOST_UNFIT}: backend nccl needs CUDA, but torch.cuda.is_available() "
                                 "is False on this host")
            visible = torch.cuda.device_count()
            if self.local_rank >= visible:
                raise SystemExit(
                    f"distbench error: {HOST_UNFIT}: rank {self.rank} has LOCAL_RANK {self.local_rank} but only {visible} GPU(s) are visible "
                    f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}): use at most {visible} "
                    "processes per node with NCCL")
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.device = torch.device("cpu")
        mark("device_set")
        # A later configuration of a batch launch (run_configs) keeps the groups the first one made.
        if not dist.is_initialized():
            kw = {"device_id": self.device} if backend == "nccl" else {}
            dist.init_process_group(backend, timeout=dt.timedelta(seconds=op_timeout_s), **kw)
        mark("pg_ready")
        # Flight Recorder dumps on the launcher's request, before it kills a job past its time limit
        from distbench.launch import fr_watch

        fr_watch.start(torch, self.rank, backend)
        # Bookkeeping (placement, agreement, per-rank times) runs on a separate Gloo group, as
        # nccl-tests uses MPI for it: it must not depend on the NCCL settings under test (with
        # NCCL_ALGO=Tree, NCCL has no algorithm for all_gather) nor add traffic to the timed comm.
        # Under Gloo the default group serves, unless a family asks for its own (see the training
        # harness: a rank failing mid-step must not pair its vote with another rank's collective).
        self.ctrl = None
        if backend == "nccl" or ctrl_on_gloo_too:
            if "ctrl" not in _KEPT_GROUPS:
                _KEPT_GROUPS["ctrl"] = dist.new_group(backend="gloo")
            self.ctrl = _KEPT_GROUPS["ctrl"]
        mark("ctrl_ready")
        self.cuda = self.device.type == "cuda"

    def agree(self, ok: bool) -> bool:
        """Every rank votes; all take the worst outcome, so no rank is left waiting in a collective."""
        t = self.torch.tensor([1 if ok else 0], dtype=self.torch.int32)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN, group=self.ctrl)
        ok = bool(t.item())
        self._bookkept()
        return ok

    def gather_rows(self, values: list[float]) -> list[list[float]]:
        """Every rank's vector of values, indexed by rank (on every rank)."""
        t = self.torch.tensor(values, dtype=self.torch.float64)
        out = [self.torch.empty_like(t) for _ in range(self.world_size)]
        self.dist.all_gather(out, t, group=self.ctrl)
        self._bookkept()
        return [o.tolist() for o in out]

    def _bookkept(self) -> None:
        """A bookkeeping collective completed: counted where the beacon counts collectives, a sign
        of life where it counts steps (distbench.launch.progress)."""
        if self.beacon.unit == "collectives":
            self.beacon.done()
        else:
            self.beacon.alive()

    def placement_ok(self, placement_out) -> bool:
        """Record every rank's GPU (placement_out) and check no two share one; on a problem rank 0
        prints the fix and the process group is destroyed (the caller exits with code 3)."""
        from distbench.launch.placement import gather_and_check

        _, problem = gather_and_check(self.dist, self.ctrl, self.rank, self.local_rank, self.device,
                                      self.world_size, placement_out)
        if problem:
            if self.rank == 0:
                print(f"distbench error: {problem}", file=sys.stderr, flush=True)
            self.dist.destroy_process_group()
        return not problem

    def say(self, text: str) -> None:
        """A progress line from rank 0 (stderr, so it lands in the job's log as it happens)."""
        if self.rank == 0:
            print(f"distbench: {text}", file=sys.stderr, flush=True)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.device)
