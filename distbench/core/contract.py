"""The CSV contracts of every benchmark family, written once here.

comm.csv: one row per measurement (backend, world_size, op, dtype, nccl_env, timing, inplace,
size_bytes, trial), its time aggregated over ranks. comm_ranks.csv: the same keys plus `rank`, one
row per rank and trial. training.csv: one row per measured step (or all-reduce trial) of one DDP
configuration. memory.csv: one row per (memory job, phase, batch size). The harnesses write these columns, aggregation checks them, and the tests hold both
to it. docs/csv-schema.md renders these tables for humans.
"""

from __future__ import annotations

from dataclasses import dataclass

from distbench.core.choices import MEMORY_PHASES, PAIR_MODES, RANK_AGGS, STATUSES, TIMINGS, TRAINING_PHASES


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # pandas dtype name
    doc: str


# The outcome columns every family's CSV ends with.
STATUS_COLUMN = Column("status", "string", "ok, oom, skipped (not applicable, by design), not_run (not reached: the job ended early), failed or wrong")
MESSAGE_COLUMN = Column("message", "string", "why the status is not ok (empty when ok)")


COMM_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "number of ranks in the job"),
    Column("nodes", "int64", "nodes the ranks ran on, one torchrun agent each (world_size / nodes ranks per node)"),
    Column("op", "string", "collective name from distbench.comm.spec.OPS"),
    Column("traffic", "string", "all_to_all_v's traffic matrix: uniform, zipf:S (rank d receives in proportion to 1/(d+1)^S, MoE routing) or file:PATH (distbench.comm.traffic); none for every other op"),
    Column("dtype", "string", "element type (float32, bfloat16, ...)"),
    Column("nccl_env", "string", "label of the NCCL environment sweep point ('default' when none)"),
    Column("timing", "string", "events, graph or host (how elapsed time was taken: see below)"),
    Column("inplace", "bool", "True when the output buffer is the input buffer"),
    Column("size_bytes", "int64", "nccl-tests 'size': bytes of the largest buffer (total for gather/scatter/alltoall)"),
    Column("count", "int64", "elements in that buffer (size_bytes / element size)"),
    Column("trial", "int64", "trial index, 0-based; each trial times `iters` back-to-back ops"),
    Column("iters", "int64", "ops timed in this trial (graph: ops per graph x graph launches)"),
    Column("rank_agg", "string", "how `time_us` combines the ranks' times: max (default), avg, min or rank0"),
    Column("time_us", "float64", "time per op in microseconds: trial elapsed / iters on each rank, combined over ranks by `rank_agg`"),
    Column("time_us_rank_min", "float64", "the fastest rank's time per op in this trial"),
    Column("time_us_rank_max", "float64", "the slowest rank's time per op in this trial"),
    Column("slowest_rank", "Int64", "rank with the largest time in this trial"),
    Column("arrival_skew_us", "float64", "how long the first rank waited for the last at the start of the trial: the spread of the ranks' wall-clock times when each was ready to issue the trial's first op (one host: one clock; across nodes it includes the hosts' clock offset)"),
    Column("last_rank", "Int64", "the rank that was ready last in this trial (a rank that is consistently last is a straggler)"),
    Column("algbw_gbps", "float64", "size_bytes / time, in GB/s (1e9 B/s); empty for barrier"),
    Column("busbw_gbps", "float64", "algbw x the op's nccl-tests bus factor, in GB/s; empty for barrier"),
    Column("busiest_rank", "Int64", "all_to_all_v: the rank that sends or receives the most over its links (the diagonal excluded); empty for other ops"),
    Column("busiest_rank_bytes", "Int64", "all_to_all_v: the bytes that rank sends or receives to / from other ranks, whichever is larger"),
    Column("busiest_rank_time_us", "float64", "all_to_all_v: that rank's own time per op in this trial (busiest_rank_bytes / it = its link rate)"),
    Column("correct", "boolean", "output equal to the expected values on every rank, before warm-up and after the timed trials (empty if not applicable)"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)

COMM_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COMM_COLUMNS)

_RANK_KEYS = ("backend", "world_size", "op", "traffic", "dtype", "nccl_env", "timing", "inplace", "size_bytes", "trial")
COMM_RANK_COLUMNS: tuple[Column, ...] = tuple(c for c in COMM_COLUMNS if c.name in _RANK_KEYS) + (
    Column("rank", "int64", "global rank"),
    Column("time_us", "float64", "this rank's time per op in this trial (its elapsed / iters)"),
    Column("arrival_us", "float64", "when this rank was ready to issue the trial's first op, after the first rank (µs, wall clock)"),
)
COMM_RANK_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COMM_RANK_COLUMNS)


TRAINING_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "number of ranks (one per GPU under NCCL)"),
    Column("nodes", "int64", "nodes the ranks ran on, one torchrun agent each (world_size / nodes ranks per node)"),
    Column("model", "string", "workload: mlp (seed 004), gpt (GPT-style decoder) or lora (gpt frozen, adapters trained)"),
    Column("strategy", "string", "ddp, or fsdp (FSDP2 fully_shard per block; gpt and lora only)"),
    Column("hidden_dim", "int64", "MLP width; gpt/lora: model width (d_model)"),
    Column("num_layers", "int64", "MLP depth (linear layers of hidden_dim x hidden_dim); gpt/lora: decoder blocks"),
    Column("n_heads", "Int64", "gpt/lora: attention heads; empty for mlp"),
    Column("seq_len", "Int64", "gpt/lora: tokens per sample; empty for mlp"),
    Column("vocab_size", "Int64", "gpt/lora: vocabulary of the random tokens; empty for mlp"),
    Column("lora_rank", "Int64", "lora: adapter rank r; empty otherwise"),
    Column("compile", "bool", "the model ran under torch.compile (warm-up absorbed the compilation)"),
    Column("batch_size", "int64", "samples per rank per optimizer step"),
    Column("global_batch_size", "int64", "samples per optimizer step over all ranks"),
    Column("scaling", "string", "weak (batch_size per rank fixed) or strong (global batch fixed)"),
    Column("dtype", "string", "float32, or bfloat16 (autocast)"),
    Column("optimizer", "string", "sgd or adamw"),
    Column("bucket_cap_mb", "float64", "DDP bucket_cap_mb"),
    Column("gradient_as_bucket_view", "bool", "DDP gradient_as_bucket_view"),
    Column("static_graph", "bool", "DDP static_graph"),
    Column("broadcast_buffers", "bool", "DDP broadcast_buffers"),
    Column("comm_hook", "string", "none, bf16_compress or fp16_compress"),
    Column("grad_accum", "int64", "micro-batches per optimizer step (gradients synced on the last)"),
    Column("nccl_env", "string", "label of the NCCL environment ('default' when none)"),
    Column("config", "string", "label of this DDP configuration ('plain' = DDP defaults)"),
    Column("phase", "string", "step (the full training step), compute_only (the same step without gradient communication: DDP no_sync; FSDP with gradient sync and resharding off, so no collective runs and the optimizer has no gradients), comm_alone (the step's gradient buckets all-reduced alone; FSDP: its all-gathers and reduce-scatters alone)"),
    Column("step", "int64", "measured step (or all-reduce trial) index, 0-based, after warm-up"),
    Column("step_time_ms", "float64", "wall time of the step, max over ranks (CUDA events on GPU, host clock + sync on CPU)"),
    Column("step_time_ms_rank_min", "float64", "the fastest rank's time for this step"),
    Column("step_time_ms_rank_max", "float64", "the slowest rank's time for this step"),
    Column("last_bucket_ms", "float64", "comm_alone: time of the last bucket DDP reduces (FSDP: the root's reduce-scatter), which cannot overlap backward; else empty"),
    Column("samples_per_s", "float64", "global_batch_size / step time (all ranks together)"),
    Column("samples_per_s_per_device", "float64", "samples_per_s / world_size"),
    Column("tokens_per_s", "float64", "gpt/lora: samples_per_s x seq_len (all ranks together); empty for mlp"),
    Column("tokens_per_s_per_device", "float64", "gpt/lora: tokens_per_s / world_size; empty for mlp"),
    Column("params_total", "Int64", "parameters of the model (adapters included)"),
    Column("params_trainable", "Int64", "parameters that get gradients (lora: the adapters only)"),
    Column("flops_per_sample", "Int64", "model FLOPs of one training sample, forward + backward: 6 N (mlp), seq_len x (6 N + 12 L H Q T) (gpt; lora: 4 N_frozen + 6 N_trainable + ...), see distbench.workloads.gpt.flops_per_token"),
    Column("device_name", "string", "the device as torch reports it (MFU's peak is matched on it); cpu on CPU"),
    Column("attention_kernel", "string", "gpt/lora: the implementation scaled_dot_product_attention chose (flash, efficient, cudnn, math, flash_for_cpu); empty for mlp"),
    Column("grad_bytes", "Int64", "bytes of gradients synced per optimizer step (per rank: DDP all-reduces them, halved by a compression hook; FSDP reduce-scatters them)"),
    Column("n_buckets", "Int64", "DDP buckets; FSDP: groups with trainable parameters"),
    Column("peak_mem_allocated_bytes", "Int64", "GPU: torch.cuda.max_memory_allocated over the phase, max over ranks; empty on CPU"),
    Column("peak_mem_reserved_bytes", "Int64", "GPU: torch.cuda.max_memory_reserved over the phase, max over ranks; empty on CPU"),
    Column("energy_j", "float64", "GPU energy of this step summed over ranks, from NVML's total-energy counter; empty where NVML has none"),
    Column("correct", "boolean", "DDP: the replicas hold identical parameters after phase step; comm_alone: the collectives' results were exact; empty if not checked (FSDP's step: one sharded copy, no replicas)"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)
TRAINING_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in TRAINING_COLUMNS)

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
    Column("phase", "string", "measure (the split at a configured batch) or search (one batch tried while looking for the largest that fits)"),
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
    Column("peak_allocated_bytes", "Int64", "GPU: torch.cuda.max_memory_allocated over the step; empty on CPU"),
    Column("peak_reserved_bytes", "Int64", "GPU: torch.cuda.max_memory_reserved over the step; empty on CPU"),
    Column("fragmentation_bytes", "Int64", "GPU: peak reserved - peak allocated"),
    Column("alloc_retries", "Int64", "GPU: allocation retries (cudaMalloc failed, cache flushed) during the step"),
    Column("unexplained_bytes", "Int64", "GPU: peak allocated - parts (DDP buckets without bucket view, temporaries, workspaces)"),
    Column("device_total_bytes", "Int64", "GPU: the device's total memory"),
    Column("peak_share", "float64", "GPU: peak reserved / device total"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)
MEMORY_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in MEMORY_COLUMNS)


PAIRS_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "ranks in the job (every ordered pair of them is measured, one pair at a time)"),
    Column("nodes", "int64", "nodes of the job"),
    Column("dtype", "string", "element type of the buffers"),
    Column("mode", "string", "uni: src sends to dst, every other rank idle; bi: src and dst send to each other at once"),
    Column("src", "int64", "sending rank (bi: the lower rank of the pair)"),
    Column("dst", "int64", "receiving rank (bi: the higher rank)"),
    Column("src_host", "string", "hostname of src"),
    Column("dst_host", "string", "hostname of dst"),
    Column("src_gpu", "string", "GPU UUID of src ('cpu' under Gloo on CPU)"),
    Column("dst_gpu", "string", "GPU UUID of dst"),
    Column("size_bytes", "int64", "bytes sent by each sender per op"),
    Column("trial", "int64", "trial index, 0-based"),
    Column("iters", "int64", "back-to-back transfers timed in this trial"),
    Column("time_us", "float64", "time per transfer: the slower of the pair's two ranks' elapsed / iters"),
    Column("algbw_gbps", "float64", "bytes moved / time in GB/s (1e9 B/s): size_bytes (uni) or 2 x size_bytes (bi)"),
    Column("correct", "boolean", "the receiver(s) got exactly the sender's values after the timed transfers"),
    STATUS_COLUMN,
    MESSAGE_COLUMN,
)
PAIRS_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in PAIRS_COLUMNS)


class SchemaError(ValueError):
    pass


@dataclass(frozen=True)
class Contract:
    """One family's CSV: its columns, the allowed values of its categorical columns, and the column
    that must be positive on `ok` rows."""
    name: str
    columns: tuple[Column, ...]
    allowed: tuple[tuple[str, tuple], ...] = ()
    positive_when_ok: str | None = None
    # Columns added after CSVs were first written, with the value older files mean: a results
    # tree from before multi-node support is all one-node jobs.
    filled_when_missing: tuple[tuple[str, object], ...] = ()
    job_rule: str = ""  # the Snakemake rule whose output such a CSV is (named when one cannot be read)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


COMM = Contract("comm", COMM_COLUMNS, (("status", STATUSES), ("timing", TIMINGS), ("rank_agg", RANK_AGGS)),
                positive_when_ok="time_us",
                filled_when_missing=(("nodes", 1), ("traffic", "none"), ("arrival_skew_us", None), ("last_rank", None),
                                     ("busiest_rank", None), ("busiest_rank_bytes", None),
                                     ("busiest_rank_time_us", None)), job_rule="comm_job")
COMM_RANKS = Contract("comm_ranks", COMM_RANK_COLUMNS, (("timing", TIMINGS),), positive_when_ok="time_us",
                      filled_when_missing=(("traffic", "none"), ("arrival_us", None)), job_rule="comm_job")
TRAINING = Contract("training", TRAINING_COLUMNS, (("status", STATUSES), ("phase", TRAINING_PHASES)),
                    positive_when_ok="step_time_ms", filled_when_missing=(("nodes", 1),), job_rule="training_job")
MEMORY = Contract("memory", MEMORY_COLUMNS, (("status", STATUSES), ("phase", MEMORY_PHASES)), job_rule="memory_job")
PAIRS = Contract("pairs", PAIRS_COLUMNS, (("status", STATUSES), ("mode", PAIR_MODES)), positive_when_ok="time_us")
CONTRACTS = {c.name: c for c in (COMM, COMM_RANKS, PAIRS, TRAINING, MEMORY)}


def check_frame(contract: Contract, df) -> None:
    """Raise SchemaError if a DataFrame does not follow the contract."""
    fillable = {name for name, _ in contract.filled_when_missing}
    missing = [c for c in contract.names if c not in df.columns and c not in fillable]
    extra = [c for c in df.columns if c not in contract.names]
    if missing or extra:
        raise SchemaError(f"{contract.name} CSV columns differ from the contract: missing={missing} extra={extra}")
    for col, allowed in contract.allowed:
        bad = sorted(set(df[col].dropna()) - set(allowed))
        if bad:
            raise SchemaError(f"unknown {col} values {bad} in {contract.name}; allowed: {list(allowed)}")
    col = contract.positive_when_ok
    rows = df[df["status"] == "ok"] if "status" in df else df
    if col and (rows[col].isna().any() or (rows[col] <= 0).any()):
        raise SchemaError(f"{contract.name}: rows with status ok must have a positive {col}")


def read_csv(contract: Contract, path):
    """Read one of the contract's CSVs with its dtypes (and check it)."""
    import pandas as pd

    dtypes = {c.name: c.dtype for c in contract.columns if c.dtype not in ("bool", "boolean")}
    df = pd.read_csv(path, dtype=dtypes, keep_default_na=True)
    dtype_of = {c.name: c.dtype for c in contract.columns}
    for name, value in contract.filled_when_missing:
        if name not in df.columns:
            df.insert(contract.names.index(name), name, pd.Series(value, index=df.index, dtype=dtype_of[name]))
    for c in contract.columns:
        if c.dtype in ("bool", "boolean"):
            df[c.name] = df[c.name].map(to_bool).astype("boolean")
    if "message" in df:
        df["message"] = df["message"].fillna("")
    check_frame(contract, df)
    return df


def check_comm_frame(df) -> None:
    check_frame(COMM, df)


def check_comm_ranks_frame(df) -> None:
    check_frame(COMM_RANKS, df)


def read_comm_csv(path):
    return read_csv(COMM, path)


def read_comm_ranks_csv(path):
    return read_csv(COMM_RANKS, path)


def read_pairs_csv(path):
    return read_csv(PAIRS, path)


def read_training_csv(path):
    return read_csv(TRAINING, path)


def read_memory_csv(path):
    return read_csv(MEMORY, path)


def to_bool(v):
    if isinstance(v, bool):
        return v
    if v is None or (isinstance(v, float) and v != v):
        return None
    s = str(v).strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    return None


def markdown_table(columns=COMM_COLUMNS) -> str:
    lines = ["| column | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{c.name}` | {c.dtype} | {c.doc} |" for c in columns]
    return "\n".join(lines)


if __name__ == "__main__":
    for contract in CONTRACTS.values():
        print(f"## {contract.name}\n\n{markdown_table(contract.columns)}\n")
