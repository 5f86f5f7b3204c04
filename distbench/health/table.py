"""The health check's tables: health_before.csv / health_after.csv (one row per GPU x item, the
HEALTH contract), health_diff.csv (the counters that can move during a run, after - before: the
HEALTH_DIFF contract), the decision to stop before the benchmarks (health.stop_on_failing), and the
comparison of several nodes' readings (driver and CUDA versions equal). Torch-free; the readings
themselves are distbench.health.readings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

import pandas as pd

from distbench.core.contract import Column, Contract
from distbench.core.io import atomic_write_csv
from distbench.core.tables import read_job_csv
from distbench.health.readings import DEGRADED, FAILING, NODE, NOT_AVAILABLE, OK, STATES, HealthRow
from distbench.health.rules import RULES, judge

HEALTH = Contract(
    "health",
    (Column("host", "string", "the node the reading was taken on"),
     Column("gpu", "string", "NVML GPU index; `node` for a per-node item; `all` when no GPU could be read"),
     Column("item", "string", "what was checked (distbench.health.readings: GPU_ITEMS, NODE_ITEMS, "
                              "driver_version_across_nodes / cuda_driver_version_across_nodes, node_read "
                              "for a node whose reading did not come back and same_machine for nodes that "
                              "answered from one machine: distbench.health.node)"),
     Column("value", "string", "the reading (units in the item's name: _c, _w, _mhz, _ms; counts otherwise)"),
     Column("expected", "string", "the limit or expected value it is held against (empty: none)"),
     Column("state", "string", "ok, degraded, failing or not available here"),
     Column("reason", "string", "why the state (what NVML did not give, when not available)"),
     Column("uuid", "string", "the GPU's UUID as NVML gives it (empty: a per-node item, or NVML gave none)"),
     Column("pci_bus_id", "string",
            "the GPU's PCI bus id as NVML gives it, domain:bus:device.function (empty: as uuid)"),
     Column("read_at", "string", "when the node's counters were read, ISO 8601 UTC (empty: not read); the "
                                 "time base of a counter's rate between the two readings (health_diff.csv)")),
    allowed=(("state", STATES),),
    filled_when_missing=(("read_at", ""),),  # files from before the readings carried their time
)

# The counters that can move during a run, and how a move is judged (DCGM's rule where it has one,
# each cited there): distbench.health.rules.RULES.
COUNTERS = tuple(RULES)

HEALTH_DIFF = Contract(
    "health_diff",
    (Column("host", "string", "the node"),
     Column("gpu", "string", "NVML GPU index, or `node`"),
     Column("item", "string", "a counter that can move during a run (distbench.health.table.COUNTERS)"),
     Column("before", "float64", "its value before the benchmarks (empty: not available)"),
     Column("after", "float64", "its value after them"),
     Column("delta", "float64", "after - before"),
     Column("interval_s", "float64", "wall time between the two readings (their read_at), s (empty: a reading "
                                     "has no time)"),
     Column("rate_per_s", "float64", "delta / interval_s for a counter judged as a rate (NVLink CRC errors, "
                                     "against DCGM's 100/s); empty for the counters judged as counts"),
     Column("state", "string", "ok (did not move, a move within its limit: \"moved, within limits\", or one "
                               "that is no fault: time at the power limit), degraded or failing (a move at or "
                               "past its limit: distbench.health.rules), not available here"),
     Column("reason", "string", "what the move means, with its limit and the limit's source")),
    allowed=(("state", STATES),),
    # files from before the readings carried their time: no interval, so no rate
    filled_when_missing=(("interval_s", float("nan")), ("rate_per_s", float("nan"))),
)


@dataclass(frozen=True)
class DiffRow:
    host: str
    gpu: str
    item: str
    before: float | None
    after: float | None
    delta: float | None
    interval_s: float | None
    rate_per_s: float | None
    state: str
    reason: str


def health_frame(rows: Iterable[HealthRow]) -> pd.DataFrame:
    return pd.DataFrame([asdict(r) for r in rows], columns=list(HEALTH.names)).astype("string")


def write_health(path, rows: Iterable[HealthRow]) -> pd.DataFrame:
    df = health_frame(rows)
    atomic_write_csv(path, df)
    return df


def read_health_csv(path) -> pd.DataFrame:
    df = read_job_csv(path, HEALTH)  # the one reader: a torn or binary file is named, with its fix
    return df.fillna({c: "" for c in HEALTH.names})


def rows_of(df: pd.DataFrame) -> list[HealthRow]:
    return [HealthRow(**{c: ("" if pd.isna(r[c]) else str(r[c])) for c in HEALTH.names}) for _, r in df.iterrows()]


def _number(v) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def interval_s(before: HealthRow | None, after: HealthRow) -> float | None:
    """Seconds between two readings of one item, from their read_at (None when either has none)."""
    if before is None or not before.read_at or not after.read_at:
        return None
    try:
        return (datetime.fromisoformat(after.read_at) - datetime.fromisoformat(before.read_at)).total_seconds()
    except ValueError:
        return None


def differences(before: Sequence[HealthRow], after: Sequence[HealthRow]) -> list[DiffRow]:
    """Each counter of each GPU read both times, after - before, judged by its rule (distbench.health.rules: a
    rate over the time between the readings, or a count); not available when either is missing."""
    then = {(r.host, r.gpu, r.item): r for r in before}
    out = []
    for r in after:
        if r.item not in COUNTERS:
            continue
        b = then.get((r.host, r.gpu, r.item))
        x, y = _number(b.value) if b else None, _number(r.value)
        seconds = interval_s(b, r)
        if x is None or y is None:
            out.append(DiffRow(r.host, r.gpu, r.item, x, y, None, seconds, None, NOT_AVAILABLE, "not read both times"))
            continue
        j = judge(r.item, y - x, seconds)
        out.append(DiffRow(r.host, r.gpu, r.item, x, y, y - x, seconds, j.rate_per_s, j.state, j.reason))
    return out


def write_diff(path, rows: Iterable[DiffRow]) -> pd.DataFrame:
    df = pd.DataFrame([asdict(r) for r in rows], columns=list(HEALTH_DIFF.names))
    df = df.astype({c.name: c.dtype for c in HEALTH_DIFF.columns})
    atomic_write_csv(path, df)
    return df


def read_diff(path) -> pd.DataFrame:
    df = read_job_csv(path, HEALTH_DIFF)
    return df.fillna({"reason": ""})


def across_nodes(rows: Sequence[HealthRow]) -> list[HealthRow]:
    """With several nodes' readings: one row per version item saying whether every node has the same
    (a node on another driver or CUDA version is degraded: its figures are not comparable)."""
    out = []
    hosts = sorted({r.host for r in rows})
    if len(hosts) < 2:
        return out
    for item in ("driver_version", "cuda_driver_version"):
        seen = {r.host: r.value for r in rows if r.gpu == NODE and r.item == item and r.value}
        if len(seen) < 2:
            out.append(HealthRow(",".join(hosts), NODE, f"{item}_across_nodes", "", "equal", NOT_AVAILABLE,
                                 "fewer than two nodes gave it"))
            continue
        values = sorted(set(seen.values()))
        common = max(values, key=lambda v: list(seen.values()).count(v))
        odd = [h for h, v in seen.items() if v != common]
        out.append(HealthRow(",".join(hosts), NODE, f"{item}_across_nodes", " / ".join(values), "equal",
                             DEGRADED if odd else OK,
                             f"{', '.join(odd)} differ from {common}" if odd else f"{common} on every node"))
    return out


def item_label(r) -> str:
    """'GPU 3 pcie_link (gen5 x8, expected gen5 x16)' for a row of either table."""
    where = f"{r.host} node" if r.gpu == NODE else f"GPU {r.gpu}"
    value = getattr(r, "value", None)
    if value is None:
        value = f"{r.before:g} -> {r.after:g}" if r.before is not None and r.after is not None else ""
    expected = getattr(r, "expected", "")
    shown = f"{value}, expected {expected}" if expected else value
    return f"{where} {r.item}" + (f" ({shown})" if shown else "")


def stop_reason(rows: Sequence[HealthRow], stop_on_failing: bool) -> str | None:
    """The message that stops the run before any benchmark job (health.stop_on_failing on and an item
    failing), else None."""
    failing = [r for r in rows if r.state == FAILING]
    if not stop_on_failing or not failing:
        return None
    return ("distbench: the health check before the benchmarks found failing item(s), and "
            "health.stop_on_failing is on, so no benchmark job runs: "
            + "; ".join(f"{item_label(r)}: {r.reason}" for r in failing)
            + ". Fix or leave out the GPU, or set health.stop_on_failing: false to measure anyway.")


def worst(states: Iterable[str]) -> str:
    states = set(states)
    return next((s for s in (FAILING, DEGRADED, OK) if s in states), NOT_AVAILABLE)


def check_before(out_csv, rows: Sequence[HealthRow]) -> list[HealthRow]:
    """Write the reading before the benchmarks (distbench.health.node.read_run): health_before.csv."""
    write_health(out_csv, rows)
    return list(rows)


def check_after(before_csv, out_csv, diff_csv, after: Sequence[HealthRow]) -> list[DiffRow]:
    """Write the reading after the benchmarks and its differences from health_before.csv."""
    before = rows_of(read_health_csv(before_csv))
    write_health(out_csv, after)
    diff = differences(before, after)
    write_diff(diff_csv, diff)
    return diff
