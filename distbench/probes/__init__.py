"""Probes of the machine a benchmark ran on: the software and hardware environment (`env`), GPU
topology (`topology`), NVLink/PCIe state from NVML (`nvml`), the NCCL probe (`nccl_probe`: a short
collective run with NCCL_DEBUG=INFO) and NCCL's own log (`nccl_log`, `nccl_comms`, `nccl_algo`).

Each probe returns plain dicts (JSON-ready) and never raises on a host without GPUs;
`python -m distbench.probes --help` exposes them on the command line. The hardware health check is
its own package, distbench.health.
"""
