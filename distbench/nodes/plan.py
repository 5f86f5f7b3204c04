"""The nodes family's rounds and their params (torch-free: the Snakefile plans without torch).

Nodes are cluster.nodes (hosts through cluster.launcher: srun, ssh, local), or nodes.simulate nodes
on this host (one torchrun agent each through the local launcher; Gloo on CPU, or gpus / simulate
GPUs each under NCCL). Each round of the schedule (distbench.nodes.schedule) is one job: one
torchrun world over all nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from distbench.core.manifest import FamilyPlan
from distbench.core.sizes import parse_size
from distbench.launch.cluster import Layout, slurm_resources
from distbench.nodes.schedule import Round, coverage, schedule


@dataclass(frozen=True)
class NodesPlan:
    backend: str | None  # None: the family does not run (why says why)
    nodes: int = 0
    ranks_per_node: int = 0
    simulated: bool = False
    mode: str = "all_pairs"
    random_pairings: int = 0
    seed: int = 0
    why: str = ""

    @cached_property
    def rounds(self) -> tuple[Round, ...]:
        """The schedule, made when first asked for: a plan the host-fit check refuses (4,096 nodes: 8.4
        million pairs, ~17 s) never pays for it."""
        if not self.backend:
            return ()
        return tuple(schedule(self.nodes, self.mode, self.random_pairings, self.seed))

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    def wildcards(self, r: Round) -> dict:
        return {"backend": self.backend, "nodes": self.nodes, "mode": self.mode, "round": r.index}

    def describe(self) -> str:
        where = "simulated on this host" if self.simulated else "cluster.nodes"
        cov = coverage(self.nodes, list(self.rounds))
        return (f"{self.nodes} nodes ({where}) x {self.ranks_per_node} rank(s), {self.backend}, {self.mode}: "
                f"{len(self.rounds)} rounds, {cov.pairs_measured} of {cov.pairs_total} pairs")


@dataclass(frozen=True)
class RoundJob:
    """One round as a job of the plan (its wildcards, backend and world size)."""

    plan: NodesPlan
    round: Round

    @property
    def wildcards(self) -> dict:
        return self.plan.wildcards(self.round)

    @property
    def backend(self) -> str:
        return self.plan.backend

    @property
    def world_size(self) -> int:
        return self.plan.world_size


class RoundJobs(Sequence):
    """The rounds as the plan's jobs, their schedule made when first asked for (NodesPlan.rounds): the
    host-fit check refuses a 4,096-node plan from its layout, without paying ~17 s for the schedule."""

    def __init__(self, plan: NodesPlan):
        self.plan = plan

    def __len__(self) -> int:
        return len(self.plan.rounds)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [RoundJob(self.plan, r) for r in self.plan.rounds[i]]
        return RoundJob(self.plan, self.plan.rounds[i])


def plan_family(config: dict, gpus: int, gpus_source: str) -> FamilyPlan:  # noqa: ARG001 - the manifest's hook
    """The node rounds' plan (the manifest's `plan`): a job per round, and the rounds' plan itself as a
    fact (its announce and placement hooks read it). Its jobs span plan.nodes nodes whatever their world size."""
    rounds = nodes_plan(config, gpus)
    return FamilyPlan(RoundJobs(rounds), (), {"nodes_plan": rounds},
                      hosts_spanned=rounds.nodes if rounds.backend and not rounds.simulated else 0)


def nodes_plan(config: dict, gpus: int) -> NodesPlan:
    layout = nodes_layout(config, gpus)
    if not layout.backend:
        return layout
    cfg = config["nodes"]
    return NodesPlan(layout.backend, layout.nodes, layout.ranks_per_node, layout.simulated, cfg["mode"],
                     cfg["random_pairings"], cfg["seed"])


def nodes_layout(config: dict, gpus: int) -> NodesPlan:
    """The rounds' backend, nodes and ranks per node, without the schedule (its rounds): what the
    host-fit check needs (distbench.pipeline.host_fit), in no time whatever cluster.nodes says."""
    cfg = config["nodes"]
    if not cfg["enabled"]:
        return NodesPlan(None, why="nodes.enabled is false")
    simulated = cfg["simulate"] > 0
    n = cfg["simulate"] if simulated else config["cluster"]["nodes"]
    if n < 2:
        return NodesPlan(None, why="node-pair rounds need at least 2 nodes: set cluster.nodes, or nodes.simulate "
                                   "for nodes on this host")
    if "nccl" in config["backends"] and gpus > 0:
        backend = "nccl"
        per_node = gpus // n if simulated else gpus
        if per_node < 1:
            return NodesPlan(None, why=f"{n} simulated NCCL nodes need at least {n} GPUs (gpus={gpus})")
    elif "gloo" in config["backends"]:
        backend, per_node = "gloo", 1
    else:
        return NodesPlan(None, why=f"backend nccl needs a GPU and gloo is not in backends (gpus={gpus})")
    if cfg["ranks_per_node"] != "auto":
        if backend == "nccl" and int(cfg["ranks_per_node"]) > per_node:
            return NodesPlan(None, why=f"nodes.ranks_per_node {cfg['ranks_per_node']} is above the {per_node} GPU(s) of a node")
        per_node = int(cfg["ranks_per_node"])
    return NodesPlan(backend, n, per_node, simulated, cfg["mode"])


def sizes_of(config: dict) -> list[int]:
    return sorted({parse_size(s) for s in config["nodes"]["sizes"]})


def round_params(config: dict, plan: NodesPlan, r: Round) -> dict:
    """The values that shape one round's measurements (a change reruns the round)."""
    cfg = config["nodes"]
    return {"round": r.index, "pairs": r.text(), "bye": r.bye, "nodes": plan.nodes, "simulated": plan.simulated,
            "sizes": sizes_of(config), "warmup": cfg["warmup"], "iters": cfg["iters"],
            "op_timeout_s": cfg["op_timeout_s"], "job_timeout_s": cfg["job_timeout_s"],
            "job_env": {k: str(v) for k, v in config["job_env"].items()}}


def round_launch(config: dict, plan: NodesPlan) -> dict:
    """distbench.launch.cluster.Launch's params: one agent per node; simulated nodes through the local
    launcher (every agent on this host over loopback)."""
    cl = config["cluster"]
    return {"nodes": plan.nodes, "ranks_per_node": plan.ranks_per_node,
            "launcher": "local" if plan.simulated else cl["launcher"], "hosts": list(cl["hosts"]),
            "rdzv_port": cl["rdzv_port"]}


def round_resources(config: dict, plan: NodesPlan) -> dict:
    """A round's resources for a cluster executor: every node, exclusively (simulated: one node)."""
    layout = Layout(1, plan.world_size) if plan.simulated else Layout(plan.nodes, plan.ranks_per_node)
    res = slurm_resources(layout, plan.backend, config["nodes"]["job_timeout_s"], config["cluster"])
    return {"tasks": layout.nodes, "tasks_per_gpu": 0, "gres": "", **res}


def rule_params(config: dict, plan: dict, job: RoundJob) -> dict:
    """A round's parameters (the manifest's job_params): its pairs, sizes and limits."""
    return round_params(config, job.plan, job.round)


def rule_launch(config: dict, plan: dict, job: RoundJob) -> dict:  # noqa: ARG001 - the manifest's hook
    return round_launch(config, job.plan)


def rule_resources(config: dict, plan: dict, job: RoundJob) -> dict:  # noqa: ARG001 - the manifest's hook
    return round_resources(config, job.plan)
