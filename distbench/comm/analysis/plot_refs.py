"""What the comm figures draw besides the measurements: the reference lines (the link peak and the
published or our own nccl-tests figure on bus-bandwidth panels, the time at the link peak on time
panels) and the strip of NCCL's algorithm/protocol ranges, each with the table it is drawn from."""

from __future__ import annotations

import math

import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.transforms import blended_transform_factory

from distbench.core.references import norm_op
from distbench.core import palette
from distbench.core.figures import ANNOTATION_PT
from distbench.core.units import human_bytes, sig3


# ---------------------------------------------------------------- reference lines (link peak, published)
def reference_lines(peak=None, published=None) -> list[dict]:
    """Horizontal busbw lines to draw: the link peak and the published figure(s).

    peak: a number (GB/s) or distbench.core.references.link_peak's dict ({'peak_gbps', 'link', ...}).
    published: a number, a (low, high) pair, distbench.core.references.expected_for's dict
    ({'expected_busbw_gbps_low', '_high', 'gpus', 'op', 'gpu', ...}) or a list of those.
    A dict's op and GPU count restrict it to the panels of that op that show that NCCL world size.
    Both describe GPU links, so they are drawn only where NCCL data are."""
    refs: list[dict] = []
    if isinstance(peak, dict):
        gbps = peak.get("peak_gbps")
        if gbps:
            link = f" {peak['link']}" if peak.get("link") else ""
            refs.append({"kind": "peak", "low": float(gbps), "high": float(gbps), "backend": "nccl",
                         "label": f"link peak{link}: {sig3(gbps)} GB/s"})
    elif peak is not None and float(peak) > 0:
        refs.append({"kind": "peak", "low": float(peak), "high": float(peak), "backend": "nccl",
                     "label": f"link peak: {sig3(peak)} GB/s"})
    items = published if isinstance(published, list) else [] if published is None else [published]
    for p in items:
        ref = {"kind": "published", "backend": "nccl"}
        if isinstance(p, dict):
            lo, hi = p.get("expected_busbw_gbps_low"), p.get("expected_busbw_gbps_high")
            lo, hi = float(lo if lo is not None else hi), float(hi if hi is not None else lo)
            ref.update(op=p.get("op"), world_size=p.get("gpus"))
            what = " ".join(str(x) for x in (f"{p['gpus']}x {p.get('gpu', '')}".strip() if p.get("gpus") else "",
                                             p.get("op") or "") if x)
            at = f" at ≥ {human_bytes(p['min_bytes'])}" if p.get("min_bytes") else ""
            where = f" ({what}{at})" if what or at else ""
        elif isinstance(p, (tuple, list)):
            lo, hi = float(min(p)), float(max(p))
            where = ""
        else:
            lo = hi = float(p)
            where = ""
        span = sig3(lo) if lo == hi else f"{sig3(lo)}-{sig3(hi)}"
        # a figure of ours (nccl-tests on a machine of ours) is labelled so, never "published"
        ours = isinstance(p, dict) and p.get("kind") == "ours"
        ref.update(low=lo, high=hi, label=f"{'nccl-tests, ours' if ours else 'published'}{where}: {span} GB/s")
        refs.append(ref)
    return refs


def published_for(ok: pd.DataFrame, gpu_name: str | None, nvls: bool | None = None) -> list[dict]:
    """The published figures (distbench.core.references.expected_for) that apply to the NCCL rows of `ok` at
    each (world size, op)'s largest measured size."""
    from distbench.core.references import expected_for

    if not gpu_name or ok is None or ok.empty:
        return []
    out = []
    nccl = ok[(ok["backend"] == "nccl") & (ok["size_bytes"] > 0)]
    for (ws, op), g in nccl.groupby(["world_size", "op"], sort=True):
        exp = expected_for(gpu_name, int(ws), str(op), int(g["size_bytes"].max()), nvls=nvls)
        if exp and exp not in out:
            out.append(exp)
    return out


def draw_refs(ax, refs, d: pd.DataFrame) -> list[dict]:
    """Draw the reference lines that apply to the panel showing `d`; return those drawn."""
    drawn = []
    for r in refs:
        mine = d[d["backend"] == r["backend"]] if r.get("backend") else d
        if mine.empty:
            continue
        if r.get("op") and not (mine["op"].map(norm_op) == norm_op(r["op"])).any():
            continue
        if r.get("world_size") and int(r["world_size"]) not in set(mine["world_size"].astype(int)):
            continue
        color, ls = ((palette.PEAK_COLOR, palette.PEAK_LINESTYLE) if r["kind"] == "peak"
                     else (palette.PUBLISHED_COLOR, palette.PUBLISHED_LINESTYLE))
        ax.axhline(r["low"], color=color, ls=ls, lw=1.1, label=r["label"], zorder=1)
        if r["high"] != r["low"]:
            ax.axhline(r["high"], color=color, ls=ls, lw=1.1, label="_" + r["label"], zorder=1)
        drawn.append(r)
    if drawn:  # room above the highest line, which would otherwise sit on the frame
        top = max(r["high"] for r in drawn)
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, max(hi, top * (1.6 if ax.get_yscale() == "log" else 1.08)))  # call on the final scale
    return drawn


def peak_time_us(d: pd.DataFrame, peak_gbps: float) -> pd.DataFrame:
    """The time each NCCL size of the panel would take at the link peak's bus bandwidth, at its
    largest NCCL world size: time x busbw / peak (= size x the op's bus factor / peak), as
    [size_bytes, time_us] rows; empty without NCCL bandwidth rows."""
    n = d[(d["backend"] == "nccl") & (d["size_bytes"] > 0) & (d["busbw_gbps_median"] > 0)]
    if n.empty or not peak_gbps:
        return pd.DataFrame(columns=["size_bytes", "time_us"])
    n = n[n["world_size"] == n["world_size"].max()].drop_duplicates("size_bytes").sort_values("size_bytes")
    return pd.DataFrame({"size_bytes": n["size_bytes"],
                         "time_us": n["time_us_median"] * n["busbw_gbps_median"] / float(peak_gbps)})


def draw_peak_time(ax, refs, d: pd.DataFrame) -> list[dict]:
    """On a time panel: the time at the link peak (the floor NCCL's time approaches at large sizes)."""
    peak = next((r for r in refs if r["kind"] == "peak"), None)
    line = peak_time_us(d, peak["low"]) if peak else None
    if line is None or line.empty:
        return []
    limits = ax.get_ylim()  # the measured times set the axis: the line is cut where it leaves them
    ax.plot(line["size_bytes"], line["time_us"], color=palette.PEAK_COLOR, ls=palette.PEAK_LINESTYLE, lw=1.1,
            zorder=1)
    ax.set_ylim(*limits)
    return [{**peak, "label": f"time at the {peak['label']} busbw\n(largest NCCL world size)"}]


def ref_handle(r: dict) -> Line2D:
    color, ls = ((palette.PEAK_COLOR, palette.PEAK_LINESTYLE) if r["kind"] == "peak"
                 else (palette.PUBLISHED_COLOR, palette.PUBLISHED_LINESTYLE))
    return Line2D([], [], color=color, ls=ls, lw=1.1, label=r["label"])



# ---------------------------------------------------------------- NCCL algorithm/protocol ranges
def nccl_ranges(d: pd.DataFrame) -> list[tuple[int, int, str]]:
    """Runs of sizes over which NCCL chose the same algorithm/protocol (the NCCL probe's tuning
    table, joined onto the summary as nccl_algo / nccl_proto in comm_summary.csv), at the
    largest NCCL world size of the panel: [(first size, last size, "Ring/LL"), ...]."""
    if "nccl_proto" not in d or "nccl_algo" not in d:
        return []
    n = d[(d["backend"] == "nccl") & d["nccl_proto"].notna() & d["nccl_algo"].notna()]
    if n.empty:
        return []
    n = n[n["world_size"] == n["world_size"].max()].drop_duplicates("size_bytes").sort_values("size_bytes")
    runs: list[list] = []
    for size, algo, proto in zip(n["size_bytes"], n["nccl_algo"], n["nccl_proto"]):
        label = f"{algo}/{proto}"
        if runs and runs[-1][2] == label:
            runs[-1][1] = int(size)
        else:
            runs.append([int(size), int(size), label])
    return [tuple(r) for r in runs]


def draw_nccl_ranges(ax, d: pd.DataFrame) -> bool:
    """A strip along the bottom of the panel: one segment per NCCL algorithm/protocol range."""
    runs = nccl_ranges(d)
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for i, (lo, hi, label) in enumerate(runs):
        ax.axvspan(lo / 1.41, hi * 1.41, ymin=0, ymax=0.05, color=palette.NCCL_RANGE_COLORS[i % 2], lw=0, zorder=1)
        # two rows of labels, alternating: neighbouring ranges' labels do not overlap in a narrow panel
        ax.text(math.sqrt(lo * hi), 0.065 + 0.075 * (i % 2), label, transform=trans, ha="center", va="bottom",
                fontsize=ANNOTATION_PT, color="0.25", zorder=4)
    return bool(runs)
