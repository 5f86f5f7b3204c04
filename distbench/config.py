"""Config validation with errors that name the key and the allowed values.

The JSON schema (distbench/config.schema.yaml) is the single source of truth; the Snakefile runs
`check_config` first (readable messages, all errors at once) and then snakemake.utils.validate on
the same schema.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")


class ConfigError(ValueError):
    pass


def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _key(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _resolve(schema: dict, sub: dict) -> dict:
    ref = sub.get("$ref")
    if ref:
        node = schema
        for part in ref.lstrip("#/").split("/"):
            node = node[part]
        return node
    return sub


def _allowed(schema: dict, sub: dict) -> str:
    sub = _resolve(schema, sub)
    if "enum" in sub:
        return "allowed: " + ", ".join(map(str, sub["enum"]))
    if "items" in sub:
        return "a list of: " + _allowed(schema, sub["items"])
    if "oneOf" in sub:
        return " or ".join(_allowed(schema, s) for s in sub["oneOf"])
    if "pattern" in sub:
        return f"a {sub.get('type', 'string')} matching {sub['pattern']}"
    if sub.get("type") == "integer":
        lo = sub.get("minimum")
        return f"an integer{f' >= {lo}' if lo is not None else ''}"
    if "properties" in sub:
        return "keys: " + ", ".join(sub["properties"])
    return sub.get("description", "see distbench/config.schema.yaml")


def _describe(schema: dict, err) -> str:
    key = _key(err.absolute_path)
    if err.validator == "additionalProperties" and "properties" in err.schema:
        known = set(err.schema["properties"])
        unknown = sorted(set(err.instance) - known)
        return f"unknown key(s) {', '.join(_key([*err.absolute_path, u]) for u in unknown)}; allowed keys here: {', '.join(err.schema['properties'])}"
    if err.validator in ("enum", "oneOf", "pattern", "type", "minimum", "maximum", "exclusiveMinimum"):
        return f"config key {key}: {err.instance!r} is not valid ({_allowed(schema, err.schema)})"
    return f"config key {key}: {err.message}"


def fill_defaults(config: dict, schema: dict) -> dict:
    """Return a copy of config with the schema's defaults filled in (recursively for objects)."""
    out = copy.deepcopy(config)

    def fill(node, sub):
        sub = _resolve(schema, sub)
        for name, raw in (sub.get("properties") or {}).items():
            prop = _resolve(schema, raw)
            default = raw.get("default", prop.get("default"))  # a default may sit beside a $ref
            if name not in node and default is not None:
                node[name] = copy.deepcopy(default)
            if isinstance(node.get(name), dict):
                fill(node[name], prop)
            if isinstance(node.get(name), dict) and "oneOf" in prop:  # e.g. sizes as an object
                for alt in prop["oneOf"]:
                    if alt.get("type") == "object":
                        fill(node[name], alt)
    fill(out, schema)
    return out


def _accepts_integer_only(schema: dict, sub: dict) -> bool:
    sub = _resolve(schema, sub)
    alts = [_resolve(schema, a) for a in sub.get("oneOf", [sub])]
    return any(a.get("type") == "integer" for a in alts) and not any(a.get("type") == "string" for a in alts)


def coerce_cli_values(node, schema: dict, sub: dict | None = None):
    """`--config world_sizes=[2,4]` arrives as ['2', '4']: turn digit strings into integers where
    the schema wants an integer (and no string), so the command line reads like the YAML file."""
    sub = _resolve(schema, sub if sub is not None else schema)
    if isinstance(node, str) and node.strip().isdigit() and _accepts_integer_only(schema, sub):
        return int(node)
    if isinstance(node, list) and "items" in sub:
        return [coerce_cli_values(v, schema, sub["items"]) for v in node]
    if isinstance(node, dict):
        props = dict(sub.get("properties") or {})
        for alt in sub.get("oneOf", []):
            props.update(_resolve(schema, alt).get("properties") or {})
        return {k: coerce_cli_values(v, schema, props[k]) if k in props else v for k, v in node.items()}
    return node


def check_config(config: dict) -> dict:
    """Validate; return the config with defaults filled in. Raise ConfigError naming every bad key."""
    import jsonschema

    from distbench.sizes import parse_size

    schema = load_schema()
    config = coerce_cli_values(config, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [_describe(schema, e) for e in errors]
    if not problems:
        config = fill_defaults(config, schema)
        sizes = config["comm"]["sizes"]
        if isinstance(sizes, dict) and parse_size(sizes["min_bytes"]) > parse_size(sizes["max_bytes"]):
            problems.append(f"config key comm.sizes: min_bytes {sizes['min_bytes']} is larger than max_bytes {sizes['max_bytes']}")
    if problems:
        raise ConfigError("invalid distbench config:\n  - " + "\n  - ".join(problems))
    return config
