"""Config validation with errors that name the key and the allowed values.

The JSON schema (distbench/pipeline/config.schema.yaml) is the single source of truth, except for
the op names: `load_schema` fills their enum and comm.ops' default in from distbench.comm.spec.OPS,
so an op is named in one place. `check_config` validates with jsonschema first (readable messages,
every bad key at once), then lets snakemake.utils.validate fill in the schema's defaults (it works on
a plain dict, so tests and distbench.pipeline.plan users get the same config as the workflow).
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from distbench.core.run_label import baseline_tables_dir

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")
SIZE_REF = "#/definitions/size"
SIZE_HELP = ("use bytes as an integer, or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, "
             "or K/M/G/T = binary as in nccl-tests")
SIZE_UNITS = ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "K", "M", "G", "T")  # what parse_size reads
# A number and some letters: what a size with an unknown unit looks like ('10XB'); the sign is kept
# so '-1' and '-1MB' can be told apart from malformed text.
_SIZE_LIKE = re.compile(r"^\s*(-?)\s*[0-9]+(?:\.[0-9]+)?\s*([A-Za-z]*)\s*$")

# job_env names that change what a process loads or runs (the dynamic loader, the program and module
# search paths, startup hooks, code NCCL and CUDA load by name). job_env reaches every rank of every
# job, so these are refused unless the config opts in with LOADER_OPT_IN: true.
LOADER_OPT_IN = "job_env_allow_loader_vars"
LOADER_VARS = frozenset({
    "PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONBREAKPOINT",
    "BASH_ENV", "ENV", "GCONV_PATH", "CUDA_INJECTION64_PATH",
    "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
})
LOADER_PREFIXES = ("LD_", "DYLD_")  # LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ... and macOS's DYLD_*


class ConfigError(ValueError):
    pass


def load_schema() -> dict:
    """The schema, with the op enum and comm.ops' default from the op specs, and the workload enum
    from the workload registry (with any DISTBENCH_WORKLOAD_MODULES extension loaded)."""
    from distbench.comm.spec import OPS
    from distbench.workloads.registry import WORKLOADS, load_extensions

    load_extensions()
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    schema["definitions"]["op"]["enum"] = list(OPS)
    schema["definitions"]["workload"]["enum"] = list(WORKLOADS)
    schema["properties"]["comm"]["properties"]["ops"]["default"] = list(OPS)
    return schema


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
        return sub.get("description") or f"exactly {sub['const']!r}"
    if "items" in sub:
        return "a list of: " + _allowed(schema, sub["items"])
    if "oneOf" in sub:
        return " or ".join(_allowed(schema, s) for s in sub["oneOf"])
    if "pattern" in sub:  # a pattern's description says it in words (job_env); else show the pattern
        return sub.get("description") or f"a {sub.get('type', 'string')} matching {sub['pattern']}"
    if sub.get("type") in ("integer", "number"):
        bounds = [f"{op} {sub[k]}" for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="))
                  if k in sub]
        kind = "an integer" if sub["type"] == "integer" else "a number"
        return f"{kind} {' and '.join(bounds)}".rstrip()
    if "properties" in sub:
        return "keys: " + ", ".join(sub["properties"])
    if sub.get("type") == "object":
        return "a mapping of NAME: value"
    if sub.get("type") == "boolean":
        return "true or false"
    return sub.get("description", "see distbench/pipeline/config.schema.yaml")


def _bad_chars(pattern: str, instance) -> str:
    """For one character class (^[...]*$, job_env's values): the characters of `instance` it refuses."""
    if not (isinstance(instance, str) and pattern.startswith("^[") and pattern.endswith("]*$")
            and pattern.count("[") == 1):
        return ""
    bad = ["a space" if c == " " else repr(c) for c in dict.fromkeys(instance) if not re.fullmatch(pattern, c)]
    return f": it contains {', '.join(bad[:-1])} and {bad[-1]}" if len(bad) > 1 else \
        f": it contains {bad[0]}" if bad else ""


def _size_or_else(schema: dict, err) -> str | None:
    """A scalar failing a oneOf of a size and something else (comm.rotate_bytes: a size, or 0 = off):
    the size's own message in words, then the other alternative."""
    alts = err.validator_value
    meant = [i for i, alt in enumerate(alts) if alt.get("$ref") == SIZE_REF]
    sizes = [s for s in err.context if meant and s.relative_schema_path[0] == meant[0] and s.validator == "size"]
    if not sizes:
        return None
    others = " or ".join(_allowed(schema, alt) for i, alt in enumerate(alts) if i != meant[0])
    return f"config key {_key(err.absolute_path)}: {sizes[0].message}; or use {others}"


def _describe(schema: dict, err) -> str:
    key = _key(err.absolute_path)
    if err.validator == "pattern" and "propertyNames" in err.absolute_schema_path:
        return f"config key {key}: name {err.instance!r} is not valid ({_allowed(schema, err.schema)})"
    if err.validator == "pattern":
        return (f"config key {key}: {err.instance!r} is not valid{_bad_chars(err.validator_value, err.instance)} "
                f"({_allowed(schema, err.schema)})")
    if err.validator == "oneOf" and not isinstance(err.instance, (list, dict)):
        said = _size_or_else(schema, err)
        if said:
            return said
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

    from distbench.core.sizes import parse_size

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
        number = isinstance(instance, (int, float)) and not isinstance(instance, bool)
        like = _SIZE_LIKE.match(instance) if isinstance(instance, str) else None
        units = {u.lower() for u in SIZE_UNITS}
        if n is not None and schema_ok and n >= 1:
            return
        if (n is not None and n < 1) or (number and instance < 1) or (like and like.group(1)):
            message = f"{instance!r} is not a size: sizes must be >= 1 byte"  # 0, '0MB', -1, '-1', '-2KiB'
        elif number or (n is None and schema_ok):
            message = f"{instance!r} is not a size: not a whole number of bytes"  # 1.5, '1.5B'
        elif like and like.group(2).lower() not in units:
            message = (f"{instance!r} is not a size: unknown unit {like.group(2)!r}; "
                       f"allowed units {', '.join(SIZE_UNITS)}")
        else:
            message = f"{instance!r} is not a size ({SIZE_HELP})"
        yield jsonschema.ValidationError(message, validator="size")

    return jsonschema.validators.extend(base, {"$ref": ref})(schema)


def _accepts_integer_only(schema: dict, sub: dict) -> bool:
    sub = _resolve(schema, sub)
    alts = [_resolve(schema, a) for a in sub.get("oneOf", [sub])]
    return any(a.get("type") == "integer" for a in alts) and not any(a.get("type") == "string" for a in alts)


def _accepts_boolean(schema: dict, sub: dict) -> bool:
    sub = _resolve(schema, sub)
    return any(_resolve(schema, a).get("type") == "boolean" for a in sub.get("oneOf", [sub]))


def coerce_cli_values(node, schema: dict, sub: dict | None = None):
    """`--config world_sizes=[2,4]` arrives as ['2', '4']: turn digit strings into integers where
    the schema wants an integer (and no string), so the command line reads like the YAML file."""
    sub = _resolve(schema, sub if sub is not None else schema)
    if isinstance(node, str) and node.strip().isdigit() and _accepts_integer_only(schema, sub):
        return int(node)
    if isinstance(node, str) and node.strip().lower() in ("true", "false") and _accepts_boolean(schema, sub):
        return node.strip().lower() == "true"  # `--config profile=true`
    if isinstance(node, list) and "items" in sub:
        return [coerce_cli_values(v, schema, sub["items"]) for v in node]
    if isinstance(node, dict):
        props = dict(sub.get("properties") or {})
        for alt in sub.get("oneOf", []):
            props.update(_resolve(schema, alt).get("properties") or {})
        return {k: coerce_cli_values(v, schema, props[k]) if k in props else v for k, v in node.items()}
    return node


def _path_order(path) -> list:
    """Errors in the order of the config: comm.sizes[2] before comm.sizes[10]."""
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in path]


def is_loader_var(name: str) -> bool:
    return name in LOADER_VARS or name.startswith(LOADER_PREFIXES)


def _loader_var_problems(config: dict) -> list:
    """job_env names that change how programs load, unless the config opts in (see LOADER_VARS)."""
    job_env = config.get("job_env")
    if not isinstance(job_env, dict) or config.get(LOADER_OPT_IN) is True:
        return []
    return [(["job_env", name],
             (f"config key job_env.{name}: {name} changes how programs load (job_env reaches every rank "
              f"of every job), so it is refused unless the config also sets {LOADER_OPT_IN}: true"))
            for name in job_env if isinstance(name, str) and is_loader_var(name)]


def check_config(config: dict) -> dict:
    """Validate; return a copy with defaults filled in. Raise ConfigError naming every bad key."""
    from snakemake.utils import validate

    from distbench.core.sizes import parse_size
    from distbench.comm.traffic import validate as traffic_problems

    schema = load_schema()
    config = coerce_cli_values(copy.deepcopy(config), schema)
    errors = [leaf for e in _validator(schema).iter_errors(config) for leaf in _leaf_errors(schema, e)]
    # After the schema: job_env's names are well formed; refuse the loader ones, all in one message.
    found = [(list(e.absolute_path), _describe(schema, e)) for e in errors] + _loader_var_problems(config)
    found.sort(key=lambda f: _path_order(f[0]))
    problems = [message for _, message in found]
    if not problems:
        # Snakemake's own default filling (what the workflow always did): it fills nested objects
        # (comm: {} gets every comm default, comm.gloo's included) and the object alternative of a
        # oneOf (comm.sizes as a sweep gets step_factor), so no code of ours is needed for that.
        validate(config, str(SCHEMA_PATH), set_default=True)
        # the one default the file does not hold (load_schema's): every op of the specs
        config["comm"].setdefault("ops", list(schema["properties"]["comm"]["properties"]["ops"]["default"]))
        cluster = config["cluster"]
        if cluster["launcher"] == "ssh" and len(cluster["hosts"]) < cluster["nodes"]:
            problems.append(f"config key cluster.hosts: launcher ssh needs one host per node, got {len(cluster['hosts'])} "
                            f"host(s) for cluster.nodes {cluster['nodes']}")
        sizes = config["comm"]["sizes"]
        if isinstance(sizes, dict) and parse_size(sizes["min_bytes"]) > parse_size(sizes["max_bytes"]):
            problems.append(f"config key comm.sizes: min_bytes {sizes['min_bytes']} is larger than max_bytes {sizes['max_bytes']}")
        # traffic matrix files are read now, so a missing or ragged one stops the run before any job
        problems += [f"config key comm.traffic: {m}" for m in traffic_problems(config["comm"]["traffic"])]
        baseline = config["report"]["baseline"]
        if baseline:
            if baseline_tables_dir(baseline) is None:
                problems.append(f"config key report.baseline: {baseline!r} holds no comm_summary.csv or "
                                "training_summary.csv (give a run label under results/, an earlier results/ tree, or its tables/ directory)")
    if problems:
        raise ConfigError("invalid distbench config:\n  - " + "\n  - ".join(problems))
    return config
