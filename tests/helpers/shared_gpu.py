"""A torchrun entry point that runs a family's module (argv[1]) with every rank reporting the same
GPU, as when CUDA_VISIBLE_DEVICES hides all but one GPU: the job must stop with the fix written out."""
import runpy
import sys

from distbench.launch import placement

_record = placement.rank_record


def same_gpu(rank, local_rank, device):
    return {**_record(rank, local_rank, device), "uuid": "GPU-shared-0000"}


placement.rank_record = same_gpu
module = sys.argv.pop(1)
runpy.run_module(module, run_name="__main__", alter_sys=True)
