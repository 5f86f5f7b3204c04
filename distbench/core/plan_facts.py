"""What one family's plan states for the rest of the run, typed: a part of the config it skips, with a
reason key a reader can act on (SkippedPart), and the plan-wide facts a family states for readers
outside it (PlanFacts: the world sizes and backends it ran, the NCCL probe's workload, the probe's time
limit, the collectives one family wants another to measure standalone).

Readers match reason keys and field names, never the sentences written for people: those may be
reworded freely. Both types read as plain mappings ({"what", "why"}; the facts that were stated), so
the plan's serialized form (what reaches the report through params) is what it was. Torch-free.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

# SkippedPart.reason: what a reader outside the family acts on
NO_GPU_FOR_NCCL = "no_gpu_for_nccl"  # NCCL asked for on a host without a GPU: the NCCL probe says why it has none
FAMILY_DISABLED = "family_disabled"  # the family's `enabled` is false: it plans no job
NAMED = ""  # named for people only: no reader acts on it

REASONS = (NO_GPU_FOR_NCCL, FAMILY_DISABLED, NAMED)


@dataclass(frozen=True, eq=False)
class SkippedPart(Mapping):
    """A part of the config the plan does not run: `what` and `why` for the report's plan section,
    `reason` (one of REASONS) for code. As a mapping (and in equality) it is the {"what", "why"} the
    report shows."""

    what: str
    why: str
    reason: str = NAMED

    def __post_init__(self):
        if self.reason not in REASONS:
            raise ValueError(f"SkippedPart reason {self.reason!r} is none of {REASONS}")

    def __getitem__(self, key: str) -> str:
        if key not in ("what", "why"):
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(("what", "why"))

    def __len__(self) -> int:
        return 2

    def __hash__(self) -> int:
        return hash((self.what, self.why))


def skipped_part(entry: Mapping) -> SkippedPart:
    """A family's skipped entry as a SkippedPart: one already, or a {"what", "why"} named for people."""
    if isinstance(entry, SkippedPart):
        return entry
    return SkippedPart(str(entry["what"]), str(entry["why"]))


def with_reason(parts, reason: str) -> list[SkippedPart]:
    """The skipped parts of this reason key."""
    return [p for p in parts if isinstance(p, SkippedPart) and p.reason == reason]


@dataclass(frozen=True)
class NcclProbeWorkload:
    """What the NCCL probe runs so NCCL logs its choices for the run's own collectives
    (distbench.probes.nccl_probe): ops, sizes in bytes, and the jobs' environment."""

    ops: tuple[str, ...] = ()
    sizes: tuple[int, ...] = ()
    job_env: Mapping[str, str] = field(default_factory=dict)

    def params(self) -> dict:
        """Plain data for the probe rule's params."""
        return {"ops": list(self.ops), "sizes": list(self.sizes), "job_env": dict(self.job_env)}


# PlanFacts' field that carries the collectives one family wants measured standalone, each
# {"backend", "world_size", "op", "dtype"} (the family that measures collectives plans them too)
STANDALONE_COLLECTIVES = "standalone_collectives"


@dataclass(frozen=True, eq=False)
class PlanFacts(Mapping):
    """Plan-wide facts a family states (FamilyPlan.facts), merged into the plan by
    distbench.pipeline.plan.make_plan under these field names. A field left None is not stated; as a
    mapping it holds the stated ones only, so two families may state different fields."""

    # {backend: [world size]} of the jobs that measure collectives, and the backends they run
    world_sizes: Mapping[str, list[int]] | None = None
    backends_run: list[str] | None = None
    # what the NCCL probe runs (it runs at the largest NCCL world size the plan has)
    nccl_probe: NcclProbeWorkload | None = None
    # the probes' and the health check load's time limit, seconds
    probe_timeout_s: int | None = None
    standalone_collectives: list[dict] | None = None

    def _stated(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def __getitem__(self, key: str):
        stated = self._stated()
        if key not in stated:
            raise KeyError(key)
        return stated[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stated())

    def __len__(self) -> int:
        return len(self._stated())
