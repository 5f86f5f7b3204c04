"""The config schema, built in one place for every reader: the pipeline checks a config with it
(distbench.pipeline.config.load_schema) and each family's ranks check their job.json against its
bounds (distbench.launch.job_record), so a value the config refuses is refused in the ranks too.

The central file (distbench/pipeline/config.schema.yaml: the run-wide keys and the shared
definitions) gets each package's own key merged into its properties: a package's schema is the
config.schema.yaml in its folder, the schema of the config key named as the package. The op enum
(and every default marked EVERY) comes from distbench.core.ops_spec; the workload enum is the
caller's (the workload registry is above this layer: its callers load its extensions first).

A fragment is checked where it is read, each problem raised as a ManifestError naming the file: it
is the package's own file, and a bad one would otherwise surface as a traceback from jsonschema, or as
a wrong default deep in a run. Torch-free; it names no package, finding the fragments by their files.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from distbench.core.manifest_check import ManifestError, shown_file
from distbench.core.shown import shown

PACKAGE = Path(__file__).resolve().parents[1]  # the distbench package's folder
CENTRAL = PACKAGE / "pipeline" / "config.schema.yaml"
FRAGMENT = "config.schema.yaml"  # a package's own key's schema, in its folder

# The central schema's key after which the packages' keys come in its properties (the order the
# messages list the allowed keys in).
FAMILIES_AFTER = "x-family-keys-after"
# A schema's marker for a default that is every value of a definition's enum ("x-default-every: op":
# every op of the specs), filled in with that enum.
EVERY = "x-default-every"

_YAML_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def fragment_files(root: Path = PACKAGE) -> dict[str, Path]:
    """{config key: file} of every package folder under `root` holding a config.schema.yaml, the
    central one's aside, by folder name. The pipeline, which knows the packages' order, passes its own
    mapping to build_config_schema (and checks it names these same files)."""
    central = root / CENTRAL.relative_to(PACKAGE)
    return {p.parent.name: p for p in sorted(root.glob(f"*/{FRAGMENT}"))
            if p != central and not p.parent.name.startswith((".", "__"))}


def build_config_schema(workloads, fragments: dict[str, Path] | None = None, central: Path = CENTRAL) -> dict:
    """The config schema: the central file with each fragment ({config key: file}; default: every
    package's, fragment_files) merged into its properties after FAMILIES_AFTER's key, in the given
    order; the op enum (and the defaults marked EVERY) from the op specs, the layout enum from the
    layout specs; the workload enum
    `workloads` (the registry's names, its extensions loaded). Every default a fragment states is
    checked against its own sub-schema."""
    from distbench.core.layout_spec import LAYOUTS
    from distbench.core.ops_spec import OPS

    fragments = fragment_files() if fragments is None else dict(fragments)
    schema = yaml.safe_load(Path(central).read_text())
    merge_fragments(schema, fragments, central)
    schema["definitions"]["op"]["enum"] = list(OPS)
    schema["definitions"]["workload"]["enum"] = list(workloads)
    schema["definitions"]["layout"]["enum"] = list(LAYOUTS)
    fill_every(schema, schema["definitions"])
    for key, path in fragments.items():
        check_fragment_defaults(schema, key, path)
    return schema


def fill_every(node, definitions: dict) -> None:
    """Set the default of every node marked EVERY to its definition's whole enum."""
    if isinstance(node, dict):
        if EVERY in node:
            node["default"] = list(definitions[node[EVERY]]["enum"])
        for v in node.values():
            fill_every(v, definitions)
    elif isinstance(node, list):
        for v in node:
            fill_every(v, definitions)


# ---------------------------------------------------------------------------------- the fragments

def _yaml_problem(e: yaml.YAMLError) -> str:
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(e, 'problem', None) or type(e).__name__}{where}"


@functools.lru_cache(maxsize=64)
def _read_fragment(path: Path, key: str, _mtime: float) -> dict:
    import jsonschema

    try:
        fragment = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ManifestError(path, f"is not valid YAML ({_yaml_problem(e)})") from None
    if fragment is None:
        raise ManifestError(path, f"is empty: it must hold the schema of config key {key!r} (a mapping, "
                                  "such as `type: object` and its `properties`)")
    if not isinstance(fragment, dict):
        kind = _YAML_KINDS.get(type(fragment), type(fragment).__name__)
        raise ManifestError(path, f"holds {kind}, not a mapping: it must hold the schema of config key {key!r}")
    try:
        jsonschema.Draft202012Validator.check_schema(fragment)
    except jsonschema.SchemaError as e:
        where = "/".join(map(str, e.absolute_path)) or "its top level"
        raise ManifestError(path, f"is not a valid JSON Schema: at {where}: {e.message}") from None
    return fragment


def read_fragment(path: Path, key: str) -> dict:
    """A schema fragment, checked: a mapping and a valid JSON Schema (its $refs may name the central
    definitions, resolved once merged). A copy: build_config_schema fills it in."""
    try:
        mtime = path.stat().st_mtime
    except OSError as e:
        raise ManifestError(path, f"cannot be read ({e.strerror})") from None
    return copy.deepcopy(_read_fragment(path, key, mtime))


def merge_fragments(schema: dict, fragments: dict, central: Path) -> dict:
    """Merge each fragment ({config key: file}) into the central schema's properties, after its
    FAMILIES_AFTER key, in the given order. A key the central schema defines, or another fragment,
    is refused naming both files."""
    after = schema.pop(FAMILIES_AFTER, None)
    own, owners = {}, {}
    for key, path in fragments.items():
        if key in schema.get("properties", {}):
            raise ManifestError(path, f"is the schema of config key {key!r}, which {shown_file(central)} "
                                      "defines already (a package may only add a key of its own)")
        if key in own:
            raise ManifestError(path, f"is the schema of config key {key!r}, which {shown_file(owners[key])} "
                                      "defines already")
        own[key], owners[key] = read_fragment(path, key), path
    props = list(schema.get("properties", {}).items())
    at = next((i + 1 for i, (k, _) in enumerate(props) if k == after), len(props))
    schema["properties"] = dict(props[:at] + list(own.items()) + props[at:])
    return schema


# the keywords whose value is a schema, a {name: schema} mapping, or a list of schemas
_SUB_SCHEMA = ("additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
               "additionalItems", "unevaluatedItems", "unevaluatedProperties")
_SUB_SCHEMA_MAPS = ("patternProperties", "definitions", "$defs", "dependentSchemas")
_SUB_SCHEMA_LISTS = ("oneOf", "anyOf", "allOf", "prefixItems")


def _with_defaults(node, where: str):
    """(config key, schema) of every sub-schema of `node` that states a default, the deepest first (a
    default filled into an outer one is named as itself)."""
    if not isinstance(node, dict):
        return
    for name, sub in (node.get("properties") or {}).items():
        yield from _with_defaults(sub, f"{where}.{name}")
    items = node.get("items")
    for sub in items if isinstance(items, list) else [items]:
        yield from _with_defaults(sub, f"{where}[]")
    for k in _SUB_SCHEMA:
        yield from _with_defaults(node.get(k), where)
    for k in _SUB_SCHEMA_MAPS:
        for sub in (node.get(k) or {}).values() if isinstance(node.get(k), dict) else ():
            yield from _with_defaults(sub, where)
    for k in _SUB_SCHEMA_LISTS:
        for sub in node.get(k) or () if isinstance(node.get(k), list) else ():
            yield from _with_defaults(sub, where)
    if "default" in node:
        yield where, node


_DEFAULTS_CHECKED: set = set()


def check_fragment_defaults(schema: dict, key: str, path: Path) -> None:
    """Every default the fragment of config key `key` states (at any depth) meets its own sub-schema,
    as the run sees it: the merged schema's definitions, the defaults below it filled in. A default
    that does not is refused naming the file and the key; the merged schema is the same from one call
    to the next, so each is checked once."""
    import json

    import jsonschema

    done = (str(path), json.dumps(schema["properties"][key], sort_keys=True, default=str),
            json.dumps(schema.get("definitions", {}), sort_keys=True, default=str))
    if done in _DEFAULTS_CHECKED:
        return
    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def properties(validator, props, instance, sub):
        for name, prop in props.items():
            if isinstance(instance, dict) and isinstance(prop, dict) and "default" in prop:
                instance.setdefault(name, copy.deepcopy(prop["default"]))
        yield from check_properties(validator, props, instance, sub)

    filling = jsonschema.validators.extend(base, {"properties": properties})
    for where, node in _with_defaults(schema["properties"][key], key):
        sub = {**{k: v for k, v in node.items() if k != "default"}, "definitions": schema.get("definitions", {})}
        error = jsonschema.exceptions.best_match(filling(sub).iter_errors(copy.deepcopy(node["default"])))
        if error is not None:
            at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
            raise ManifestError(path, f"the default of config key {where} ({shown(node['default'])}) does not "
                                      f"meet its own schema: {where}{at}: {error.message}")
    _DEFAULTS_CHECKED.add(done)
