"""The figures a verdict is held against, kept once below every reader: the theoretical link peak per
GPU (link_peak), the sourced reference rows of busbw (EXPECTED, expected_for) and small-message
latency (LATENCY, latency_for), and the thresholds that call a measurement healthy against them
(HEALTHY_OF_PUBLISHED, LOW_PEAK_FRACTION). The communication report, the node gate and the
prediction all read them here, so the three judge one measurement alike. Torch-free, pandas-free.

nccl-tests' busbw is defined so it "can be directly compared to hardware peak bandwidths"
(https://raw.githubusercontent.com/NVIDIA/nccl-tests/master/doc/PERFORMANCE.md); that peak is the
per-GPU, per-direction bandwidth of the slowest link on the ring. Line rate is not reachable:
NVLink packets carry ~20% overhead, so ~80% of it is the practical ceiling
(https://github.com/NVIDIA/nccl/issues/1054, https://github.com/NVIDIA/nccl-tests/issues/149).
All bandwidths here are GB/s = 1e9 B/s, one direction.
"""

from __future__ import annotations

import re

# NVLink generation -> (GB/s per link per direction, links per GPU on the flagship part).
NVLINK_GENERATIONS = {1: (20.0, 4), 2: (25.0, 6), 3: (25.0, 12), 4: (25.0, 18), 5: (50.0, 18)}
# GPU name fragment -> NVLink generation. Order matters: "GH200" before "H200", "A800"/"H800" have fewer links.
_GPU_NVLINK = (
    (r"GB[23]00|B[123]00", 5, None),
    (r"H800", 4, 8),
    (r"GH200|H200|H100|H20\b", 4, None),
    (r"A800", 3, 8),
    (r"A100", 3, None),
    (r"V100", 2, None),
    (r"P100", 1, None),
)
# PCIe generation -> GB/s per lane per direction after 128b/130b (Gen3+) encoding.
PCIE_LANE_GBPS = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
PCIE_EFFECTIVE = 0.8  # TLP/DLLP overhead: a Gen4 x16 slot moves ~25 of its ~32 GB/s

# busbw below this share of the link peak at the largest size is suspicious. Healthy NVLink runs
# reach ~60% (2-GPU all_gather/reduce_scatter) to ~80% (all_reduce, broadcast) of the raw peak,
# so 50% flags a PCIe or socket fallback without warning on a machine that is fine.
LOW_PEAK_FRACTION = 0.50
# of a reference range's low end, what is still healthy: run-to-run and machine-to-machine spread
HEALTHY_OF_PUBLISHED = 0.90
_GPU_PCIE_GEN = ((r"H100|H200|H20\b|B200|RTX 50|L40|RTX PRO", 5), (r"A100|A800|A10\b|A30|A40|L4\b|RTX 30|RTX 40|RTX A", 4),
                 (r"V100|T4\b|P100|RTX 20", 3))


def _nvlink_generation_from_name(gpu_name: str | None) -> tuple[int | None, int | None]:
    for pattern, gen, links in _GPU_NVLINK:
        if gpu_name and re.search(pattern, gpu_name, re.I):
            # PCIe cards of NVLink GPUs reach peers over a bridge or not at all; the topology decides.
            return gen, links
    return None, None


def _pcie_gen_from_name(gpu_name: str | None) -> int | None:
    for pattern, gen in _GPU_PCIE_GEN:
        if gpu_name and re.search(pattern, gpu_name, re.I):
            return gen
    return None


def _gpu_paths(topology: dict | None, gpus: list[str] | None) -> tuple[dict | None, dict[str, int]]:
    """(slowest GPU-GPU link, NVLink count per GPU over its NVLink peers) for the GPUs in use.

    NCCL builds its rings over NVLink when the NVLink graph connects every GPU (NVSwitch boards,
    V100 hybrid cube-mesh, A100 4-GPU mesh); only otherwise does a PCIe hop bound the ring.
    """
    links = [l for l in (topology or {}).get("links") or [] if not gpus or (l["a"] in gpus and l["b"] in gpus)]
    if not links:
        return None, {}
    order = {"NV": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}
    slowest = max(links, key=lambda l: (order.get(l["type"], 6), -(l.get("nvlinks") or 0)))
    linked = {l["a"] for l in links} | {l["b"] for l in links}
    per_gpu = {g: 0 for g in linked}
    adj: dict[str, set] = {g: set() for g in linked}
    for l in links:
        if l["type"] == "NV":
            per_gpu[l["a"]] += l["nvlinks"]
            per_gpu[l["b"]] += l["nvlinks"]
            adj[l["a"]].add(l["b"])
            adj[l["b"]].add(l["a"])
    seen, todo = set(), [next(iter(linked))]
    while todo:
        g = todo.pop()
        if g not in seen:
            seen.add(g)
            todo += adj[g] - seen
    if seen == linked and slowest["type"] != "NV":
        # Connected over NVLink despite some PCIe pairs: report the NVLink side as the path.
        slowest = min((l for l in links if l["type"] == "NV"), key=lambda l: l["nvlinks"])
    return slowest, (per_gpu if seen == linked else {})


def link_peak(topology: dict | None = None, nvlink: dict | None = None, nccl: dict | None = None,
              gpu_name: str | None = None, gpus: list[str] | None = None) -> dict:
    """{"peak_gbps": float|None, "link": "NVLink4 x18", "basis": "...", "kind": nvlink|pcie|network|None}.

    `gpus` (e.g. ["GPU0", "GPU1"]) restricts the topology to the GPUs the job used."""
    if gpu_name is None:
        names = (topology or {}).get("gpu_names") or {}
        gpu_name = next(iter(names.values()), None)
        nv_gpus = (nvlink or {}).get("gpus") or []
        gpu_name = gpu_name or (nv_gpus[0].get("name") if nv_gpus else None)

    # Across nodes the NIC is the bottleneck (NVLink/PCIe inside a node are far faster).
    if nccl and (nccl.get("nnodes") or 1) > 1:
        speeds = list((nccl.get("net_speeds_mbps") or {}).values())
        net = nccl.get("net_plugin") or "network"
        if speeds:
            gbps = min(speeds) / 8 / 1000  # Mb/s -> GB/s
            return {"peak_gbps": gbps, "link": f"NET/{net} {min(speeds) // 1000} Gb/s", "kind": "network",
                    "basis": f"{nccl['nnodes']} nodes: the slowest NIC NCCL reported runs at {min(speeds) // 1000} Gb/s "
                             f"= {gbps:g} GB/s per direction, assuming one NIC per GPU."}
        return {"peak_gbps": None, "link": f"NET/{net}", "kind": "network",
                "basis": f"{nccl['nnodes']} nodes over NET/{net}, but the NCCL log gives no NIC speed."}

    path, nv_per_gpu = _gpu_paths(topology, gpus)
    nv_gpus = [g for g in (nvlink or {}).get("gpus", []) if g.get("nvlink_active")]
    gen, default_links = _nvlink_generation_from_name(gpu_name)
    nvml_gens = {g["nvlink_generation"] for g in nv_gpus if g.get("nvlink_generation")}
    if gen is None and nvml_gens:
        gen = min(nvml_gens)

    if path is not None:
        uses_nvlink = path["type"] == "NV"
    elif nvlink and nvlink.get("available"):
        uses_nvlink = bool(nv_gpus)
    else:  # only the name is known: SXM parts sit on NVLink, PCIe cards are assumed not bridged
        uses_nvlink = gen is not None and not re.search(r"PCIe", gpu_name or "", re.I)
    if uses_nvlink and gen:
        per_link, flagship_links = NVLINK_GENERATIONS[gen]
        if nv_gpus:
            links = min(g["nvlink_active"] for g in nv_gpus)
            src = f"NVML reports {links} active links per GPU (fewest over GPUs)"
        elif path is not None:
            # Per GPU, its NVLinks to all peers, capped at what the part has: NV18 to each of 7
            # NVSwitch peers is the same 18 links seen 7 times, while a mesh's NV4s add up.
            links = min(min(n, default_links or flagship_links) for n in nv_per_gpu.values())
            src = f"nvidia-smi topo -m shows {path['raw']} between {path['a']} and {path['b']} ({links} links per GPU)"
        else:
            links = default_links or flagship_links
            src = f"{gpu_name} has {links} links"
        peak = per_link * links
        return {"peak_gbps": peak, "link": f"NVLink{gen} x{links}", "kind": "nvlink",
                "basis": f"{src}; NVLink{gen} carries {per_link:g} GB/s per link per direction, so {peak:g} GB/s "
                         f"(about {peak * 0.8:.0f} GB/s is reachable after protocol overhead)."}

    # PCIe: prefer the link NVML reports (max gen/width, since idle GPUs downclock the link).
    pcie = [(g.get("pcie_gen_max"), g.get("pcie_width_max")) for g in (nvlink or {}).get("gpus", [])]
    pcie = [(gn, w) for gn, w in pcie if gn and w]
    if pcie:
        pgen, width = min(pcie)
        src = "NVML"
    else:
        pgen, width, src = _pcie_gen_from_name(gpu_name), 16, f"assumed x16 for {gpu_name}"
    if pgen in PCIE_LANE_GBPS:
        peak = round(PCIE_LANE_GBPS[pgen] * width, 1)
        where = f" ({path['type']} between {path['a']} and {path['b']})" if path else ""
        cross = " The path crosses the CPU interconnect between NUMA nodes, which can cap it lower." if path and path["type"] == "SYS" else ""
        return {"peak_gbps": peak, "link": f"PCIe Gen{pgen} x{width}", "kind": "pcie",
                "basis": f"GPUs talk over PCIe{where}; Gen{pgen} x{width} ({src}) is {peak:g} GB/s raw per direction, "
                         f"about {peak * PCIE_EFFECTIVE:.0f} GB/s effective.{cross}"}
    return {"peak_gbps": None, "link": None, "kind": None,
            "basis": "no topology, NVML or known GPU name to derive the link peak from."}


GiB = 1 << 30
# Published busbw for large collectives; each row cites where the number was stated, found again in the
# public thread (docs/fixtures.md lists them). kind: "published" (a public statement, source = its
# address) or "ours" (nccl-tests run by this project on a named machine and date, source = where it is
# kept): a figure of ours is never called published (reference_text), and is kept only where no public
# one was found. nvls: measured with NVLink SHARP on (True), off or ring forced (False), or either
# (None: ops NVLS does not accelerate). form: "sxm" (NVSwitch baseboards) or "pcie" (PCIe cards, no
# NVLink). nodes > 1 with per_nic: the figure is per network card, scaled by the NICs per node.
_EXPECTED_FIELDS = ("gpu", "gpus", "op", "min_bytes", "nvls", "expected_busbw_gbps_low", "expected_busbw_gbps_high",
                    "source", "note", "kind")
PUBLISHED, OURS = "published", "ours"
NCCL_TESTS = "https://github.com/NVIDIA/nccl-tests/issues/"
NCCL = "https://github.com/NVIDIA/nccl/issues/"
H200X2 = ("nccl-tests 2.19.6 (MPI build, mpiexec -n 2) by this project on a lent 2x H200, 2026-11-28; "
          "benchmarks/results/gate-reference-h200x2-2026-11-28")
H100X2 = ("the gate's NCCL all_reduce (events timing; graph timing at 8 B with NCCL_GRAPH_MIXING_SUPPORT=0) by this "
          "project on a lent 2x H100, 2026-11-27, 4 launches (noise.txt); benchmarks/results/gate-h100x2-2026-11-27")
H100X4 = ("this project's NCCL collective sweep (events and graph timing, NVLS off) on a lent 4x H100, 2026-11-26 "
          "(its summary table under run-h100x4/tables/); benchmarks/results/report-h100x4-2026-11-26")
ML_ENGINEERING = "https://github.com/stas00/ml-engineering/blob/master/network/README.md"
AZURE_A100 = "https://github.com/Azure/AI-benchmarking-guide/blob/main/Azure_Results/ND_A100_v4_results.md"
ISSUE_48 = ("nccl-tests 2.19.6 (MPI build, mpiexec -n 4) on a lent 4x H200, 2026-11-28, quoted from issue 48; "
            "benchmarks/results/gate-reference-h200x4-2026-11-28")
_EXPECTED_ROWS = (
    ("H100", 8, "all_reduce", 1 * GiB, False, 360.0, 370.0, NCCL_TESTS + "212",
     "NCCL maintainer: ~370 GB/s effective NVLink4 bandwidth with NCCL_ALGO=RING (NVLS off); "
     "corroborated by 368.76 GB/s in " + NCCL_TESTS + "309", PUBLISHED),
    ("H100", 8, "all_reduce", 1 * GiB, True, 450.0, 480.0, NCCL_TESTS + "212",
     "NVLink SHARP (NVLS, the default on NVSwitch systems): peak busbw ~480 GB/s on 8 GPUs at large sizes; "
     "476 GB/s at 4 GiB called \"in the expected range for H100\" by NVIDIA in " + NCCL_TESTS + "290", PUBLISHED),
    ("H200", 8, "all_reduce", 1 * GiB, True, 450.0, 480.0, NCCL_TESTS + "272",
     "8x H200, NCCL 2.20.3 defaults: peak 475 GB/s busbw (sizes up to 4 GiB)", PUBLISHED),
    ("H200", 8, "all_reduce", 1 * GiB, False, 360.0, 370.0, NCCL_TESTS + "212",
     "H200 has H100's NVLink4 x18: the maintainer's ~370 GB/s effective NVLink4 figure with NCCL_ALGO=RING "
     "(no H200-specific ring figure was found)", PUBLISHED),
    ("H100", 8, "all_gather", 1 * GiB, None, 360.0, 370.0, NCCL_TESTS + "212",
     "NCCL maintainer: the ~370 GB/s effective NVLink4 bandwidth shows as busbw in the non-allreduce operations",
     PUBLISHED),
    ("H100", 8, "reduce_scatter", 1 * GiB, None, 360.0, 370.0, NCCL_TESTS + "212",
     "NCCL maintainer: the ~370 GB/s effective NVLink4 bandwidth shows as busbw in the non-allreduce operations",
     PUBLISHED),
    ("H200", 2, "all_reduce", 1 * GiB, False, 320.0, 340.0,
     "nccl-tests all_reduce_perf by this project, 2x H200 NV18, 2026-11-26; benchmarks/results/comm-fidelity-h200x2-2026-11-26",
     "2x H200 NV18, nccl-tests all_reduce 1 GiB ~330 GB/s busbw: no public figure for 2 GPUs was found", OURS),
    ("H200", 2, "all_gather", 1 * GiB, None, 261.0, 271.0, H200X2,
     "2x H200 NV18, nccl-tests 2.19.6 all_gather 1 GiB, 268-270 GB/s busbw over 3 launches", OURS),
    ("H200", 2, "reduce_scatter", 1 * GiB, None, 266.0, 278.0, H200X2,
     "2x H200 NV18, nccl-tests 2.19.6 reduce_scatter 1 GiB, 274-278 GB/s busbw over 3 launches", OURS),
    # 4x H200 of an 8-GPU NVSwitch board, nccl-tests 2.19.6 built with MPI, `mpiexec -n 4` (one process
    # per GPU, like torchrun), NVLS off, 2026-11-28: a held-out measurement (our own collective sweep
    # matched it within 0.956-1.002); the band is the figure and 3% under it
    ("H200", 4, "all_reduce", 1 * GiB, False, 344.0, 355.0, ISSUE_48,
     "4x H200 NV18, nccl-tests all_reduce 1 GiB 354.7 GB/s busbw: no public figure for 4 GPUs was found", OURS),
    ("H200", 4, "all_gather", 1 * GiB, None, 316.0, 327.0, ISSUE_48,
     "4x H200 NV18, nccl-tests all_gather 1 GiB 326.4 GB/s busbw", OURS),
    ("H200", 4, "reduce_scatter", 1 * GiB, None, 317.0, 327.0, ISSUE_48,
     "4x H200 NV18, nccl-tests reduce_scatter 1 GiB 327.0 GB/s busbw", OURS),
    ("H200", 8, "all_gather", 1 * GiB, None, 360.0, 370.0, NCCL_TESTS + "212",
     "H200 has H100's NVLink4 x18: the maintainer's ~370 GB/s effective NVLink4 bandwidth as busbw in the "
     "non-allreduce operations; 361.4 GB/s measured on 8x H200 at 16 GiB (NCCL 2.27.7) in " + ML_ENGINEERING, PUBLISHED),
    ("H200", 8, "reduce_scatter", 1 * GiB, None, 360.0, 370.0, NCCL_TESTS + "212",
     "H200 has H100's NVLink4 x18: the maintainer's ~370 GB/s effective NVLink4 bandwidth as busbw in the "
     "non-allreduce operations; 362.9 GB/s measured on 8x H200 at 16 GiB (NCCL 2.27.7) in " + ML_ENGINEERING, PUBLISHED),
    # 2x and 4x H100 SXM (GPUs of an 8-GPU NVSwitch board, NVLS off), measured by this project: no public
    # figure at 1 GiB for these counts was found (NVIDIA/nccl#1455 gives 365-370 GB/s ring all_reduce on 2-8
    # H100 at 2-4 GiB, a larger size). Our collective sweep matched nccl-tests within 0.956-1.002 on 4x H200 (the
    # rows above); the band is the figures and 3% under the lowest, as for the H200 rows. The 512 MiB figures hold
    # at 1 GiB as a floor: busbw grows with size up to the link's limit.
    ("H100", 2, "all_reduce", 1 * GiB, False, 322.0, 332.0, H100X2,
     "2x H100 NV18, the gate's all_reduce 1 GiB: 330.0-331.7 GB/s busbw over 4 launches", OURS),
    ("H100", 2, "all_gather", 512 << 20, None, 242.0, 253.0, H100X4,
     "2x H100 NV18, all_gather 512 MiB: 249.8 (events) and 252.8 GB/s (graph) busbw", OURS),
    ("H100", 2, "reduce_scatter", 512 << 20, None, 243.0, 252.0, H100X4,
     "2x H100 NV18, reduce_scatter 512 MiB: 251.3 (events) and 252.3 GB/s (graph) busbw", OURS),
    ("H100", 4, "all_reduce", 512 << 20, False, 335.0, 346.0, H100X4,
     "4x H100 NV18, all_reduce 512 MiB: 345.8 (events) and 346.0 GB/s (graph) busbw", OURS),
    ("H100", 4, "all_gather", 512 << 20, None, 304.0, 314.0, H100X4,
     "4x H100 NV18, all_gather 512 MiB: 313.5 (events) and 314.1 GB/s (graph) busbw", OURS),
    ("H100", 4, "reduce_scatter", 512 << 20, None, 302.0, 312.0, H100X4,
     "4x H100 NV18, reduce_scatter 512 MiB: 311.7 (graph) and 312.1 GB/s (events) busbw", OURS),
    ("A100", 8, "all_reduce", 1 * GiB, None, 225.0, 232.0, AZURE_A100,
     "8x A100-SXM4-80GB (Azure ND A100 v4, NCCL 2.18.5), in-place all_reduce: 228.10 GB/s busbw at 1 GiB (the page "
     "says NVLS, which A100 does not have: " + NCCL_TESTS + "228); 229.04 GB/s at 1 GiB on a single A100 node in "
     + ML_ENGINEERING, PUBLISHED),
    ("A100", 8, "all_reduce", 8 * GiB, False, 220.0, 235.0, NCCL_TESTS + "149",
     "NCCL maintainer: 12 NVLink3 links give ~240 GB/s effective, ~230 GB/s reachable at 8 GiB", PUBLISHED),
    # PCIe-only parts: "on PCI systems, the performance you get is usually determined by the bandwidth
    # your CPU and memory can deliver" (NCCL maintainer, of 28 GB/s on 8x RTX 5090)
    ("RTX 5090", 8, "all_reduce", 1 * GiB, None, 28.0, 28.0, NCCL + "1639",
     "8x RTX 5090 on PCIe Gen5: 28 GB/s busbw at 1-8 GiB, which the NCCL maintainer called impressive for "
     "PCIe (the CPU and memory bound it)", PUBLISHED, {"form": "pcie"}),
    ("RTX 5090", 4, "all_reduce", 1 * GiB, None, 35.0, 35.0, NCCL + "1639",
     "4x RTX 5090 on PCIe Gen5: 35 GB/s busbw at 1-8 GiB (same thread)", PUBLISHED, {"form": "pcie"}),
    # two nodes over InfiniBand NDR: per 400 Gb/s NIC, with NCCL_ALGO=RING (Tree over-reports on 2 nodes:
    # TWO_NODE_TREE)
    ("H100", 16, "all_reduce", 1 * GiB, None, 46.0, 48.0, NCCL_TESTS + "290",
     "NVIDIA: \"for NDR @ 400Gbps you should see 46-48GB/s per NIC\" when benchmarking two nodes with "
     "NCCL_ALGO=RING", PUBLISHED, {"node_count": 2, "per_nic": True, "algo": "ring"}),
)
_DEFAULTS = {"node_count": 1, "form": "sxm", "per_nic": False, "algo": None}
EXPECTED = [{**_DEFAULTS, **dict(zip(_EXPECTED_FIELDS, r[:10])), **(r[10] if len(r) > 10 else {})}
            for r in _EXPECTED_ROWS]
# On two nodes NCCL's Tree (or NVLSTree) all_reduce puts part of the traffic on NVLink and can report a
# busbw beyond the network's: a per-NIC figure holds with NCCL_ALGO=RING only.
TWO_NODE_TREE = (NCCL_TESTS + "196", "on 2 nodes NCCL uses Tree, whose busbw can go beyond the network "
                 "bottleneck (NCCL maintainer); benchmark the network with NCCL_ALGO=RING")

# Small-message latency, CUDA graphs: time per op (µs) at or below max_bytes.
LATENCY = [
    # ours first: 8 B with graph mixing off is the gate's own point; the published ~6 µs below is 128 B-64 KiB
    {"gpu": "H100", "gpus": 2, "op": "all_reduce", "max_bytes": 8, "timing": "graph",
     "expected_latency_us": 5.41, "source": H100X2, "kind": OURS,
     "note": "2x H100, the gate's all_reduce 8 B under CUDA graphs with NCCL_GRAPH_MIXING_SUPPORT=0: 5.29-5.55 µs "
             "over 4 launches (median 5.41)"},
    {"gpu": "H100", "gpus": 2, "op": "all_reduce", "max_bytes": 64 << 10, "timing": "graph",
     "expected_latency_us": 6.0, "source": NCCL + "1259", "kind": PUBLISHED,
     "note": "2x H100 on an HGX board, nccl-tests with CUDA graphs (-G 10) and NCCL_ALGO=NVLSTree forced, "
             "128 B - 64 KiB: \"approximately 6us\" (NCCL 2.20.5)"},
    {"gpu": "H200", "gpus": 2, "op": "all_reduce", "max_bytes": 8, "timing": "graph",
     "expected_latency_us": 4.56, "source": H200X2, "kind": OURS,
     "note": "2x H200, nccl-tests all_reduce 8 B with -G 10 and NCCL_GRAPH_MIXING_SUPPORT=0: 4.56-4.57 µs"},
    {"gpu": "H200", "gpus": 4, "op": "all_reduce", "max_bytes": 8, "timing": "graph",
     "expected_latency_us": 6.88, "source": ISSUE_48, "kind": OURS,
     "note": "4x H200, nccl-tests all_reduce 8 B with -G 10 and NCCL_GRAPH_MIXING_SUPPORT=0: 6.88 µs"},
]


def latency_for(gpu_name: str | None, world_size: int, op: str, size_bytes: int) -> dict | None:
    """The published small-message latency that applies (graph timing), or None."""
    if not gpu_name or re.search(r"PCIe|NVL\b", gpu_name, re.I):
        return None
    return next((r for r in LATENCY if re.search(rf"\b{r['gpu']}\b", gpu_name, re.I) and r["gpus"] == world_size
                 and norm_op(r["op"]) == norm_op(op) and size_bytes <= r["max_bytes"]), None)


def latency_text(ref: dict) -> str:
    if ref.get("kind", PUBLISHED) != PUBLISHED:
        return (f"the {ref['expected_latency_us']:g} µs we measured for {ref['gpus']}x {ref['gpu']} with CUDA graphs "
                f"({ref['source']}; our measurement, not a publication)")
    return (f"the published ~{ref['expected_latency_us']:g} µs for {ref['gpus']}x {ref['gpu']} with CUDA graphs "
            f"({ref['source']})")


def reference_text(exp: dict) -> str:
    """A reference figure as the report names it: "the published 360-370 GB/s for 8x H100 (its
    source)", or, for a figure of ours, what it is (nccl-tests, where, when, where it is kept)."""
    span = f"{exp['expected_busbw_gbps_low']:g}-{exp['expected_busbw_gbps_high']:g} GB/s"
    where = f"{exp['gpus']}x {exp['gpu']}"
    if exp.get("kind", PUBLISHED) == PUBLISHED:
        return f"the published {span} for {where} ({exp['source']})"
    return f"the {span} we measured for {where} ({exp['source']}; our measurement, not a publication)"


TABLE = "distbench/core/references.py"  # where the reference figures are kept (EXPECTED), as the report names it


def missing_reference(gpu_name: str | None, world_size: int, op: str, size_bytes: int,
                      nvls: bool | None = None, node_count: int = 1, nics: int | None = None,
                      algo: str | None = None) -> str:
    """What a verdict without a reference figure lacks, named (GPU, world size, op, size) with why
    the table has none: "no reference figure for 4x H100 all_reduce at 1 GiB in
    distbench/core/references.py's table (published, or measured by us; it has all_reduce for 8x
    A100, 8x H100, 2x H200, 8x H200)". Say it only where expected_for found none."""
    from distbench.core.units import human_bytes

    if not gpu_name:
        return (f"no GPU name in env.json, so no reference figure for {world_size} ranks of {op} at "
                f"{human_bytes(size_bytes)} from {TABLE}'s table")
    gpu = next((r["gpu"] for r in EXPECTED if re.search(rf"\b{r['gpu']}\b", gpu_name, re.I)), gpu_name)
    what = f"no reference figure for {world_size}x {gpu} {op} at {human_bytes(size_bytes)} in {TABLE}'s table"
    if _pcie_name(gpu_name):
        return f"{what} (its figures are for SXM parts on NVSwitch baseboards, not {gpu_name}, and for PCIe-only RTX 5090)"
    same = [r for r in EXPECTED if r["gpu"] == gpu and r["gpus"] == world_size and r["node_count"] == node_count
            and norm_op(r["op"]) == norm_op(op)]
    if node_count == 2 and any(r["per_nic"] for r in same):
        if str(algo or "").lower() != "ring":
            return f"{what} ({TWO_NODE_TREE[1]}: {TWO_NODE_TREE[0]})"
        if not nics:
            return f"{what} (its {node_count}-node figure is per NIC, and the NICs per node are not known)"
    if same and all(size_bytes < r["min_bytes"] for r in same):
        return f"{what} (its {world_size}x {gpu} {op} figure holds from {human_bytes(min(r['min_bytes'] for r in same))})"
    if same and nvls is not None:
        return f"{what} (it has {world_size}x {gpu} {op} with NVLS {'on' if same[0]['nvls'] else 'off'} only)"
    has = [f"{r['gpus']}x {r['gpu']}" for r in sorted(EXPECTED, key=lambda r: (r["gpu"], r["gpus"]))
           if norm_op(r["op"]) == norm_op(op)]
    has = list(dict.fromkeys(has))
    return f"{what} (published, or measured by us; " + (
        f"it has {op} for {', '.join(has)})" if has else f"it has no {op} figure)")


def norm_op(op) -> str:
    """An op name as the reference figures compare it: "AllReduce", "all_reduce", "allreduce" alike."""
    return str(op).replace("_", "").lower()


def _pcie_name(gpu_name: str) -> bool:
    return bool(re.search(r"PCIe|NVL\b", gpu_name, re.I))


def expected_for(gpu_name: str | None, world_size: int, op: str, size_bytes: int,
                 nvls: bool | None = None, node_count: int = 1, nics: int | None = None,
                 algo: str | None = None) -> dict | None:
    """The published figure that applies, or None. With nvls unknown the NVLS-off (lower) row wins,
    so a run is never judged against a ceiling it may not have been allowed to use. A PCIe card's name
    (H100 PCIe, H100 NVL) matches only rows of PCIe parts. Over several nodes a per-NIC row applies with
    the NICs per node known (`nics`: the figure is scaled by them) and NCCL_ALGO=RING (`algo`: on two
    nodes Tree over-reports, TWO_NODE_TREE); the row returned then holds the scaled figure."""
    if not gpu_name:
        return None
    pcie = _pcie_name(gpu_name)
    rows = [
        r for r in EXPECTED
        if re.search(rf"\b{r['gpu']}\b", gpu_name, re.I) and r["gpus"] == world_size and r["node_count"] == node_count
        and (r["form"] == "pcie" or not pcie) and norm_op(r["op"]) == norm_op(op) and size_bytes >= r["min_bytes"]
        and (nvls is None or r["nvls"] is None or r["nvls"] == nvls)
        and (r["algo"] is None or str(algo or "").lower() == r["algo"])
    ]
    if any(r["per_nic"] for r in rows):
        if not nics:
            return None
        rows = [{**r, "expected_busbw_gbps_low": r["expected_busbw_gbps_low"] * nics,
                 "expected_busbw_gbps_high": r["expected_busbw_gbps_high"] * nics,
                 "note": f"{r['note']}; x {nics} NICs per node"} if r["per_nic"] else r for r in rows]
    if not rows:
        return None
    return min(rows, key=lambda r: r["expected_busbw_gbps_low"])
