"""Run one comm job under torchrun with a bounded time, and always leave complete CSVs behind.

If the job crashes, hangs or loses a rank, the rows it finished are kept, the measurement in
progress is recorded as `failed` with a readable reason, and the rest as `skipped`, so the DAG goes
on and the report shows what happened.
"""

from __future__ import annotations

import csv
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from distbench.comm import Point, base_row, csv_value, partial_path, plan_points, ranks_path
from distbench.io import atomic_write_json, atomic_write_text
from distbench.schema import COMM_COLUMN_NAMES, COMM_RANK_COLUMN_NAMES


def torchrun_command(job, params: dict, out_csv, placement_json) -> list[str]:
    """An argument list (never a shell string): config values cannot be interpreted by a shell."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
        f"--nproc_per_node={job.world_size}",
        "-m", "distbench.comm",
        "--backend", job.backend, "--dtype", job.dtype,
        "--ops", ",".join(params["ops"]),
        "--sizes", ",".join(str(s) for s in params["sizes"]),
        "--timing", ",".join(params["timing"]),
        "--inplace", ",".join("true" if v else "false" for v in params.get("inplace", [False])),
        "--warmup", str(params["warmup"]), "--iters", str(params["iters"]),
        "--trials", str(params["trials"]), "--graph-launches", str(params["graph_launches"]),
        "--rank-agg", params["rank_agg"], "--rotate-bytes", str(params["rotate_bytes"]),
        "--op-timeout-s", str(params["op_timeout_s"]),
        "--nccl-env-label", job.nccl_env_label,
        "--out", str(out_csv), "--ranks-out", str(ranks_path(Path(out_csv))),
        "--placement-out", str(placement_json),
    ]


def job_environment(job, params: dict, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update(params["job_env"])
    env.update(job.nccl_env)
    # Snakemake sets OMP_NUM_THREADS to the rule's threads and torchrun passes it on; collectives
    # need none, and one thread per rank keeps Gloo ranks from fighting over the cores.
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _last_error(log_text: str) -> str:
    """The most telling line of a failed job's log, for the `message` column."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    ours = [ln for ln in lines if "distbench error: " in ln]
    if ours:
        return ours[-1][ours[-1].index("distbench error: ") + len("distbench error: "):][:400]
    # A Python exception in a rank ("[rank1]: torch.OutOfMemoryError: ...").
    exc = [ln for ln in lines if re.match(r"^(\[rank\d+\]: )?[\w.]*(Error|Exception)\b.*: ", ln)
           and "ChildFailedError" not in ln]
    # torchrun's summary names the rank that failed first and how.
    root = re.search(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?\n",
                     "\n".join(lines) + "\n", re.S)
    if root:
        rank, code, sig = root.groups()
        first = f"rank {rank} exited with code {code}{' ' + sig if sig else ''} (torchrun's root cause)"
        return (first + (f"; last error: {exc[-1]}" if exc else ""))[:400]
    if exc:
        return exc[-1][:400]
    return lines[-1][:400] if lines else "no output"


def run_comm_job(job, params: dict, out_csv, placement_json, log_path) -> str:
    """Run the job; return 'ok' or the failure reason. out_csv, its per-rank times CSV
    (comm.ranks_path) and placement_json exist afterwards in every case."""
    out_csv, log_path = Path(out_csv), Path(log_path)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for path in (out_csv, ranks_path(out_csv)):
        for stale in (path, partial_path(path)):
            stale.unlink(missing_ok=True)
    cmd = torchrun_command(job, params, out_csv, placement_json)
    timeout_s = params["job_timeout_s"]
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        log.write("# " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=job_environment(job, params),
                                start_new_session=True)  # own process group: a timeout kills every rank
        try:
            rc = proc.wait(timeout=timeout_s)
            reason = None if rc == 0 else f"torchrun exited with code {rc}"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, reason = -1, f"job killed after {timeout_s} s (comm.job_timeout_s): a rank hung or was lost"
    wall_s = time.monotonic() - t0
    with open(log_path, "a") as log:
        log.write(f"# distbench: exit {rc} after {wall_s:.1f} s\n")
    if reason is None and out_csv.exists() and ranks_path(out_csv).exists():
        return "ok"
    if reason is None:
        reason = "torchrun exited 0 but wrote no CSV"
    detail = _last_error(log_path.read_text(errors="replace"))
    message = f"{reason}: {detail}"
    _write_failure_csv(job, params, out_csv, message)
    if not Path(placement_json).exists():  # torchrun never got a rank as far as the placement check
        atomic_write_json(placement_json, {"ranks": [], "error": message})
    return message


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _read_partial(path: Path, columns) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if None not in r.values() and len(r) == len(columns)]
    return rows


def _csv_text(rows: list[dict], columns) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns)
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _write_failure_csv(job, params, out_csv: Path, message: str) -> None:
    """Keep finished rows; mark the measurement in progress failed and the rest skipped."""
    from distbench.ops import OPS, element_count
    import torch

    done = _read_partial(partial_path(out_csv), COMM_COLUMN_NAMES)
    trials = params["trials"]
    n_done = len(done) // trials
    done = done[: n_done * trials]  # a torn last batch (killed mid-write) is dropped
    # Per-rank times are written before their point's rows: keep those of finished points only.
    point_keys = ("op", "size_bytes", "timing", "inplace")
    finished = {tuple(r[k] for k in point_keys) for r in done}
    rank_rows = [r for r in _read_partial(partial_path(ranks_path(out_csv)), COMM_RANK_COLUMN_NAMES)
                 if tuple(r[k] for k in point_keys) in finished]
    elem = torch.empty((), dtype=getattr(torch, job.dtype)).element_size()

    fields = SimpleNamespace(backend=job.backend, world_size=job.world_size, dtype=job.dtype,
                             nccl_env_label=job.nccl_env_label, iters=params["iters"],
                             graph_launches=params["graph_launches"], rank_agg=params["rank_agg"])
    rows = list(done)
    points = plan_points(params["ops"], params["sizes"], params["timing"], params.get("inplace", [False]))
    for i, point in enumerate(points[n_done:]):
        spec = OPS[point.op]
        count = element_count(spec, point.size_bytes, elem, job.world_size)
        size = count * elem if spec.moves_data and count else point.size_bytes
        base = base_row(fields, Point(point.op, size, point.timing, point.inplace), count)
        status, msg = ("failed", message) if i == 0 else ("skipped", f"not run: the job ended early ({message})")
        rows += [{k: csv_value(v) for k, v in {**base, "trial": t, "status": status, "message": msg}.items()}
                 for t in range(trials)]
    atomic_write_text(ranks_path(out_csv), _csv_text(rank_rows, COMM_RANK_COLUMN_NAMES))
    atomic_write_text(out_csv, _csv_text(rows, COMM_COLUMN_NAMES))
    for path in (out_csv, ranks_path(out_csv)):
        partial_path(path).unlink(missing_ok=True)
