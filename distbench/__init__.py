"""distbench: reproducible benchmarks of distributed-training communication.

The package holds the engine (collective ops, timing harness, probes, aggregation, plots, report);
the Snakemake workflow at the repository root only wires these together.
"""

__version__ = "0.1.0"
