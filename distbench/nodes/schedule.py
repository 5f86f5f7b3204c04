"""Which nodes measure together in each round (torch-free; the plan and the estimate use it).

All pairs (round-robin, the circle method): node 0 stays put and the others rotate one place per
round, so N nodes (N even) meet every other node exactly once in N-1 rounds of N/2 pairs; for N odd a
phantom node is added and whoever meets it sits the round out (a bye): N rounds of (N-1)/2 pairs.
No node appears twice in a round, so all of a round's pairs can measure at the same time.

Random (the fast mode): the nodes are relabelled by a seeded permutation and the first k rounds of
that round-robin are kept, so each node gets k distinct partners (k-1 in the round where it has a
bye, N odd) and no pair repeats; coverage is k / (N-1) of all pairs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MODES = ("all_pairs", "random")

Pair = tuple[int, int]


@dataclass(frozen=True)
class Round:
    index: int
    pairs: tuple[Pair, ...]  # (a, b) with a < b, node indices
    bye: int | None = None  # the node sitting this round out (N odd)

    def text(self) -> str:
        """'0-3,1-2': the round's pairs as the harness takes them (--pairs)."""
        return ",".join(f"{a}-{b}" for a, b in self.pairs)


def round_robin(n: int) -> list[Round]:
    """Every pair of n nodes exactly once: n-1 rounds (n even) or n rounds with one bye each (n odd)."""
    if n < 2:
        return []
    m = n + (n % 2)  # with a phantom node m-1 = n when n is odd
    others = list(range(1, m))
    rounds = []
    for r in range(m - 1):
        ring = [0, *others]
        pairs, bye = [], None
        for i in range(m // 2):
            a, b = ring[i], ring[m - 1 - i]
            if n % 2 and n in (a, b):  # the phantom: its partner sits out
                bye = b if a == n else a
                continue
            pairs.append((min(a, b), max(a, b)))
        rounds.append(Round(r, tuple(sorted(pairs)), bye))
        others = [others[-1], *others[:-1]]  # rotate all but node 0 by one place
    return rounds


def random_rounds(n: int, pairings: int, seed: int = 0) -> list[Round]:
    """k = pairings rounds of the round-robin under a seeded relabelling of the nodes (all pairs when
    k >= the round-robin's rounds)."""
    full = round_robin(n)
    if pairings >= len(full):
        return full
    perm = list(range(n))
    random.Random(seed).shuffle(perm)
    out = []
    for r in full[:pairings]:
        pairs = tuple(sorted((min(perm[a], perm[b]), max(perm[a], perm[b])) for a, b in r.pairs))
        out.append(Round(r.index, pairs, None if r.bye is None else perm[r.bye]))
    return out


def schedule(n: int, mode: str, pairings: int = 3, seed: int = 0) -> list[Round]:
    if mode == "all_pairs":
        return round_robin(n)
    if mode == "random":
        return random_rounds(n, pairings, seed)
    raise ValueError(f"mode {mode!r}: allowed {', '.join(MODES)}")


@dataclass(frozen=True)
class Coverage:
    nodes: int
    rounds: int
    pairs_measured: int  # distinct pairs
    pairs_total: int  # n(n-1)/2
    min_partners: int  # the fewest distinct partners any node has
    max_partners: int

    @property
    def share(self) -> float:
        return self.pairs_measured / self.pairs_total if self.pairs_total else 0.0


def coverage(n: int, rounds: list[Round]) -> Coverage:
    seen: set[Pair] = set()
    partners: list[set[int]] = [set() for _ in range(n)]
    for r in rounds:
        for a, b in r.pairs:
            seen.add((a, b))
            partners[a].add(b)
            partners[b].add(a)
    counts = [len(p) for p in partners] or [0]
    return Coverage(n, len(rounds), len(seen), n * (n - 1) // 2, min(counts), max(counts))


def parse_pairs(text: str) -> list[Pair]:
    """'0-3,1-2' -> [(0, 3), (1, 2)]."""
    out = []
    for item in filter(None, text.split(",")):
        a, b = item.split("-")
        out.append((int(a), int(b)))
    return out
