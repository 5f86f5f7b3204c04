"""Traces on request (config `profile`): a real pipeline run with torch.profiler traces per rank,
their overlap table and report section; the measured rows untouched; per-family overrides;
`profile: nsys` without nsys (the manifest says why) and with a stand-in `nsys` on PATH (a script,
since Nsight Systems cannot be installed here: it checks the wrapper's argument list only)."""

import json
import os
import stat

import pandas as pd
import pytest

from distbench.pipeline.config import ConfigError, check_config
from distbench.launch.profiling import family_mode
from tests.conftest import RUN, snakemake

# `pytest -m heavy` (README: the second test command): three real workflow runs under torch.profiler.
pytestmark = pytest.mark.heavy

CONFIG = """
backends: [gloo]
world_sizes: [2]
profile: {profile}
comm:
  ops: [all_reduce, all_to_all_v]
  traffic: [uniform]
  sizes: [1KiB, 1MiB]
  gloo: {{max_bytes: 1MiB, warmup: 1, iters: 3, trials: 2}}
training:
  models: [mlp]
  world_sizes: [2]
  steps: 5
  warmup_steps: 2
  allreduce_trials: 3
{training_extra}
memory:
  enabled: false
predict:
  enabled: false
"""


def test_modes_and_per_family_overrides():
    assert family_mode(check_config({}), "training") == "off"
    c = check_config({"profile": True, "comm": {"profile": False}})
    assert family_mode(c, "training") == "torch" and family_mode(c, "comm") == "off"
    assert family_mode(check_config({"training": {"profile": "nsys"}}), "training") == "nsys"
    with pytest.raises(ConfigError, match=r"config key profile: 'perf' is not valid"):
        check_config({"profile": "perf"})
    # on the command line (`--config profile=true`) the value arrives as text
    assert family_mode(check_config({"profile": "true"}), "comm") == "torch"
    assert family_mode(check_config({"profile": "nsys"}), "comm") == "nsys"


def test_a_profiled_run_traces_every_rank_and_keeps_the_measurements(workflow_dir):
    (workflow_dir / "p.yaml").write_text(CONFIG.format(profile="true", training_extra=""))
    r = snakemake(workflow_dir, "--cores", "2", "comm", "training", "report", "--configfile", "p.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    res = workflow_dir / RUN
    for job in ("comm/gloo/float32/ws2/default", "training/gloo/mlp/ws2/plain"):
        trace = res / job / "trace"
        assert sorted(p.name for p in trace.glob("trace_rank*.json.gz")) == ["trace_rank0.json.gz", "trace_rank1.json.gz"]
        manifest = json.loads((trace / "profile.json").read_text())
        assert manifest["mode"] == "torch" and manifest["files"] == ["trace_rank0.json.gz", "trace_rank1.json.gz"]
    table = pd.read_csv(res / "tables/trace_overlap.csv")
    ws2 = table[table["job"] == "gloo/mlp/ws2/plain"]
    assert len(ws2) == 2 and (ws2["n_comm_events"] > 0).all() and (ws2["comm_us"] > 0).all()
    assert ws2["overlap_fraction"].between(0, 1).all()
    # the profiled pass is extra: the measured rows are exactly what an unprofiled job writes
    train = pd.read_csv(res / "training/gloo/mlp/ws2/plain/training.csv")
    assert train.groupby("phase").size().to_dict() == {"step": 5, "compute_only": 5, "comm_alone": 3}
    md = (workflow_dir / "report/report.md").read_text()
    section = md.split("## Traces")[1].split("\n## ")[0]
    assert "| training | gloo/mlp/ws2/plain | torch | 2 |" in section
    assert f"../{RUN}/training/gloo/mlp/ws2/plain/trace/trace_rank1.json.gz" in section


def _fake_nsys(bin_dir):
    """A stand-in `nsys`: records its arguments, then runs the command after `-o <path>`."""
    script = bin_dir / "nsys"
    script.write_text("#!/bin/sh\n"
                      "printf '%s\\n' \"$@\" > \"$NSYS_ARGS_OUT\"\n"
                      "while [ \"$1\" != \"-o\" ]; do shift; done\n"
                      "touch \"$2.nsys-rep\"; shift 2\n"
                      "exec \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("with_nsys", [False, True])
def test_nsys_mode(workflow_dir, tmp_path, with_nsys):
    extra = "  profile: nsys"
    (workflow_dir / "n.yaml").write_text(CONFIG.format(profile="false", training_extra=extra))
    env = {"NSYS_ARGS_OUT": str(tmp_path / "nsys_args.txt")}
    path = os.environ["PATH"]
    if with_nsys:
        (tmp_path / "bin").mkdir()
        _fake_nsys(tmp_path / "bin")
        path = f"{tmp_path / 'bin'}:{path}"
    else:
        path = ":".join(p for p in path.split(":") if not (os.path.exists(os.path.join(p, "nsys"))))
    r = snakemake(workflow_dir, "--cores", "2", f"{RUN}/tables/trace_overlap.csv", "--configfile", "n.yaml",
                  env={**env, "PATH": path})
    assert r.returncode == 0, r.stderr[-3000:]
    trace = workflow_dir / f"{RUN}/training/gloo/mlp/ws2/plain/trace"
    manifest = json.loads((trace / "profile.json").read_text())
    assert manifest["mode"] == "nsys"
    assert not (workflow_dir / f"{RUN}/comm/gloo/float32/ws2/default/trace").exists()  # comm not profiled
    if not with_nsys:
        assert "nsys (Nsight Systems) is not installed" in manifest["note"] and manifest["files"] == []
        return
    assert manifest["files"] == ["job.nsys-rep", "nsys.log", "nsys_job.json", "nsys_placement.json"], manifest
    args = (tmp_path / "nsys_args.txt").read_text().split("\n")
    assert args[:4] == ["profile", "--trace=cuda,nvtx,osrt", "--force-overwrite=true", "-o"]
    assert args[4] == str(trace / "job") or args[4].endswith("plain/trace/job")
    wrapped = args[5:]
    assert "torch.distributed.run" in wrapped and "distbench.training" in wrapped
    # the short pass reads its values from a job.json of its own (issue 46: no values as strings)
    assert wrapped[wrapped.index("--params") + 1].endswith("plain/trace/nsys_job.json") and "--steps" not in wrapped
    short = json.loads((trace / "nsys_job.json").read_text())["params"]["job"]
    assert (short["steps"], short["warmup_steps"], short["inspect"]) == (3, 1, False)
    # the short pass's rows are thrown away; the job's own CSV has its full measurement
    assert not (trace / "nsys_pass.csv").exists()
    train = pd.read_csv(workflow_dir / f"{RUN}/training/gloo/mlp/ws2/plain/training.csv")
    assert (train.groupby("phase").size()["step"]) == 5
