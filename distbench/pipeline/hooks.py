"""The manifests' hooks ("module:function" strings: a family's plan, job parameters, job entry, steps...)
turned into functions, imported when first called. Apart from distbench.core.manifest on purpose: what
reads tables imports the manifests (their tables and sections), never the modules their hooks name
(tests/core/test_layout.py follows each hook as an import of this module)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def resolve(ref: str) -> Callable:
    """The function a manifest names as "module:function"."""
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except AttributeError:
        raise AttributeError(f"a manifest names {ref!r}, but {module} has no {name!r}") from None
