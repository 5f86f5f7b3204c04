"""The comm family: collectives over NCCL and Gloo, nccl-tests style, each result checked exactly.

What each collective is (its bus factor, torch-free) is distbench.core.ops_spec; `ops` is how torch
runs each one, `harness` times and checks one job's points, `main` is its command line
(`python -m distbench.comm`) and writes the job's CSVs, `pairs` the GPU-pair matrix, `traffic` the
all_to_all_v traffic matrices, `plan` its jobs, `job` what the launcher needs to run one, `contract`
its CSV columns, `analysis/` its summary, findings, plots and report section. Run alone:
    torchrun --standalone --nproc_per_node=2 -m distbench.comm --backend gloo --out comm.csv
"""
