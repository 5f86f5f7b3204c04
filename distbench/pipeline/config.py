"""Config validation with errors that name the key and the allowed values.

The JSON schema is the single source of truth: distbench/pipeline/config.schema.yaml holds the
run-wide keys and the shared definitions, and each family's own key is the schema file its manifest
names (FamilyManifest.schema, in the family's folder), merged in by `load_schema`. The op names are
filled in from distbench.core.ops_spec.OPS (their enum, and every default marked `x-default-every: op`),
so an op is named in one place. `check_config` validates with jsonschema first (readable messages,
every bad key at once), then fills in the schema's defaults as snakemake.utils.validate does (on a
plain dict, so tests and distbench.pipeline.plan users get the same config as the workflow), then
runs each family's own checks (its manifest's config_check).
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path

import yaml

import distbench
from distbench.core.config_schema import CENTRAL, FRAGMENT, build_config_schema, fragment_files
from distbench.core.manifest_check import ManifestError
from distbench.core.run_label import baseline_tables_dir, label_problem
from distbench.core.shown import MAX_VALUE_CHARS, shown
from distbench.pipeline.cli_values import _resolve, coerce_cli_values
from distbench.pipeline.hooks import resolve
from distbench.pipeline.same_values import same_value_problems

SCHEMA_PATH = CENTRAL


def baseline_marks() -> list[str]:
    """The tables a baseline run is found by: the families' summaries (their manifests mark them for
    summary.json), as file names under tables/."""
    from distbench.pipeline.families import manifests

    return [Path(t.path).name for m in manifests() for t in m.tables if t.summary_json]
SIZE_REF = "#/definitions/size"
SIZE_HELP = ("use bytes as an integer, or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, "
             "or K/M/G/T = binary as in nccl-tests")
SIZE_UNITS = ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "K", "M", "G", "T")  # what parse_size reads
# A number and some letters: what a size with an unknown unit looks like ('10XB'); the sign is kept
# so '-1' and '-1MB' can be told apart from malformed text.
_SIZE_LIKE = re.compile(r"^\s*(-?)\s*[0-9]+(?:\.[0-9]+)?\s*([A-Za-z]*)\s*$")

# job_env names that change what a process loads or runs (the dynamic loader, the program and module
# search paths, startup hooks, code NCCL and CUDA load by name, modules our own ranks import by name).
# job_env reaches every rank of every job, so these are refused unless the config opts in with
# LOADER_OPT_IN: true.
LOADER_OPT_IN = "job_env_allow_loader_vars"
LOADER_VARS = frozenset({
    "PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONPLATLIBDIR", "PYTHONBREAKPOINT",
    # a warning filter's category (-W action::module.Class) is imported at startup; a bytecode
    # cache prefix is where the interpreter loads .pyc files from
    "PYTHONWARNINGS", "PYTHONPYCACHEPREFIX",
    "BASH_ENV", "ENV", "GCONV_PATH", "CUDA_INJECTION64_PATH",
    "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN",
    # distbench.workloads.registry.EXTENSIONS_ENV: every rank that builds a workload imports these modules
    "DISTBENCH_WORKLOAD_MODULES",
})
LOADER_PREFIXES = ("LD_", "DYLD_")  # LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ... and macOS's DYLD_*
# NCCL loads a shared library named by NCCL_<KIND>_PLUGIN (net, tuner, profiler, env, and those to come)
LOADER_NCCL_SUFFIX = "_PLUGIN"

# Variables that distort what a timed run measures: refused wherever a job's environment is set
# (job_env, and every list of NCCL settings: the shared definition nccl_env), with the same message. The NCCL probe job
# (distbench.probes.nccl_probe) sets NCCL's logging itself, apart from the timed runs.
TIMING_VARS = {
    "NCCL_DEBUG": "NCCL's logging slows small messages; the NCCL probe job collects NCCL's log separately",
    "NCCL_DEBUG_SUBSYS": "NCCL's logging slows small messages; the NCCL probe job collects NCCL's log separately",
    "CUDA_LAUNCH_BLOCKING": "every kernel launch waits for the kernel, so nothing overlaps",
    "TORCH_DISTRIBUTED_DEBUG": "DETAIL checks every collective across ranks before it runs",
    "TORCH_NCCL_DESYNC_DEBUG": "it records and checks every collective for desync reports",
}

# Bounds on what a message built from user input may hold: a value is shown up to MAX_VALUE_CHARS
# characters (distbench.core.shown), a problem line up to MAX_PROBLEM_CHARS, and the first
# MAX_PROBLEMS problems are listed.
MAX_PROBLEM_CHARS = 1000  # the longest list of allowed keys (a family's, nccl_env's) fits
MAX_PROBLEMS = 25
# The most values (every list item, mapping entry and scalar, YAML aliases counted each time they
# are used) a config may hold: the default config filled in has about 400. Checked before anything
# walks the config, so a YAML alias bomb costs no time or memory.
MAX_CONFIG_VALUES = 100_000


def _clip(message: str) -> str:
    return message if len(message) <= MAX_PROBLEM_CHARS else f"{message[:MAX_PROBLEM_CHARS - 30]}... ({len(message):,} characters)"


class ConfigError(ValueError):
    pass


def family_schemas() -> dict[str, Path]:
    """{config key: schema file} of every family that states its config's schema (its manifest's
    `schema`, a file in its folder), in the families' order."""
    from distbench.pipeline.families import manifests

    root = Path(distbench.__file__).parent
    return {m.name: root / m.name / m.schema for m in manifests() if m.schema}


def _same_fragments(fragments: dict[str, Path]) -> None:
    """The manifests' schema files are the ones the ranks find by their folders
    (distbench.core.config_schema.fragment_files): else the ranks would check job.json against
    another schema than the config's."""
    found = {k: p.resolve() for k, p in fragment_files(Path(distbench.__file__).parent).items()}
    for key, path in fragments.items():
        if found.get(key) != path.resolve():
            raise ManifestError(path, f"is not {FRAGMENT} in the folder of package {key!r}: the ranks read a "
                                      f"package's schema from its folder's {FRAGMENT} (name it so)")
    unnamed = sorted(set(found) - set(fragments))
    if unnamed:
        raise ManifestError(found[unnamed[0]], f"is named by no manifest's schema (schema={FRAGMENT!r} merges it)")


def load_schema() -> dict:
    """The schema (distbench.core.config_schema.build_config_schema, as the ranks build it): the
    central file with each family's schema merged into its properties (after FAMILIES_AFTER's key, in
    the families' order), the op enum (and the defaults marked EVERY) from the op specs, and the
    workload enum from the workload registry (with any DISTBENCH_WORKLOAD_MODULES extension loaded)."""
    from distbench.workloads.registry import WORKLOADS, load_extensions

    load_extensions()
    fragments = family_schemas()
    _same_fragments(fragments)
    return build_config_schema(list(WORKLOADS), fragments, SCHEMA_PATH)


def fill_defaults(config: dict, schema: dict) -> None:
    """Fill in the schema's defaults, as snakemake.utils.validate(config, schema, set_default=True)
    does (the recipe of jsonschema's FAQ: a property's default is set where the property is checked),
    on the merged schema (Snakemake's own takes only a file): it fills nested objects (a family's {}
    gets every default of its key, its sub-objects' included) and the object alternative of a oneOf
    (a size sweep gets its step_factor)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    check_properties = base.VALIDATORS["properties"]

    def properties(validator, props, instance, sub):
        for name, prop in props.items():
            if "default" in prop:
                instance.setdefault(name, copy.deepcopy(prop["default"]))
        yield from check_properties(validator, props, instance, sub)

    jsonschema.validators.extend(base, {"properties": properties})(schema).validate(config)


def _key(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


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
    if "pattern" in sub:  # in words: x-allowed (run_label, NCCL_ALGO), else the description (job_env)
        return sub.get("x-allowed") or sub.get("description") or f"a {sub.get('type', 'string')} matching {sub['pattern']}"
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


# How every pattern of the schema ends: `$` alone also matches before a final newline in Python's re
# (what jsonschema uses), so "Ring\n" passed; the lookahead refuses it (and means nothing in ECMA).
PATTERN_END = "$(?!\\n)"


def _bad_chars(pattern: str, instance) -> str:
    """For one character class (^[...]*$, job_env's values): the characters of `instance` it refuses."""
    pattern = pattern.removesuffix(PATTERN_END) + "$" if pattern.endswith(PATTERN_END) else pattern
    if not (isinstance(instance, str) and pattern.startswith("^[") and pattern.endswith("]*$")
            and pattern.count("[") == 1):
        return ""
    bad = ["a space" if c == " " else repr(c) for c in dict.fromkeys(instance) if not re.fullmatch(pattern, c)]
    bad = bad if len(bad) <= 8 else [*bad[:7], f"{len(bad) - 7} more"]
    return f": it contains {', '.join(bad[:-1])} and {bad[-1]}" if len(bad) > 1 else \
        f": it contains {bad[0]}" if bad else ""


def _size_or_else(schema: dict, err) -> str | None:
    """A scalar failing a oneOf of a size and something else (a rotation's bytes: a size, or 0 = off):
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
        return f"config key {key}: name {shown(err.instance)} is not valid ({_allowed(schema, err.schema)})"
    if err.validator == "pattern":
        return (f"config key {key}: {shown(err.instance)} is not valid{_bad_chars(err.validator_value, err.instance)} "
                f"({_allowed(schema, err.schema)})")
    if err.validator == "oneOf" and not isinstance(err.instance, (list, dict)):
        said = _size_or_else(schema, err)
        if said:
            return said
    if err.validator == "additionalProperties" and "properties" in err.schema:
        known = set(err.schema["properties"])
        unknown = sorted((u for u in set(err.instance) - known if u not in TIMING_VARS), key=str)
        said = [_timing_var_message([*err.absolute_path, u]) for u in sorted(set(err.instance) & set(TIMING_VARS))]
        if unknown:
            names = [_key([*err.absolute_path, str(u)[:MAX_VALUE_CHARS]]) for u in unknown[:10]]
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            said.append(f"unknown key(s) {', '.join(names)}{more}; allowed keys here: {', '.join(err.schema['properties'])}")
        return "\n  - ".join(said)
    if err.validator == "maxItems":
        return f"config key {key}: {len(err.instance):,} entries; at most {err.validator_value} are allowed"
    if err.validator == "maxLength":
        return f"config key {key}: {len(err.instance):,} characters; at most {err.validator_value:,} are allowed"
    if err.validator == "finite":
        return f"config key {key}: {shown(err.instance)} is not a finite number ({_allowed(schema, err.schema)})"
    if err.validator in ("enum", "oneOf", "pattern", "type", "minimum", "maximum", "exclusiveMinimum"):
        return f"config key {key}: {shown(err.instance)} is not valid ({_allowed(schema, err.schema)})"
    return f"config key {key}: {_clip(err.message)}"


def _leaf_errors(schema: dict, err) -> list:
    """A list or object failing a oneOf whose only list/object alternative is the one it was meant
    for (a list of sizes, or a sweep): report that alternative's own errors, which name the bad
    element (`sizes[1]` under its key), instead of 'matches none of the alternatives'."""
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

    from distbench.core.sizes import MAX_SIZE_BYTES, SizeTooLarge, parse_size

    base = jsonschema.Draft202012Validator
    base_ref = base.VALIDATORS["$ref"]
    base_maximum = base.VALIDATORS["maximum"]

    def maximum(validator, value, instance, sub):
        # NaN compares false with any bound, so `maximum` alone lets .nan through (every number of
        # the schema has a maximum: tests/workflow/test_schema_bounds.py)
        if isinstance(instance, float) and math.isnan(instance):
            yield jsonschema.ValidationError(f"{instance!r} is not a finite number", validator="finite")
            return
        yield from base_maximum(validator, value, instance, sub)

    def ref(validator, value, instance, sub):
        if value != SIZE_REF:
            yield from base_ref(validator, value, instance, sub)
            return
        try:
            n = parse_size(instance)
        except SizeTooLarge:
            yield jsonschema.ValidationError(f"{shown(instance)} is not a size: at most 1 PiB ({MAX_SIZE_BYTES:,} "
                                             "bytes), more than any host's memory", validator="size")
            return
        except ValueError:
            n = None
        schema_ok = next(iter(base_ref(validator, value, instance, sub)), None) is None
        number = isinstance(instance, (int, float)) and not isinstance(instance, bool)
        like = _SIZE_LIKE.match(instance) if isinstance(instance, str) else None
        units = {u.lower() for u in SIZE_UNITS}
        if n is not None and schema_ok and n >= 1:
            return
        if (n is not None and n < 1) or (number and instance < 1) or (like and like.group(1)):
            message = f"{shown(instance)} is not a size: sizes must be >= 1 byte"  # 0, '0MB', -1, '-1', '-2KiB'
        elif number or (n is None and schema_ok):
            message = f"{shown(instance)} is not a size: not a whole number of bytes"  # 1.5, '1.5B'
        elif like and like.group(2).lower() not in units:
            message = (f"{shown(instance)} is not a size: unknown unit {shown(like.group(2))}; "
                       f"allowed units {', '.join(SIZE_UNITS)}")
        else:
            message = f"{shown(instance)} is not a size ({SIZE_HELP})"
        yield jsonschema.ValidationError(message, validator="size")

    return jsonschema.validators.extend(base, {"$ref": ref, "maximum": maximum})(schema)


def _path_order(path) -> list:
    """Errors in the order of the config: sizes[2] before sizes[10]."""
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in path]


def _timing_var_message(path) -> str:
    name = path[-1]
    return (f"config key {_key(path)}: {name} distorts timed runs ({TIMING_VARS[name]}), so it is refused "
            f"in job_env and nccl_env alike")


def _timing_var_problems(config: dict) -> list:
    """job_env names that distort timed runs (TIMING_VARS); nccl_env's are refused by its allow-list
    with the same message (_describe)."""
    job_env = config.get("job_env")
    if not isinstance(job_env, dict):
        return []
    return [(["job_env", name], _timing_var_message(["job_env", name])) for name in job_env if name in TIMING_VARS]


def _expanded_values(node, memo: dict) -> int:
    """How many values `node` holds, a YAML alias counted each time it is used (memoised by identity,
    so this takes time in the values written, not in what they expand to)."""
    if not isinstance(node, (dict, list)):
        return 1
    if id(node) not in memo:
        memo[id(node)] = 0  # a cycle (not possible from YAML, but from Python) counts once
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        memo[id(node)] = 1 + sum(_expanded_values(c, memo) for c in children)
    return memo[id(node)]


def _name_length_problems(config: dict) -> list[str]:
    """run_label, which becomes a path component (each family checks its own names: its config_check)."""
    label = config["run_label"]
    why = label_problem(label) if label else None
    return [f"config key run_label: {shown(label)} {why}"] if why else []


def family_problems(config: dict) -> list[str]:
    """Every family's own checks of its config (its manifest's config_check), in the families' order."""
    from distbench.pipeline.families import manifests

    return [p for m in manifests() if m.config_check for p in resolve(m.config_check)(config)]


def is_loader_var(name: str) -> bool:
    return (name in LOADER_VARS or name.startswith(LOADER_PREFIXES)
            or (name.startswith("NCCL_") and name.endswith(LOADER_NCCL_SUFFIX)))


def _loader_var_problems(config: dict) -> list:
    """job_env names that change how programs load, unless the config opts in (see LOADER_VARS)."""
    job_env = config.get("job_env")
    if not isinstance(job_env, dict) or config.get(LOADER_OPT_IN) is True:
        return []
    return [(["job_env", name],
             (f"config key job_env.{name}: {name} changes how programs load (job_env reaches every rank "
              f"of every job), so it is refused unless the config also sets {LOADER_OPT_IN}: true"))
            for name in job_env if isinstance(name, str) and is_loader_var(name)]


class _NoDuplicateKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last one,
    so `world_sizes: [2]` followed by `world_sizes: [1024]` would silently plan 1,024 ranks)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *alias` may repeat, as YAML allows
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
                seen[key] = line
            except TypeError:  # an unhashable key: the base loader says so
                break
            if first is not None:
                raise ConfigError(f"key {shown(key)} is given twice (lines {first} and {line}); "
                                  "YAML would keep only the last: give it once")
        return super().construct_mapping(node, deep=deep)


def check_config_files(paths) -> None:
    """The config files Snakemake loaded (workflow.configfiles), read again with a loader that refuses
    a duplicate key: Snakemake's loader keeps the last one and check_config only sees the result.
    Raise ConfigError naming the file, the key and both lines."""
    problems = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                yaml.load(f, Loader=_NoDuplicateKeys)
        except ConfigError as e:
            problems.append(f"config file {shown(str(path))}: {e}")
        except (OSError, yaml.YAMLError):
            pass  # unreadable or not YAML: Snakemake's own loader has said so, or will
    if problems:
        raise ConfigError("invalid distbench config:\n  - " + "\n  - ".join(problems))


def check_config(config: dict) -> dict:
    """Validate; return a copy with defaults filled in. Raise ConfigError naming every bad key."""
    try:
        values = _expanded_values(config, {})
    except RecursionError:
        values = MAX_CONFIG_VALUES + 1
    if values > MAX_CONFIG_VALUES:
        raise ConfigError(f"invalid distbench config:\n  - the config holds more than {MAX_CONFIG_VALUES:,} values "
                          "(YAML aliases counted each time they are used); nothing was checked further")
    schema = load_schema()
    config = coerce_cli_values(copy.deepcopy(config), schema)
    errors = [leaf for e in _validator(schema).iter_errors(config) for leaf in _leaf_errors(schema, e)]
    # After the schema: job_env's names are well formed; refuse the loader ones, all in one message.
    found = [(list(e.absolute_path), _describe(schema, e)) for e in errors] + _loader_var_problems(config)
    found += _timing_var_problems(config)
    if not errors:  # every entry parses: a list that gives one value twice, spelt two ways
        found += same_value_problems(config, schema, _key)
    found.sort(key=lambda f: _path_order(f[0]))
    problems = [message for _, message in found]
    if not problems:
        fill_defaults(config, schema)  # nested objects too, as snakemake.utils.validate fills them
        cluster = config["cluster"]
        if cluster["launcher"] == "ssh" and len(cluster["hosts"]) < cluster["nodes"]:  # cluster.nodes: not a family name
            problems.append(f"config key cluster.hosts: launcher ssh needs one host per node, got {len(cluster['hosts'])} "
                            f"host(s) for cluster.nodes {cluster['nodes']}")  # not a family name
        problems += _name_length_problems(config)
        problems += family_problems(config)
        baseline = config["report"]["baseline"]
        if baseline:
            marks = baseline_marks()
            if baseline_tables_dir(baseline, marks) is None:
                problems.append(f"config key report.baseline: {shown(baseline)} holds no {' or '.join(marks)} (give a "
                                "run label under results/, an earlier results/ tree, or its tables/ directory)")
    if problems:
        problems = [_clip(p) for p in problems]
        if len(problems) > MAX_PROBLEMS:
            problems = [*problems[:MAX_PROBLEMS], f"... and {len(problems) - MAX_PROBLEMS:,} more problems"]
        raise ConfigError("invalid distbench config:\n  - " + "\n  - ".join(problems))
    return config
