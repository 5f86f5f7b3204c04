"""The memory family's torchrun job: its arguments and its failure rows, for distbench.launch.torchrun."""

from __future__ import annotations

from pathlib import Path

from distbench.launch.cluster import Launch
from distbench.core.io import atomic_write_text, csv_text, partial_path, read_partial_rows
from distbench.core.layout_spec import layout
from distbench.launch.failure import unreached_rows
from distbench.launch.job_record import (
    BACKEND, CONFIG_LABEL, JOB_ENV, MODEL, OP_TIMEOUT, WORLD_SIZE, Field, RecordSpec, pointer,
)
from distbench.launch.job_values import flags
from distbench.launch.torchrun import TorchrunJob, job_environment, run_torchrun_job
from distbench.memory.contract import MEMORY_COLUMN_NAMES
from distbench.workloads.job_fields import config_schema, workload_fields
from distbench.workloads.registry import workload_shape


def _batch_sizes(config: dict) -> dict:
    """job.json's batch sizes: the config's (memory.gpu.lm_batch_sizes: integers in bounds, each once), at least one."""
    from distbench.launch.job_record import resolve_pointer

    node = resolve_pointer(config, "memory.gpu.lm_batch_sizes")
    return {**{k: v for k, v in node.items() if k != "default"}, "minItems": 1}


# A memory job's values, declared once: job.json's keys and bounds (the config schema's memory and
# training blocks), the ranks' arguments (distbench.memory.harness) and the flags for people (memory_args).
MEMORY_RECORD = RecordSpec("memory", (
    BACKEND, WORLD_SIZE,
    CONFIG_LABEL, MODEL,
    Field("strategy", pointer("memory.strategies.items"), "--strategy"),
    Field("gradient_as_bucket_view", {"type": "boolean"}, "--gradient-as-bucket-view"),
    Field("dtype", pointer("training.dtype"), "--dtype"),
    Field("optimizer", pointer("memory.optimizer"), "--optimizer"),
    Field("batch_sizes", _batch_sizes, "--batch-sizes", arg=lambda v, r: sorted(v)),
    Field("search", pointer("memory.search"), "--search"),
    Field("search_max_batch", pointer("memory.search_max_batch"), "--search-max-batch"),
    Field("snapshot", pointer("memory.snapshot")),
    OP_TIMEOUT,
    Field("job_timeout_s", pointer("memory.job_timeout_s")),
    JOB_ENV,
), extra_fields=workload_fields)


def memory_values(job, params: dict) -> list[tuple[str, object]]:
    """Every value a memory job takes from its plan, as (flag, value) typed as distbench.memory's parser
    gives it (MEMORY_RECORD's arguments), checked against the record (a JobRecordError names the key)."""
    params = {**params, "strategy": job.strategy, "gradient_as_bucket_view": job.gradient_as_bucket_view}
    MEMORY_RECORD.check_job(params, config_schema())
    return MEMORY_RECORD.arguments(MEMORY_RECORD.values(job.wildcards, params))


def memory_args(job, params: dict, out_csv, placement_json, snapshot=None) -> list[str]:
    """distbench.memory's arguments for one job of the plan (distbench.memory.plan.MemoryJob +
    memory_params): the job's job.json where its rule wrote one (`params_json`), else every value as a
    flag (a job started by hand)."""
    outputs = ["--out", str(out_csv), "--placement-out", str(placement_json),
               *(["--snapshot-out", str(snapshot)] if snapshot else [])]
    if params.get("params_json"):
        return ["--params", str(params["params_json"]), *outputs]
    return [*flags(memory_values(job, params)), *outputs]


def run_memory_job(job, params: dict, out_csv, placement_json, log_path, snapshot=None) -> str:
    """Run one memory job; return 'ok' or the failure reason. out_csv and placement_json exist
    afterwards in every case."""
    out_csv = Path(out_csv)
    return run_torchrun_job(TorchrunJob(
        module="distbench.memory", args=memory_args(job, params, out_csv, placement_json, snapshot),
        world_size=job.world_size, env=job_environment(params["job_env"], {}),
        timeout_s=params["job_timeout_s"], outputs=[out_csv], placement_json=Path(placement_json),
        log_path=Path(log_path), write_failure=lambda message, status: write_failure_rows(job, params, out_csv, message, status),
        launch=Launch.from_params(params.get("launch"), job.world_size)))


def write_failure_rows(job, params: dict, out_csv: Path, message: str, status: str = "failed") -> None:
    """Keep the rows written before the job ended; the batch sizes not reached get `failed` or `hung` (the
    first) and `not_run` rows."""
    done = read_partial_rows(partial_path(out_csv), MEMORY_COLUMN_NAMES)
    measured = {int(r["batch_size"]) for r in done if r.get("phase") == "measure" and str(r.get("batch_size") or "").isdigit()}
    base = {
        "backend": job.backend, "world_size": job.world_size, "model": job.model, "strategy": job.strategy,
        "gradient_as_bucket_view": job.gradient_as_bucket_view if not layout(job.strategy).sharded else None,
        "config": job.config_label, **workload_shape(job.model, params), "dtype": params["dtype"],
        "optimizer": params["optimizer"], "phase": "measure",
    }
    missing = [b for b in params["batch_sizes"] if b not in measured]
    rows = done + unreached_rows(([{**base, "batch_size": b}] for b in missing), message, status=status)
    if not missing:
        rows.append({**base, "phase": "search", "status": status, "message": message})
    atomic_write_text(out_csv, csv_text(rows, MEMORY_COLUMN_NAMES))


def job_of(entry) -> tuple:
    """The plan's MemoryJob and the job's params from its rule's view (distbench.launch.batch.Entry)."""
    from distbench.memory.plan import MemoryJob

    wc, p = entry.wildcards, entry.params
    params = {**p["job"], "launch": p["launch"]}
    job = MemoryJob(wc["backend"], int(wc["world_size"]), wc["model"], wc["config"], p["job"]["strategy"],
                    p["job"]["gradient_as_bucket_view"])
    return job, params


def rule_job(job_json):
    """The memory job rule's entry (the manifest's job_entry): the job as its rule wrote it to job.json;
    it may share a launch with the others of its backend and world size (distbench.launch.batch)."""
    from distbench.launch.batch import read_entry, results_dir_of, run_job
    from distbench.memory.manifest import MANIFEST

    me = read_entry(job_json)
    job, params = job_of(me)
    params["params_json"] = str(job_json)  # its ranks read their values from it (--params)
    out = me.output
    return f"memory job {job.wildcards}", lambda: run_job(
        me, results_dir_of(out["csv"], MANIFEST.job_file()), batch_family(),
        alone=lambda: run_memory_job(job, params, out["csv"], out["placement"], me.log,
                                     snapshot_path(params, out["csv"])))


def snapshot_path(params: dict, out_csv) -> Path | None:
    """memory.snapshot: the pickle lands beside the job's CSV (the report links it)."""
    return Path(out_csv).with_name("snapshot.pickle") if params["snapshot"] else None


def _batch_args(entry, outputs: dict) -> list[str]:
    job, params = job_of(entry)
    params["params_json"] = outputs["job_json"]  # its values, written by the launch (distbench.launch.batch.run_job)
    return memory_args(job, params, outputs["csv"], outputs["placement"], snapshot_path(params, outputs["csv"]))


def batch_family():
    """How distbench.launch.batch runs several memory configurations in one launch."""
    from distbench.launch.batch import Family

    return Family("distbench.memory", _batch_args, lambda e: job_environment(job_of(e)[1]["job_env"], {}),
                  lambda e: job_of(e)[1]["job_timeout_s"])
