"""The hang and slow-job checks, on any host: one job under the real launcher
(distbench.launch.torchrun, ranks started as the pipeline starts them), then either rank 1 frozen
with SIGSTOP mid-run (`freeze`) or nothing done to it (`slow`: far more steps than its time limit
allows). Prints the job's outcome (the message its CSV rows carry) and the wall time.

  python benchmarks/runs/freeze_rank.py comm nccl freeze OUTDIR     # a comm job, rank 1 frozen
  python benchmarks/runs/freeze_rank.py training nccl freeze OUTDIR # a training job (Flight Recorder on)
  python benchmarks/runs/freeze_rank.py training nccl slow OUTDIR   # 100,000 steps, 60 s limit: timeout
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

family, backend, mode, out = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]).resolve()
out.mkdir(parents=True, exist_ok=True)
ws = 1 if mode == "slow" else 2
gpu = backend == "nccl"
if family == "comm":
    code = f"""
from distbench.comm.plan import CommJob
from distbench.comm.job import run_comm_job
params = dict(ops=["all_reduce"], sizes=[8, 1 << 20, 128 << 20], warmup=5, iters=20, trials=20000,
              timing=["events" if {gpu} else "host"], inplace=[False], graph_launches=1, rank_agg="max",
              rotate_bytes=0, op_timeout_s=600, job_timeout_s=60, job_env={{}})
print(run_comm_job(CommJob({backend!r}, "float32", {ws}, "default", {{}}), params, r"{out}/comm.csv",
                   r"{out}/placement.json", r"{out}/log"))
"""
    csv = out / "comm.csv"
else:
    code = f"""
from distbench.pipeline.config import check_config
from distbench.training.plan import TrainingJob, training_params
from distbench.training.job import run_training_job
cfg = check_config({{"training": {{"warmup_steps": 2, "steps": 100000, "allreduce_trials": 2}}}})
job = TrainingJob({backend!r}, {ws}, "plain", cfg["training"]["ddp"], {{}})
params = training_params(cfg, job)
if not {gpu}:
    params.update(hidden_dim=32, num_layers=1, batch_size=8)
params["job_timeout_s"] = 60
print(run_training_job(job, params, r"{out}/training.csv", r"{out}/placement.json", r"{out}/log"))
"""
    csv = out / "training.csv"
t0 = time.time()
launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
if mode == "freeze":
    time.sleep(35)  # well into the timed sweep (comm) or the timed steps (training)
    pid = None
    for d in Path("/proc").iterdir():
        try:
            env, cmd = (d / "environ").read_bytes(), (d / "cmdline").read_bytes()
        except OSError:
            continue
        if str(out).encode() in env and b"RANK=1\0" in env and f"distbench.{family}".encode() in cmd:
            pid = int(d.name)
    if pid is None:
        sys.exit(f"no rank 1 found at {time.time() - t0:.1f} s: {launcher.communicate()[0][-2000:]}")
    print(f"SIGSTOP rank 1 (pid {pid}) at {time.time() - t0:.1f} s", flush=True)
    os.kill(pid, signal.SIGSTOP)
text, _ = launcher.communicate(timeout=400)
print(text.strip().splitlines()[-1] if text.strip() else "(no output)")
print(f"wall {time.time() - t0:.1f} s")
place = json.loads((out / "placement.json").read_text())
print("placement hang:", json.dumps({k: place.get("hang", {}).get(k) for k in ("culprits", "waiting", "progress")}))
time.sleep(2)
left = []
for d in Path("/proc").iterdir():  # any process of the job still here (its environment names OUTDIR)
    try:
        if d.name.isdigit() and int(d.name) != os.getpid() and str(out).encode() in (d / "environ").read_bytes():
            left.append(int(d.name))
    except OSError:
        pass
print("processes left:", left or "none")
