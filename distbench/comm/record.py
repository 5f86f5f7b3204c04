"""The comm family's job record (distbench.launch.job_record.RecordSpec): its values, declared once.
Apart from distbench.comm.job, which imports the ranks' module (distbench.comm.main) for its output
paths, so that the ranks can read their job.json with it without an import cycle."""

from __future__ import annotations

from distbench.comm.harness import job_timings
from distbench.launch.job_record import (
    BACKEND, JOB_ENV, NCCL_ENV, OP_TIMEOUT, PROFILE, PROFILE_STEPS, WORLD_SIZE, Field, RecordSpec, byte_list, pointer,
)


def _timings(value, values: dict) -> list[str]:
    return job_timings(values["backend"], list(value))


# A comm job's values, declared once: job.json's keys and bounds (the config schema's comm block), the
# ranks' arguments (distbench.comm.main) and the flags for people (comm_args without a job.json).
COMM_RECORD = RecordSpec("comm", (
    BACKEND,
    Field("dtype", pointer("comm.dtypes.items"), "--dtype", wildcard=True),
    Field("nccl_env", {"type": "string", "minLength": 1}, "--nccl-env-label", wildcard=True, name="nccl_env_label"),
    WORLD_SIZE,
    Field("ops", pointer("comm.ops"), "--ops"),
    Field("sizes", byte_list(), "--sizes"),
    Field("timing", pointer("comm.timing"), "--timing", arg=_timings),
    Field("inplace", pointer("comm.inplace"), "--inplace"),
    Field("traffic", pointer("comm.traffic"), "--traffic", required=False, repeat=True),
    Field("traffic_digest", {"type": "object", "maxProperties": 16, "additionalProperties": {"type": "string"}},
          required=False),
    Field("warmup", pointer("comm.warmup"), "--warmup"),
    Field("iters", pointer("comm.iters"), "--iters"),
    Field("trials", pointer("comm.trials"), "--trials"),
    Field("graph_launches", pointer("comm.graph_launches"), "--graph-launches"),
    Field("graph_max_bytes", {"$ref": "#/definitions/size/oneOf/0"}, "--graph-max-bytes", required=False),
    Field("rank_agg", pointer("comm.rank_agg"), "--rank-agg"),
    Field("rotate_bytes", {"type": "integer", "minimum": 0, "maximum": 1125899906842624}, "--rotate-bytes"),
    OP_TIMEOUT,
    Field("job_timeout_s", pointer("comm.job_timeout_s")),
    JOB_ENV,
    NCCL_ENV,
    Field("pairs", {"type": "boolean"}),
    # the pair matrix's sizes reach the ranks only for the job that measures it (pairs: true)
    Field("pairs_sizes", byte_list(unique=True), "--pairs-sizes", arg=lambda v, r: list(v) if r.get("pairs") else []),
    Field("pairs_iters", pointer("comm.pairs_iters"), "--pairs-iters"),
    Field("pairs_trials", pointer("comm.pairs_trials"), "--pairs-trials"),
    PROFILE, PROFILE_STEPS,
))
