"""Regressions against a baseline (config `report.baseline`: an earlier results tree, or its
`tables/` directory): every point of the registered sections' measures (distbench.core.section.Measure,
declared by each family beside its analysis) present in both, flagged when its figure moved by more
than its measured noise AND more than a threshold. Noise is the two p5-p95 intervals (a move counts
only when they do not overlap); a measure that records no spread is decided by the threshold alone.
Reads tables only (no harness), through the one reader (distbench.core.readers): a baseline file that
cannot be read is named in the report's REGRESSIONS section, at its top, and the rest still compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from distbench.core.readers import BASELINE_FIX, UnreadableFile, read_table, remake
from distbench.core.run_label import baseline_tables_dir as tables_dir
from distbench.core.section import Measure
from distbench.core.units import human_bytes, human_time_us

DEFAULT_THRESHOLD_PCT = 5.0
TIME_UNITS = {"µs": 1.0, "ms": 1e3}  # a time, in µs per unit: moves are slower/faster; others more/less
COLUMNS = ("family", "what", "baseline", "now", "change_pct", "direction", "flagged", "why", "unit")


def _read(path: Path, m: Measure, fix: str) -> pd.DataFrame | None:
    """One table holding measure m (None when absent or empty), through the one reader: whole, with
    the measure's value and noise columns, numbers there, finite on ok rows."""
    cols = tuple(c for c in (m.value, m.low, m.high) if c)
    return read_table(path, fix, columns=cols, numeric=cols, finite_when_ok=cols, missing_ok=True)


def _now(table, m: Measure) -> pd.DataFrame | None:
    """This run's table holding m: as the report already read it (ReportInputs.table, read once per
    report), checked for the measure's columns; or a path, read here."""
    if table is None or isinstance(table, pd.DataFrame):
        if table is not None:
            cols = [c for c in (m.value, m.low, m.high) if c]
            missing = [c for c in cols if c not in table.columns]
            text = [c for c in cols if c in table.columns and len(table) and not pd.api.types.is_numeric_dtype(table[c])]
            if missing or text:
                raise UnreadableFile(m.table, f"it lacks the column(s) {missing}" if missing else
                                     f"column {text[0]} holds text where numbers belong", remake(m.table))
        return table
    return _read(Path(table), m, remake(table))


def human_value(x: float, unit: str) -> str:
    """A measure's value as the report writes it, by its unit."""
    if unit in TIME_UNITS:
        return human_time_us(TIME_UNITS[unit] * x)
    return human_bytes(int(x)) if unit == "B" else f"{x:.3g} {unit}".strip()


def _with_defaults(m: Measure, df: pd.DataFrame) -> pd.DataFrame:
    """Tables written before a key column existed: the value it then had."""
    df = df.copy()
    for col, value in m.defaults.items():
        if col not in df:
            df[col] = value
    return df


def compare_one(m: Measure, now: pd.DataFrame, base: pd.DataFrame, threshold_pct: float) -> pd.DataFrame:
    now, base = _with_defaults(m, now), _with_defaults(m, base)
    keys = [k for k in m.keys if k in now and k in base]
    ok = [d[d["status"] == "ok"] if "status" in d else d for d in (now, base)]
    cols = keys + [c for c in (m.value, m.low, m.high) if c]
    both = ok[0][cols].merge(ok[1][cols], on=keys, suffixes=("", "_base")).dropna(subset=[m.value, m.value + "_base"])
    rows = []
    for _, r in both.iterrows():
        b, n = float(r[m.value + "_base"]), float(r[m.value])
        if b <= 0:
            continue
        change = 100 * (n / b - 1)
        beyond_threshold = abs(change) >= threshold_pct
        if m.low and pd.notna(r.get(m.low)) and pd.notna(r.get(m.low + "_base")):
            apart = r[m.low] > r[m.high + "_base"] or r[m.high] < r[m.low + "_base"]
            noise = "p5-p95 intervals apart" if apart else "within the p5-p95 noise"
        else:
            apart, noise = True, "no spread recorded"
        worse = (change > 0) == m.worse_when_higher
        rows.append({
            "family": m.family, "what": ", ".join(f"{k}={r[k]}" for k in keys),
            "baseline": b, "now": n, "change_pct": change,
            "direction": ("slower" if m.unit in TIME_UNITS else "more") if worse else
                         ("faster" if m.unit in TIME_UNITS else "less"),
            "flagged": bool(beyond_threshold and apart),
            "why": f"{change:+.1f}% ({'beyond' if beyond_threshold else 'within'} {threshold_pct:g}%), {noise}",
            "unit": m.unit,
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def compare(now_tables: dict, baseline, measures: Sequence[Measure],
            threshold_pct: float = DEFAULT_THRESHOLD_PCT, unreadable: list | None = None) -> pd.DataFrame:
    """now_tables: {table file name: this run's table, read (a DataFrame) or its path}; baseline: a results tree or tables dir;
    measures: what to compare (the registered sections' regressions).

    A baseline file that cannot be read (truncated, binary, a column missing, text where a number
    should be) raises UnreadableFile; given a list as `unreadable`, its UnreadableFile is added there
    instead (once per file) and the measures it holds are left out, so that the others are compared.
    This run's own tables that cannot be read always raise (their fix is to make them again)."""
    def bad(e: UnreadableFile) -> None:
        if unreadable is None:
            raise e
        if all(u.path != e.path for u in unreadable):
            unreadable.append(e)

    base_dir = tables_dir(baseline, list(dict.fromkeys(m.table for m in measures)))
    if base_dir is None:
        bad(UnreadableFile(baseline, f"it holds no {' or '.join(dict.fromkeys(m.table for m in measures))} (nor does "
                                     "its tables/)", BASELINE_FIX))
        return pd.DataFrame(columns=list(COLUMNS))
    parts = []
    for m in measures:
        now = _now(now_tables.get(m.table), m)
        try:
            base = _read(base_dir / m.table, m, BASELINE_FIX)
        except UnreadableFile as e:
            bad(e)
            continue
        if now is not None and base is not None and len(now) and len(base):
            parts.append(compare_one(m, now, base, threshold_pct))
    parts = [p for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(COLUMNS))
