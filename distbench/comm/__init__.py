"""The comm family: collectives over NCCL and Gloo, nccl-tests style.

`ops` is the registry (one small spec per collective), `harness` times, checks and writes one job's
CSVs, `job` is what the launcher needs to run it. Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend gloo --out comm.csv
"""
