"""The node gate (operator mode): the operator's one-line answer for one node. One command per node
reads its health, runs a short collective check, holds both against published figures and the node's
own baseline, and says PASS, WARN or FAIL in one line, within a time budget; as a SLURM Prolog= or
HealthCheckProgram=, and with a Prometheus textfile. `cli` is the command, `check` takes the readings
in a process of its own, `supervise` keeps the budget, `rules` judges, `points` reads collective
points and baselines, `slurm` drains and resumes, `prom` writes the textfile, `inputs` checks its flags
and config keys before anything is read.

"Is this node OK?" has three owners: distbench.health reads each GPU of a node and judges the
readings (the gate's health half is that check's items and limits); distbench.nodes finds a slow
node or link across nodes with pair rounds; the gate (here) turns one node's readings and a short
comm check into one line.

It sits in the pipeline's layer (tests/core/test_layout.py): like distbench.pipeline it composes a
family (comm: its job, its plan, its reference table) and the health check, which a family may not
import.
"""
