"""The node-pair schedule (distbench.nodes.schedule), checked on paper up to 1,000 nodes."""

import pytest

from distbench.nodes.schedule import coverage, parse_pairs, random_rounds, round_robin, schedule

SIZES = [2, 3, 4, 5, 7, 8, 9, 16, 31, 64, 65, 128, 257, 999, 1000]


def _check_rounds(n, rounds):
    for r in rounds:
        used = [x for p in r.pairs for x in p] + ([r.bye] if r.bye is not None else [])
        assert len(used) == len(set(used)), f"a node twice in round {r.index}"
        assert all(0 <= x < n for x in used) and all(a < b for a, b in r.pairs)


@pytest.mark.parametrize("n", SIZES)
def test_round_robin_covers_every_pair_exactly_once(n):
    rounds = round_robin(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    _check_rounds(n, rounds)
    pairs = [p for r in rounds for p in r.pairs]
    assert len(pairs) == len(set(pairs)) == n * (n - 1) // 2
    if n % 2:  # one bye per round, every node sits out exactly once
        assert sorted(r.bye for r in rounds) == list(range(n))
    else:
        assert all(r.bye is None and len(r.pairs) == n // 2 for r in rounds)


@pytest.mark.parametrize("n", [4, 9, 64, 1000])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_random_mode_gives_k_distinct_partners_and_its_coverage(n, k):
    rounds = random_rounds(n, k, seed=7)
    assert len(rounds) == min(k, len(round_robin(n)))
    _check_rounds(n, rounds)
    pairs = [p for r in rounds for p in r.pairs]
    assert len(pairs) == len(set(pairs))  # no pair twice
    cov = coverage(n, rounds)
    assert cov.max_partners == len(rounds)
    assert cov.min_partners >= len(rounds) - (n % 2)  # a bye costs a node one partner
    assert cov.pairs_measured == len(pairs)
    if k < n - 1:
        assert cov.share == pytest.approx(len(pairs) / (n * (n - 1) / 2)) and cov.share < 1
    # seeded: the same seed gives the same pairs, another seed others
    assert random_rounds(n, k, seed=7) == rounds
    if n > 4:
        assert random_rounds(n, k, seed=8) != rounds


def test_schedule_modes_and_the_harness_argument():
    assert coverage(8, schedule(8, "all_pairs")).share == 1.0
    assert len(schedule(1000, "random", pairings=3)) == 3
    r = round_robin(4)[0]
    assert parse_pairs(r.text()) == list(r.pairs)
    with pytest.raises(ValueError):
        schedule(4, "bisect")
    assert round_robin(1) == []
