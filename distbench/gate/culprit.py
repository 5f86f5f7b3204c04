"""Which GPU is at fault, named by index, PCI bus id and UUID, from the gate's own readings (torch-free).

The evidence, per GPU, all taken before or beside the collective within the gate's budget (no extra
launch): the compute processes NVML listed on it before the check touched it (any is a stranger's:
distbench.health.processes), its bf16 matmul throughput under the health load against the median of
its peers' (DCGM's cross-GPU throughput outlier, distbench.health.outliers), and its other failing or
degraded health items. A GPU with evidence is named first in the gate's line, beside the collective's
miss; where the collective missed and no GPU stands out, the line says so instead of guessing.

`--gpus N` means the collective spans N GPUs: a node whose CUDA sees fewer (CUDA_VISIBLE_DEVICES, a
lost device) fails, naming the GPUs NVML has and CUDA was not shown. CUDA_VISIBLE_DEVICES entries are
matched as UUIDs (GPU-...) or as ordinals; an ordinal is taken in NVML's order (PCI bus order), which
is CUDA's order too on a node of one GPU model (CUDA_DEVICE_ORDER=PCI_BUS_ID makes it so on any).
"""

from __future__ import annotations

from distbench.gate.rules import FAIL, INFO, WARN, Check
from distbench.health.outliers import MATMUL_DEGRADED_UNDER
from distbench.health.readings import DEGRADED, FAILING, PROCESSES_NOT_CHECKED

_SEVERITY = {FAILING: 0, DEGRADED: 1}
# A GPU whose processes no source could list carries no evidence against itself: the check could not
# look (a MIG slice, a driver that refuses the list), so it ranks after every finding and never takes
# the collective's miss on its own.
_UNREAD = 2


def identities(rows) -> dict[str, tuple[str, str]]:
    """{NVML index: (PCI bus id, UUID)} from the health rows."""
    out: dict[str, tuple[str, str]] = {}
    for r in rows:
        if r.gpu.isdigit() and (r.pci_bus_id or r.uuid):
            out.setdefault(r.gpu, (r.pci_bus_id, r.uuid))
    return out


def name_gpu(gpu: str, ident: dict) -> str:
    """'GPU 2 (0000:8a:00.0, GPU-93214692-8c4…)'."""
    bus, uuid = ident.get(gpu, ("", ""))
    bus = bus[4:] if len(bus) == 16 and bus.startswith("0000") else bus  # NVML's 8-digit domain, shortened
    short = uuid[:16] + "…" if len(uuid) > 16 else uuid
    inner = ", ".join(x for x in (bus, short) if x)
    return f"GPU {gpu} ({inner})" if inner else f"GPU {gpu}"


def evidence(rows) -> dict[str, list[tuple[int, float, str]]]:
    """{gpu: [(severity, matmul ratio or 1, what was found)]} of the GPUs with failing or degraded items."""
    out: dict[str, list] = {}
    for r in rows:
        if not r.gpu.isdigit() or r.state not in _SEVERITY:
            continue
        ratio = float(r.value) if r.item == "matmul_vs_peers" and r.value else 1.0
        text = (f"its bf16 matmul {ratio:.0%} of its peers' median" if r.item == "matmul_vs_peers"
                else r.reason if r.item == "compute_processes" else f"{r.item}: {r.reason}")
        unread = r.item == "compute_processes" and r.reason.startswith(PROCESSES_NOT_CHECKED)
        out.setdefault(r.gpu, []).append((_UNREAD if unread else _SEVERITY[r.state], ratio, text))
    return out


def _collective_miss(checks: list[Check]) -> str:
    """The collective's bandwidth miss (a reference or baseline check that warned or failed), said once."""
    miss = [c for c in checks if c.check in ("reference", "baseline") and c.state in (FAIL, WARN)
            and "busbw" in c.subject]
    if not miss:
        return ""
    worst = min(miss, key=lambda c: c.state != FAIL)
    return f"{worst.subject.rsplit(' ', 1)[0]}: {worst.reason}"


def lead(rows, checks: list[Check], state: str) -> str:
    """The bad GPU first, as the gate's line begins on a WARN or FAIL: 'GPU 2 (bus, uuid): <the
    collective's miss>; <its evidence>'; or, where the collective missed and no GPU stands out, that
    no GPU does. Empty when there is nothing to name."""
    if state not in (FAIL, WARN):
        return ""
    ident = identities(rows)
    found = evidence(rows)
    miss = _collective_miss(checks)
    unread = sorted((g for g, items in found.items() if all(s == _UNREAD for s, _, _ in items)), key=int)
    if miss and len(unread) == len(found):
        found = {}  # the only GPUs named are those the check could not look at: none stands out
    if not found:
        if not miss:
            return ""
        causes = [c.reason for c in checks if c.check == "transport" and c.state in (FAIL, WARN)]
        if causes:  # the node's configuration, not its links: NCCL on a slower path than the hardware offers
            return f"{miss}; " + "; ".join(causes)
        strays = (f"processes not checked on {', '.join(name_gpu(g, ident) for g in unread)}" if unread
                  else "no stray process")
        return (f"{miss}; no single GPU stands out ({strays}, every GPU's matmul within "
                f"{1 - MATMUL_DEGRADED_UNDER:.0%} of its peers', no failing health item): suspect the links "
                "between GPUs (the nodes family's pair rounds find which)")
    ranked = sorted(found, key=lambda g: min((s, r) for s, r, _ in found[g]))
    parts = []
    for g in ranked[:2]:
        items = sorted(found[g])
        parts.append(f"{name_gpu(g, ident)}: " + "; ".join(([miss] if miss and g == ranked[0] else [])
                                                            + [t for _, _, t in items]))
    more = f" (+{len(ranked) - 2} more GPUs)" if len(ranked) > 2 else ""
    return " | ".join(parts) + more


def hidden_gpus(rows, visible: str | None) -> list[str]:
    """The NVML indices of the GPUs CUDA_VISIBLE_DEVICES does not show (none when it is unset)."""
    ident = identities(rows)
    if visible is None or not ident:
        return []
    shown = [v.strip() for v in visible.split(",") if v.strip()]
    order = sorted(ident, key=int)  # NVML's order: PCI bus order
    seen = set()
    for v in shown:
        if v.lstrip("-").isdigit():
            if int(v) < 0:
                break  # CUDA stops at the first invalid ordinal
            if int(v) < len(order):
                seen.add(order[int(v)])
        else:
            seen |= {g for g, (_bus, uuid) in ident.items() if uuid and uuid.lower().startswith(v.lower())}
    return [g for g in order if g not in seen]


def span_check(rows, expected_gpus: int, world_size: int, backend: str, visible: str | None,
               source: str = "") -> list[Check]:
    """--gpus N: the collective must span N GPUs (`world_size`: the GPUs CUDA shows, the collective's
    ranks); fewer fails, naming the GPUs CUDA was not shown."""
    if expected_gpus <= 0:
        return []
    world_size = world_size if backend == "nccl" else 0  # Gloo on CPU processes spans no GPU
    if world_size >= expected_gpus:
        return [Check("gpus", "GPUs spanned", str(world_size), str(expected_gpus), INFO,
                      f"the collective spans all {expected_gpus} GPUs --gpus asks for")]
    if world_size == 0 and "no NVIDIA driver" in source:
        # NVML answers, but neither /proc/driver/nvidia nor nvidia-smi says what CUDA is shown: the
        # collective ran over no GPU, and which GPUs CUDA would use is not known (said, not guessed)
        return [Check("gpus", "GPUs spanned", "0", str(expected_gpus), WARN,
                      f"the collective spanned no GPU: which of the {expected_gpus} GPUs CUDA is shown cannot be "
                      f"read here ({source}); the collective check is not a GPU verdict")]
    ident = identities(rows)
    hidden = hidden_gpus(rows, visible)
    named = ", ".join(name_gpu(g, ident) for g in hidden)
    where = f"CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else "CUDA_VISIBLE_DEVICES unset"
    return [Check("gpus", "GPUs spanned", str(world_size), str(expected_gpus), FAIL,
                  f"the collective could span {world_size} of the {expected_gpus} GPUs --gpus asks for ({where})"
                  + (f": not usable by CUDA: {named}" if named else ""))]
