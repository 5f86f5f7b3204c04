"""Node-pair rounds on paper: rounds, transfers and wall time at any node count, for both modes
(torch-free, pandas-free: printed when the Snakefile is parsed, `snakemake -n` included).

A round costs a fixed part (start N torchrun agents, rendezvous, init) plus one pair group per pair
that every rank creates, plus the transfers, which all pairs make at the same time (so they do not
grow with N, on a network with full bisection bandwidth). Transfers follow the alpha-beta model: a
message of s bytes takes alpha + s / beta; per size and timed or warm-up iteration a pair makes a
barrier (2 alpha) before each of its three ops: send a->b and b->a (alpha + s/beta each) and an
all_reduce between its two nodes (2 (alpha + s/beta): reduce-scatter then all-gather).

The fixed part is the measured round wall time (the nodes_round rule's benchmark files under
results/*/benchmarks/nodes/, any run) less the modelled transfers and groups, else DEFAULT_FIXED_S.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path


# Stated defaults: a 200 Gb/s NIC (25 GB/s) per GPU and 15 us across the network for a small message.
ALPHA_US = 15.0
BETA_GBPS = 25.0
GROUP_S = 0.002  # creating one pair's process group on every rank (local synchronization: members only)
# A round's fixed cost without history: start the agents, rendezvous, init, import torch (2x H200
# and 2-core CPU round jobs: 10-20 s; distbench.pipeline.estimate's job figures are of the same order).
DEFAULT_FIXED_S = 15.0
BENCHMARK = "benchmarks/nodes/{backend}/n{nodes}/{mode}/round{round}.tsv"
SCALES = (8, 64, 1000)


def rounds_of(n: int, mode: str, pairings: int) -> int:
    full = n - 1 if n % 2 == 0 else n
    return full if mode == "all_pairs" else min(pairings, full)


def transfers_s(sizes: list[int], warmup: int, iters: int, alpha_us: float = ALPHA_US,
                beta_gbps: float = BETA_GBPS) -> float:
    """One pair's transfers in one round, alpha-beta."""
    per_iter = sum(6 * alpha_us * 1e-6 + 4 * (alpha_us * 1e-6 + s / (beta_gbps * 1e9)) for s in sizes)
    return per_iter * (warmup + iters)


@dataclass(frozen=True)
class RoundCost:
    fixed_s: float
    transfer_s: float
    source: str  # "measured: ..." or "default ..."

    def at(self, n: int) -> float:
        return self.fixed_s + GROUP_S * (n // 2) + self.transfer_s


def measured_rounds(results_dir: str | Path, backend: str) -> list[tuple[int, float]]:
    """(nodes, seconds) of every recorded round of this backend, any run label."""
    out = []
    for tsv in sorted(Path(results_dir).glob(f"*/benchmarks/nodes/{backend}/n*/*/round*.tsv")):
        try:
            lines = tsv.read_text().splitlines()
            col = lines[0].split("\t").index("s")
            secs = [float(line.split("\t")[col]) for line in lines[1:] if line.strip()]
            out.append((int(tsv.parts[-3][1:]), sum(secs) / len(secs)))
        except (OSError, ValueError, IndexError, ZeroDivisionError):
            continue
    return out


def round_cost(results_dir, backend: str, sizes: list[int], warmup: int, iters: int) -> RoundCost:
    transfer = transfers_s(sizes, warmup, iters)
    past = measured_rounds(results_dir, backend)
    if not past:
        return RoundCost(DEFAULT_FIXED_S, transfer, f"default {DEFAULT_FIXED_S:g} s fixed per round")
    wall = statistics.median(s for _, s in past)
    n = statistics.median(n for n, _ in past)
    fixed = max(0.0, wall - transfer - GROUP_S * (n // 2))
    return RoundCost(fixed, transfer, f"measured: median {wall:.1f} s over {len(past)} {backend} round(s) at {n:g} nodes")


@dataclass(frozen=True)
class Scale:
    nodes: int
    mode: str
    rounds: int
    pairs: int  # pair measurements
    messages: int  # timed and warm-up transfers (per rank pair), all rounds
    wall_s: float
    one_at_a_time_s: float  # every pair of the schedule's coverage one after another, in one job


def on_paper(n: int, mode: str, pairings: int, cost: RoundCost, sizes: list[int], warmup: int, iters: int) -> Scale:
    rounds = rounds_of(n, mode, pairings)
    pairs = rounds * (n // 2)
    messages = pairs * len(sizes) * 3 * (warmup + iters)
    return Scale(n, mode, rounds, pairs, messages, rounds * cost.at(n), cost.fixed_s + pairs * cost.transfer_s)


def human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} days"


def message(config: dict, plan, results_dir="results") -> str:
    """What `snakemake -n` prints: this plan's rounds and time, and the same at 8, 64 and 1,000 nodes."""
    from distbench.nodes.plan import sizes_of

    cfg = config["nodes"]
    sizes = sizes_of(config)
    cost = round_cost(results_dir, plan.backend, sizes, cfg["warmup"], cfg["iters"])
    here = on_paper(plan.nodes, plan.mode, cfg["random_pairings"], cost, sizes, cfg["warmup"], cfg["iters"])
    lines = [f"distbench: node rounds: {plan.describe()}, about {human(here.wall_s)} "
             f"({cost.at(plan.nodes):.1f} s per round; {cost.source})"]
    for mode in ("all_pairs", "random"):
        cells = []
        for n in SCALES:
            s = on_paper(n, mode, cfg["random_pairings"], cost, sizes, cfg["warmup"], cfg["iters"])
            cells.append(f"{n}: {s.rounds} rounds, {s.pairs:,} pairs, {human(s.wall_s)}")
        label = mode if mode == "all_pairs" else f"random ({cfg['random_pairings']} partners)"
        lines.append(f"distbench: node rounds on paper, {label}: " + "; ".join(cells))
    return "\n".join(lines)


def readme_table(cost: RoundCost, sizes: list[int], warmup: int, iters: int, pairings: int = 3) -> str:
    """The README's table (Markdown)."""
    rows = ["| nodes | mode | rounds | pair measurements | transfers | wall time | one pair at a time |",
            "|---:|---|---:|---:|---:|---:|---:|"]
    for n in SCALES:
        for mode in ("all_pairs", "random"):
            s = on_paper(n, mode, pairings, cost, sizes, warmup, iters)
            rows.append(f"| {n:,} | {mode if mode == 'all_pairs' else f'random ({pairings})'} | {s.rounds:,} | "
                        f"{s.pairs:,} | {s.messages:,} | {human(s.wall_s)} | {human(s.one_at_a_time_s)} |")
    return "\n".join(rows)




def announce(config: dict, plan: dict) -> str | None:
    """Before the first job (the manifest's `announce`): this plan's rounds and their time, on paper at
    larger node counts too; None when the rounds do not run."""
    rounds = plan["nodes_plan"]
    return message(config, rounds) if rounds.backend else None
