"""The memory harness's CSV rows (memory.csv: distbench.memory.contract), from what its ranks gathered:
the configuration columns, a measured batch's split and peak, a search or confirm try's outcome and
peak. Shared by distbench.memory.harness and distbench.memory.largest."""

from __future__ import annotations

import math
from dataclasses import dataclass

from distbench.core.layout_spec import layout
from distbench.memory.search import reached_cap

# The allocator's view of some real steps, in this order (GPU; NaN on CPU)
PEAK = ("peak_allocated_bytes", "peak_reserved_bytes", "alloc_retries", "device_total_bytes")
MEASURED = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", *PEAK, "steady_peak_allocated_bytes")


@dataclass(frozen=True)
class Tried:
    """One try of real steps at a batch, as every rank voted: the worst status over the ranks, why,
    and the peak (PEAK's values, each the maximum over the ranks; None when the steps did not run)."""
    status: str  # ok, oom or failed
    message: str
    peak: tuple[float, ...] | None = None


def worst_of_ranks(values) -> float:
    """The largest of the ranks' values, NaN when none has one (CPU)."""
    real = [v for v in values if not math.isnan(v)]
    return max(real) if real else math.nan


def base_row(a, h) -> dict:
    """A row's configuration columns (the workload's shape from the registry: a.shape)."""
    return {
        "backend": a.backend, "world_size": h.world_size, "model": a.model, "strategy": a.strategy,
        "gradient_as_bucket_view": a.gradient_as_bucket_view if not layout(a.strategy).sharded else None,
        "config": a.config_label, **a.shape,
        "dtype": a.dtype, "optimizer": a.optimizer, "phase": None, "batch_size": None, "device_name": h.device_name,
        "params_total": getattr(h, "n_params", None), "params_trainable": getattr(h, "n_trainable", None),
        "status": "ok", "message": "",
    }


def peak_columns(peak) -> dict:
    """A row's allocator columns from PEAK's values (max over ranks); none on CPU."""
    v = dict(zip(PEAK, peak, strict=True))
    if math.isnan(v["peak_allocated_bytes"]):
        return {}
    out = {k: int(x) for k, x in v.items()}
    out.update(fragmentation_bytes=out["peak_reserved_bytes"] - out["peak_allocated_bytes"],
               peak_share=out["peak_reserved_bytes"] / out["device_total_bytes"])
    return out


def measured_row(a, h, batch: int, per_rank: list[list[float]]) -> dict:
    from distbench.memory import accounting

    worst = {name: worst_of_ranks(r[i] for r in per_rank) for i, name in enumerate(MEASURED)}
    v = {k: int(x) for k, x in worst.items() if k not in PEAK and not math.isnan(x)}
    est = accounting.estimate(h.n_params, h.n_trainable, h.n_trainable_tensors, a.optimizer, h.world_size,
                              sharded=layout(a.strategy).sharded)
    parts = v["params_bytes"] + v["grads_bytes"] + v["optimizer_bytes"] + v["activations_bytes"]
    states = v["params_bytes"] + v["grads_bytes"] + v["optimizer_bytes"]
    row = {**base_row(a, h), "phase": "measure", "batch_size": batch, **v, "parts_bytes": parts,
           "estimate_params_bytes": est["params"], "estimate_grads_bytes": est["grads"],
           "estimate_optimizer_bytes": est["optimizer"],
           "estimate_error_bytes": states - (est["params"] + est["grads"] + est["optimizer"]),
           **peak_columns([worst[k] for k in PEAK])}
    if "peak_allocated_bytes" in row:
        row["unexplained_bytes"] = row["peak_allocated_bytes"] - parts
    return row


def tried_row(a, h, phase: str, batch: int, tried: Tried) -> dict:
    """A search or confirm row: the batch, how its real steps went, their peak when they ran, and
    whether it is the search's cap that fit."""
    return {**base_row(a, h), "phase": phase, "batch_size": batch, "status": tried.status, "message": tried.message,
            "search_capped": reached_cap(batch, a.search_max_batch, tried.status == "ok"),
            **(peak_columns(tried.peak) if tried.peak else {})}
