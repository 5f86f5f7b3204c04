"""The training family's torchrun job: its arguments and its failure rows, for distbench.launch.torchrun."""

from __future__ import annotations

import os
from pathlib import Path

from distbench.launch.cluster import Launch
from distbench.core.io import atomic_write_text, csv_text, partial_path, read_partial_rows
from distbench.launch.failure import unreached_rows
from distbench.launch.job_values import flags
from distbench.launch.job_record import (
    BACKEND, CONFIG_LABEL, JOB_ENV, MODEL, NCCL_ENV, OP_TIMEOUT, PROFILE, PROFILE_STEPS, WORLD_SIZE, Field, RecordSpec, pointer, write_variant,
)
from distbench.launch.torchrun import TorchrunJob, job_environment, run_job_with_traces
from distbench.launch.profiling import trace_dir
from distbench.training.contract import TRAINING_COLUMN_NAMES, TRAINING_PHASES
from distbench.workloads.job_fields import config_schema, workload_fields
from distbench.workloads.layouts import dp_batch
from distbench.workloads.registry import workload, workload_shape


def _ddp_args(ddp: dict, values: dict) -> list[tuple[str, object]]:
    return [("--bucket-cap-mb", float(ddp["bucket_cap_mb"])), ("--gradient-as-bucket-view", ddp["gradient_as_bucket_view"]),
            ("--static-graph", ddp["static_graph"]), ("--broadcast-buffers", ddp["broadcast_buffers"]),
            ("--comm-hook", ddp["comm_hook"]), ("--grad-accum", ddp["grad_accum"])]


def nccl_env_label(nccl_env: dict) -> str:
    return "+".join(f"{k}={v}" for k, v in sorted(nccl_env.items())) or "default"


DDP_KEYS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "broadcast_buffers", "comm_hook", "grad_accum")

# A training job's values, declared once: job.json's keys and bounds (the config schema's training
# block), the ranks' arguments (distbench.training.harness) and the flags for people (training_args).
TRAINING_RECORD = RecordSpec("training", (
    BACKEND, WORLD_SIZE,
    CONFIG_LABEL, MODEL,
    Field("strategy", pointer("training.lm.strategies.items"), "--strategy"),
    Field("shard_size", pointer("training.lm.shard_size"), "--shard-size", required=False),
    Field("tp_size", pointer("training.lm.tp_size"), "--tp-size", required=False),
    Field("compile", {"type": "boolean"}, "--compile"),
    Field("batch_size", pointer("training.gpu.batch_size"), "--batch-size"),
    Field("scaling", pointer("training.scaling"), "--scaling"),
    Field("global_batch_size", pointer("training.global_batch_size"), "--global-batch-size"),
    Field("dtype", pointer("training.dtype"), "--dtype"),
    Field("optimizer", pointer("training.optimizer"), "--optimizer"),
    Field("ddp", {"allOf": [{"$ref": "#/definitions/ddp"}], "required": list(DDP_KEYS)}, args=_ddp_args),
    Field("warmup_steps", pointer("training.warmup_steps"), "--warmup-steps"),
    Field("steps", pointer("training.steps"), "--steps"),
    Field("allreduce_trials", pointer("training.allreduce_trials"), "--allreduce-trials"),
    OP_TIMEOUT,
    Field("job_timeout_s", pointer("training.job_timeout_s")),
    JOB_ENV,
    Field("nccl_env", NCCL_ENV.schema, "--nccl-env-label", arg=lambda v, r: nccl_env_label(v)),
    PROFILE, PROFILE_STEPS,
    Field("inspect", {"type": "boolean"}, required=False),
    Field("inspect_steps", pointer("training.inspect_steps"), required=False),
), extra_fields=workload_fields)


def training_values(job, params: dict) -> list[tuple[str, object]]:
    """Every value a training job takes from its plan, as (flag, value) typed as the harness's parser
    gives it (TRAINING_RECORD's arguments), checked against the record: a value the config would
    refuse (the string "false" for compile) is a JobRecordError naming the key."""
    params = {**params, "nccl_env": job.nccl_env}  # the plan's job names its NCCL settings (its label's)
    TRAINING_RECORD.check_job(params, config_schema())
    return TRAINING_RECORD.arguments(TRAINING_RECORD.values(job.wildcards, params))


def training_args(job, params: dict, out_csv, placement_json) -> list[str]:
    """distbench.training's arguments for one job of the plan (distbench.training.plan.TrainingJob +
    training_params): the job's job.json where its rule wrote one (`params_json`: the ranks read its
    values as JSON), else every value as a flag (a job started by hand)."""
    outputs = [
        "--out", str(out_csv), "--placement-out", str(placement_json),
        *(["--profile-dir", str(trace_dir(out_csv)), "--profile-steps", str(params["profile_steps"])]
          if params.get("profile") == "torch" else []),
        *(["--inspect-dir", str(inspect_dir(out_csv)), "--inspect-steps", str(params["inspect_steps"])]
          if params.get("inspect") else []),
    ]
    if params.get("params_json"):
        return ["--params", str(params["params_json"]), *outputs]
    return [*flags(training_values(job, params)), *outputs]


# Where tools/nccl_inspector_build.sh puts the plugin (its BUILD_DIR default); DISTBENCH_NCCL_INSPECTOR
# in the launcher's environment names another build.
INSPECTOR_DEFAULT = "/tmp/nccl-inspector-build/libnccl-profiler-inspector.so"
INSPECTOR_ENV = "DISTBENCH_NCCL_INSPECTOR"


def inspect_dir(out_csv) -> Path:
    """Where training.inspect's records go: `inspect/` beside the job's CSV."""
    return Path(out_csv).parent / "inspect"


def inspector_env(directory, backend: str, base: dict | None = None) -> dict:
    """The environment training.inspect adds to one NCCL job (none on Gloo), the dump directories made:
    - NCCL's own word on each collective's algorithm and protocol: NCCL_DEBUG=INFO with subsystem
      TUNING ("AllReduce: 67125248 Bytes -> Algo RING proto SIMPLE ..."), one file per process;
    - NCCL's Inspector plugin where it is built (DISTBENCH_NCCL_INSPECTOR, else INSPECTOR_DEFAULT):
      every collective, kernel-timed, at every size (NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES=0: the default
      8 KiB floor would drop small buckets), dumped every 500 us (the default, at teardown only, wrote
      nothing: benchmarks/investigations/nccl-inspector). NCCL_INSPECTOR_DUMP_DIR must exist before
      NCCL starts (the plugin does not make its parents: it wrote nothing into a missing one).
    Settings the job's own environment (`base`: job_env, nccl_env) already has are left as they are."""
    if backend != "nccl":
        return {}
    base = os.environ if base is None else base
    dump = Path(directory) / "inspector"
    dump.mkdir(parents=True, exist_ok=True)
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING", "NCCL_DEBUG_FILE": str(dump / "nccl_tuning.%h.%p.log")}
    plugin = base.get(INSPECTOR_ENV) or INSPECTOR_DEFAULT
    if Path(plugin).is_file():
        env.update({"NCCL_PROFILER_PLUGIN": plugin, "NCCL_INSPECTOR_ENABLE": "1",
                    "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS": "500",
                    "NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES": "0", "NCCL_INSPECTOR_DUMP_DIR": str(dump)})
    return {k: v for k, v in env.items() if k not in base or k.startswith("NCCL_INSPECTOR_DUMP_DIR")}



def short_pass_args(job, params: dict, out_csv, placement_json) -> list[str]:
    """The job once more, briefly (one warm-up step, profile_steps steps, one all-reduce trial),
    for the nsys run: what the trace shows, not a measurement."""
    changes = {"warmup_steps": 1, "steps": params["profile_steps"], "allreduce_trials": 1, "profile": "off",
               "inspect": False}
    short = {**params, **changes}
    if params.get("params_json"):  # the short run reads its values from a job.json of its own too
        short["params_json"] = write_variant(params["params_json"], Path(out_csv).with_name("nsys_job.json"), **changes)
    return training_args(job, short, out_csv, placement_json)


def run_training_job(job, params: dict, out_csv, placement_json, log_path) -> str:
    """Run one training job; return 'ok' or the failure reason. out_csv and placement_json exist
    afterwards in every case."""
    out_csv = Path(out_csv)
    env = job_environment(params["job_env"], job.nccl_env)
    if params.get("inspect"):  # this job's only: NCCL reads it when the communicator starts
        inspect_dir(out_csv).mkdir(parents=True, exist_ok=True)  # the rule's output, whatever the job records
        env.update(inspector_env(inspect_dir(out_csv), job.backend, env))
    torchrun_job = TorchrunJob(
        module="distbench.training", args=training_args(job, params, out_csv, placement_json),
        world_size=job.world_size, env=env,
        timeout_s=params["job_timeout_s"], outputs=[out_csv], placement_json=Path(placement_json),
        log_path=Path(log_path), write_failure=lambda message, status: write_failure_rows(job, params, out_csv, message, status),
        launch=Launch.from_params(params.get("launch"), job.world_size))
    return run_job_with_traces(torchrun_job, params, lambda tdir: short_pass_args(
        job, params, tdir / "nsys_pass.csv", tdir / "nsys_placement.json"))


def write_failure_rows(job, params: dict, out_csv: Path, message: str, status: str = "failed") -> None:
    """Keep the rows of finished phases; one `failed` (or `hung`) row for the phase in progress, one `not_run`
    row for each phase not reached."""
    done = read_partial_rows(partial_path(out_csv), TRAINING_COLUMN_NAMES)
    phases_done = list(dict.fromkeys(r["phase"] for r in done))
    # the last phase seen may be torn (killed while writing it): only phases followed by another count
    finished = phases_done[:-1] if phases_done and len(phases_done) < len(TRAINING_PHASES) else phases_done
    rows = [r for r in done if r["phase"] in finished]
    ddp = params["ddp"]
    world = job.world_size
    try:
        per_rank, global_batch = workload(params["model"]).per_rank_batch(
            params["scaling"], params["batch_size"], params["global_batch_size"], world)
    except ValueError:  # the harness refused this split: the rows still name the job's batch
        per_rank = params["global_batch_size"] // world if params["scaling"] == "strong" else params["batch_size"]
        global_batch = per_rank * world
    per_rank = dp_batch(params["strategy"], per_rank, params.get("tp_size"))  # fsdp_tp: a TP group's batch
    base = {
        "backend": job.backend, "world_size": world, "nodes": Launch.from_params(params.get("launch"), world).nodes,
        "model": params["model"], "strategy": params["strategy"],
        "shard_size": params.get("shard_size"), "tp_size": params.get("tp_size"), **workload_shape(params["model"], params),
        "compile": params["compile"], "batch_size": per_rank, "global_batch_size": global_batch,
        "scaling": params["scaling"], "dtype": params["dtype"], "optimizer": params["optimizer"],
        "bucket_cap_mb": ddp["bucket_cap_mb"], "gradient_as_bucket_view": ddp["gradient_as_bucket_view"],
        "static_graph": ddp["static_graph"], "broadcast_buffers": ddp["broadcast_buffers"],
        "comm_hook": ddp["comm_hook"], "grad_accum": ddp["grad_accum"],
        "nccl_env": nccl_env_label(job.nccl_env),
        "config": job.config_label, "step": 0,
    }
    rows += unreached_rows(([{**base, "phase": phase}] for phase in TRAINING_PHASES if phase not in finished), message,
                           status=status)
    atomic_write_text(out_csv, csv_text(rows, TRAINING_COLUMN_NAMES))


def job_of(entry) -> tuple:
    """The plan's TrainingJob and the job's params from its rule's view (distbench.launch.batch.Entry)."""
    from distbench.training.plan import TrainingJob

    wc, p = entry.wildcards, entry.params
    params = {**p["job"], "launch": p["launch"]}
    job = TrainingJob(wc["backend"], int(wc["world_size"]), wc["config"], params["ddp"], p["job"]["nccl_env"],
                      wc["model"], p["job"]["strategy"], p["job"].get("compile") is True)
    return job, params


def rule_job(job_json):
    """The training job rule's entry (the manifest's job_entry): the job as its rule wrote it to
    job.json. An inspected job (training.inspect) launches alone: its NCCL environment (Inspector, TUNING
    logs) is its own, and NCCL reads it when the communicator starts (distbench.launch.batch.batchable
    leaves it out too); the others may share a launch (distbench.launch.batch)."""
    from distbench.launch.batch import read_entry, results_dir_of, run_job
    from distbench.training.manifest import MANIFEST

    me = read_entry(job_json)
    job, params = job_of(me)
    params["params_json"] = str(job_json)  # its ranks read their values from it (--params)
    out = me.output
    alone = lambda: run_training_job(job, params, out["csv"], out["placement"], me.log)  # noqa: E731
    if params.get("inspect"):
        return f"training job {job.wildcards}", alone
    return f"training job {job.wildcards}", lambda: run_job(
        me, results_dir_of(out["csv"], MANIFEST.job_file()), batch_family(), alone=alone)


def _batch_args(entry, outputs: dict) -> list[str]:
    job, params = job_of(entry)
    params["params_json"] = outputs["job_json"]  # its values, written by the launch (distbench.launch.batch.run_job)
    return training_args(job, params, outputs["csv"], outputs["placement"])


def _batch_env(entry) -> dict:
    job, params = job_of(entry)
    return job_environment(params["job_env"], job.nccl_env)


def batch_family():
    """How distbench.launch.batch runs several training configurations in one launch."""
    from distbench.launch.batch import Family

    return Family("distbench.training", _batch_args, _batch_env, lambda e: job_of(e)[1]["job_timeout_s"])
