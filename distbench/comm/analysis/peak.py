"""The link peak and the reference figures as the comm report reads them. They are kept in
distbench.core.references (the node gate and the prediction hold measurements against the same
figures); this module names them for the comm family's own readers."""

from __future__ import annotations

from distbench.core.references import (  # noqa: F401 - the comm report's names for the shared figures
    EXPECTED,
    GiB,
    LATENCY,
    LOW_PEAK_FRACTION,
    NVLINK_GENERATIONS,
    OURS,
    PCIE_EFFECTIVE,
    PCIE_LANE_GBPS,
    PUBLISHED,
    TABLE,
    TWO_NODE_TREE,
    expected_for,
    latency_for,
    latency_text,
    link_peak,
    missing_reference,
    norm_op,
    reference_text,
)
