# Sourced by the GPU run scripts from the repository root (they cd there first), on a lent machine
# (device tool, carry .whl) or a GPU host of your own: NVLink multicast off (the lent machines need
# it; config.yaml's job_env no longer sets it, and every job inherits these exports), the wheelhouse on PYTHONPATH (wheels.sh), $OUT made, and the
# machine described (GPUs, topology, torch and NCCL versions) in $OUT; $R is the run's results/<label>.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
source benchmarks/runs/wheels.sh  # Snakemake from .whl/ where carried; distbench from this checkout
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" | tee "$OUT/versions.txt"
export DISTBENCH_RUN_LABEL="${DISTBENCH_RUN_LABEL:-$(python3 -c 'from distbench.core.run_label import default_label; print(default_label())')}"
R="results/$DISTBENCH_RUN_LABEL"  # where the pipeline writes (results/<run label>/)
