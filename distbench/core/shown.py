"""A config value as a message shows it: its repr, cut short, in bounded time for any value (the
config check's messages, and the checks each family states for its own config keys)."""

from __future__ import annotations

import reprlib

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 2, 6, 6, 80, 80, 40
MAX_VALUE_CHARS = 100


def shown(value) -> str:
    """A config value as a message shows it: its repr, cut short (bounded time for any value)."""
    text = _REPR.repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."
