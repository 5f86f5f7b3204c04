#!/usr/bin/env bash
# Run a torch.distributed program (env:// rendezvous) under MPICH's mpiexec instead of torchrun:
# hydra's PMI_RANK / PMI_SIZE / MPI_LOCALRANKID become torchrun's RANK / WORLD_SIZE / LOCAL_RANK.
#   mpiexec -n 2 bash pmi_as_torchrun.sh python3 -m distbench.comm --backend nccl ...
export RANK=$PMI_RANK WORLD_SIZE=$PMI_SIZE LOCAL_RANK=${MPI_LOCALRANKID:-$PMI_RANK}
export LOCAL_WORLD_SIZE=${MPI_LOCALNRANKS:-$PMI_SIZE} MASTER_ADDR=${MASTER_ADDR:-127.0.0.1} MASTER_PORT=${MASTER_PORT:-29544}
exec "$@"
