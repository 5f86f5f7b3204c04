"""A torchrun entry point whose all_reduce uses MAX instead of SUM: the harness must flag it."""
import sys
from dataclasses import replace

import torch.distributed as dist

from distbench.comm import main as cli, ops

ops.TORCH_OPS["all_reduce"] = replace(ops.TORCH_OPS["all_reduce"], run=lambda c, b: dist.all_reduce(b.send, op=dist.ReduceOp.MAX))
sys.exit(cli.main(sys.argv[1:]))
