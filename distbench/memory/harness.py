"""Memory benchmark harness: one torchrun job measures, for one model (mlp, gpt, lora) and one
strategy (DDP, with or without gradient_as_bucket_view, or FSDP2) at one world size, where the
memory of a training step goes at each batch size, and (on GPU) the largest batch at which a real
training step runs.

Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.memory --backend gloo --model gpt \
        --gpt-size tiny --seq-len 32 --batch-sizes 1,2,4 --out memory.csv

The step. Every step this harness runs is the training family's real step, wrapped as that family
wraps it (distbench.training.trainer: DDP with the job's gradient_as_bucket_view and DDP's other
defaults; AdamW's fused kernel on GPU): forward and loss under autocast, backward with DDP's
gradient sync, the optimizer step, gradients set to None. And each measurement starts as a training
run starts, from a fresh DDP wrapper (`fresh_steps`): the reducer's first synced iteration records
the order in which gradients become ready, and at the next forward it rebuilds its buckets in that
order, allocating new ones. On GPU the first iteration's buckets outlive that rebuild when the host
runs ahead of the device, as a training loop's does: ProcessGroupNCCL holds the tensors of each
collective (the Work's TensorShelf) until the Work is waited on (DDP waits on its future instead)
or its watchdog thread (polling every 100 ms) sees it finished and sets them aside, to be freed at
the group's next call from this thread. The first iteration's all-reduces are still running when
the second forward rebuilds, so the second step's forward and the start of its backward, where the
activations peak, hold both sets: the gradients' size again, 4.9 GiB for gpt 1.3b (torch's source,
ProcessGroupNCCL.cpp: shelvesToUnstash_). A later step of a long-rebuilt wrapper never shows it:
not the search that stepped under no_sync, nor a steady step (40.3 GiB at gpt 1.3b batch 8 where the
training job's step peaked at 45.2 GiB; on CPU, where Gloo holds nothing,
the allocator's count of the two is the same). `fresh_steps` lets go of the
previous wrapper first (NCCL's held tensors included: `drain`), makes a new one and runs the steps
back to back with no host sync between them, as a training loop does; the peak is over them all.

Per batch size (phase `measure`; one warm-up at the smallest batch first, so the optimizer state
exists): a fresh wrapper's first two steps (the peak allocated / reserved, allocation retries: what a
training run at this batch needs), then one more step (`steady_peak_allocated_bytes`: the buckets
rebuilt) with its memory counted (distbench.memory.accounting): forward under
accounting.SavedActivations, gradients read after backward, optimizer state after the step. Parts:
parameters, gradients, optimizer state, activations saved for backward; `unexplained_bytes` = peak
allocated - the sum of the parts (DDP's buckets without bucket view, the rebuild's second set,
autograd's temporaries, the logits' fp32 copy, workspace); fragmentation = reserved - allocated; the
device's total memory. Each column is the maximum over ranks. Beside each row: the analytic estimate
of parameters, gradients and optimizer state (accounting.estimate) and how far the measured model
states are from it. On CPU there is no allocator to read: those columns are empty.

Largest batch (phase `search`, GPU and DDP only; distbench.memory.search): from the batch the
measured peaks predict, or doubling from the largest measured batch, until a try runs out of memory,
then bisection; one row per batch tried (`ok` with its peak, or `oom`). A try is a fresh wrapper's
first two real steps at that batch (`try_batch`), gradients synced, the optimizer state present. Every
rank votes on the outcome and frees its memory before the next try. Doubling stops at
`--search-max-batch` (memory.search_max_batch): when that batch fits, its row has `search_capped`
true and the largest batch is only known to be at least that. FSDP is not searched (a rank out of
memory inside FSDP's all-gather would leave the others waiting); on CPU there is no device limit.

Bounded on several ranks. A rank out of memory inside a synced step would leave the others waiting
in an all-reduce. So at more than one rank each try first runs the step's forward and backward
alone on the bare model (no wrapper, no collective: `compute_alone`) and every rank votes on it: a
batch whose compute runs out of memory on any rank is out of memory on all of them before any rank
enters a collective (on one rank there is no one to wait, and no pre-vote). What remains is a batch
whose compute fits on every rank while the synced steps run out of memory on some ranks and not
others (DDP's replicas allocate alike, so this takes devices, or NCCL's timing, that differ by
rank): the process group's op timeout (`--op-timeout-s`, the top-level op_timeout_s) ends the waiting ranks,
and the job with them, its rows so far kept (distbench.memory.job.write_failure_rows marks the rest).

Confirm (phase `confirm`): the search's answer runs again from a drained allocator, now three real
steps (the fresh wrapper's two and one after the rebuild), and its row records the peak at that
batch. If it runs out of memory, the batch below it is confirmed instead, at most CONFIRM_ATTEMPTS
batches: the answer is the largest batch that confirmed (none, said so, when none did). The search
and the confirm run in distbench.memory.largest; their rows, and the measured ones, are made in
distbench.memory.rows.

`--snapshot-out PATH` (GPU): a torch.cuda.memory snapshot (the pickle PyTorch's memory viewer at
pytorch.org/memory_viz opens) of the fresh wrapper's steps at the largest measured batch, from rank 0.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import sys
import threading
from pathlib import Path

from distbench.launch.timeline import mark
from distbench.core.choices import BACKENDS, OPTIMIZERS, MODEL_DTYPES
from distbench.core.layout_spec import layout
from distbench.launch.failure import unreached_rows
from distbench.launch.ranks import RankContext, failure_status, finish_config, first_line, ranks_text
from distbench.workloads.cli import add_model_args, resolve_model_args
from distbench.memory.contract import MEMORY_COLUMN_NAMES
from distbench.memory.largest import search
from distbench.memory.rows import PEAK, Tried, worst_of_ranks, base_row, measured_row
from distbench.memory.search import DEFAULT_SEARCH_MAX_BATCH

# A fresh DDP wrapper's first synced step and the next, at whose forward the reducer rebuilds its
# buckets: the two a training run at that batch must get through first.
FRESH_STEPS = 2
# How long a drain waits for NCCL's watchdog (its poll is 100 ms; a private call, so bounded).
DRAIN_TIMEOUT_S = 10.0
STATUS_CODE = {"ok": 0, "oom": 1, "failed": 2}  # a vote takes the worst (largest)


class MemoryHarness(RankContext):
    def __init__(self, args):
        super().__init__(args.backend, args.op_timeout_s, ctrl_on_gloo_too=True, progress_unit="steps")
        self.args = args
        self.device_name = self.torch.cuda.get_device_name(self.device) if self.cuda else "cpu"

    # -- the model ----------------------------------------------------------------------------

    def build(self):
        """The workload (distbench.workloads.registry), wrapped in DDP or sharded with FSDP2, and
        its optimizer (the training family's: make_optimizer with fused=True on GPU, which only
        AdamW takes)."""
        from distbench.workloads import mlp
        from distbench.workloads.registry import workload

        torch, a = self.torch, self.args
        torch.manual_seed(0)
        built = workload(a.model).build(a, self.rank, self.device)
        self.model, self.loss_fn, self.data = built.model, built.loss_fn, built.data
        params = list(self.model.parameters())
        self.n_params = sum(p.numel() for p in params)
        self.n_trainable = sum(p.numel() for p in params if p.requires_grad)
        self.n_trainable_tensors = sum(1 for p in params if p.requires_grad)
        if layout(a.strategy).sharded:
            from distbench.workloads import gpt

            gpt.fully_shard_blocks(self.model, bfloat16=a.dtype == "bfloat16")
            self.wrapped = self.model
        else:
            self.wrap_ddp()
        self.opt = mlp.make_optimizer(a.optimizer, [p for p in self.wrapped.parameters() if p.requires_grad],
                                      fused=self.cuda)
        self.autocast = lambda: mlp.autocast(a.dtype, self.device)

    def wrap_ddp(self):
        """Wrap the model in DDP as the training family's default does (collective: every rank calls
        it): gradient_as_bucket_view as the job says, DDP's defaults otherwise."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        kw = {"gradient_as_bucket_view": self.args.gradient_as_bucket_view}
        if self.cuda:
            kw.update(device_ids=[self.device.index], output_device=self.device.index)
        self.wrapped = DDP(self.model, **kw)

    def fresh_wrapper(self):
        """A new DDP wrapper, as a training run starts with one (collective: every rank calls it),
        after the old one's memory is let go of (so the new one's steps do not count it). FSDP keeps
        its wrapping: it has no bucket rebuild."""
        if layout(self.args.strategy).sharded:
            self.release()
            return
        self.wrapped = None  # the old reducer (and its buckets) goes with its last reference
        gc.collect()
        self.drain()
        self.release()
        self.wrap_ddp()

    def drain(self):
        """Wait until the device is idle and NCCL has let go of what its finished collectives held
        (the module says why that can lag): until its watchdog has seen every collective finished
        (`_wait_for_pending_works`, private to torch: at most DRAIN_TIMEOUT_S), then one small
        all-reduce, the group's next call from this thread, which frees what the watchdog set aside.
        A training run starts with nothing held, so a measurement does too. Collective (every rank
        calls it); GPU only: Gloo holds nothing."""
        self.sync()
        if not self.cuda:
            return
        group = self.dist.group.WORLD

        def wait():
            with contextlib.suppress(Exception):  # a torch without it: the all-reduce below frees less
                group._wait_for_pending_works()  # releases the GIL while it polls

        waiter = threading.Thread(target=wait, name="distbench-memory-drain", daemon=True)
        waiter.start()
        waiter.join(DRAIN_TIMEOUT_S)
        self.dist.all_reduce(self.torch.zeros(1, device=self.device))
        self.sync()

    def release(self):
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    # -- real steps ---------------------------------------------------------------------------

    def real_step(self, x, y, parts: dict | None = None) -> None:
        """One training step as the training family takes it (distbench.training.trainer's step with
        one micro-batch): forward and loss under autocast, backward (DDP all-reduces each gradient
        bucket as it fills), the optimizer step, gradients set to None. `parts`: filled with what the
        step held, counted from the tensors (activations saved for backward, gradients after backward,
        optimizer state after the step)."""
        from distbench.memory import accounting

        counting = parts is not None
        with accounting.SavedActivations(self.model) if counting else contextlib.nullcontext() as saved:
            with self.autocast():
                loss = self.loss_fn(self.wrapped(x), y)
        loss.backward()
        if counting:
            parts["grads"] = accounting.gradient_bytes(self.model)
        self.opt.step()
        if counting:
            parts["optimizer"] = accounting.optimizer_state_bytes(self.opt)
            parts["activations"] = saved.bytes
        self.opt.zero_grad(set_to_none=True)

    def fresh_steps(self, batch: int, steps: int, snapshot: str | None = None) -> list[float]:
        """`steps` real steps at `batch` on a fresh wrapper, back to back (no host sync between them,
        as in a training loop), and this rank's PEAK over them. snapshot: the allocator's history of
        the steps, dumped there (GPU)."""
        torch = self.torch
        x, y = self.data(batch)
        self.fresh_wrapper()
        retries0 = self._retries()
        recording = self.cuda and bool(snapshot)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        if recording:
            torch.cuda.memory._record_memory_history(max_entries=200_000)
        try:
            for _ in range(steps):
                self.real_step(x, y)
                self.beacon.done()  # host side, between steps
            self.sync()
            if recording:
                torch.cuda.memory._dump_snapshot(snapshot)
        finally:
            if recording:  # also when a step ran out of memory: the next steps are not recorded
                torch.cuda.memory._record_memory_history(enabled=None)
        return self._peak(retries0)

    def _peak(self, retries0: int) -> list[float]:
        if not self.cuda:
            return [math.nan] * len(PEAK)
        torch = self.torch
        return [float(torch.cuda.max_memory_allocated(self.device)), float(torch.cuda.max_memory_reserved(self.device)),
                float(self._retries() - retries0), float(torch.cuda.get_device_properties(self.device).total_memory)]

    def _retries(self) -> int:
        return int(self.torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)) if self.cuda else 0

    # -- one measured batch -------------------------------------------------------------------

    def measure(self, batch: int, snapshot: str | None = None) -> list[float]:
        """This rank's rows.MEASURED values at `batch` (NaN where the CPU has none): the fresh wrapper's
        first two steps (the peak), then one step with its memory counted (the steady peak)."""
        from distbench.memory import accounting

        torch = self.torch
        self.beacon.at(f"measured steps at batch {batch}")
        peak = self.fresh_steps(batch, FRESH_STEPS, snapshot)
        x, y = self.data(batch)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        parts: dict = {}
        self.real_step(x, y, parts)
        self.sync()
        self.beacon.done()
        steady = float(torch.cuda.max_memory_allocated(self.device)) if self.cuda else math.nan
        out = [accounting.parameter_bytes(self.model), parts["grads"], parts["optimizer"], parts["activations"],
               *peak, steady]
        del x, y
        self.release()
        return [float(v) for v in out]

    # -- one try of the search ----------------------------------------------------------------

    def compute_alone(self, batch: int) -> None:
        """The step's forward and backward at `batch` on the bare model: no wrapper, so no collective
        at all (DDP's hooks on the gradients stay idle outside its forward). Every rank votes on it
        before any rank enters a synced step. No optimizer step: with gradients of this rank's data
        alone it would make the replicas' optimizer states differ (its memory is the synced steps')."""
        x, y = self.data(batch)
        with self.autocast():
            loss = self.loss_fn(self.model(x), y)
        loss.backward()
        del loss
        self.opt.zero_grad(set_to_none=True)
        self.sync()

    def vote(self, status: str, why: str, where: str, values: list[float] = ()) -> tuple[str, str, list[list[float]]]:
        """Every rank's status and values: the worst status, why (this rank's reason, or which ranks
        had the worst outcome, and `where`), and the values by rank."""
        votes = self.gather_rows([float(STATUS_CODE[status]), *values])
        code = max(int(v[0]) for v in votes)
        worst = {v: k for k, v in STATUS_CODE.items()}[code]
        if worst == "ok":
            return worst, "", [v[1:] for v in votes]
        if status != worst or not why:
            why = f"rank(s) {ranks_text([r for r, v in enumerate(votes) if int(v[0]) == code])}: {worst}"
        return worst, f"{where}: {why}", [v[1:] for v in votes]

    def try_batch(self, batch: int, steps: int = FRESH_STEPS) -> Tried:
        """Real steps at `batch` on a fresh wrapper (fresh_steps), every rank voting; at more than
        one rank the step's compute alone first (compute_alone), every rank voting, so a batch out of
        memory there leaves no rank in a collective. The wrapper is made anew after a failure."""
        self.beacon.at(f"largest-batch search: {steps} real steps at batch {batch}")
        if self.world_size > 1:
            status, why = "ok", ""
            try:
                self.compute_alone(batch)
            except Exception as e:  # noqa: BLE001 - an OOM is the answer; anything else is said as a failure
                status, why = failure_status(e), first_line(e)
            self.release()  # no collective ran: the wrapper is as it was
            status, why, _ = self.vote(status, why, "the step's forward and backward alone, before any sync")
            if status != "ok":
                return Tried(status, why)
        status, why, peak = "ok", "", [math.nan] * len(PEAK)
        try:
            peak = self.fresh_steps(batch, steps)
        except Exception as e:  # noqa: BLE001 - as above
            status, why = failure_status(e), first_line(e)
        self.release()
        status, why, peaks = self.vote(status, why, f"{steps} real steps on a fresh wrapper", peak)
        if status != "ok":
            self.fresh_wrapper()  # a step cut short leaves DDP's reducer mid-iteration
            return Tried(status, why)
        return Tried(status, "", tuple(worst_of_ranks(col) for col in zip(*peaks)))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", help="a job's job.json, as its rule writes it: its values, read as JSON "
                                    "(distbench.memory.job.MEMORY_RECORD); only the outputs come from flags")
    p.add_argument("--backend", choices=BACKENDS)
    p.add_argument("--gradient-as-bucket-view", choices=("false", "true"), default="false")
    add_model_args(p)
    p.add_argument("--dtype", choices=MODEL_DTYPES, default="float32")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--batch-sizes", help="comma-separated per-rank batch sizes, e.g. 1,2,4,8")
    p.add_argument("--search", choices=("false", "true"), default="true",
                   help="GPU + DDP: find the largest batch at which real steps run (from the limit the measured batches "
                        "predict, then bisection), then confirm it")
    p.add_argument("--search-max-batch", type=int, default=DEFAULT_SEARCH_MAX_BATCH,
                   help="the search tries no larger batch per rank; when this one fits, the row says search_capped")
    p.add_argument("--config-label", default="ddp")
    p.add_argument("--op-timeout-s", type=int, default=300)
    p.add_argument("--out", required=True, help="CSV to write (rank 0); atomically renamed when complete")
    p.add_argument("--placement-out", help="JSON with every rank's GPU placement")
    p.add_argument("--snapshot-out", help="GPU: torch.cuda.memory snapshot of a fresh wrapper's first two steps at the "
                                           "largest measured batch (rank 0)")
    a = p.parse_args(argv)
    if a.params:  # checked against the memory record, then set as typed: nothing parsed again
        from distbench.launch.job_record import read_for_ranks
        from distbench.launch.job_values import apply
        from distbench.memory.job import MEMORY_RECORD
        from distbench.workloads.job_fields import config_schema

        apply(a, read_for_ranks(a.params, MEMORY_RECORD, config_schema()).arguments(MEMORY_RECORD))
    elif not (a.backend and a.batch_sizes):
        p.error("--backend and --batch-sizes (or --params) are required")
    else:
        a.gradient_as_bucket_view = a.gradient_as_bucket_view == "true"
        a.search = a.search == "true"
        try:
            a.batch_sizes = sorted({int(b) for b in a.batch_sizes.split(",")})
        except ValueError:
            p.error(f"--batch-sizes: expected comma-separated integers, got {a.batch_sizes!r}")
    if not a.batch_sizes or a.batch_sizes[0] < 1:
        p.error("--batch-sizes must be >= 1")
    if a.search_max_batch < 1:
        p.error("--search-max-batch must be >= 1")
    resolve_model_args(p, a)
    return a


def main(argv=None, keep_groups: bool = False) -> int:
    from distbench.core.io import PartialCsvs

    a = parse_args(argv)
    h = MemoryHarness(a)
    if not h.placement_ok(a.placement_out):
        return 3
    writer = PartialCsvs([(Path(a.out), MEMORY_COLUMN_NAMES)]) if h.rank == 0 else None
    say = h.say

    def write(rows):
        if writer:
            writer.write(0, rows)

    err = None
    try:
        h.build()
    except Exception as e:  # noqa: BLE001 - recorded as the job's outcome
        from distbench.workloads.gpt import FSDPUnavailable

        unavailable = isinstance(e, FSDPUnavailable)
        err = ("skipped" if unavailable else failure_status(e),
               f"{'FSDP2 (fully_shard) cannot run here: ' if unavailable else 'building the model: '}{first_line(e)}")
    mark("measure_start")  # the model is built: the warm-up step and the measured batches begin
    if h.agree(err is None):
        try:
            h.measure(a.batch_sizes[0])  # warm-up: the optimizer state exists before any measured step
        except Exception as e:  # noqa: BLE001 - the smallest batch failing is every row's outcome
            err = (failure_status(e), f"warm-up step at batch {a.batch_sizes[0]}: {first_line(e)}")
        ok = h.agree(err is None)
    else:
        ok = False
    if not ok:
        err = err or ("failed", "another rank failed to build the model or run its first step")
        write([{**base_row(a, h), "phase": "measure", "batch_size": b, "status": err[0], "message": err[1]}
               for b in a.batch_sizes])
        say(f"{err[0]}: {err[1]}")
    else:
        measured = []  # (batch, peak reserved bytes): where the search starts (predicted_largest_batch)
        for i, b in enumerate(a.batch_sizes):
            snap = a.snapshot_out if (h.cuda and b == a.batch_sizes[-1] and h.rank == 0) else None
            mine, err = None, None
            try:
                mine = h.measure(b, snapshot=snap)
            except Exception as e:  # noqa: BLE001
                err = (failure_status(e), f"batch {b}: {first_line(e)}")
            if h.agree(mine is not None):
                row = measured_row(a, h, b, h.gather_rows(mine))
                write([row])
                measured.append((b, row.get("peak_reserved_bytes")))
                say(f"batch {b}: params {row['params_bytes']} B, grads {row['grads_bytes']} B, optimizer "
                    f"{row['optimizer_bytes']} B, activations {row['activations_bytes']} B"
                    + (f", peak allocated {row['peak_allocated_bytes']} B over a fresh wrapper's first two steps, "
                       f"{row['steady_peak_allocated_bytes']} B over a later one" if "peak_allocated_bytes" in row else ""))
                continue
            err = err or ("oom", f"batch {b}: another rank ran out of memory")
            write(unreached_rows(([{**base_row(a, h), "phase": "measure", "batch_size": x}] for x in a.batch_sizes[i:]),
                                 err[1], status=err[0], not_run_message=f"not measured: batch {b} already failed ({err[0]})"))
            say(f"{err[0]}: {err[1]}")
            h.fresh_wrapper()  # a step cut short leaves DDP's reducer mid-iteration
            break
        search(a, h, write, say, measured)
    return finish_config(h, writer, keep_groups)  # a batch launch's next configuration reuses its groups


if __name__ == "__main__":
    sys.exit(main())
