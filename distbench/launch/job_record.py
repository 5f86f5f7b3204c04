"""The job.json format: what a family's job rule writes (`Entry`: rule, wildcards, params {job,
launch}, output, log) and what its ranks read (`--params`).

Each family declares its job values once, as a `RecordSpec` of `Field`s (in its job.py): the key in
job.json, the bounds (a pointer into the config schema, so a value the config refuses is refused
here too, or a fragment where job.json holds the value in another form, e.g. sizes in bytes), and
the ranks' flag it sets. From that one list come the JSON schema the ranks validate job.json with
(`RecordSpec.schema`), the ranks' arguments (`JobRecord.arguments`) and the flags for people
(`RecordSpec.flags`). The config schema is the caller's (distbench.core.config_schema builds it; the
workload names it needs are a layer above this one: distbench.workloads.job_fields.config_schema).

Reading is bounded: `--params` must name a regular file of at most MAX_JOB_JSON_BYTES (a FIFO or
/dev/zero would block or never end), checked before and, on the opened descriptor, after opening.
Every problem is a `JobRecordError` naming the file and the key; the ranks turn it into exit status 2
with no traceback (`exit_usage`), before any process group exists.

Torch-free: the rule scripts and the ranks' argument parsing import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType

from distbench.core.io import atomic_write_json, file_kind

MAX_JOB_JSON_BYTES = 1 << 20  # a job.json is a few KiB; a traffic digest map stays far below this
MAX_PROBLEMS_SHOWN = 8
MAX_MESSAGE_CHARS = 300


class JobRecordError(ValueError):
    """A job.json that is not one this family's ranks can run: the message names the file and the key."""


# ---------------------------------------------------------------------------------- reading the file

def _no_constants(name: str):
    raise ValueError(f"{name} is not a JSON number")  # NaN and Infinity pass every bound unchecked


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise ValueError(f"key {k!r} given twice")
        seen[k] = v
    return seen


def read_json_file(path, limit: int = MAX_JOB_JSON_BYTES):
    """A regular file's JSON, at most `limit` bytes. stat first (a FIFO, a device or a directory is
    refused without opening it), then open non-blocking and check the descriptor again (a file swapped
    for a FIFO between the two cannot block the read)."""
    where = str(path)
    try:
        st = os.stat(path)
    except OSError as e:
        raise JobRecordError(f"{where}: cannot read it ({e.strerror or type(e).__name__})") from None
    _check_stat(where, st, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise JobRecordError(f"{where}: cannot read it ({e.strerror or type(e).__name__})") from None
    try:
        _check_stat(where, os.fstat(fd), limit)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise JobRecordError(f"{where}: cannot read it ({e.strerror or type(e).__name__})") from None
    finally:
        os.close(fd)
    if total > limit:
        raise JobRecordError(f"{where}: over {limit:,} bytes; not a job's job.json")
    try:
        return json.loads(b"".join(chunks).decode("utf-8"), parse_constant=_no_constants,
                          object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise JobRecordError(f"{where}: not a job's job.json ({_clip(str(e))})") from None


def _check_stat(where: str, st: os.stat_result, limit: int) -> None:
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise JobRecordError(f"{where}: {kind}, not a job's job.json (a regular file)")
    if st.st_size > limit:
        raise JobRecordError(f"{where}: {st.st_size:,} bytes, over {limit:,}; not a job's job.json")


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS - 3] + "..."


# ---------------------------------------------------------------------------------- the entry

@dataclass(frozen=True)
class Entry:
    """One benchmark job, as Snakemake will run it (and its rule writes it to job.json)."""

    rule: str
    wildcards: dict
    params: dict
    output: dict  # output name -> path (csv, placement)
    log: str

    @property
    def digest(self) -> str:
        """What Snakemake reruns a job for (its rule, wildcards and params), hashed."""
        key = json.dumps({"rule": self.rule, "wildcards": self.wildcards, "params": self.params},
                         sort_keys=True, default=str)
        return hashlib.sha256(key.encode()).hexdigest()[:20]

    @property
    def group(self) -> str:
        """Jobs that can share one launch (distbench.launch.batch): one family's rule, backend, world
        size, environment and placement (everything that shapes the processes and their group, not the
        measurement)."""
        p = self.params
        env = {"launch": p.get("launch"), "nccl_env": p.get("job", {}).get("nccl_env"),
               "job_env": p.get("job", {}).get("job_env")}
        return json.dumps([self.rule, self.wildcards.get("backend"), self.wildcards.get("world_size"), env],
                          sort_keys=True, default=str)

    @property
    def name(self) -> str:
        wc = self.wildcards  # in the plan's order (a manifest read back has its keys sorted)
        return f"{self.rule.removesuffix('_job')} " + "/".join(
            str(wc[k]) for k in ("backend", "model", "world_size", "config") if k in wc)


# ---------------------------------------------------------------------------------- writing it

def write_job_json(path, entry) -> Path:
    """An Entry (or its dict) as job.json, atomically."""
    atomic_write_json(path, entry if isinstance(entry, dict) else asdict(entry))
    return Path(path)


def read_entry(path) -> Entry:
    """The job as its rule wrote it, its shape checked but not its values (the launcher's read: the
    ranks check the values against the family's RecordSpec)."""
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise JobRecordError(f"{path}: not a job's job.json (a JSON object)")
    missing = [k for k in ENTRY_KEYS if k not in data]
    unknown = sorted(set(data) - set(ENTRY_KEYS))
    if missing or unknown:
        raise JobRecordError(f"{path}: not a job's job.json (" + "; ".join(
            [f"missing key(s) {', '.join(missing)}"] * bool(missing) + [f"unknown key(s) {', '.join(unknown)}"] * bool(unknown))
            + ")")
    return Entry(**data)


def write_variant(job_json, path, **job_values) -> Path:
    """A copy of a job's job.json with some of its job values replaced (the nsys pass's short run), so
    that run reads its values from JSON too."""
    entry = read_json_file(job_json)
    entry["params"]["job"] = {**entry["params"]["job"], **job_values}
    return write_job_json(path, entry)


ENTRY_KEYS = ("rule", "wildcards", "params", "output", "log")
# What a launcher adds to a job's params beside its values (its launch, its job.json's path): not job values.
LAUNCHER_KEYS = ("launch", "params_json")


# ---------------------------------------------------------------------------------- a family's record

@dataclass(frozen=True)
class Field:
    """One job value. `key`: its key under params.job (or under wildcards, `wildcard=True`: Snakemake's
    strings). `schema`: config-schema pointers, the first that exists is used ("comm.iters" is
    properties.comm.properties.iters; "definitions.size.oneOf.0" is literal), or a JSON-schema fragment.
    `flag`: the ranks' argument it sets (None: the launcher's value only); `arg`: the value that
    argument gets, from this value and all the record's (default: the value as it is). `name`: the
    record's name for it where the key is taken (a wildcard beside a job key of the same name).
    `repeat`: for people, the flag once per item (an argparse `append`). `args`: a value that sets
    several of the ranks' arguments (DDP's settings): its (flag, value) pairs."""

    key: str
    schema: tuple[str, ...] | dict | Callable[[dict], dict]
    flag: str | None = None
    required: bool = True
    wildcard: bool = False
    arg: Callable[[object, dict], object] | None = None
    name: str | None = None
    repeat: bool = False
    args: Callable[[object, dict], list[tuple[str, object]]] | None = None  # several flags from one value

    @property
    def record_name(self) -> str:
        return self.name or self.key


def pointer(*paths: str) -> tuple[str, ...]:
    return tuple(paths)


@dataclass(frozen=True)
class RecordSpec:
    """A family's job values, declared once. `extra_fields`: computed at first use (the workloads'
    shape arguments, which an extension module may add). Every check takes the config schema
    (`config`: distbench.core.config_schema.build_config_schema's), whose bounds the fields point at."""

    family: str
    fields: tuple[Field, ...]
    extra_fields: Callable[[], tuple[Field, ...]] | None = field(default=None, compare=False)

    def all_fields(self) -> tuple[Field, ...]:
        return self.fields + (self.extra_fields() if self.extra_fields else ())

    def schema(self, config: dict) -> dict:
        """job.json's JSON schema, its bounds taken from the config schema `config`."""
        fields = self.all_fields()
        key = (self.family, tuple((f.key, f.wildcard) for f in fields), id(config))
        if key not in _SCHEMAS:
            # `config` is kept beside its record's schema, so its id is never another schema's
            _SCHEMAS[key] = (config, _schema_of(fields, config))
        return _SCHEMAS[key][1]

    def values(self, wildcards: dict, job: dict) -> dict:
        """The record's values from a job's wildcards and params (no check: the plan's own)."""
        out = {}
        for f in self.all_fields():
            source = wildcards if f.wildcard else job
            if f.key in source:
                out[f.record_name] = source[f.key]
        return out

    def arguments(self, values: dict) -> list[tuple[str, object]]:
        """The ranks' (flag, value) pairs, typed as their parser gives them."""
        out = []
        for f in self.all_fields():
            if f.record_name not in values:
                continue
            value = values[f.record_name]
            if f.args:
                out += f.args(value, values)
            elif f.flag:
                out.append((f.flag, f.arg(value, values) if f.arg else value))
        return out

    def flags(self, wildcards: dict, job: dict) -> list[str]:
        """The job's values as a command line for people (distbench.launch.job_values.flags)."""
        from distbench.launch.job_values import flags

        repeated = {f.flag for f in self.all_fields() if f.flag and f.repeat}
        pairs = []
        for flag, value in self.arguments(self.values(wildcards, job)):
            if flag in repeated:
                pairs += [(flag, v) for v in value]
            else:
                pairs.append((flag, value))
        return flags(pairs)

    def check(self, data, where: str, config: dict) -> None:
        """Raise JobRecordError naming `where` and every bad key (at most MAX_PROBLEMS_SHOWN)."""
        problems = problems_of(self.schema(config), data)
        if problems:
            more = len(problems) - MAX_PROBLEMS_SHOWN
            shown_ = problems[:MAX_PROBLEMS_SHOWN] + ([f"and {more} more"] if more > 0 else [])
            raise JobRecordError(f"{where}: " + "; ".join(shown_))

    def check_job(self, job, config: dict, where: str = "params") -> None:
        """Check a job's params alone (the launcher's values for its flags): JobRecordError naming the key."""
        job = {k: v for k, v in job.items() if k not in LAUNCHER_KEYS} if isinstance(job, dict) else job
        schema = self.schema(config)
        sub = {**schema["properties"]["params"]["properties"]["job"], "definitions": schema["definitions"]}
        problems = [f"job.{p}" if not p.startswith("(top") else f"job{p[len('(top level)'):]}"
                    for p in problems_of(sub, job)]
        if problems:
            raise JobRecordError(f"{where}: " + "; ".join(problems[:MAX_PROBLEMS_SHOWN]))

    def read(self, path, config: dict) -> JobRecord:
        """The job.json at `path`, checked against this family's schema (its bounds `config`'s)."""
        data = read_json_file(path)
        self.check(data, str(path), config)
        entry = Entry(**data)
        return JobRecord(self.family, str(path), entry,
                         MappingProxyType(self.values(entry.wildcards, entry.params["job"])))


@dataclass(frozen=True)
class JobRecord:
    """One job's values, checked: its Entry as the rule wrote it and the values by record name."""

    family: str
    path: str
    entry: Entry
    values: MappingProxyType

    def arguments(self, spec: RecordSpec) -> list[tuple[str, object]]:
        return spec.arguments(dict(self.values))


# ---------------------------------------------------------------------------------- the schema

def resolve_pointer(schema: dict, path: str):
    """A config-schema node: each name is a property's where the node has it ("comm.iters"), else the
    node's own key or list index ("comm.dtypes.items", "definitions.size.oneOf.0")."""
    node = schema
    for p in path.split("."):
        if isinstance(node, list):
            node = node[int(p)]
        elif isinstance(node.get("properties"), dict) and p in node["properties"]:
            node = node["properties"][p]
        else:
            node = node[p]
    return node


def _fragment(f: Field, schema: dict) -> dict:
    if isinstance(f.schema, dict):
        return f.schema
    if callable(f.schema):
        return f.schema(schema)
    for path in f.schema:
        try:
            return resolve_pointer(schema, path)
        except (KeyError, IndexError, TypeError):
            continue
    raise KeyError(f"job value {f.key}: none of the config schema's {', '.join(f.schema)} exists")


_SCHEMAS: dict[tuple, tuple[dict, dict]] = {}


def _schema_of(fields: tuple[Field, ...], config: dict) -> dict:
    def obj(fields):
        return {"type": "object", "additionalProperties": False,
                "required": [f.key for f in fields if f.required],
                "properties": {f.key: _fragment(f, config) for f in fields}}

    wildcards = obj([f for f in fields if f.wildcard])
    wildcards["additionalProperties"] = {"type": "string"}  # Snakemake's other wildcards, if any: not read
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "definitions": config["definitions"],
        "type": "object", "additionalProperties": False, "required": list(ENTRY_KEYS),
        "properties": {
            "rule": {"type": "string"},
            "wildcards": wildcards,
            "params": {"type": "object", "additionalProperties": False, "required": ["job"],
                       "properties": {"job": obj([f for f in fields if not f.wildcard]),
                                      "launch": {"type": ["object", "null"]},
                                      # the rule's job_entry hook, which its script resolves; not the ranks'
                                      "entry": {"type": "string", "maxLength": 300}}},
            "output": {"type": "object", "additionalProperties": {"type": "string"}},
            "log": {"type": "string"},
        },
    }


def _key(path) -> str:
    parts = list(path)
    if parts[:2] == ["params", "job"] and len(parts) > 2:  # a job value: job.<key>, as the config's keys read
        parts = ["job", *parts[2:]]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def problems_of(schema: dict, data) -> list[str]:
    """Every place `data` breaks `schema`, one line each: the key, then what is wrong with it."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data),
                    key=lambda e: [str(p) for p in e.absolute_path])
    out = []
    for err in errors:
        where = list(err.absolute_path)
        if err.validator == "required":
            missing = [k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance]
            out += [f"{_key([*where, k])}: missing (every job.json of this family has it)" for k in missing]
        elif err.validator == "additionalProperties" and isinstance(err.instance, dict) and "properties" in err.schema:
            known = err.schema["properties"]
            out += [f"{_key([*where, str(k)[:80]])}: unknown key (allowed: {', '.join(known)})"
                    for k in sorted(set(err.instance) - set(known), key=str)]
        else:
            out.append(f"{_key(where)}: {_clip(err.message)}")
    return list(dict.fromkeys(out))


def exit_usage(error: JobRecordError, code: int = 2):
    """A usage error as argparse gives one (exit 2), saying which file and key."""
    print(f"distbench error: {error}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def read_for_ranks(path, spec: RecordSpec, config: dict) -> JobRecord:
    """The ranks' read of `--params` (its bounds the config schema `config`'s, as the pipeline checks
    the config with): the record, or exit 2 naming the file and the key."""
    try:
        return spec.read(path, config)
    except JobRecordError as e:
        exit_usage(e)


# ---------------------------------------------------------------------------------- shared fields

# every family's process-group timeout: the config's top-level op_timeout_s
OP_TIMEOUT = Field("op_timeout_s", pointer("op_timeout_s"), "--op-timeout-s")
JOB_ENV = Field("job_env", pointer("job_env"))
PROFILE = Field("profile", {"enum": ["off", "torch", "nsys"]}, required=False)
PROFILE_STEPS = Field("profile_steps", pointer("profile_steps"), required=False)
BACKEND = Field("backend", {"enum": ["nccl", "gloo"]}, "--backend", wildcard=True)
WORLD_SIZE = Field("world_size", {"type": "string", "pattern": "^[1-9][0-9]{0,3}$"}, wildcard=True)
NCCL_ENV = Field("nccl_env", {"$ref": "#/definitions/nccl_env"})
# a configuration's label (the {config} wildcard) and the workload of a job that trains a model
CONFIG_LABEL = Field("config", {"type": "string", "minLength": 1, "maxLength": 200}, "--config-label", wildcard=True,
                     name="config_label")
MODEL = Field("model", {"$ref": "#/definitions/workload"}, "--model")


def byte_list(min_items: int = 1, unique: bool = False) -> dict:
    """A list of byte counts, as job.json holds a config's sizes (parsed: the integer form of the
    config's #/definitions/size)."""
    return {"type": "array", "minItems": min_items, "uniqueItems": unique,
            "items": {"$ref": "#/definitions/size/oneOf/0"}}
