"""Flight Recorder's cost: the same comm job and training job run with
DISTBENCH_FLIGHT_RECORDER=1 and =0, alternating (on, off, on, off, ...: drift hits both), through
the real launcher (distbench.launch.torchrun, so the environment is exactly a job's); prints each
op and size's median time_us and the training step/comm_alone median times side by side with the
difference. Run by benchmarks/runs/flight_recorder_cost.sh; on CPU it runs Gloo (a smoke test)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd

from distbench.comm.job import run_comm_job
from distbench.comm.plan import CommJob, job_params
from distbench.launch.hang import FLIGHT_RECORDER_ENV
from distbench.pipeline.config import check_config
from distbench.training.job import run_training_job
from distbench.training.plan import TrainingJob, training_params


def main(out: Path, world_size: int, rounds: int) -> None:
    import torch

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    cfg = check_config({
        "comm": {"ops": ["all_reduce", "all_gather", "reduce_scatter", "broadcast"],
                 "sizes": ["1KiB", "64KiB", "1MiB", "16MiB", "256MiB"] if backend == "nccl" else ["1KiB", "64KiB"],
                 "warmup": 20, "iters": 100, "trials": 5, "timing": ["events"] if backend == "nccl" else ["host"],
                 "gloo": {"max_bytes": "1MiB", "warmup": 5, "iters": 50, "trials": 5}},
        "training": {"warmup_steps": 5, "steps": 30, "allreduce_trials": 10,
                     "gpu": {"hidden_dim": 4096, "num_layers": 8, "batch_size": 256},
                     "cpu": {"hidden_dim": 256, "num_layers": 2, "batch_size": 32}}})
    comm_job = CommJob(backend, "float32", world_size, "default", {})
    tr_job = TrainingJob(backend, world_size, "plain", cfg["training"]["ddp"], {})
    comm, train = [], []
    for i in range(rounds):
        for fr in ("1", "0"):
            os.environ[FLIGHT_RECORDER_ENV] = fr  # job_environment reads the launcher's environment
            d = out / f"round{i}_fr{fr}"
            d.mkdir(parents=True, exist_ok=True)
            status = run_comm_job(comm_job, job_params(cfg, backend), d / "comm.csv", d / "comm_p.json", d / "comm.log")
            print(f"round {i} FR={fr} comm: {status}", flush=True)
            df = pd.read_csv(d / "comm.csv")
            comm.append(df[df["status"] == "ok"].assign(fr=fr))
            status = run_training_job(tr_job, training_params(cfg, tr_job), d / "t.csv", d / "t_p.json", d / "t.log")
            print(f"round {i} FR={fr} training: {status}", flush=True)
            df = pd.read_csv(d / "t.csv")
            train.append(df[df["status"] == "ok"].assign(fr=fr))
    pd.set_option("display.width", 200)
    c = pd.concat(comm).groupby(["op", "size_bytes", "fr"])["time_us"].median().unstack("fr")
    c["diff_pct"] = 100 * (c["1"] / c["0"] - 1)
    print(f"\ncomm ({backend}, {world_size} ranks): median time_us per op, Flight Recorder off (0) and on (1)")
    print(c.rename(columns={"0": "fr_off_us", "1": "fr_on_us"}).round(2).to_string())
    t = pd.concat(train).groupby(["phase", "fr"])["step_time_ms"].median().unstack("fr")
    t["diff_pct"] = 100 * (t["1"] / t["0"] - 1)
    print(f"\ntraining ({backend}, {world_size} ranks, MLP): median step_time_ms per phase, off (0) and on (1)")
    print(t.rename(columns={"0": "fr_off_ms", "1": "fr_on_ms"}).round(3).to_string())
    c.to_csv(out / "comm_fr_cost.csv")
    t.to_csv(out / "training_fr_cost.csv")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
