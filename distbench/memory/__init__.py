"""The memory family: where a training step's memory goes (parameters, gradients, optimizer state,
activations, the allocator's rest) at each batch size, and the largest batch at which a real training
step runs. `accounting` measures one step's memory, `search` is the largest-batch search's arithmetic
(torch-free), `largest` runs it and its confirm on the ranks, `rows` makes the CSV's rows; `plan`,
`job`, `contract`, `harness` and `analysis/` as in every family. Run alone with
`torchrun -m distbench.memory`; see `harness`."""
