"""The comm family: collectives over NCCL and Gloo, nccl-tests style.

`spec` says what each collective is (torch-free), `ops` how torch runs it, `harness` times and
checks one job's points, `cli` is its command line and writes the job's CSVs, `job` is what the
launcher needs to run it. Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend gloo --out comm.csv
"""
