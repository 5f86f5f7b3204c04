"""Traces on request (config `profile`): a short extra pass of a benchmark job, after its timed
passes, recorded per rank, and what the job's trace directory holds.

- `torch`: `torch.profiler` around a few more steps (training) or ops (comm) in the same ranks,
  after every timed pass is over; each rank writes `trace_rank<r>.json.gz` (Chrome/Perfetto
  format: open it at ui.perfetto.dev or chrome://tracing). distbench.traces.overlap reads it.
- `nsys`: after the job, a second, short run of it (few steps or ops, its CSV thrown away) under
  `nsys profile` (Nsight Systems), `job.nsys-rep` in the trace directory; only where `nsys` is on
  PATH, else the manifest says why there is none.
Never inside a timed pass: the measured rows come from the job's own passes, unprofiled.

Each job's trace directory holds `profile.json` (the manifest: mode, files, a note), so the
directory exists, and says why it is empty, whatever happened.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from distbench.core.io import atomic_write_text

MANIFEST = "profile.json"


def profile_mode(value) -> str:
    """The config's `profile` value (false / true / "nsys", or a family's override) as a mode:
    off, torch or nsys."""
    if value is True or value == "torch":
        return "torch"
    if value == "nsys":
        return "nsys"
    return "off"


def family_mode(config: dict, family: str) -> str:
    """`<family>.profile` when set, else the top-level `profile`."""
    own = config.get(family, {}).get("profile")
    return profile_mode(config.get("profile", False) if own is None else own)


def trace_dir(out_csv) -> Path:
    """Where a job's traces go: `trace/` beside its CSV."""
    return Path(out_csv).parent / "trace"


def trace_file(out_dir, rank: int) -> Path:
    return Path(out_dir) / f"trace_rank{rank}.json.gz"


def profile_pass(torch, step, n_steps: int, out_dir, rank: int, cuda: bool, sync) -> Path:
    """Run `step` n_steps times under torch.profiler (CPU, and CUDA where there is a GPU) after one
    unrecorded call, and write this rank's Chrome trace; `sync` waits for the device and peers."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    step()
    sync()
    with profile(activities=activities) as prof:
        for i in range(n_steps):
            with record_function(f"distbench_step_{i}"):
                step()
        sync()
    path = trace_file(out_dir, rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.json.gz")
    prof.export_chrome_trace(str(tmp))
    tmp.replace(path)
    return path


def write_manifest(out_dir, mode: str, note: str = "") -> None:
    """profile.json: the mode and the trace files present (relative names), written atomically."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = sorted(p.name for p in out_dir.iterdir() if p.is_file() and p.name != MANIFEST and not p.name.startswith("."))
    atomic_write_text(out_dir / MANIFEST, json.dumps({"mode": mode, "files": files, "note": note}, indent=1) + "\n")


def nsys_prefix(out_dir) -> list[str] | None:
    """`nsys profile ...` to put before a job's launch command, or None where nsys is not installed."""
    nsys = shutil.which("nsys")
    if nsys is None:
        return None
    return [nsys, "profile", "--trace=cuda,nvtx,osrt", "--force-overwrite=true", "-o", str(Path(out_dir) / "job")]
