"""Probes of the machine a benchmark ran on: GPU topology, NVLink state, NCCL's own log.

Each probe returns plain dicts (JSON-ready) and never raises on a host without GPUs;
`python -m distbench.probes --help` exposes them on the command line.
"""
