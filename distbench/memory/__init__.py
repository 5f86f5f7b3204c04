"""The memory family: where a training step's memory goes (parameters, gradients, optimizer state,
activations, the allocator's rest) at each batch size, and the largest batch that fits. Run alone
with `torchrun -m distbench.memory`; see `harness`."""
