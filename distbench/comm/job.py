"""The comm family's torchrun job: its arguments and its failure rows, for distbench.launch.torchrun."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from distbench.launch.cluster import Launch
from distbench.launch.failure import unreached_rows
from distbench.launch.job_record import write_variant
from distbench.comm.main import pairs_path, ranks_path
from distbench.comm.harness import base_row, plan_points
from distbench.comm.record import COMM_RECORD
from distbench.core.io import atomic_write_text, csv_text, partial_path, read_partial_rows
from distbench.launch.torchrun import TorchrunJob, job_environment, run_job_with_traces
from distbench.launch.profiling import trace_dir
from distbench.comm.contract import COMM_COLUMN_NAMES, COMM_RANK_COLUMN_NAMES, PAIRS_COLUMN_NAMES


def comm_args(job, params: dict, out_csv, placement_json) -> list[str]:
    """distbench.comm's arguments for one job of the plan (distbench.comm.plan.CommJob + job_params):
    the job's job.json where its rule wrote one (the ranks read its values as JSON), else every value
    as a flag (a job started by hand)."""
    outputs = ["--out", str(out_csv), "--ranks-out", str(ranks_path(Path(out_csv))),
               "--pairs-out", str(pairs_path(Path(out_csv))), "--placement-out", str(placement_json),
               *(["--profile-dir", str(trace_dir(out_csv)), "--profile-steps", str(params["profile_steps"])]
                 if params.get("profile") == "torch" else [])]
    if params.get("params_json"):
        return ["--params", str(params["params_json"]), *outputs]
    return [*COMM_RECORD.flags(job.wildcards, params), *outputs]



def short_pass_args(job, params: dict, out_csv, placement_json) -> list[str]:
    """The job's ops once more, briefly (largest size, events or host timing, one trial of
    profile_steps ops), for the nsys run: what the trace shows, not a measurement."""
    changes = {"sizes": params["sizes"][-1:], "timing": params["timing"][:1], "warmup": 1,
               "iters": params["profile_steps"], "trials": 1, "pairs": False, "profile": "off"}
    short = {**params, **changes}
    if params.get("params_json"):  # the short run reads its values from a job.json of its own too
        short["params_json"] = str(write_variant(params["params_json"], Path(out_csv).with_name("nsys_job.json"), **changes))
    return comm_args(job, short, out_csv, placement_json)


def run_comm_job(job, params: dict, out_csv, placement_json, log_path) -> str:
    """Run one comm job; return 'ok' or the failure reason. out_csv, its per-rank times CSV
    (cli.ranks_path) and placement_json exist afterwards in every case."""
    out_csv = Path(out_csv)
    torchrun_job = TorchrunJob(
        module="distbench.comm", args=comm_args(job, params, out_csv, placement_json),
        world_size=job.world_size, env=job_environment(params["job_env"], job.nccl_env, flight_recorder=False),  # its per-call cost
        timeout_s=params["job_timeout_s"], outputs=[out_csv, ranks_path(out_csv), pairs_path(out_csv)],
        placement_json=Path(placement_json), log_path=Path(log_path),
        write_failure=lambda message, status: write_failure_rows(job, params, out_csv, message, status),
        launch=Launch.from_params(params.get("launch"), job.world_size))
    return run_job_with_traces(torchrun_job, params, lambda tdir: short_pass_args(
        job, params, tdir / "nsys_pass.csv", tdir / "nsys_placement.json"))


def write_failure_rows(job, params, out_csv: Path, message: str, status: str = "failed") -> None:
    """Keep finished rows; mark the measurement in progress `status` (failed, or hung) and the rest not_run."""
    import torch

    from distbench.core.ops_spec import SPECS, element_count

    done = read_partial_rows(partial_path(out_csv), COMM_COLUMN_NAMES)
    trials = params["trials"]
    n_done = len(done) // trials
    done = done[: n_done * trials]  # a torn last batch (killed mid-write) is dropped
    # Per-rank times are written before their point's rows: keep those of finished points only.
    point_keys = ("op", "traffic", "requested_bytes", "timing", "inplace")
    finished = {tuple(r[k] for k in point_keys) for r in done}
    rank_rows = [r for r in read_partial_rows(partial_path(ranks_path(out_csv)), COMM_RANK_COLUMN_NAMES)
                 if tuple(r[k] for k in point_keys) in finished]
    elem = torch.empty((), dtype=getattr(torch, job.dtype)).element_size()

    nodes = Launch.from_params(params.get("launch"), job.world_size).nodes
    fields = SimpleNamespace(backend=job.backend, world_size=job.world_size, nodes=nodes, dtype=job.dtype,
                             nccl_env_label=job.nccl_env_label, iters=params["iters"],
                             graph_launches=params["graph_launches"], rank_agg=params["rank_agg"])
    points = plan_points(params["ops"], params["sizes"], params["timing"], params.get("inplace", [False]),
                         params.get("traffic", ["uniform"]), params.get("graph_max_bytes", 0))

    def point_rows(point) -> list[dict]:
        spec = SPECS[point.op]
        count = element_count(spec, point.size_bytes, elem, job.world_size)
        size = count * elem if spec.moves_data and count else point.size_bytes
        base = base_row(fields, point, count, size)
        return [{**base, "trial": t} for t in range(trials)]

    rows = done + unreached_rows((point_rows(p) for p in points[n_done:]), message, status=status)
    pair_rows = _pair_failure_rows(job, params, out_csv, fields, elem, bool(n_done == len(points)), message, status)
    atomic_write_text(pairs_path(out_csv), csv_text(pair_rows, PAIRS_COLUMN_NAMES))
    atomic_write_text(ranks_path(out_csv), csv_text(rank_rows, COMM_RANK_COLUMN_NAMES))
    atomic_write_text(out_csv, csv_text(rows, COMM_COLUMN_NAMES))


def _pair_failure_rows(job, params, out_csv: Path, fields, elem: int, sweep_done: bool, message: str,
                       status: str = "failed") -> list[dict]:
    """The pair matrix's rows when the job ended early: the finished ones, then `failed` for the
    pair in progress (only when the sweep before it had finished) and `not_run` for the rest."""
    from distbench.comm.pairs import pair_row, plan_pairs

    if not params.get("pairs"):
        return []
    trials = params["pairs_trials"]
    done = read_partial_rows(partial_path(pairs_path(out_csv)), PAIRS_COLUMN_NAMES)
    pairs = plan_pairs(job.world_size, params["pairs_sizes"])
    n_done = min(len(done) // trials, len(pairs))
    rows = done[: n_done * trials]
    fields.pairs_iters = params["pairs_iters"]
    return rows + unreached_rows(([{**pair_row(fields, [], p, elem), "trial": t} for t in range(trials)]
                                  for p in pairs[n_done:]), message, in_progress=sweep_done, status=status)


def rule_job(job_json):
    """The comm job rule's entry (the manifest's job_entry): the job as its rule wrote it to job.json,
    which its ranks read too (`--params`)."""
    from distbench.comm.plan import CommJob
    from distbench.launch.batch import read_entry

    me = read_entry(job_json)
    wc, out = me.wildcards, me.output
    params = {**me.params["job"], "launch": me.params["launch"], "params_json": str(job_json)}
    job = CommJob(wc["backend"], wc["dtype"], int(wc["world_size"]), wc["nccl_env"], params["nccl_env"])
    return f"comm job {job.wildcards}", lambda: run_comm_job(job, params, out["csv"], out["placement"], me.log)
