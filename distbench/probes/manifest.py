"""The probes, as the workflow, the estimate and the report see them (distbench.core.manifest). The
NCCL probe is a job of its own (one per run, no wildcards of a job). The hardware health check is
its own package with its own manifest (distbench.health.manifest)."""

from distbench.core.manifest import PackageManifest, register
from distbench.core.manifest import EstimateDefault

MANIFEST = register(PackageManifest(
    name="probes",
    order=70,
    job_rule="probe_nccl",
    job_dir="probe",
    job_files=("nccl.json",),
    benchmark="benchmarks/probe/{backend}/ws{world_size}.tsv",
    estimated=True,
    cached=("probe/env.json", "probe/topology.json", "probe/nccl.json"),
    # Default wall time of the NCCL probe before any was recorded (distbench.pipeline.estimate): 7.8 / 8.0 s
    # on 2x H200 with the run's shared bytecode cache (benchmarks/results/quick-h200x2-2026-11-29,
    # c-all-cuts-*/jobs.csv; 10.8 s before it); on a host without GPUs it only writes why it did not run
    # (0.1 s).
    estimate_defaults={
        ("gpu", "nccl"): EstimateDefault(8.0, source="2x H200: 7.8-8.0 s"),
        ("cpu", "nccl"): EstimateDefault(0.2, source="no GPU: the probe writes why it did not run"),
    },
))
