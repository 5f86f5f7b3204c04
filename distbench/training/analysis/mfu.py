"""Peak dense matmul throughput per GPU model and dtype: the denominator of MFU.

MFU = achieved model FLOPs per second on one device / the device's peak for the dtype the model
computes in (bfloat16: the dense tensor-core figure, no 2:4 sparsity; float32: the non-tensor FP32
figure, since torch keeps TF32 off for matmuls by default). A device is matched on the name torch
(or NVML) reports, by the patterns below, in order; the matched row is recorded next to the MFU.
An unknown device gets no peak and an empty MFU with the reason: a guessed peak is worse than none
(pytorch/torchtitan#668: an H100 PCIe/SXM mix-up moved MFU by 30%).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    device: str  # the row's name, recorded with each MFU
    pattern: str  # regular expression searched in the reported device name
    bfloat16_tflops: float | None
    float32_tflops: float | None
    source: str


# Order matters: more specific names first (GH200 before H200, H100 NVL/PCIe before H100 SXM).
PEAKS: tuple[DevicePeak, ...] = (
    DevicePeak("GH200", r"GH200", 989.4, 67.0, "NVIDIA GH200 Grace Hopper Superchip datasheet (H100-class GPU)"),
    DevicePeak("H200 NVL", r"H200 NVL", 835.5, 60.0, "NVIDIA H200 datasheet, H200 NVL column"),
    DevicePeak("H200 SXM", r"H200", 989.4, 67.0, "NVIDIA H200 datasheet, H200 SXM column (BF16 1,979 TFLOPS with sparsity)"),
    DevicePeak("H100 NVL", r"H100 NVL", 835.5, 60.0, "NVIDIA H100 datasheet, H100 NVL column"),
    DevicePeak("H100 PCIe", r"H100 PCIe", 756.5, 51.2, "NVIDIA H100 datasheet, H100 PCIe column"),
    DevicePeak("H100 SXM", r"H100 80GB HBM3|H100 SXM", 989.4, 67.0,
               "NVIDIA H100 datasheet, H100 SXM column (BF16 1,979 TFLOPS with sparsity)"),
    DevicePeak("A100", r"A100", 312.0, 19.5, "NVIDIA A100 datasheet (SXM and PCIe share the figure)"),
    DevicePeak("L40S", r"L40S", 362.05, 91.6, "NVIDIA L40S datasheet (BF16 733 TFLOPS with sparsity)"),
    DevicePeak("A10", r"\bA10\b", 125.0, 31.2, "NVIDIA A10 datasheet"),
    DevicePeak("L4", r"\bL4\b", 121.0, 30.3, "NVIDIA L4 datasheet (BF16 242 TFLOPS with sparsity)"),
)


@dataclass(frozen=True)
class PeakMatch:
    tflops: float | None
    device: str  # the matched row ('' when none)
    note: str  # why there is no peak ('' when there is one)


def peak_for(device_name: str, dtype: str) -> PeakMatch:
    """The peak TFLOP/s of `device_name` computing in `dtype` (float32 or bfloat16)."""
    name = str(device_name or "")
    if not name or name == "cpu":
        return PeakMatch(None, "", f"no peak FLOP/s table for device {name or '(unknown)'!r}: MFU left empty")
    for row in PEAKS:
        if re.search(row.pattern, name):
            value = {"bfloat16": row.bfloat16_tflops, "float32": row.float32_tflops}.get(dtype)
            if value is None:
                return PeakMatch(None, row.device, f"no {dtype} peak for {row.device}: MFU left empty")
            return PeakMatch(value, row.device, "")
    return PeakMatch(None, "", f"device {name!r} is not in distbench.training.analysis.mfu.PEAKS: MFU left empty "
                               "(add its dense peak with a source)")


def mfu(flops_per_sample: float, samples_per_s_per_device: float, device_name: str, dtype: str) -> tuple[float, float, PeakMatch]:
    """(TFLOP/s per device, MFU as a fraction or NaN, the peak match)."""
    tflops = flops_per_sample * samples_per_s_per_device / 1e12
    match = peak_for(device_name, dtype)
    value = tflops / match.tflops if match.tflops and tflops == tflops else float("nan")
    return tflops, value, match
