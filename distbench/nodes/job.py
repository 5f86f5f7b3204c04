"""The nodes family's torchrun job (one round): its arguments and its failure rows, for
distbench.launch.torchrun."""

from __future__ import annotations

from pathlib import Path

from distbench.core.io import atomic_write_text, csv_text
from distbench.launch.cluster import Launch
from distbench.launch.job_record import BACKEND, JOB_ENV, Field, RecordSpec, byte_list, pointer
from distbench.launch.torchrun import TorchrunJob, job_environment, run_torchrun_job
from distbench.nodes.contract import NODES_COLUMN_NAMES
from distbench.nodes.schedule import parse_pairs
from distbench.workloads.job_fields import config_schema


# A round's values, declared once: job.json's keys and bounds (the config schema's nodes block), the
# ranks' arguments (distbench.nodes.harness) and the flags for people (round_args).
ROUND_RECORD = RecordSpec("nodes", (
    BACKEND,
    Field("round", {"type": "integer", "minimum": 0, "maximum": 4095}, "--round"),
    Field("pairs", {"type": "string", "maxLength": 65536,
                    "pattern": "^[0-9]{1,4}-[0-9]{1,4}(,[0-9]{1,4}-[0-9]{1,4})*$(?!\\n)"}, "--pairs"),
    Field("bye", {"type": ["integer", "null"], "minimum": 0, "maximum": 4095}),
    Field("nodes", pointer("cluster.nodes"), "--nodes"),
    Field("simulated", {"type": "boolean"}, "--simulated"),
    Field("sizes", byte_list(unique=True), "--sizes"),
    Field("warmup", pointer("nodes.warmup"), "--warmup"),
    Field("iters", pointer("nodes.iters"), "--iters"),
    Field("op_timeout_s", pointer("nodes.op_timeout_s"), "--op-timeout-s"),
    Field("job_timeout_s", pointer("nodes.job_timeout_s")),
    JOB_ENV,
))


def round_values(backend: str, params: dict) -> list[tuple[str, object]]:
    """Every value a round takes from its plan, as (flag, value) typed as distbench.nodes' parser gives
    it (ROUND_RECORD's arguments), checked against the record (a JobRecordError names the key)."""
    ROUND_RECORD.check_job(params, config_schema())
    return ROUND_RECORD.arguments(ROUND_RECORD.values({"backend": backend}, params))


def round_args(backend: str, params: dict, out_csv, placement_json) -> list[str]:
    """The round's arguments: its job.json where its rule wrote one (`params_json`), else every value as a
    flag (a round started by hand)."""
    outputs = ["--out", str(out_csv), "--placement-out", str(placement_json)]
    if params.get("params_json"):
        return ["--params", str(params["params_json"]), *outputs]
    return [*ROUND_RECORD.flags({"backend": backend}, params), *outputs]


def run_round(backend: str, params: dict, out_csv, placement_json, log_path) -> str:
    """Run one round; return 'ok' or the failure reason. out_csv and placement_json exist afterwards."""
    out_csv = Path(out_csv)
    launch = Launch.from_params(params["launch"], params["launch"]["nodes"] * params["launch"]["ranks_per_node"])
    return run_torchrun_job(TorchrunJob(
        module="distbench.nodes", args=round_args(backend, params, out_csv, placement_json),
        world_size=launch.nodes * launch.ranks_per_node, env=job_environment(params["job_env"], {}),
        timeout_s=params["job_timeout_s"], outputs=[out_csv], placement_json=Path(placement_json),
        log_path=Path(log_path), write_failure=lambda message, status: write_failure_rows(backend, params, out_csv, message, status),
        launch=launch))


def write_failure_rows(backend: str, params: dict, out_csv: Path, message: str, status: str = "failed") -> None:
    """A round is one world: when it fails (or hangs), every pair of it did (one row per pair, op and size)."""
    rows = []
    for a, b in parse_pairs(params["pairs"]):
        for size in params["sizes"]:
            for op, direction in (("send_recv", "a_to_b"), ("send_recv", "b_to_a"), ("all_reduce", "both")):
                rows.append({"round": params["round"], "nodes": params["nodes"], "backend": backend,
                             "node_a": f"node{a}", "node_b": f"node{b}", "node_a_index": a, "node_b_index": b,
                             "op": op, "direction": direction, "size_bytes": size, "status": status,
                             "message": message})
    atomic_write_text(out_csv, csv_text(rows, NODES_COLUMN_NAMES))


def rule_job(job_json):
    """The round rule's entry (the manifest's job_entry): the round as its rule wrote it to job.json."""
    import json
    from pathlib import Path

    e = json.loads(Path(job_json).read_text())
    params = {**e["params"]["job"], "launch": e["params"]["launch"], "params_json": str(job_json)}
    out = e["output"]
    what = f"node round {e['wildcards']['round']} ({params['pairs']})"
    return what, lambda: run_round(e["wildcards"]["backend"], params, out["csv"], out["placement"], e["log"])
