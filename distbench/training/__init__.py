"""The DDP training benchmark family (seed 004): a synthetic MLP trained with
DistributedDataParallel, each step timed as a full DDP step (`ddp`), as the same step without
gradient communication (`compute_only`) and as the step's gradient buckets all-reduced alone
(`comm_alone`). Run alone with `torchrun ... -m distbench.training`; see `harness`.
"""
