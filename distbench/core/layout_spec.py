"""What each parallel layout is, written once and torch-free: one `LayoutSpec` per layout, as
`distbench.core.ops_spec` keeps one `OpSpec` per collective. It sits in core because both the ranks'
side and the table readers branch on a layout, and the readers may not import torch or the workloads.

Every place that decides something by layout reads it from here: the plan (which layouts run at one
rank, the group-size key a job's params carry, the collectives its inspected jobs want measured
standalone), the harness's phases (whether the layout has a compute-only step and a standalone replay
of its collectives, whether DDP wraps the model), the rows' group-size columns, and the report (a
layout's title, with its group size; the sentence names of its collectives; which layout it equals
when its group spans every rank). The torch side (building the mesh, sharding the model) lives in
`distbench.workloads.layouts`, looked up by the spec's name: the only other module that names a layout.

Adding a layout
---------------
1. one `LayoutSpec(...)` entry in `SPECS` below (its place in the tuple is its place in the report);
2. its torch side: a function in `SHARD` of `distbench.workloads.layouts` (and, for a layout with a
   group size, its check in `CHECKS` there).
docs/architecture.md has this recipe; tests/core/test_layout_spec.py checks that no other module
compares layout names, and tests/core/test_recipe_layout.py follows the recipe on a copy of the package.
"""

from __future__ import annotations

from dataclasses import dataclass

from distbench.core.ops_spec import SPECS as OP_SPECS

# What a mesh dim does with the model over its ranks
REPLICATE = "replicate"  # whole copies (or whole copies of shards): gradients all-reduced across
SHARD = "shard"  # FSDP2's shards: parameters all-gathered, gradients reduce-scattered
TENSOR = "tensor"  # tensor parallel: each rank holds a slice of every projection; activations all-reduced
ROLES = (REPLICATE, SHARD, TENSOR)

PARAM_DTYPE = "param"  # a collective in the model's dtype (bfloat16 for a bfloat16 model, else float32)

# How the collectives-alone phase replays a layout's collectives (None on the spec: not replayed alone)
REPLAY_BUCKETS = "buckets"  # DDP's gradient buckets, all-reduced back to back
REPLAY_FSDP_GROUPS = "fsdp_groups"  # FSDP's per-group all-gathers and reduce-scatters over every rank
REPLAYS = (REPLAY_BUCKETS, REPLAY_FSDP_GROUPS)


@dataclass(frozen=True)
class MeshDim:
    name: str  # the DeviceMesh dim's name
    role: str  # REPLICATE, SHARD or TENSOR


@dataclass(frozen=True)
class Collective:
    op: str  # an OpSpec name
    dtype: str  # PARAM_DTYPE or "float32"
    over: str  # the MeshDim whose groups run it


@dataclass(frozen=True)
class LayoutSpec:
    name: str  # as the config, the harness's --strategy and the tables spell it
    title: str  # as the report names it: "FSDP2 full shard"
    short: str  # in a sentence, before "'s": "FSDP's 64 MiB all_gathers"
    # Outermost first. One dim spans every rank; of two, the inner one has `group` ranks and the outer
    # world size / group (the mesh torch builds: init_device_mesh(device, (world // group, group))).
    mesh: tuple[MeshDim, ...]
    collectives: tuple[Collective, ...]  # what one step issues, on which dim's groups
    sharded: bool  # FSDP2 holds the parameters (False: DDP wraps the model, replicas on every rank)
    # The one key naming the inner dim's ranks: config key, harness flag (--shard-size) and table column
    # alike. None for a 1D layout.
    group: str | None = None
    group_title: str = ""  # the title with the group size, "{}" for it: "HSDP (shard {})"
    # Why no step of the layout runs without communication (None: it has a compute-only step: under
    # DDP's no_sync, or with FSDP's collectives turned off)
    no_compute_only: str | None = None
    replay: str | None = None  # REPLAY_BUCKETS, REPLAY_FSDP_GROUPS, or None: not replayed alone
    baseline: bool = False  # plain DDP: every layout's 1-rank baseline, config label 'plain'
    # The layout this one is when its group spans every rank (HSDP with shard_size = world size shards
    # as FSDP2 full shard does, with one replica): the report says the two differ by noise only
    full_group_is: str | None = None

    @property
    def other_words(self) -> str:
        """What a step's time that is neither compute nor the collectives holds under this layout, in a
        sentence: 'host-bound or idle time, FSDP bookkeeping'."""
        return f"host-bound or idle time, {self.short} bookkeeping"

    @property
    def collectives_words(self) -> str:
        """The collectives one step issues, in a sentence: 'the all-reduce' (DDP), 'the all-gathers and
        reduce-scatters' (FSDP2); the form the collectives-alone phase replays."""
        ops = [c.op.replace("_", "-") for c in self.collectives]
        ops = list(dict.fromkeys(ops))
        if len(ops) == 1:
            return f"the {ops[0]}"
        return "the " + ", ".join(f"{o}s" for o in ops[:-1]) + f" and {ops[-1]}s"

    @property
    def has_compute_only(self) -> bool:
        return self.no_compute_only is None

    @property
    def min_world_size(self) -> int:
        """A 2D layout needs a second dim: at least 2 ranks (plain DDP on one rank is its baseline)."""
        return 2 if len(self.mesh) > 1 else 1

    @property
    def tensor_parallel(self) -> bool:
        """Its tensor-parallel ranks share one batch (the global batch stays batch_size x world size),
        and its all-reduces are activations', not gradient buckets."""
        return any(d.role == TENSOR for d in self.mesh)

    @property
    def replicas(self) -> bool:
        """Every rank holds whole parameters after a step (DDP): their equality is checkable."""
        return not self.sharded

    @property
    def skips_a_phase(self) -> bool:
        """A timed phase (compute-only, collectives alone) this layout cannot have: its rows say
        skipped, and the job stays ok when its real step ran."""
        return not self.has_compute_only or self.replay is None

    def degrees(self, world_size: int, group: int | None = None) -> dict[str, int]:
        """Ranks per group of each mesh dim: {"replicate": 2, "shard": 4} for HSDP at 8 ranks, shard 4.
        A 2D layout without its group size takes every rank into the inner dim."""
        if len(self.mesh) == 1:
            return {self.mesh[0].name: world_size}
        outer, inner = self.mesh
        g = int(group or world_size)
        return {outer.name: world_size // g, inner.name: g}

    def collectives_at(self, world_size: int, group: int | None = None,
                       dtype: str = "float32") -> list[tuple[str, str, int]]:
        """(op, dtype, ranks) of each collective a step issues at this size, `dtype` for PARAM_DTYPE;
        none on a dim of one rank (no communicator runs it)."""
        ranks = self.degrees(world_size, group)
        return [(c.op, dtype if c.dtype == PARAM_DTYPE else c.dtype, ranks[c.over])
                for c in self.collectives if ranks[c.over] > 1]

    def titled(self, group: float | None = None) -> str:
        """'HSDP (shard 2)' with a group size, else the title."""
        if self.group_title and group is not None and group == group:
            return self.group_title.format(int(group))
        return self.title


def _dim(name: str, role: str | None = None) -> MeshDim:
    return MeshDim(name, role or name)


def _registry(*specs: LayoutSpec) -> dict[str, LayoutSpec]:
    """The specs by name; a duplicate name, an op no OpSpec has, a collective on a dim the mesh lacks or
    a 2D mesh without its group key is refused here, at import."""
    out: dict[str, LayoutSpec] = {}
    for s in specs:
        if s.name in out:
            raise ValueError(f"layout {s.name!r} is registered twice")
        dims = [d.name for d in s.mesh]
        if not 1 <= len(dims) <= 2 or len(set(dims)) != len(dims) or any(d.role not in ROLES for d in s.mesh):
            raise ValueError(f"layout {s.name!r}: a mesh of one or two distinct dims, roles {ROLES}")
        if (len(dims) == 2) != (s.group is not None):
            raise ValueError(f"layout {s.name!r}: a 2D mesh names its inner dim's size (group), a 1D one does not")
        for c in s.collectives:
            if c.op not in OP_SPECS or c.over not in dims:
                raise ValueError(f"layout {s.name!r}: collective {c} is not an op of ops_spec over a dim of {dims}")
        if s.replay is not None and s.replay not in REPLAYS:
            raise ValueError(f"layout {s.name!r}: replay {s.replay!r} is none of {REPLAYS}")
        if s.full_group_is is not None and s.full_group_is not in out:
            raise ValueError(f"layout {s.name!r}: full_group_is {s.full_group_is!r} is not registered before it")
        out[s.name] = s
    if sum(s.baseline for s in out.values()) != 1:
        raise ValueError("exactly one layout is the baseline")
    return out


_FSDP = (Collective("all_gather", PARAM_DTYPE, "shard"), Collective("reduce_scatter", "float32", "shard"))

SPECS: dict[str, LayoutSpec] = _registry(
    LayoutSpec("ddp", "DDP", "DDP", (_dim(REPLICATE),), (Collective("all_reduce", "float32", REPLICATE),),
               sharded=False, replay=REPLAY_BUCKETS, baseline=True),
    LayoutSpec("fsdp", "FSDP2 full shard", "FSDP", (_dim(SHARD),), _FSDP, sharded=True, replay=REPLAY_FSDP_GROUPS),
    # FSDP2 over a (replicate, shard) DeviceMesh: shard within groups of shard_size ranks, replicate across
    LayoutSpec("hsdp", "HSDP", "HSDP", (_dim(REPLICATE), _dim(SHARD)),
               _FSDP + (Collective("all_reduce", "float32", REPLICATE),), sharded=True, group="shard_size",
               group_title="HSDP (shard {})", full_group_is="fsdp"),
    # tensor parallel inside groups of tp_size ranks (torchtitan's plan), FSDP2 across them
    LayoutSpec("fsdp_tp", "2D (FSDP2 + TP)", "2D (FSDP2 + TP)", (_dim("dp", SHARD), _dim("tp", TENSOR)),
               (Collective("all_gather", PARAM_DTYPE, "dp"), Collective("reduce_scatter", "float32", "dp"),
                Collective("all_reduce", PARAM_DTYPE, "tp"), Collective("all_reduce", "float32", "tp")),
               sharded=True, group="tp_size", group_title="2D (TP {})",
               no_compute_only="tensor parallel's all-reduces run inside forward and backward"),
)
LAYOUTS: tuple[str, ...] = tuple(SPECS)  # every layout, in the report's order
BASELINE: str = next(s.name for s in SPECS.values() if s.baseline)
GROUP_KEYS: tuple[str, ...] = tuple(dict.fromkeys(s.group for s in SPECS.values() if s.group))


def layout(name: str) -> LayoutSpec:
    """The spec of a layout the caller knows is registered (a ValueError names the registered ones)."""
    try:
        return SPECS[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r}: registered {list(LAYOUTS)}") from None


def layout_of(value) -> LayoutSpec | None:
    """The spec of a table's strategy cell: the baseline for an empty one (rows from before the column),
    None for a name no spec has."""
    if value is None or value != value or str(value) in ("", "nan", "None"):
        return SPECS[BASELINE]
    return SPECS.get(str(value))


def layout_or_baseline(value) -> LayoutSpec:
    """layout_of, with the baseline's spec for a name no spec has: whose words (collectives_words,
    other_words) a sentence about an unknown layout's row falls back to."""
    return layout_of(value) or SPECS[BASELINE]


def layout_title(value, group: float | None = None) -> str:
    """A table's strategy cell as the report names it ('HSDP (shard 2)'); an unknown name as it is."""
    spec = layout_of(value)
    return spec.titled(group) if spec is not None else str(value)
