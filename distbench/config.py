"""Config validation with errors that name the key and the allowed values.

The JSON schema (distbench/config.schema.yaml) is the single source of truth. `check_config`
validates with jsonschema first (readable messages, every bad key at once), then lets
snakemake.utils.validate fill in the schema's defaults (it works on a plain dict, so tests and
distbench.plan users get the same config as the workflow).
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")
SIZE_REF = "#/definitions/size"
SIZE_HELP = ("use bytes as an integer, or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, "
             "or K/M/G/T = binary as in nccl-tests")


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
    if sub.get("$ref") == SIZE_REF:
        return f"a size ({SIZE_HELP})"
    sub = _resolve(schema, sub)
    if "enum" in sub:
        return "allowed: " + ", ".join(map(str, sub["enum"]))
    if "const" in sub:
        return f"exactly {sub['const']!r}"
    if "items" in sub:
        return "a list of: " + _allowed(schema, sub["items"])
    if "oneOf" in sub:
        return " or ".join(_allowed(schema, s) for s in sub["oneOf"])
    if "pattern" in sub:
        return f"a {sub.get('type', 'string')} matching {sub['pattern']}"
    if sub.get("type") in ("integer", "number"):
        bounds = [f"{op} {sub[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="))
                  if k in sub]
        kind = "an integer" if sub["type"] == "integer" else "a number"
        return f"{kind} {' and '.join(bounds)}".rstrip()
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


def _leaf_errors(schema: dict, err) -> list:
    """A list or object failing a oneOf whose only list/object alternative is the one it was meant
    for (comm.sizes: a list of sizes, or a sweep): report that alternative's own errors, which name
    the bad element (comm.sizes[1]), instead of 'matches none of the alternatives'."""
    if err.validator == "oneOf" and isinstance(err.instance, (list, dict)):
        kind = "array" if isinstance(err.instance, list) else "object"
        meant = [i for i, alt in enumerate(err.validator_value) if _resolve(schema, alt).get("type") == kind]
        leaves = [leaf for sub in err.context if len(meant) == 1 and sub.relative_schema_path[0] == meant[0]
                  for leaf in _leaf_errors(schema, sub)]
        if leaves:
            return leaves
    return [err]


def _validator(schema: dict):
    """jsonschema's validator for the schema, where a size ($ref: #/definitions/size) is also parsed:
    one message per bad size, in words (no regular expression), and at least 1 byte."""
    import jsonschema

    from distbench.sizes import parse_size

    base = jsonschema.Draft202012Validator
    base_ref = base.VALIDATORS["$ref"]

    def ref(validator, value, instance, sub):
        if value != SIZE_REF:
            yield from base_ref(validator, value, instance, sub)
            return
        try:
            n = parse_size(instance)
        except ValueError:
            n = None
        schema_ok = next(iter(base_ref(validator, value, instance, sub)), None) is None
        if n is not None and n < 1:
            message = f"{instance!r} is not a size: sizes must be >= 1 byte"
        elif n is None and schema_ok:
            message = f"{instance!r} is not a size: not a whole number of bytes"
        elif n is None or not schema_ok:
            message = f"{instance!r} is not a size ({SIZE_HELP})"
        else:
            return
        yield jsonschema.ValidationError(message, validator="size")

    return jsonschema.validators.extend(base, {"$ref": ref})(schema)


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
    """Validate; return a copy with defaults filled in. Raise ConfigError naming every bad key."""
    from snakemake.utils import validate

    from distbench.sizes import parse_size

    schema = load_schema()
    config = coerce_cli_values(copy.deepcopy(config), schema)
    errors = [leaf for e in _validator(schema).iter_errors(config) for leaf in _leaf_errors(schema, e)]
    errors.sort(key=lambda e: list(map(str, e.absolute_path)))
    problems = [_describe(schema, e) for e in errors]
    if not problems:
        # Snakemake's own default filling (what the workflow always did): it fills nested objects
        # (comm: {} gets every comm default, comm.gloo's included) and the object alternative of a
        # oneOf (comm.sizes as a sweep gets step_factor), so no code of ours is needed for that.
        validate(config, str(SCHEMA_PATH), set_default=True)
        sizes = config["comm"]["sizes"]
        if isinstance(sizes, dict) and parse_size(sizes["min_bytes"]) > parse_size(sizes["max_bytes"]):
            problems.append(f"config key comm.sizes: min_bytes {sizes['min_bytes']} is larger than max_bytes {sizes['max_bytes']}")
    if problems:
        raise ConfigError("invalid distbench config:\n  - " + "\n  - ".join(problems))
    return config
