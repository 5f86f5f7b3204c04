"""The node-pair rounds' report section and its Verdict headlines: a confirmed slow node is
"failing" (the headlines of this section come before the families' in the Verdict, so the bad
nodes are named first), an unconfirmed suspect or a slow link "below expected", a sound cluster
"healthy". Fragments: templates/nodes.*.j2."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from distbench.core.section import Headline, ReportInputs, Section, table
from distbench.nodes.analysis.summary import read_tables

TEMPLATES = Path(__file__).parent / "templates"
ADVICE = ("check that node's NICs and GPUs (ibstat, ethtool, nvidia-smi -q), its PCIe links and its load; "
          "then run the rounds again")
LINK_ADVICE = "check the path between the two nodes (cables, switch ports, ibstat on both ends)"


def _tables(inputs: ReportInputs):
    path = inputs.path("nodes_scores")
    return read_tables(path) if path else None


def _x(v) -> str:
    return "—" if v is None or pd.isna(v) else f"{v:.2f}x"


def _pct(v) -> str:
    return "—" if v is None or pd.isna(v) else f"{v:.0%}"


def node_headlines(nodes: pd.DataFrame, pairs: pd.DataFrame) -> list[Headline]:
    out = []
    for _, r in nodes[nodes["state"] == "slow"].iterrows():
        out.append(Headline("nodes", f"node {r['node']} is slow: bandwidth {_pct(r['bandwidth_score'])} and time "
                                     f"{_x(r['latency_score'])} of the cluster median", "failing",
                            f"{r['evidence']}; {ADVICE}"))
    for _, r in nodes[nodes["state"] == "suspect"].iterrows():
        out.append(Headline("nodes", f"node {r['node']} may be slow (unconfirmed)", "below expected", r["evidence"]))
    for _, r in pairs[pairs["cause"] == "link"].iterrows():
        out.append(Headline("nodes", f"link {r['node_a']} – {r['node_b']} is slow: bandwidth "
                                     f"{_pct(r['bandwidth_ratio'])} and time {_x(r['latency_ratio'])} of the cluster "
                                     "median", "below expected",
                            f"both nodes are fine with their other partners; {LINK_ADVICE}"))
    failed = pairs[pairs["status"] != "ok"]
    if len(failed):
        rounds = sorted(set(int(x) for x in failed["round"]))
        out.append(Headline("nodes", f"{len(failed)} node pair(s) not measured (rounds {rounds})", "failing",
                            str(failed["message"].iloc[0])[:300]))
    if not out:
        out.append(Headline("nodes", f"{len(nodes)} nodes, {len(pairs)} pairs: no slow node or link", "healthy",
                            "every pair within the thresholds of the cluster median (nodes.slow_latency, "
                            "nodes.slow_bandwidth)"))
    return out


def headlines(inputs: ReportInputs) -> list[Headline]:
    t = _tables(inputs)
    return node_headlines(*t) if t else []


def findings(inputs: ReportInputs) -> list[str]:
    t = _tables(inputs)
    if not t:
        return []
    nodes, pairs = t
    bad = nodes[nodes["state"].isin(["slow", "suspect"])]["node"].tolist()
    links = [f"{a} – {b}" for a, b in pairs.loc[pairs["cause"] == "link", ["node_a", "node_b"]].itertuples(index=False)]
    if not bad and not links:
        return [f"Node-pair rounds: {len(nodes)} nodes, {len(pairs)} pairs, none slow."]
    return [f"Node-pair rounds: slow node(s) {', '.join(bad) or 'none'}; slow link(s) {', '.join(links) or 'none'}."]


def build(inputs: ReportInputs) -> dict | None:
    t = _tables(inputs)
    if not t:
        return None
    nodes, pairs = t
    rows = [[r["node"], r["state"], _x(r["latency_score"]), _pct(r["bandwidth_score"]),
             f"{int(r['slow_pairs'])} / {int(r['pairs'])}", r["evidence"]] for _, r in nodes.iterrows()]
    slow = pairs[pairs["slow"].astype(bool)] if len(pairs) else pairs
    link_rows = [[r["node_a"], r["node_b"], int(r["round"]), _x(r["latency_ratio"]), _pct(r["bandwidth_ratio"]),
                  r["cause"]] for _, r in slow.iterrows()]
    rounds = pairs["round"].nunique() if len(pairs) else 0
    return {"table": table(["node", "state", "time score", "bandwidth score", "slow pairs", "evidence"], rows),
            "pairs": table(["node a", "node b", "round", "time", "bandwidth", "cause"], link_rows) if link_rows else None,
            "note": (f"{len(nodes)} nodes, {len(pairs)} pairs in {rounds} rounds, all pairs of a round measuring at "
                     "once. Scores are a node's median over its pairs against the cluster median (time at the "
                     "smallest size, bandwidth at the largest; 1 = the cluster). A node slow with most partners is "
                     "confirmed against its known-good partners (from the pairs already measured); a slow pair whose "
                     "nodes are fine elsewhere is a slow link.")}

NODES = Section("nodes", "Node-pair rounds", TEMPLATES, build, headlines=headlines, findings=findings,
                figure_dirs=("figures_nodes",),
                figure_titles={"nodes_bandwidth": "Node pairs: bandwidth against the cluster median",
                               "nodes_latency": "Node pairs: time against the cluster median"},
                full_tables={"nodes_scores.csv": "per node: scores, state and evidence",
                             "nodes_pairs.csv": "per node pair: figures against the cluster and the cause of a slow pair"})
