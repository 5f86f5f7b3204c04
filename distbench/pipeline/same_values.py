"""List entries of a config that spell one value twice (distbench.pipeline.config.check_config).

The schema's uniqueItems compares what was written, so it refuses `[8, 8]` and lets `[8, "8B"]`
through, or `{NCCL_MIN_NCHANNELS: 4}` beside `{NCCL_MIN_NCHANNELS: "04"}`. A size written twice was
quietly measured once (each list is made a set of byte counts), and NCCL settings written twice name
two job directories that measure the same thing. Each kind of value the shared schema defines for lists
has its key here, by its definition: every list of the config whose items are that definition is
checked, wherever it is (a family's key or a run-wide one), so no key is listed. A kind of value a
family defines for itself is its config_check's to compare (its manifest's hook: a traffic matrix
spelt two ways, for one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from distbench.core.shown import shown
from distbench.pipeline.cli_values import _resolve


def _size(value):
    from distbench.core.sizes import parse_size

    n = parse_size(value)
    return n, f"both are {n:,} bytes"


# NCCL reads these as a set of names (its parseList): Ring,Tree is Tree,Ring
_NAME_SETS = ("NCCL_ALGO", "NCCL_PROTO")


def _nccl_value(name: str, value):
    text = str(value)
    if name in _NAME_SETS:
        neg = text.startswith("^")
        return ("^" if neg else "") + ",".join(sorted(set(text.removeprefix("^").split(","))))
    # a number's text is the number NCCL reads (strtol): "04" is 4, "1" is 1; a name stays itself (a path
    # level's name and its legacy number are not taken for one another: NCCL's numbers changed over time)
    return int(text) if text.isdigit() else text


def _nccl_env(env):
    settings = {k: _nccl_value(k, v) for k, v in env.items()}
    label = " ".join(f"{k}={settings[k]}" for k in sorted(settings))
    return frozenset(settings.items()), (f"both set {label}" if label else "both are NCCL's defaults")


# $ref of a definition -> (an entry -> (what makes two entries one value, that value in words))
SAME_VALUE: dict[str, Callable] = {"#/definitions/size": _size, "#/definitions/nccl_env": _nccl_env}


def _lists(schema: dict, sub: dict, node, path: list) -> Iterator[tuple[list, str, list]]:
    """(path, its items' $ref, the list) of every list in `node` whose items are a definition of
    SAME_VALUE, the schema walked beside the config (through properties, $refs and oneOf's alternatives)."""
    sub = _resolve(schema, sub)
    for alt in [sub, *(_resolve(schema, a) for a in sub.get("oneOf", []))]:
        if isinstance(node, list) and "items" in alt:
            ref = alt["items"].get("$ref")
            if ref in SAME_VALUE:
                yield path, ref, node
            for i, v in enumerate(node):
                yield from _lists(schema, alt["items"], v, [*path, i])
            return
        if isinstance(node, dict) and "properties" in alt:
            for k, v in node.items():
                if k in alt["properties"]:
                    yield from _lists(schema, alt["properties"][k], v, [*path, k])
            return


def same_value_problems(config: dict, schema: dict, key: Callable[[list], str]) -> list[tuple[list, str]]:
    """(path, message) of every list entry that is an entry before it again, in other words: the
    message names the key, both entries and what they are. `key(path)` writes a path as the messages
    do (`<key>[2]`). Run once the schema passed, so every entry parses."""
    found = []
    for path, ref, entries in _lists(schema, schema, config, []):
        seen: dict = {}
        for i, entry in enumerate(entries):
            same, what = SAME_VALUE[ref](entry)
            first = seen.setdefault(same, i)
            if first != i:
                how = "" if entry == entries[first] else ", written another way"
                found.append(([*path, i], f"config key {key([*path, i])}: {shown(entry)} is {key([*path, first])} "
                                          f"({shown(entries[first])}) again{how} ({what}); give it once"))
    return found
