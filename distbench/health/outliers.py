"""A GPU that is slower than its peers at the same matmul, judged the way DCGM's diagnostic judges
cross-GPU throughput outliers, and the compute processes found on a GPU before the check.

DCGM's Diagnostic plugin (dcgmi diag, level 3) runs the same GEMM on every GPU and treats a GPU whose
GFLOPS fall more than `gflops_tolerance_pcnt` percent below the mean of the GPUs as an error
(NVIDIA/DCGM PluginStrings.h: DIAGNOSTIC_STR_GFLOPS_TOLERANCE_PCNT, "% of mean below
which gflops are treated as errors"; https://docs.nvidia.com/datacenter/dcgm/latest/reference/
diagnostics/plugins/diagnostic.html: "can identify cross-GPU outliers in throughput ... when the
corresponding tolerances are enabled"). DCGM ships that tolerance at 0 (off), so the numbers are
ours: more than 10% under its peers degrades a GPU, more than 25% under fails it. Two differences
from DCGM, both on purpose: the yardstick is the median of the *other* GPUs (with 2 GPUs the mean
of both would hide half of a halving), and the matmul is this health check's 3 s bf16 load, not
DCGM's 3-minute one. A healthy node's spread is in benchmarks/results/ (the gate's GPU evidence).
Torch-free.
"""

from __future__ import annotations

from statistics import median

MATMUL_DEGRADED_UNDER = 0.90  # of the peers' median: more than 10% slower
MATMUL_FAILING_UNDER = 0.75  # more than 25% slower


def matmul_vs_peers(tflops: dict[str, float | None]) -> dict[str, tuple[float | None, float | None]]:
    """{gpu: (its TFLOP/s, its ratio to the median of the other GPUs)}; the ratio is None for a GPU
    with no figure, or with no peer that has one."""
    out = {}
    for gpu, mine in tflops.items():
        peers = [v for g, v in tflops.items() if g != gpu and v]
        out[gpu] = (mine, mine / median(peers) if mine and peers else None)
    return out


def matmul_state(ratio: float | None) -> str:
    """"failing", "degraded" or "ok" for a ratio to the peers' median; "" when there is none."""
    if ratio is None:
        return ""
    if ratio < MATMUL_FAILING_UNDER:
        return "failing"
    return "degraded" if ratio < MATMUL_DEGRADED_UNDER else "ok"
