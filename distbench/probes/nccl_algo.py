"""NCCL's algorithm and protocol names, and the algorithm/protocol it picked per collective and size.

The TUNING lines nccl_log parses name them by index (2.18) or by name in any case (2.19+); these
helpers put both into NCCL's own spelling and turn the per-size choices into the short ranges the
probe JSON and the report cite ("1 MiB: Ring/LL, 2 MiB+: Ring/Simple").
"""

from __future__ import annotations

from distbench.core.sizes import human_bytes

# Index order of NCCL's ncclAlgoStr / ncclProtoStr (src/enqueue.cc, src/include/device.h).
ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTO_NAMES = ("LL", "LL128", "Simple")
_ALGO_BY_UPPER = {a.upper(): a for a in ALGO_NAMES} | {"NVLS_TREE": "NVLSTree", "COLLNET_DIRECT": "CollNetDirect",
                                                      "COLLNET_CHAIN": "CollNetChain"}
_PROTO_BY_UPPER = {p.upper(): p for p in PROTO_NAMES}


def algo_name(token: str) -> str:
    """NCCL's spelling of an algorithm logged as an index (2.18) or a name in any case (2.19+)."""
    if token.isdigit():
        i = int(token)
        return ALGO_NAMES[i] if i < len(ALGO_NAMES) else token
    return _ALGO_BY_UPPER.get(token.upper(), token)


def proto_name(token: str) -> str:
    """NCCL's spelling of a protocol logged as an index (2.18) or a name in any case (2.19+)."""
    if token.isdigit():
        i = int(token)
        return PROTO_NAMES[i] if i < len(PROTO_NAMES) else token
    return _PROTO_BY_UPPER.get(token.upper(), token)


def algo_by_size(parsed: dict) -> list[dict]:
    """Distinct (op, size, algo, proto) choices from TUNING lines, ordered by op then size."""
    seen = {}
    for t in parsed.get("tuning", []):
        key = (t["op"] or "?", t["size_bytes"])
        seen.setdefault(key, {"op": t["op"], "size_bytes": t["size_bytes"], "algo": t["algo"], "proto": t["proto"]})
    return [seen[k] for k in sorted(seen)]


def describe_algo_ranges(rows: list[dict]) -> str:
    """Contiguous size ranges with one algo/proto, e.g. "1 MiB: Ring/LL, 2 MiB+: Ring/Simple"."""
    by_op: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: (r.get("op") or "", r["size_bytes"])):
        by_op.setdefault(r.get("op") or "?", []).append(r)
    parts = []
    for op, op_rows in by_op.items():
        runs: list[list[dict]] = []
        for r in op_rows:
            if runs and (runs[-1][-1]["algo"], runs[-1][-1]["proto"]) == (r["algo"], r["proto"]):
                runs[-1].append(r)
            else:
                runs.append([r])
        pieces = []
        for i, run in enumerate(runs):
            lo, hi = human_bytes(run[0]["size_bytes"]), human_bytes(run[-1]["size_bytes"])
            if i == len(runs) - 1 and len(runs) > 1:
                span = f"{lo}+"
            else:
                span = lo if lo == hi else f"{lo}–{hi}"
            pieces.append(f"{span}: {run[0]['algo']}/{run[0]['proto']}")
        text = ", ".join(pieces)
        parts.append(f"{op}: {text}" if len(by_op) > 1 else text)
    return "; ".join(parts)
