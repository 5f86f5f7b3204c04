"""The hardware health check: per-GPU hardware readings of one node and the rules that judge them
(its own package: one of the three owners below). `readings` reads a node's GPUs from NVML and
the kernel log (items and states), `load` the sampling window under a matmul load, `rules` judges a
counter that moved during the run (DCGM's limits), `table` the CSV contracts, the before/after
differences and the stop decision, `node` one reading per node of a multi-node run (through the
launchers of distbench.launch.cluster), `jobs` the benchmark jobs measured on an affected GPU, and
`section` the report's "Hardware health" section (+ templates/). `python -m distbench.health` reads
this node by hand.

"Is this node OK?" has three answers, each with its own owner:
- distbench.health (here): per-GPU hardware readings and their rules, per node, before and after the
  benchmarks of a run;
- distbench.nodes: node-pair rounds that find a slow node or link across the nodes of a cluster;
- distbench.gate: the operator's one-line answer (PASS, WARN or FAIL) for one node, built on the
  readings and rules here and a short collective check.

Torch-free (the matmul load runs in a process of its own); it sits in the probes' layer
(tests/core/test_layout.py) and reads NVML through distbench.probes.nvml.
"""
