"""The training family: DDP and FSDP2 scaling of a workload of distbench.workloads.registry (the
synthetic MLP of seed 004, and a GPT-style language model, full or LoRA), each step timed as the full
step (`step`), as the same step without gradient communication (`compute_only`) and as its gradient
communication alone (`comm_alone`), with tokens/s and MFU.

`harness` is the job's command line and main loop, `trainer` the rank's model (DDP or FSDP2) and its
step, `phases` the three phases and their rows, `matmul` the achievable matmul peak (the second MFU
denominator), `inspect` the in-step collectives and compute slowdown on the harness's side; `plan`,
`job`, `contract` and `manifest` as in every family. `analysis/` reads the tables: summary, findings,
plots, MFU peaks, the in-step analysis (instep: the collectives inside the step; instep_summary: the
step split in four parts, from the traces that distbench.traces.split reads; instep_view: how the
report shows them) and the report section. Run alone with `torchrun ... -m distbench.training`; see
`harness`.
"""
