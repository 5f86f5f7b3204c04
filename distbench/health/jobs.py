"""Which benchmark jobs ran on a GPU (or node) the health check found degraded or failing: every
job's placement file (results/<label>/<family>/<configuration>/placement.json, written by its rank
0: hostname, uuid, pci_bus_id per rank; distbench.launch.placement) against the health rows' GPU
identity. A GPU is matched by its UUID, else by host and PCI bus id; a per-node item by host name.
Where neither side names the GPU (a CPU run, an NVML without UUIDs, a job without a placement file)
the job's mapping is unknown, and the report says so rather than guessing.

Reads JSON only: torch-free, and no family's code (the family and configuration are the file's path).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distbench.core.readers import UnreadableFile, read_json, remake
from distbench.health.readings import NODE


def pci_key(bus_id: str | None) -> str:
    """A PCI bus id as both NVML ("00000000:19:00.0") and the placement file ("0000:19:00.0") write
    it, reduced to one form: a 4-digit domain, lower case ("" when none)."""
    if not bus_id:
        return ""
    rest = str(bus_id).strip().lower()
    head, _, tail = rest.partition(":")
    try:
        return f"{int(head, 16):04x}:{tail}"
    except ValueError:
        return rest


def uuid_key(uuid: str | None) -> str:
    """A GPU UUID as NVML ("GPU-3f0a...") and torch's device properties ("3f0a...") write it: lower
    case, without the "GPU-" prefix ("" when none)."""
    text = str(uuid or "").strip().lower()
    return text[4:] if text.startswith("gpu-") else text


@dataclass(frozen=True)
class Job:
    family: str
    configuration: str
    ranks: tuple[dict, ...]  # the placement file's rank records; () when it could not be read
    why_unread: str = ""

    @property
    def name(self) -> str:
        return f"{self.family} {self.configuration}".strip()


@dataclass(frozen=True)
class GpuJobs:
    """The jobs of one affected GPU: those measured on it (with the ranks that were) and those whose
    placement cannot say."""
    on: tuple[tuple[Job, tuple[int, ...]], ...]
    unknown: tuple[tuple[Job, str], ...]


def job_of(path: Path) -> tuple[str, str]:
    """(family, configuration) of .../results/<label>/<family>/<configuration...>/placement.json."""
    parts = path.parts
    if "results" in parts:
        at = len(parts) - 1 - parts[::-1].index("results")
        rest = parts[at + 2:-1]
    else:
        rest = parts[-3:-1]
    return (rest[0], "/".join(rest[1:])) if rest else (path.parent.name, "")


def read_jobs(placements) -> list[Job]:
    jobs = []
    for path in map(Path, placements or []):
        family, configuration = job_of(path)
        try:
            ranks = read_json(path, remake(path)).get("ranks") or []
        except UnreadableFile as exc:
            jobs.append(Job(family, configuration, (), f"its placement file is unreadable ({exc.problem})"))
            continue
        jobs.append(Job(family, configuration, tuple(r for r in ranks if isinstance(r, dict)),
                        "" if ranks else "its placement file lists no ranks"))
    return jobs


def _rank_on(rank: dict, host: str, gpu: str, uuid: str, pci: str, hosts: set[str]) -> bool | None:
    """Whether this rank ran on the GPU (or node): True, False, or None when it cannot be told."""
    # the node's name as the health check wrote it (placement's `node`; older files: the host name)
    rank_host = str(rank.get("node") or rank.get("hostname") or "")
    if gpu == NODE:
        if rank_host not in hosts:  # a name the health check does not know (e.g. SLURM's node names)
            return None
        return rank_host in host.split(",")
    if str(rank.get("device") or "").startswith("cpu"):
        return False  # a CPU rank (Gloo on CPU tensors) used no GPU, this one included
    r_uuid, r_pci = uuid_key(rank.get("uuid")), pci_key(rank.get("pci_bus_id"))
    if uuid and r_uuid:
        return r_uuid == uuid
    if pci and r_pci and rank_host in hosts:
        return rank_host == host and r_pci == pci
    return None


def _why_unknown(job: Job, gpu: str, uuid: str, pci: str) -> str:
    if job.why_unread:
        return job.why_unread
    if gpu == NODE:
        return "its ranks' host names are not among the health check's nodes"
    if not (uuid or pci):
        return "NVML gave this GPU no UUID or PCI bus id"
    if all(not r.get("uuid") and not r.get("pci_bus_id") for r in job.ranks):
        return "its ranks name no GPU (no UUID or PCI bus id in its placement file)"
    return "its ranks' GPUs cannot be matched (no UUID, and no PCI bus id on a known host)"


def jobs_on(key: tuple[str, str], identity: tuple[str, str], jobs: list[Job], hosts: set[str]) -> GpuJobs:
    """The jobs measured on the GPU (host, gpu) whose NVML identity is (uuid, pci_bus_id); hosts: every
    node the health check read."""
    host, gpu = key
    uuid, pci = uuid_key(identity[0]), pci_key(identity[1])
    on, unknown = [], []
    for job in jobs:
        seen = [(int(r.get("rank", -1)), _rank_on(r, host, gpu, uuid, pci, hosts)) for r in job.ranks]
        ranks = tuple(sorted(rank for rank, hit in seen if hit))
        if ranks:
            on.append((job, ranks))
        elif not seen or any(hit is None for _, hit in seen):
            unknown.append((job, _why_unknown(job, gpu, uuid, pci)))
    return GpuJobs(tuple(on), tuple(unknown))


def _ranks_text(ranks: tuple[int, ...]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))}"


def describe(found: GpuJobs, any_jobs: bool, limit: int = 4) -> str:
    """The jobs of one affected GPU in a sentence: 'measured on it: comm gloo/... (rank 1), ...'."""
    parts = []
    if found.on:
        shown = [f"{job.name} ({_ranks_text(ranks)})" for job, ranks in found.on[:limit]]
        more = len(found.on) - limit
        parts.append("measured on it: " + ", ".join(shown) + (f" and {more} more job(s)" if more > 0 else ""))
    if found.unknown:
        reasons = sorted({why for _, why in found.unknown})
        parts.append(f"whether {len(found.unknown)} job(s) ran on it is unknown ({'; '.join(reasons)})")
    if not parts:
        parts.append("no benchmark job ran on it" if any_jobs else
                     "which jobs ran on it is unknown (no job placement files)")
    return "; ".join(parts)
