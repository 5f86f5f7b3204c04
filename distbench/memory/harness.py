"""Memory benchmark harness: one torchrun job measures, for one model (mlp, gpt, lora) and one
strategy (DDP, with or without gradient_as_bucket_view, or FSDP2) at one world size, where the
memory of a training step goes at each batch size, and (on GPU) the largest batch that fits.

Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.memory --backend gloo --model gpt \
        --gpt-size tiny --seq-len 32 --batch-sizes 1,2,4 --out memory.csv

Per batch size (phase `measure`; one warm-up step at the smallest batch first, so the optimizer
state exists and DDP has rebuilt its buckets): gradients set to None, the allocator's peak reset,
then one step: forward under distbench.memory.accounting.SavedActivations, backward, optimizer
step. Parts (accounting): parameters, gradients (read after backward), optimizer state (after the
step), activations saved for backward. GPU: the allocator's peak allocated / reserved over the step
(torch.cuda.memory_stats), fragmentation = reserved - allocated, allocation retries during the
step, the device's total memory; `unexplained_bytes` = peak allocated - the sum of the parts
(DDP's buckets without bucket view, autograd's temporaries, the logits' fp32 copy, workspace).
Each column is the maximum over ranks. Beside each row: the analytic estimate of parameters,
gradients and optimizer state (accounting.estimate) and how far the measured model states are
from it.

Largest batch (phase `search`, GPU and DDP only; distbench.memory.search): doubling from the largest
measured batch until a step runs out of memory on any rank, then bisection; one row per batch tried
(`ok` or `oom`). Doubling stops at `--search-max-batch` (memory.search_max_batch): when that batch
fits, its row has `search_capped` true and the largest batch that fits is only known to be at least
that. The step runs under no_sync, so no rank waits in a collective for one that ran out of memory
(DDP's buckets exist either way); every rank votes on the outcome and frees its memory before the next
try. FSDP is skipped there (a rank out of memory inside FSDP's all-gather would leave the others
waiting); on CPU there is no device limit to search.

`--snapshot-out PATH` (GPU): a torch.cuda.memory snapshot (the pickle PyTorch's memory viewer at
pytorch.org/memory_viz opens) of the step at the largest measured batch, from rank 0.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
from pathlib import Path

from distbench.launch.timeline import mark
from distbench.core.choices import BACKENDS, OPTIMIZERS, MODEL_DTYPES
from distbench.launch.failure import unreached_rows
from distbench.launch.ranks import RankContext, failure_status, finish_config, first_line
from distbench.workloads.cli import add_model_args, resolve_model_args
from distbench.memory.contract import MEMORY_COLUMN_NAMES
from distbench.memory.search import DEFAULT_SEARCH_MAX_BATCH, predicted_largest_batch, reached_cap, search_largest_batch

MEASURED = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "peak_allocated_bytes",
            "peak_reserved_bytes", "alloc_retries", "device_total_bytes")


class MemoryHarness(RankContext):
    def __init__(self, args):
        super().__init__(args.backend, args.op_timeout_s, ctrl_on_gloo_too=True, progress_unit="steps")
        self.args = args
        self.device_name = self.torch.cuda.get_device_name(self.device) if self.cuda else "cpu"

    # -- the model ----------------------------------------------------------------------------

    def build(self):
        """The workload (distbench.workloads.registry), wrapped in DDP or sharded with FSDP2, and
        its optimizer."""
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
        if a.strategy == "fsdp":
            from distbench.workloads import gpt

            gpt.fully_shard_blocks(self.model, bfloat16=a.dtype == "bfloat16")
            self.wrapped = self.model
        else:
            self.wrap_ddp()
        self.opt = mlp.make_optimizer(a.optimizer, [p for p in self.wrapped.parameters() if p.requires_grad],
                                      fused=self.cuda and a.optimizer == "adamw")
        self.autocast = lambda: mlp.autocast(a.dtype, self.device)

    def wrap_ddp(self):
        """(Re-)wrap the model in DDP (collective: every rank calls it)."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        kw = {"gradient_as_bucket_view": self.args.gradient_as_bucket_view}
        if self.cuda:
            kw.update(device_ids=[self.device.index], output_device=self.device.index)
        self.wrapped = DDP(self.model, **kw)

    def rewrap(self):
        """A fresh DDP wrapper after a step that did not finish (its reducer is mid-iteration)."""
        self.release()
        if self.args.strategy == "ddp":
            self.wrap_ddp()

    def release(self):
        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()

    # -- one measured step --------------------------------------------------------------------

    def measure(self, batch: int, snapshot: str | None = None) -> list[float]:
        """This rank's MEASURED values for one step at `batch` (NaN where the CPU has none)."""
        from distbench.memory import accounting

        torch = self.torch
        self.beacon.at(f"measured step at batch {batch}")
        x, y = self.data(batch)
        self.release()
        retries0 = self._retries()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
            if snapshot:
                torch.cuda.memory._record_memory_history(max_entries=200_000)
        with accounting.SavedActivations(self.model) as saved:
            with self.autocast():
                loss = self.loss_fn(self.wrapped(x), y)
        loss.backward()
        grads = accounting.gradient_bytes(self.model)
        self.opt.step()
        self.sync()
        self.beacon.done()
        out = [accounting.parameter_bytes(self.model), grads, accounting.optimizer_state_bytes(self.opt), saved.bytes]
        if self.cuda:
            if snapshot:
                torch.cuda.memory._dump_snapshot(snapshot)
                torch.cuda.memory._record_memory_history(enabled=None)
            out += [torch.cuda.max_memory_allocated(self.device), torch.cuda.max_memory_reserved(self.device),
                    self._retries() - retries0, torch.cuda.get_device_properties(self.device).total_memory]
        else:
            out += [math.nan] * 4
        del x, y, loss
        self.release()
        return [float(v) for v in out]

    def _retries(self) -> int:
        return int(self.torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0)) if self.cuda else 0

    def try_batch(self, batch: int) -> tuple[str, str]:
        """One step at `batch` under no_sync (no collective inside), every rank voting:
        ('ok', ''), ('oom', why) or ('failed', why)."""
        status, why = "ok", ""
        self.beacon.at(f"largest-batch search: step at batch {batch}")
        try:
            x, y = self.data(batch)
            with self.wrapped.no_sync():
                with self.autocast():
                    loss = self.loss_fn(self.wrapped(x), y)
                loss.backward()
            self.opt.step()
            self.sync()
            self.beacon.done()
            del x, y, loss
        except Exception as e:  # noqa: BLE001 - an OOM is the answer; anything else is said as a failure
            status, why = failure_status(e), first_line(e)
        self.release()
        votes = self.gather_rows([{"ok": 0, "oom": 1, "failed": 2}[status]])
        worst = max(v[0] for v in votes)
        if worst:
            self.rewrap()
        status = ("ok", "oom", "failed")[int(worst)]
        return status, why or ("" if status == "ok" else f"another rank: {status}")


# -- rows -------------------------------------------------------------------------------------

def base_row(a, h: MemoryHarness) -> dict:
    """A row's configuration columns (the workload's shape from the registry: a.shape)."""
    return {
        "backend": a.backend, "world_size": h.world_size, "model": a.model, "strategy": a.strategy,
        "gradient_as_bucket_view": a.gradient_as_bucket_view if a.strategy == "ddp" else None,
        "config": a.config_label, **a.shape,
        "dtype": a.dtype, "optimizer": a.optimizer, "phase": None, "batch_size": None, "device_name": h.device_name,
        "params_total": getattr(h, "n_params", None), "params_trainable": getattr(h, "n_trainable", None),
        "status": "ok", "message": "",
    }


def measured_row(a, h: MemoryHarness, batch: int, per_rank: list[list[float]]) -> dict:
    from distbench.memory import accounting

    worst = {name: max(r[i] for r in per_rank) for i, name in enumerate(MEASURED)}
    v = {k: (None if math.isnan(x) else int(x)) for k, x in worst.items()}
    est = accounting.estimate(h.n_params, h.n_trainable, h.n_trainable_tensors, a.optimizer, h.world_size,
                              sharded=a.strategy == "fsdp")
    parts = v["params_bytes"] + v["grads_bytes"] + v["optimizer_bytes"] + v["activations_bytes"]
    states = v["params_bytes"] + v["grads_bytes"] + v["optimizer_bytes"]
    row = {**base_row(a, h), "phase": "measure", "batch_size": batch, **v, "parts_bytes": parts,
           "estimate_params_bytes": est["params"], "estimate_grads_bytes": est["grads"],
           "estimate_optimizer_bytes": est["optimizer"],
           "estimate_error_bytes": states - (est["params"] + est["grads"] + est["optimizer"])}
    if v["peak_allocated_bytes"] is not None:
        row.update(fragmentation_bytes=v["peak_reserved_bytes"] - v["peak_allocated_bytes"],
                   unexplained_bytes=v["peak_allocated_bytes"] - parts,
                   peak_share=v["peak_reserved_bytes"] / v["device_total_bytes"])
    return row


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m distbench.memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", help="a job's job.json, as its rule writes it: its values, read as JSON "
                                    "(distbench.memory.job.memory_values); only the outputs come from flags")
    p.add_argument("--backend", choices=BACKENDS)
    p.add_argument("--gradient-as-bucket-view", choices=("false", "true"), default="false")
    add_model_args(p)
    p.add_argument("--dtype", choices=MODEL_DTYPES, default="float32")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    p.add_argument("--batch-sizes", help="comma-separated per-rank batch sizes, e.g. 1,2,4,8")
    p.add_argument("--search", choices=("false", "true"), default="true",
                   help="GPU + DDP: find the largest batch that fits (from the limit the measured batches predict, then bisection)")
    p.add_argument("--search-max-batch", type=int, default=DEFAULT_SEARCH_MAX_BATCH,
                   help="the search tries no larger batch per rank; when this one fits, the row says search_capped")
    p.add_argument("--config-label", default="ddp")
    p.add_argument("--op-timeout-s", type=int, default=300)
    p.add_argument("--out", required=True, help="CSV to write (rank 0); atomically renamed when complete")
    p.add_argument("--placement-out", help="JSON with every rank's GPU placement")
    p.add_argument("--snapshot-out", help="GPU: torch.cuda.memory snapshot of the largest measured batch (rank 0)")
    a = p.parse_args(argv)
    if a.params:  # the values as the plan typed them: nothing joined into a string and parsed again
        from distbench.launch.job_values import apply, read_job_json
        from distbench.memory.job import job_of, memory_values

        apply(a, memory_values(*job_of(read_job_json(a.params, p))))
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
            h.measure(a.batch_sizes[0])  # warm-up: optimizer state exists, DDP's buckets rebuilt
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
                    f"{row['optimizer_bytes']} B, activations {row['activations_bytes']} B, peak allocated "
                    f"{row['peak_allocated_bytes']} B")
                continue
            err = err or ("oom", f"batch {b}: another rank ran out of memory")
            write(unreached_rows(([{**base_row(a, h), "phase": "measure", "batch_size": x}] for x in a.batch_sizes[i:]),
                                 err[1], status=err[0], not_run_message=f"not measured: batch {b} already failed ({err[0]})"))
            say(f"{err[0]}: {err[1]}")
            h.rewrap()  # a step cut short leaves DDP's reducer mid-iteration
            break
        search(a, h, write, say, measured)
    return finish_config(h, writer, keep_groups)  # a batch launch's next configuration reuses its groups


def search_guess(h: MemoryHarness, measured: list) -> int | None:
    """Where the search starts: the batch at which the measured batches' peak reserved memory would
    reach what this GPU can hold (free + what torch reserves now), the smallest over the ranks (all
    ranks must try the same batches); None (the search starts at the largest measured batch) when
    the measurements give no prediction. Only the number of tries depends on it, not the answer."""
    if len(measured) < 2:  # the same on every rank: each appends every measured row
        return None
    try:
        free, _ = h.torch.cuda.mem_get_info(h.device)
        mine = predicted_largest_batch(measured, free + h.torch.cuda.memory_reserved(h.device)) or 0
    except Exception:  # noqa: BLE001 - no prediction: the plain search
        mine = 0
    guesses = [int(v[0]) for v in h.gather_rows([float(mine)])]
    return min(guesses) if all(g > 0 for g in guesses) else None


def search(a, h: MemoryHarness, write, say, measured: list | None = None) -> None:
    """The largest batch that fits (GPU, DDP): phase `search` rows, one per batch tried."""
    def row(b, status, message="", capped=None):
        return {**base_row(a, h), "phase": "search", "batch_size": b, "search_capped": capped, "status": status,
                "message": message}

    if not a.search:
        return
    if not h.cuda or a.strategy != "ddp":
        why = ("CPU: no device memory limit to search" if not h.cuda else
               "FSDP: a rank out of memory inside FSDP's all-gather would leave the others waiting; "
               "the search runs DDP configurations only")
        write([row(None, "skipped", why)])
        return

    def attempt(b) -> bool | None:
        status, why = h.try_batch(b)
        write([row(b, status, why, capped=reached_cap(b, a.search_max_batch, status == "ok"))])
        return None if status == "failed" else status == "ok"

    guess = search_guess(h, measured or [])
    found = search_largest_batch(a.batch_sizes[-1], a.search_max_batch, attempt, guess=guess)
    if found.failed:
        return
    say(f"largest batch that fits: {found.largest_fits or 'none'} (the search started at "
        f"{guess if guess else a.batch_sizes[-1]}{', the predicted limit' if guess else ''})"
        + (f" (at least: the search stopped at its cap, {a.search_max_batch})" if found.capped else ""))


if __name__ == "__main__":
    sys.exit(main())
