"""The packages' config schema fragments, read, checked and merged into the central schema: the
functions live in distbench.core.config_schema, low enough for the ranks to build the same schema
(they check their job.json against it); the pipeline's names for them stay here."""

from __future__ import annotations

from distbench.core.config_schema import (
    FAMILIES_AFTER,
    check_fragment_defaults,
    merge_fragments,
    read_fragment,
)

__all__ = ["FAMILIES_AFTER", "check_fragment_defaults", "merge_fragments", "read_fragment"]
