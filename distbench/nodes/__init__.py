"""Node-pair rounds: which node (or link) of a cluster is slow, found by pairs of nodes measured
against each other across the cluster. `schedule` pairs the nodes (round-robin, random),
`scale` puts rounds, transfers and wall time on paper; a round is one job, one torchrun world over
every node, one process group per pair (`harness`); `analysis/` names the slow node or link.

"Is this node OK?" has three owners: here, the pair rounds that find a slow node across nodes;
distbench.health, each node's per-GPU hardware readings and their rules; distbench.gate, the
operator's one-line answer for one node, built on distbench.health. Torch-free except harness.
"""
