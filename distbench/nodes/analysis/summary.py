"""Node-pair rounds, read back (torch-free): per pair, per node, and which node or link is slow.

- per_op: one row per (pair, op, direction, size): the pair's time is its slowest rank's median, its
  bandwidth the lowest (send/recv a->b and b->a, and the all_reduce: three figures per size).
- References: per (op, size), each node's median over its pairs, then the median over the nodes (the
  cluster median). Taking each node's median first keeps a slow node out of the reference: with
  4 nodes one slow node is in half the pairs, but it moves only its own node median.
- A pair's latency ratio is the median over its three figures at the smallest size of time /
  reference, its bandwidth ratio the median at the largest of bandwidth / reference: the median, so
  one op disturbed by the host (a rank descheduled for milliseconds) does not make a pair slow; a
  link slow in one direction only is then missed (nodes.csv keeps each direction). A pair is slow
  when its latency ratio is above nodes.slow_latency or its bandwidth ratio below nodes.slow_bandwidth.
- Per node: latency score = median over its pairs of the pair's time / reference (1 = the cluster),
  bandwidth score = median of bandwidth / reference; the share of its partners it is slow with.
- Slow node against slow link: a node slow with at least nodes.slow_share of its partners is a
  suspect. The follow-up is computed from the pairs already measured, not from an extra round: a
  suspect is confirmed (state slow) when it is also slow with at least that share of its known-good
  partners (nodes that are not suspects); with no known-good partner it stays a suspect. A slow pair
  whose two nodes are not slow is a slow link (its nodes: state link, fine with their other partners).
  Assumes fewer than half the nodes are slow (the references are medians).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.core.io import atomic_write_csv
from distbench.core.readers import read_table, remake

PAIR_KEYS = ("node_a", "node_b")
PAIR_COLUMNS = ("round", "node_a", "node_b", "time_us_small", "busbw_gbps_large", "latency_ratio",
                "bandwidth_ratio", "slow", "cause", "status", "message")
NODE_COLUMNS = ("node", "pairs", "slow_pairs", "latency_score", "bandwidth_score", "good_partners",
                "slow_with_good", "state", "evidence")
STATES = ("slow", "suspect", "link", "failed", "ok")  # worst first


def thresholds(config: dict | None) -> dict:
    cfg = (config or {}).get("nodes", {})
    return {"slow_latency": cfg.get("slow_latency", 2.0), "slow_bandwidth": cfg.get("slow_bandwidth", 0.7),
            "slow_share": cfg.get("slow_share", 0.5)}


def _ok(raw: pd.DataFrame) -> pd.DataFrame:
    return raw[raw["status"] == "ok"]


def per_op(raw: pd.DataFrame) -> pd.DataFrame:
    """(pair, op, direction, size): the slowest rank's median time, the lowest bandwidth."""
    return (_ok(raw).groupby([*PAIR_KEYS, "round", "op", "direction", "size_bytes"], as_index=False)
            .agg(time_us=("time_us", "max"), busbw_gbps=("busbw_gbps", "min")))


def references(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (op, size): the median over nodes of each node's median pair time and bandwidth."""
    both = pd.concat([ops.assign(node=ops["node_a"]), ops.assign(node=ops["node_b"])])
    per_node = both.groupby(["op", "size_bytes", "node"], as_index=False)[["time_us", "busbw_gbps"]].median()
    return (per_node.groupby(["op", "size_bytes"], as_index=False)[["time_us", "busbw_gbps"]].median()
            .rename(columns={"time_us": "ref_time_us", "busbw_gbps": "ref_busbw_gbps"}))


def pair_table(raw: pd.DataFrame, limits: dict) -> pd.DataFrame:
    """One row per measured pair: its figures against the cluster's, and whether it is slow."""
    failed = raw[raw["status"] != "ok"].groupby([*PAIR_KEYS, "round"], as_index=False).agg(
        status=("status", "first"), message=("message", "first"))
    ops = per_op(raw)
    rows = []
    if not ops.empty:
        small, large = ops["size_bytes"].min(), ops["size_bytes"].max()
        ops = ops.merge(references(ops), on=["op", "size_bytes"])
        ops["lat"] = ops["time_us"] / ops["ref_time_us"]
        ops["bw"] = ops["busbw_gbps"] / ops["ref_busbw_gbps"]
        for (a, b, rnd), g in ops.groupby([*PAIR_KEYS, "round"]):
            s, lg = g[g["size_bytes"] == small], g[g["size_bytes"] == large]
            lat, bw = s["lat"].median(), lg["bw"].median()
            slow = bool(lat > limits["slow_latency"] or bw < limits["slow_bandwidth"])
            rows.append({"round": rnd, "node_a": a, "node_b": b, "time_us_small": s["time_us"].median(),
                         "busbw_gbps_large": lg["busbw_gbps"].median(), "latency_ratio": lat, "bandwidth_ratio": bw,
                         "slow": slow, "cause": "", "status": "ok", "message": ""})
    for _, f in failed.iterrows():
        if not any(r["node_a"] == f["node_a"] and r["node_b"] == f["node_b"] for r in rows):
            rows.append({"round": f["round"], "node_a": f["node_a"], "node_b": f["node_b"], "slow": False,
                         "cause": "", "status": f["status"], "message": f["message"]})
    return pd.DataFrame(rows, columns=list(PAIR_COLUMNS))


def _partners(pairs: pd.DataFrame, node: str) -> pd.DataFrame:
    mine = pairs[(pairs["node_a"] == node) | (pairs["node_b"] == node)]
    return mine.assign(partner=mine["node_a"].where(mine["node_b"] == node, mine["node_b"]))


def verdicts(pairs: pd.DataFrame, limits: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(nodes table, pairs table with each slow pair's cause: 'node X' or 'link')."""
    pairs = pairs.copy()
    nodes = sorted(set(pairs["node_a"]) | set(pairs["node_b"]))
    measured = pairs[pairs["status"] == "ok"]
    share = {}
    for n in nodes:
        p = _partners(measured, n)
        share[n] = p["slow"].mean() if len(p) else float("nan")
    suspects = {n for n in nodes if share[n] == share[n] and share[n] >= limits["slow_share"] and
                _partners(measured, n)["slow"].any()}
    good = set(nodes) - suspects
    rows, slow_nodes = [], set()
    for n in nodes:
        p = _partners(measured, n)
        with_good = p[p["partner"].isin(good)]
        k = int(with_good["slow"].sum())
        row = {"node": n, "pairs": len(p), "slow_pairs": int(p["slow"].sum()),
               "latency_score": p["latency_ratio"].median() if len(p) else float("nan"),
               "bandwidth_score": p["bandwidth_ratio"].median() if len(p) else float("nan"),
               "good_partners": len(with_good), "slow_with_good": k}
        if not len(p):
            row.update(state="failed", evidence="no pair of this node was measured (its rounds failed)")
        elif n in suspects and len(with_good) and k / len(with_good) >= limits["slow_share"]:
            slow_nodes.add(n)
            row.update(state="slow", evidence=(
                f"slow with {row['slow_pairs']} of {len(p)} partners, and with {k} of its {len(with_good)} "
                f"known-good partners ({', '.join(sorted(with_good.loc[with_good['slow'], 'partner']))})"))
        elif n in suspects and not len(with_good):
            row.update(state="suspect", evidence=(
                f"slow with {row['slow_pairs']} of {len(p)} partners, none of them known-good: "
                "unconfirmed (pair it with nodes known to be fine, or run mode all_pairs)"))
        else:
            row.update(state="ok", evidence=f"fine with {len(p) - row['slow_pairs']} of {len(p)} partners")
        rows.append(row)
    table = pd.DataFrame(rows, columns=list(NODE_COLUMNS))
    unconfirmed = set(table.loc[table["state"] == "suspect", "node"])
    for i, r in pairs[pairs["slow"]].iterrows():
        culprits = sorted({r["node_a"], r["node_b"]} & (slow_nodes | unconfirmed))
        pairs.at[i, "cause"] = f"node {culprits[0]}" if len(culprits) == 1 else (
            "nodes " + " and ".join(culprits) if culprits else "link")
    links = pairs[pairs["cause"] == "link"]
    for i, r in table.iterrows():
        mine = links[(links["node_a"] == r["node"]) | (links["node_b"] == r["node"])]
        if r["state"] == "ok" and len(mine):
            others = sorted((set(mine["node_a"]) | set(mine["node_b"])) - {r["node"]})
            table.at[i, "state"] = "link"
            table.at[i, "evidence"] = (f"slow only with {', '.join(others)} (a slow link); fine with "
                                       f"{r['pairs'] - r['slow_pairs']} of {r['pairs']} partners")
    order = {s: i for i, s in enumerate(STATES)}
    table = table.sort_values(["state", "latency_score"], key=lambda c: c.map(order) if c.name == "state" else -c)
    return table.reset_index(drop=True), pairs


def summarize(raw: pd.DataFrame, config: dict | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    limits = thresholds(config)
    return verdicts(pair_table(raw, limits), limits)


def write_tables(round_csvs, raw_out, pairs_out, nodes_out, config: dict | None = None) -> None:
    from distbench.nodes.contract import read_nodes_csv

    frames = [read_nodes_csv(p) for p in round_csvs]
    raw = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    atomic_write_csv(raw_out, raw)
    nodes, pairs = summarize(raw, config)
    atomic_write_csv(pairs_out, pairs)
    atomic_write_csv(nodes_out, nodes)


def read_tables(nodes_csv) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(nodes, pairs) from tables/nodes_scores.csv and the nodes_pairs.csv beside it."""
    path = Path(nodes_csv)
    nodes = read_table(path, remake(path), missing_ok=True)  # the one reader: a torn file is named, with its fix
    if nodes is None:
        return None
    pairs_path = path.with_name("nodes_pairs.csv")
    pairs = read_table(pairs_path, remake(pairs_path), missing_ok=True)
    return nodes, pairs if pairs is not None else pd.DataFrame(columns=list(PAIR_COLUMNS))
