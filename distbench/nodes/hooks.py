"""What the pipeline asks of the nodes family besides its plan (its manifest names the function): what
its rounds put on the host that runs them. The rounds place themselves (one agent per node, not by
world size), so the family says where they run. Torch-free.
"""

from __future__ import annotations

from distbench.core.manifest import HostNeed
from distbench.core.units import human_bytes
from distbench.nodes.plan import nodes_layout, sizes_of

PEAK = 2.0  # a node round: one float32 buffer, and Gloo's all_reduce a copy of it


def host_placement(config: dict, plan: dict, launcher: str) -> tuple[list[HostNeed], list[str]]:
    """The rounds' ranks, agents and buffers on this host (the manifest's host_placement): every node
    of a simulated round, or of a round through the local launcher; none under srun or ssh. Read off
    the nodes' layout, never their schedule (4,096 nodes would take seconds)."""
    rounds = nodes_layout(config, plan["gpus"])
    if not rounds.backend or not (rounds.simulated or launcher == "local"):
        return [], []
    problems = []
    if rounds.backend == "nccl" and not rounds.simulated:
        problems.append(f"node rounds over {rounds.nodes} nodes through the local launcher under NCCL: every node's "
                        "ranks would take this host's GPUs from 0. What fits: nodes.simulate (each simulated node "
                        "its own GPUs), or cluster.launcher ssh or srun")
    largest = max(sizes_of(config))
    need = HostNeed(PEAK * largest, f"{human_bytes(largest)} (nodes.sizes)", lambda cap: PEAK * min(cap, largest),
                    largest, keys="nodes.sizes", gpu_keys="nodes.sizes", backend=rounds.backend,
                    world_size=rounds.world_size, ranks=rounds.world_size, agents=rounds.nodes,
                    what="node rounds",
                    spread="nodes.simulate, or cluster.nodes on the local launcher")
    return [need], problems
