"""The achievable matmul peak (config `training.matmul_sweep: true`): before the training
jobs, each GPU of the host runs the model's own GEMMs in the model's dtype, one after another, and
the best TFLOP/s any of them reaches is that GPU's achievable peak: the second MFU denominator, beside
the spec sheet's (distbench.training.analysis.mfu). NVML's SM and memory clocks, power draw and
enforced power limit are read while each size runs, so a throttled or power-capped GPU shows why its
achievable peak is low.

    python -m distbench.training.matmul --dtype bfloat16 --gemm 4096x3072x1024 --gemm 4096x1024x1024 \\
        --out matmul.csv [--seconds 0.5]

A GEMM MxNxK is C[M,N] = A[M,K] @ B[K,N], 2·M·N·K FLOPs. The shapes (`gemm_shapes`) are the forward
linear layers of the workload at the job's per-rank micro-batch, and their weight-gradient GEMMs
(K = the tokens). dtype float32 runs with TF32 off, as the training harness leaves it, so the
figure is comparable with the spec sheet's non-tensor FP32 peak."""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

from distbench.core.io import atomic_write_text, csv_text

COLUMNS = ("device_index", "device_name", "dtype", "m", "n", "k", "time_us", "tflops", "sm_clock_mhz",
           "sm_clock_max_mhz", "mem_clock_mhz", "power_draw_w", "power_limit_w", "status", "message")


def gemm_shapes(model: str, shape: dict, micro_batch: int) -> list[tuple[int, int, int]]:
    """(M, N, K) of the workload's linear layers at one micro-batch of `micro_batch` samples: forward,
    then each one's weight gradient (N×K = weight, K = tokens). MLP: hidden×hidden; GPT/LoRA: qkv,
    attention out, MLP in/out and the vocabulary projection (torch-free: the plan calls it)."""
    d = int(shape["hidden_dim"])
    if shape.get("seq_len"):
        tokens = micro_batch * int(shape["seq_len"])
        fwd = [(tokens, 3 * d, d), (tokens, d, d), (tokens, 4 * d, d), (tokens, d, 4 * d)]
        if shape.get("vocab_size"):
            fwd.append((tokens, int(shape["vocab_size"]), d))
    else:
        fwd = [(micro_batch, d, d)]
    wgrad = [(k, n, m) for m, n, k in fwd]
    return list(dict.fromkeys(fwd + wgrad))


def parse_gemm(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gemm: expected MxNxK, got {text!r}") from None
    if min(m, n, k) < 1:
        raise argparse.ArgumentTypeError(f"--gemm: every size must be >= 1, got {text!r}")
    return m, n, k


def _nvml(index: int):
    """(read() -> dict of the clock/power columns, close) for GPU `index`; empty values without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no NVML: the columns stay empty, never guessed
        return lambda: {}, lambda: None

    def read():
        out = {}
        for col, fn in (("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                        ("sm_clock_max_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                        ("mem_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)),
                        ("power_draw_w", lambda: pynvml.nvmlDeviceGetPowerUsage(h) / 1000),
                        ("power_limit_w", lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000)):
            try:
                out[col] = fn()
            except Exception:  # noqa: BLE001 - one unreadable counter leaves its column empty
                pass
        return out

    return read, pynvml.nvmlShutdown


def sweep_device(torch, index: int, dtype: str, gemms, seconds: float) -> list[dict]:
    """One row per GEMM on GPU `index`: the median of timed batches of back-to-back matmuls."""
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    dt = {"bfloat16": torch.bfloat16, "float32": torch.float32}[dtype]
    name = torch.cuda.get_device_name(dev)
    read, close = _nvml(index)
    rows = []
    for m, n, k in gemms:
        base = {"device_index": index, "device_name": name, "dtype": dtype, "m": m, "n": n, "k": k}
        try:
            a = torch.randn(m, k, device=dev, dtype=dt)
            b = torch.randn(k, n, device=dev, dtype=dt)
            for _ in range(3):
                a @ b
            torch.cuda.synchronize(dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            a @ b
            end.record()
            end.synchronize()
            per = max(start.elapsed_time(end) / 1e3, 1e-6)
            reps = max(1, min(1000, int(seconds / 5 / per)))  # five timed batches in about `seconds`
            times, clocks = [], []
            for _ in range(5):
                start.record()
                for _ in range(reps):
                    a @ b
                end.record()
                clocks.append(read())  # while the batch runs on the GPU
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e3 / reps)
            t = sorted(times)[2]
            mid = clocks[2] if clocks else {}
            rows.append({**base, "time_us": t, "tflops": 2 * m * n * k / (t * 1e-6) / 1e12, **mid, "status": "ok",
                         "message": ""})
            del a, b
        except RuntimeError as e:  # torch.OutOfMemoryError included: this size's row says so
            rows.append({**base, "time_us": math.nan, "tflops": math.nan, "status": "failed",
                         "message": str(e).splitlines()[0] if str(e) else type(e).__name__})
        torch.cuda.empty_cache()
    close()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m distbench.training.matmul", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtype", choices=("bfloat16", "float32"), required=True)
    p.add_argument("--gemm", type=parse_gemm, action="append", required=True, help="MxNxK (repeatable)")
    p.add_argument("--seconds", type=float, default=0.5, help="timed time per GEMM and GPU (about)")
    p.add_argument("--devices", help="comma-separated GPU indices (default: every visible GPU)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    import torch

    rows = []
    if not torch.cuda.is_available():
        rows.append({"device_index": "", "device_name": "cpu", "dtype": args.dtype, "status": "not_run",
                     "message": "no GPU: the matmul sweep measures GPUs only"})
    else:
        devices = [int(x) for x in args.devices.split(",")] if args.devices else range(torch.cuda.device_count())
        for i in devices:
            rows += sweep_device(torch, i, args.dtype, list(dict.fromkeys(args.gemm)), args.seconds)
            best = max((r["tflops"] for r in rows if r["device_index"] == i and r["status"] == "ok"), default=math.nan)
            print(f"GPU {i} ({rows[-1]['device_name']}): best {best:.1f} TFLOP/s {args.dtype} over "
                  f"{len(args.gemm)} GEMM(s)", flush=True)
    write_rows(args.out, rows)
    return 0


def write_rows(path, rows: list[dict]) -> None:
    """training_matmul.csv's rows, COLUMNS only, written atomically (distbench.core.io)."""
    atomic_write_text(path, csv_text([{k: r.get(k, "") for k in COLUMNS} for r in rows], COLUMNS))


def run_sweeps(params: dict, out_csv, log_path) -> str:
    """The workflow's sweep (rule training_matmul, params from distbench.training.plan.matmul_params): one
    `python -m distbench.training.matmul` per dtype, its output appended to `log_path`, the rows of all
    of them in `out_csv`. A sweep that fails leaves a `failed` row naming why, so the DAG goes on (MFU
    then has no achievable peak for that dtype). Returns what was measured, for the launcher's log."""
    import subprocess

    out = Path(out_csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows, said = [], []
    for sweep in params.get("sweeps", []):  # none: no planned model has GEMMs to name (a header-only table)
        part = out.with_name(f".{out.stem}.{sweep['dtype']}.csv")
        cmd = [sys.executable, "-m", "distbench.training.matmul", "--dtype", sweep["dtype"], "--out", str(part),
               "--seconds", str(params["seconds"]), *[a for g in sweep["gemms"] for a in ("--gemm", g)]]
        with open(log_path, "a") as log:
            print("$ " + " ".join(cmd), file=log, flush=True)
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        if rc == 0 and part.exists():
            with open(part, newline="") as f:
                got = list(csv.DictReader(f))
            part.unlink()
            rows += got
            ok = [float(r["tflops"]) for r in got if r["status"] == "ok"]
            said.append(f"{sweep['dtype']}: best {max(ok):.1f} TFLOP/s" if ok else f"{sweep['dtype']}: "
                        + (got[0]["message"] if got else "no rows"))
        else:
            rows.append({"dtype": sweep["dtype"], "status": "failed",
                         "message": f"the sweep exited with status {rc} (its output: {log_path})"})
            said.append(f"{sweep['dtype']}: failed (exit {rc})")
    write_rows(out, rows)
    return "; ".join(said)


if __name__ == "__main__":
    sys.exit(main())
