"""distbench: a reproducible benchmark pipeline for distributed training on GPU clusters.

Is this cluster (this node, this NCCL setting, this node count) fast and healthy for training, and if
not, why and where? The package holds the families (comm, training, memory, nodes: each its plan,
harness, analysis and report section), the launcher, the probes and the report; the Snakemake
workflow at the repository root only wires them together (docs/architecture.md).
"""

__version__ = "0.1.0"
