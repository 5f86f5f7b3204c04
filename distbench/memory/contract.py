"""The memory family's CSV contract. memory.csv: one row per (memory job, phase, batch size); the job
is (backend, world_size, model, config). The harness writes these columns, aggregation checks them.
"""

from __future__ import annotations

from distbench.core.choices import STATUSES
from distbench.core.contract import (
    MESSAGE_COLUMN, STATUS_COLUMN, Column, Contract, TableContract, print_tables, read_csv, register_tables,
)

MEMORY_PHASES = ("measure", "search", "confirm")

# memory.csv: one row per (job, phase, batch size); the job is (backend, world_size, model, config).
MEMORY_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "number of ranks"),
    Column("model", "string", "mlp, gpt or lora (distbench.workloads)"),
    Column("strategy", "string", "ddp or fsdp"),
    Column("gradient_as_bucket_view", "boolean", "DDP gradient_as_bucket_view (empty for FSDP)"),
    Column("config", "string", "ddp, ddp+gbv (gradient_as_bucket_view) or fsdp"),
    Column("hidden_dim", "int64", "MLP width; gpt/lora: model width"),
    Column("num_layers", "int64", "MLP depth; gpt/lora: blocks"),
    Column("n_heads", "Int64", "gpt/lora: attention heads"),
    Column("seq_len", "Int64", "gpt/lora: tokens per sample"),
    Column("vocab_size", "Int64", "gpt/lora: vocabulary"),
    Column("lora_rank", "Int64", "lora: adapter rank"),
    Column("dtype", "string", "float32, or bfloat16 (autocast; FSDP: bf16 parameters)"),
    Column("optimizer", "string", "sgd, sgd_momentum or adamw"),
    Column("phase", "string", "measure (the split at a configured batch), search (one batch tried while looking for the largest at which real steps run) or confirm (the search's answer run again; out of memory, the batch below)"),
    Column("batch_size", "Int64", "samples per rank (empty on a skipped search row)"),
    Column("device_name", "string", "the device as torch reports it; cpu on CPU"),
    Column("params_total", "Int64", "parameters of the model"),
    Column("params_trainable", "Int64", "parameters that get gradients"),
    Column("params_bytes", "Int64", "bytes of parameter storages on a rank (FSDP: its shards)"),
    Column("grads_bytes", "Int64", "bytes of gradient storages after backward (unique storages: with gradient_as_bucket_view, DDP's buckets)"),
    Column("optimizer_bytes", "Int64", "bytes of optimizer-state storages after the step"),
    Column("activations_bytes", "Int64", "bytes of the non-parameter storages autograd saved for backward (saved_tensors_hooks, unique storages)"),
    Column("parts_bytes", "Int64", "params + grads + optimizer + activations"),
    Column("estimate_params_bytes", "Int64", "analytic: parameters x 4 bytes (/ world size under FSDP)"),
    Column("estimate_grads_bytes", "Int64", "analytic: trainable parameters x 4 bytes (/ world size under FSDP)"),
    Column("estimate_optimizer_bytes", "Int64", "analytic: trainable x (0 sgd, 4 sgd_momentum, 8 adamw) bytes (/ world size under FSDP) + 4 per AdamW parameter tensor (step)"),
    Column("estimate_error_bytes", "Int64", "measured params + grads + optimizer - the estimate of the three"),
    Column("peak_allocated_bytes", "Int64", "GPU: torch.cuda.max_memory_allocated over a fresh DDP wrapper's real steps at this batch, as a training run starts (measure, search: its first two, the second rebuilding DDP's buckets; confirm: three; FSDP: the sharded model's first two at this batch); empty on CPU and on rows whose steps did not run"),
    Column("peak_reserved_bytes", "Int64", "GPU: torch.cuda.max_memory_reserved over the same steps; empty on CPU"),
    Column("steady_peak_allocated_bytes", "Int64", "GPU, measure rows: torch.cuda.max_memory_allocated over one more step after those (DDP's buckets rebuilt), the step whose parts are counted; empty on CPU, on other rows and in files from before the column"),
    Column("fragmentation_bytes", "Int64", "GPU: peak reserved - peak allocated"),
    Column("alloc_retries", "Int64", "GPU: allocation retries (cudaMalloc failed, cache flushed) during those steps"),
    Column("unexplained_bytes", "Int64", "GPU, measure rows: peak allocated - parts (DDP buckets without bucket view and the rebuild's second set, temporaries, workspaces)"),
    Column("device_total_bytes", "Int64", "GPU: the device's total memory"),
    Column("peak_share", "float64", "GPU: peak reserved / device total"),
    Column("search_capped", "boolean", "search and confirm rows: true when this batch is memory.search_max_batch and its steps ran, so the search stopped at its cap and the largest batch that fits is at least this; false on the other search and confirm rows; empty on measure and skipped rows (and in files from before the column)"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)
MEMORY_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in MEMORY_COLUMNS)


# search_capped came later: older files leave it empty (the summary then reads a search that ended
# without an out-of-memory as capped, which is what it was). steady_peak_allocated_bytes and the confirm
# rows are newer still: in files without them a measured peak was a steady step's and a search tried each batch
# under no_sync, unconfirmed (the summary says so).
MEMORY = Contract("memory", MEMORY_COLUMNS, (("status", STATUSES), ("phase", MEMORY_PHASES)),
                  filled_when_missing=(("search_capped", None), ("steady_peak_allocated_bytes", None)),
                  job_rule="memory_job")


# The tables under tables/ as their readers take them (distbench.core.readers.read_table holds each
# file of the name to it): the columns the report, summary.json and the plots index without asking
# whether they are there. No measurement is owed on every ok row: the peaks are empty on CPU.
TABLES = register_tables(
    TableContract("memory_summary", ("backend", "world_size", "model", "config", "hidden_dim", "num_layers",
                                     "largest_measured_batch", "params_bytes", "grads_bytes", "optimizer_bytes",
                                     "activations_bytes", "estimate_states_bytes", "estimate_error_bytes",
                                     "peak_allocated_bytes", "peak_reserved_bytes", "unexplained_bytes", "peak_share",
                                     "activation_bytes_per_sample", "activation_fit_residual", "largest_batch_fits",
                                     "search_note", "status")),
    TableContract("memory", ("backend", "world_size", "model", "config", "phase", "batch_size", "activations_bytes",
                             "parts_bytes", "status")),
)


def read_memory_csv(path):
    return read_csv(MEMORY, path)


if __name__ == "__main__":
    print_tables(MEMORY)
