"""The training family's CSV contract. training.csv: one row per measured step (or all-reduce trial)
of one DDP/FSDP configuration and phase. The harness writes these columns, aggregation checks them.
"""

from __future__ import annotations

from distbench.core.choices import STATUS_SEVERITY, STATUSES
from distbench.core.contract import (
    MESSAGE_COLUMN, STATUS_COLUMN, Column, Contract, Positive, TableContract, print_tables, read_csv,
    register_tables,
)

TRAINING_PHASES = ("step", "compute_only", "comm_alone")

# training.lm.compile: a compiled job's config label is its eager label plus this suffix
# ("plain+compile", "fsdp+compile"), so the two are distinct jobs (paths, job.json, cached results)
# while the eager labels, and with them every eager result already on disk, stay as they were.
COMPILE_SUFFIX = "+compile"
# A job whose torch.compile failed (dynamo or inductor raised: the message is torch's first line): its
# compiled phases did not run; the eager job of the same layout is a separate job, and its result stands.
COMPILE_FAILED = "compile_failed"
TRAINING_STATUSES = STATUSES + (COMPILE_FAILED,)
# Worst first, as distbench.core.choices.STATUS_SEVERITY, with compile_failed just after failed: the
# compiled job failed, though by the compiler's hand and not the measurement's.
_ORDER = sorted(STATUS_SEVERITY, key=STATUS_SEVERITY.__getitem__)
_ORDER.insert(_ORDER.index("failed") + 1, COMPILE_FAILED)
TRAINING_SEVERITY = {s: i for i, s in enumerate(_ORDER)}


TRAINING_COLUMNS: tuple[Column, ...] = (
    Column("backend", "string", "nccl or gloo"),
    Column("world_size", "int64", "number of ranks (one per GPU under NCCL)"),
    Column("nodes", "int64", "nodes the ranks ran on, one torchrun agent each (world_size / nodes ranks per node)"),
    Column("model", "string", "workload: mlp (seed 004), gpt (GPT-style decoder) or lora (gpt frozen, adapters trained)"),
    Column("strategy", "string", "the parallel layout: ddp, fsdp (FSDP2 fully_shard per block: mlp, gpt and lora), hsdp (FSDP2 over a (replicate, shard) mesh) or fsdp_tp (tensor parallel in groups of tp_size ranks, FSDP2 across them: gpt)"),
    Column("shard_size", "Int64", "hsdp: ranks per shard group (parameters sharded within, replicated across groups); empty otherwise"),
    Column("tp_size", "Int64", "fsdp_tp: ranks per tensor-parallel group (they share one batch of tp_size x batch_size sequences); empty otherwise"),
    Column("hidden_dim", "int64", "MLP width; gpt/lora: model width (d_model)"),
    Column("num_layers", "int64", "MLP depth (linear layers of hidden_dim x hidden_dim); gpt/lora: decoder blocks"),
    Column("n_heads", "Int64", "gpt/lora: attention heads; empty for mlp"),
    Column("seq_len", "Int64", "gpt/lora: tokens per sample; empty for mlp"),
    Column("vocab_size", "Int64", "gpt/lora: vocabulary of the random tokens; empty for mlp"),
    Column("lora_rank", "Int64", "lora: adapter rank r; empty otherwise"),
    Column("compile", "bool", "the model ran under torch.compile (training.lm.compile; warm-up absorbed the compilation)"),
    Column("compile_time_s", "float64", "compiled jobs, phases step and compute_only: the wall time of the phase's warm-up steps beyond as many of its steady (median timed) steps, max over ranks: torch's compilation (and recompilation) of the step, which the timed steps and tokens/s never include; empty for eager jobs and comm_alone"),
    Column("batch_size", "int64", "samples per rank per optimizer step (fsdp_tp: per tensor-parallel group, shared by its ranks)"),
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
    Column("status", "string", STATUS_COLUMN.doc.replace(" or wrong", ", wrong or compile_failed (torch.compile raised: the phases that run the compiled model, step and compute_only, did not run; message: torch's reason)")),
    Column("message", "string", MESSAGE_COLUMN.doc[:-1] + "; a compiled job's ok rows say so when torch still compiled during the timed steps)"),
)
TRAINING_COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in TRAINING_COLUMNS)

# Columns added later, with what older files mean: one node, no 2D layout, eager (no compile time)
TRAINING = Contract("training", TRAINING_COLUMNS, (("status", TRAINING_STATUSES), ("phase", TRAINING_PHASES)),
                    positive_when_ok="step_time_ms",
                    filled_when_missing=(("nodes", 1), ("shard_size", None), ("tp_size", None), ("compile", False),
                                         ("compile_time_s", None)),
                    job_rule="training_job")


# The tables under tables/ as their readers take them (distbench.core.readers.read_table holds each
# file of the name to it): the columns the report, summary.json, the plots and the prediction index
# without asking whether they are there, and the measurements an ok row must hold. Tokens/s is a
# language model's (mlp rows, without a seq_len, leave it empty); MFU is not here, since it is empty
# where no peak is known for the device.
TABLES = register_tables(
    TableContract("training_summary",
                  ("backend", "world_size", "model", "strategy", "config", "hidden_dim", "num_layers", "seq_len",
                   "scaling", "step_time_ms_median", "compute_only_ms_median", "samples_per_s_median",
                   "tokens_per_s_median", "tokens_per_s_per_device_median", "params_trainable", "tflops_per_device",
                   "mfu", "peak_tflops", "mfu_note", "attention_kernel", "overlap_fraction", "grad_bytes",
                   "plain_1gpu_samples_per_s", "efficiency_vs_plain_1gpu", "efficiency_vs_own_1gpu", "status"),
                  positive=("step_time_ms_median", "samples_per_s_median",
                            Positive("tokens_per_s_median", where_filled="seq_len"),
                            Positive("tokens_per_s_per_device_median", where_filled="seq_len"))),
    TableContract("training", ("backend", "world_size", "model", "config", "phase", "step", "step_time_ms", "status"),
                  positive=("step_time_ms",)),
    # the traces' per-step figures of each inspected job (distbench.traces.split_step): a job without GPU
    # traces is a "skipped" row with empty figures, so only the key and the status are owed
    TableContract("training_trace_split", ("job", "status")),
)


def read_training_csv(path):
    return read_csv(TRAINING, path)


if __name__ == "__main__":
    print_tables(TRAINING)
