"""The node gate (operator mode): one command per node that reads its health, runs a short collective
check, holds both against published figures and the node's own baseline, and says PASS, WARN or FAIL
in one line, within a time budget; as a SLURM Prolog= or HealthCheckProgram=, and with a Prometheus
textfile. `cli` is the command, `check` takes the readings in a process of its own, `supervise` keeps
the budget, `rules` judges, `points` reads collective points and baselines, `slurm` drains and resumes,
`prom` writes distbench.prom.

It sits in the pipeline's layer (tests/test_layout.py): like distbench.pipeline it composes a family
(comm: its job, its plan, its reference table) and the probes (health), which a family may not import.
"""
