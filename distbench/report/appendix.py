"""The report's closing sections, none a family's: the probes' results (the GPU topology matrix,
then advice, link peak, NCCL, rank placement as the probes wrote them) and the appendix (environment
and versions, each job's cache state and command line, the configuration). Fragments: templates/sections/."""

from __future__ import annotations

import json
import shlex
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from distbench.core.intervals import overlaps
from distbench.core.provenance import JOB_ENV_PREFIXES
from distbench.core.readers import UnreadableFile, read_json, remake
from distbench.core.section import ReportInputs, Section, fmt_cell, table
from distbench.core.units import count_noun

TEMPLATES = Path(__file__).parent / "templates" / "sections"
ENV_KEYS = ("hostname", "platform", "python", "torch", "cuda", "nccl_version", "gloo_available",
            "driver", "gpu_count", "cpu_model", "cpu_count", "git_commit")
# Row labels where the probe's key alone misleads. nccl_version is what torch loaded; NVIDIA images also
# set an NCCL_VERSION environment variable (the NCCL the image ships), which lands in job_env.
ENV_LABELS = {"nccl_version": "NCCL (loaded by torch)"}
JOB_ENV_LABEL = f"environment variables ({', '.join(p + '*' for p in JOB_ENV_PREFIXES)})"


def _nccl_loaded(env: dict) -> str:
    if env.get("nccl_version"):
        return str(env["nccl_version"])
    if env.get("cuda_available") is False or ("cuda_available" not in env and not env.get("cuda")):
        return "n/a (no CUDA)"
    return "n/a (torch reported no NCCL)"


def _job_env(job_env) -> str:
    """Environment variables as NAME=value, shell-quoted where needed, in one cell."""
    if not isinstance(job_env, dict):
        return str(job_env)
    return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(job_env.items())) or "none set"


def _env_table(env: dict) -> dict:
    if not env:
        return table(["key", "value"], [])
    rows = []
    for k in ENV_KEYS:
        if k == "nccl_version":
            rows.append([ENV_LABELS[k], _nccl_loaded(env)])
        elif k in env:
            rows.append([ENV_LABELS.get(k, k), env.get(k)])
    rows += [[f"GPU {g.get('index', i)}", f"{g.get('name')} ({fmt_cell(g.get('memory_total_mib'))} MiB, "  # not a family name
              f"PCI {g.get('pci_bus_id')}, {g.get('uuid')})"] for i, g in enumerate(env.get("gpus") or [])]
    if "job_env" in env:
        rows.append([JOB_ENV_LABEL, _job_env(env["job_env"])])
    rows += [[k, json.dumps(v) if isinstance(v, (dict, list)) else v] for k, v in env.items()
             if k not in ENV_KEYS and k not in ("gpus", "job_env")]
    return table(["key", "value"], rows)


def _cell(v, limit: int = 300) -> str | None:
    """A probe value as one table cell: scalars as is, flat dicts/lists inline, deep structures counted."""
    if v is None or isinstance(v, (str, int, float, bool)):
        text = v
    elif isinstance(v, dict) and all(not isinstance(x, (dict, list)) for x in v.values()):
        text = ", ".join(f"{k}={x}" for k, x in v.items()) or None
    elif isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v):
        text = ", ".join(map(str, v)) or None
    else:  # rings, tuning tables, matrices: too deep for a report cell; the JSON file keeps them
        text = f"{len(v)} {'entry' if len(v) == 1 else 'entries'} (see the probe JSON)"
    return text if not isinstance(text, str) or len(text) <= limit else text[: limit - 1] + "…"


def _extra_block(value) -> dict:
    """An extra section as a table (flat values), bullet items and preformatted blocks (multi-line text)."""
    block = {"table": None, "items": [], "blocks": []}
    if isinstance(value, str):
        block["blocks"].append({"label": "", "text": value})
    elif isinstance(value, dict):
        multi = {k: v for k, v in value.items() if isinstance(v, str) and "\n" in v}
        block["blocks"] = [{"label": k, "text": v} for k, v in multi.items()]
        block["table"] = table(["key", "value"], [[k, _cell(v)] for k, v in value.items() if k not in multi])
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for v in value for k in v))
        # JSON round trips sort keys; advice reads best as severity, text, then the evidence.
        keys = [k for k in ("severity", "text") if k in keys] + [k for k in keys if k not in ("severity", "text")]
        block["table"] = table(keys, [[_cell(v.get(k)) for k in keys] for v in value])
    elif isinstance(value, list):
        block["items"] = [str(_cell(v)) for v in value]
    else:
        block["items"] = [str(value)]
    return block


# How good a link class is, best first (nvidia-smi topo -m's legend): the matrix's cell colours.
LINK_CLASSES = (("NV", "nvlink"), ("PIX", "pcie-switch"), ("PXB", "pcie-switch"), ("PHB", "pcie-host"),
                ("NODE", "numa"), ("SYS", "cross-socket"), ("NET", "network"), ("SOC", "cross-socket"))


def _link_class(cell: str) -> str:
    cell = str(cell or "").strip()
    if cell in ("X", ""):
        return "self"
    return next((cls for prefix, cls in LINK_CLASSES if cell.startswith(prefix)), "other")


def _topology_matrix(topology: dict | None) -> dict | None:
    """The GPU link matrix from the topology probe: a row per GPU, a column per GPU (and NIC), each
    cell the link class nvidia-smi names, coloured by class in the HTML."""
    matrix = (topology or {}).get("matrix") or {}
    if not matrix:
        return None
    gpus = [g for g in (topology.get("gpus") or list(matrix)) if g in matrix]
    columns = list(dict.fromkeys(c for g in gpus for c in matrix[g]))
    rows = [[g] + [matrix[g].get(c) for c in columns] for g in gpus]
    return {**table(["", *columns], rows),
            "classes": [[""] + [_link_class(matrix[g].get(c)) for c in columns] for g in gpus],
            "note": "NV#: NVLink (# links); PIX/PXB: through PCIe switches; PHB: through the CPU's PCIe host bridge; "
                    "NODE: across PCIe host bridges within a NUMA node; SYS: across NUMA nodes (the CPU interconnect)."}


EXTRA_TITLES = {"advice": "Advice", "topology": "GPU topology", "nccl": "NCCL", "peak": "Link peak",
                "placement": "Rank placement", "nvlink": "NVLink"}


def _extras(extra: dict | None) -> list[dict]:
    out = []
    for key, value in (extra or {}).items():
        if value is None or value == [] or value == {}:
            continue  # render each section only when present
        out.append({"key": key, "title": EXTRA_TITLES.get(key, key.replace("_", " ").capitalize()),
                    **_extra_block(value)})
    return out


def snakemake_run_started(workdir=".") -> datetime | None:
    """When the Snakemake run rendering the report started: the newest log in .snakemake/log is
    that run's, named after its start in local time (2026-11-26T144052.658292.snakemake.log)."""
    logs = sorted(Path(workdir, ".snakemake", "log").glob("*.snakemake.log"))
    if not logs:
        return None
    try:
        return datetime.strptime(logs[-1].name.split(".snakemake")[0], "%Y-%m-%dT%H%M%S.%f").astimezone()
    except ValueError:
        return None


def _cache_state(placements, run_started) -> dict | None:
    """Per benchmark job: made by this run or reused from an earlier one, when, on which host and
    at which commit (the provenance the launcher adds to each job's placement file)."""
    if not placements:
        return None
    headers = ["job", "results", "finished (UTC)", "host", "commit", "outcome"]
    rows, reused, launches, locks, waited = [], 0, {}, {}, 0.0
    for path in map(Path, placements):
        # a placement file that cannot be read costs its row the provenance, not the report
        # (its job's measurements were read from its CSV; the hung-jobs section reads it too)
        unread = None
        try:
            prov = read_json(path, remake(path)).get("provenance") or {}
        except UnreadableFile as e:
            prov, unread = {}, e.problem
        if not isinstance(prov, dict):
            prov, unread = {}, "its provenance is not a JSON object"
        # results/<label>/<family>/...: the job is what follows the label
        job = "/".join(path.parts[2:-1]) if path.parts[:1] == ("results",) else str(path.parent)
        finished = prov.get("finished")
        try:
            when = datetime.fromisoformat(prov["started"]) if prov.get("started") else None
        except (TypeError, ValueError):  # a hand-edited date: unknown, like none
            when = None
        if unread:
            state = f"unknown (its placement file cannot be read: {unread[:80]})"
        elif when is None or run_started is None:
            state = "unknown (no provenance)" if when is None else "—"
        elif when < run_started - timedelta(seconds=1):  # older provenance kept whole seconds only
            state, reused = "reused from an earlier run", reused + 1
        else:
            state = "this run"
        commit = prov.get("commit") or "—"
        lock = prov.get("host_lock") if isinstance(prov.get("host_lock"), dict) else {}
        if lock.get("path"):
            locks.setdefault(f"{lock['path']} on {lock.get('host') or '?'}", set()).add(str(lock.get("scope") or "?"))
            waited += float(lock.get("waited_s") or 0) if state == "this run" else 0.0
        _add_launch(launches, job, prov)
        rows.append([job, state, (finished or "—").replace("T", " ").replace("+00:00", ""), prov.get("host") or "—",
                     commit[:12] + ("-dirty" if commit.endswith("-dirty") and len(commit) > 12 else ""),
                     (prov.get("outcome") or "—")[:120]])
    note = (f"{count_noun(len(rows), 'benchmark job')}: {reused} reused from earlier runs (Snakemake's cache), "
            f"{len(rows) - reused} made by this run" if run_started else count_noun(len(rows), "benchmark job"))
    note += ". A job reruns when its parameters change or its outputs are deleted (docs/running.md, Caching and reruns)"
    return {"table": table(headers, rows), "commands": _launch_text(launches),
            "note": note + _lock_note(placements, locks, waited) + "."}


def _lock_note(placements, locks: dict, waited: float) -> str:
    """Which host lock the jobs held (distbench.launch.hostlock), how long this run waited for it, and
    any two benchmark measurements of a run that overlapped all the same (checked from their start
    and end times: distbench.core.intervals)."""
    text = ""
    if locks:
        text += ". Host lock held by every benchmark job: " + "; ".join(
            f"{where} ({', '.join(sorted(scopes))})" for where, scopes in sorted(locks.items()))
        if waited > 0:
            text += f"; this run's jobs waited {waited:.1f} s for it in all (outside their measured time)"
    runs = sorted({Path(*p.parts[:2]) for p in map(Path, placements) if p.parts[:1] == ("results",) and len(p.parts) > 2})
    clashes = [line for run in runs for line in overlaps(run)]
    if clashes:
        text += (f". **{len(clashes)} overlap(s) of benchmark measurements on one host**, each measuring the other's "
                 "load: " + "; ".join(clashes[:5]) + ("; ..." if len(clashes) > 5 else "") + " (rerun them: delete their CSVs)")
    else:
        text += ". No two benchmark measurements of this run overlapped (their start and end times, checked)"
    return text


def _add_launch(launches: dict, job: str, prov: dict) -> None:
    """File a job under its launch: a configuration measured in a shared launch (distbench.launch.batch)
    under that launch (its log names it), any other job under its own."""
    if not prov:  # no provenance (a missing or older placement file): the cache table says so
        return
    batch = prov.get("batch") if isinstance(prov.get("batch"), dict) else {}
    # its log and start: a later run's launch by the same job writes the same log path
    key = ("batch", batch["log"], prov.get("started")) if batch.get("log") else ("job", job)
    launch = launches.setdefault(key, {"jobs": [], "commands": [], "batch": batch})
    launch["jobs"].append(job)
    launch["commands"] = launch["commands"] or list(prov.get("commands") or [])


def _launch_text(launches: dict) -> str:
    """Every launch once: its job(s) as a comment, then its command lines, a command that every rank
    runs alike (a direct one-node launch: one process per rank, each told its rank by RANK) written
    once with "x N ranks". A shared launch is listed once, with every configuration measured in it."""
    out = []
    for (kind, *_), launch in launches.items():
        jobs, commands = launch["jobs"], launch["commands"]
        head = "# " + ", ".join(jobs)
        if kind == "batch":
            head += (f" (one shared launch of {launch['batch'].get('configurations') or len(jobs)} configurations, "
                     f"started by {launch['batch'].get('launched_by') or jobs[0]})")
        if not commands:
            where = f"; its log {launch['batch']['log']} starts with them" if kind == "batch" else ""
            out.append(f"{head}\n# (no command line recorded{where})")
            continue
        counted = {}
        for c in commands:
            counted[c] = counted.get(c, 0) + 1
        if len(counted) == 1 and len(commands) > 1:
            head += f" x {len(commands)} ranks (one process per rank, the same command; each rank's RANK tells it apart)"
        out.append(head + "\n" + "\n".join(c + (f"  # x {n}" if n > 1 and len(counted) > 1 else "")
                                           for c, n in counted.items()))
    return "\n".join(out)


def _appendix(inputs: ReportInputs) -> dict:
    return {"env": _env_table(inputs.env_dict()), "cache": _cache_state(inputs.placements, inputs.run_started),
            "config_yaml": yaml.safe_dump(inputs.config or {}, sort_keys=False, allow_unicode=True).rstrip()}


TOPOLOGY = Section("topology", "Topology", TEMPLATES, lambda inputs: _topology_matrix((inputs.extra or {}).get("topology")))
EXTRAS = Section("extras", "The probes' results", TEMPLATES, lambda inputs: _extras(inputs.extra))
APPENDIX = Section("appendix", "Appendix", TEMPLATES, _appendix)
