"""Values from the command line, typed by the schema: Snakemake reads `--config key=value` with
YAML's base loader, so every scalar arrives as a string (`world_sizes=[2,4]` as ['2', '4'],
`cost='{gpu_hour_usd: 3}'` as '3'); here a number's text becomes the number where the schema wants
one, and 'true' / 'false' booleans, so the command line reads like the YAML file."""

from __future__ import annotations

import re


def _resolve(schema: dict, sub: dict) -> dict:
    ref = sub.get("$ref")
    if ref:
        node = schema
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        return node
    return sub


def _accepts_integer_only(schema: dict, sub: dict) -> bool:
    sub = _resolve(schema, sub)
    alts = [_resolve(schema, a) for a in sub.get("oneOf", [sub])]
    return any(a.get("type") == "integer" for a in alts) and not any(a.get("type") == "string" for a in alts)


def _accepts_boolean(schema: dict, sub: dict) -> bool:
    sub = _resolve(schema, sub)
    return any(_resolve(schema, a).get("type") == "boolean" for a in sub.get("oneOf", [sub]))


def _accepts_number_only(schema: dict, sub: dict) -> bool:
    sub = _resolve(schema, sub)
    alts = [_resolve(schema, a) for a in sub.get("oneOf", [sub])]
    return any(a.get("type") == "number" for a in alts) and not any(a.get("type") == "string" for a in alts)


# A number as YAML 1.2 and JSON write one: no nan, inf, hex or underscores, the whole value
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _as_number(text: str):
    """'3' -> 3, '1.5' -> 1.5, '2e-3' -> 0.002; None for anything else."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else float(text)


def _numeric_const(schema: dict, sub: dict, text: str):
    """A number the schema names outright: a `0` that is a const alternative beside a size (a
    rotation's bytes, 0 = off), or one of an enum of numbers with no type (`tp_size: 4` of [2, 4]):
    '0' or '4' from the command line means it."""
    sub = _resolve(schema, sub)
    for alt in [sub, *(_resolve(schema, a) for a in sub.get("oneOf", []))]:
        for const in [alt.get("const"), *(alt.get("enum") or [])]:
            if isinstance(const, (int, float)) and not isinstance(const, bool) and _as_number(text) == const:
                return const
    return None


def coerce_cli_values(node, schema: dict, sub: dict | None = None):
    """`--config world_sizes=[2,4]` arrives as ['2', '4'], and `cost='{gpu_hour_usd: 3}'` as '3'
    (Snakemake reads a value with YAML's base loader: every scalar a string): turn a number's text
    into the number where the schema wants an integer or a number (and no string), and 'true' /
    'false' into booleans, so the command line reads like the YAML file."""
    sub = _resolve(schema, sub if sub is not None else schema)
    if isinstance(node, str) and node.strip().isdigit() and _accepts_integer_only(schema, sub):
        return int(node)
    if isinstance(node, str) and _accepts_number_only(schema, sub) and _as_number(node) is not None:
        return _as_number(node)  # `health='{load_s: 600}'`, `step_factor: 1.5`
    if isinstance(node, str) and _numeric_const(schema, sub, node) is not None:
        return _numeric_const(schema, sub, node)  # a key's `{rotate_bytes: 0}`: 0 = off beside a size
    if isinstance(node, str) and node.strip().lower() in ("true", "false") and _accepts_boolean(schema, sub):
        return node.strip().lower() == "true"  # `--config profile=true`
    if isinstance(node, list):  # a list, or the list alternative of a oneOf (world_sizes: auto or a list)
        items = next((a["items"] for a in [sub, *(_resolve(schema, a) for a in sub.get("oneOf", []))]
                      if "items" in a), None)
        if items is not None:
            return [coerce_cli_values(v, schema, items) for v in node]
    if isinstance(node, dict):
        props = dict(sub.get("properties") or {})
        for alt in sub.get("oneOf", []):
            props.update(_resolve(schema, alt).get("properties") or {})
        return {k: coerce_cli_values(v, schema, props[k]) if k in props else v for k, v in node.items()}
    return node
