"""What a benchmark family declares about itself, once: its FamilyManifest, and the one registry of
them (`register`, which refuses a second family of the same name, as torchtitan's register_train_spec).

Each family package holds one `manifest.py` that defines `MANIFEST = register(FamilyManifest(...))`;
distbench.pipeline.families imports those modules and reads the registry (core names no family). The
manifest is the family's whole interface: its plan (config and GPUs in, jobs out: `plan`), each job's
parameters (`job_params`), what its job runs (`job_entry`), its steps that read tables (`steps`: the
aggregate and plot rules), its estimate defaults, host-fit needs, config checks and schema fragment,
its tables, figures, report sections and package data. rules/families.smk builds every family's rules
from these. A package that is no benchmark family (no plan of jobs: a probe, a check, an analysis of
the families' tables) registers a PackageManifest, which holds only what such packages declare.

`register` checks a manifest before it joins the registry, each problem a ManifestError naming the
manifest file and the field: every "module:function" hook and "module:NAME" section resolves (read
from the module's source unless the module is loaded: a hook's module may import torch), the name
is an identifier equal to its folder's, the files it declares exist, and no other manifest has its
name or one of its tables' names.

Paths are templates under results/<run label>/ with Snakemake's {wildcards}. Torch-free, pandas-free:
the Snakefile reads the manifests while the DAG is built.
"""

from __future__ import annotations

import re
import string
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from distbench.core.manifest_check import ManifestError, manifest_problems, shown_file


def _always(_config: Mapping, _plan: Mapping) -> bool:
    return True


def config_flag(*keys: str) -> Callable[[Mapping, Mapping], bool]:
    """A condition on one config value: `config_flag("widgets", "pairs")` is config["widgets"]["pairs"]."""

    def flag(config: Mapping, _plan: Mapping = None) -> bool:  # type: ignore[assignment]
        value = config
        for k in keys:
            value = value[k]
        return bool(value)

    flag.__qualname__ = "config_flag(" + ".".join(keys) + ")"
    return flag


def _match(template: list[str], parts: list[str]) -> dict[str, str] | None:
    """One directory template's wildcards read off path parts ("ws{world_size}" against "ws2")."""
    found: dict[str, str] = {}
    for t, part in zip(template, parts, strict=True):
        pattern = "".join(re.escape(lit) + (f"(?P<{f}>[^/]+)" if f else "")
                          for lit, f, _, _ in string.Formatter().parse(t))
        m = re.fullmatch(pattern, part)
        if not m:
            return None
        found.update(m.groupdict())
    return found


@dataclass(frozen=True)
class Table:
    """One file a family writes for its readers (a table under tables/, or a document)."""

    name: str  # the key its readers use: ReportInputs.table(name)
    path: str  # under results/<label>/, e.g. "tables/<family>_summary.csv"
    # an input of the report (and of summary.json); False: written for people and other rules only
    report: bool = True
    # (config, plan) -> whether this run writes it; None: whenever the family is active
    when: Callable[[Mapping, Mapping], bool] | None = None
    # `snakemake report` alone goes on without it when it was never made (a reading the report names
    # as not taken), instead of stopping
    optional_cached: bool = False
    # copied beside the report (its full tables), whether or not a section reads it
    beside_report: bool = False
    # read by summary.json too (a SummaryPart of the family's section names it: tests/core/test_manifests.py)
    summary_json: bool = False
    # Snakemake's own report (`snakemake --report`): its caption, a file in the family's folder, and
    # its subcategory under "Tables" ("" : not in that report)
    caption: str = ""
    subcategory: str = ""
    # it holds rows whenever its family ran (the plan holds the family's jobs): every job leaves a row
    # per planned point, a failed one its failure rows (distbench.launch.failure), so a header alone
    # means the file was cut short or overwritten, and every reader refuses it (rows_reason)
    rows: bool = False
    # the columns its readers need (the report, summary.json, the plots): a file without one of them is
    # refused, naming it, before any of them reads it (distbench.core.readers.read_table)
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Figures:
    """A plot rule's output directory (under results/<label>/) whose PNGs the report shows."""

    path: str
    when: Callable[[Mapping, Mapping], bool] | None = None
    # Snakemake's own report: its caption (a file in the family's folder) and category
    caption: str = ""
    category: str = ""


@dataclass(frozen=True)
class FamilyPlan:
    """What one family's plan hook returns (distbench.pipeline.plan.make_plan loops over the manifests)."""

    # its jobs: objects with .wildcards (job_dir's fields), .backend and .world_size
    jobs: tuple = ()
    # what the config asked for and this host cannot run, each {"what", "why"} (the report's plan section)
    skipped: tuple = ()
    # plan-wide facts this family states, merged into the plan (a key stated by two families is refused)
    facts: Mapping = field(default_factory=dict)
    # the cluster nodes its jobs span beyond what their world size places (the node rounds): the health
    # check reads that many nodes
    hosts_spanned: int = 0


@dataclass(frozen=True)
class JobFiles:
    """A step's input: one file of every planned job of the family (None: each job's result)."""

    name: str | None = None


@dataclass(frozen=True)
class TableRef:
    """A step's input: one table of any family, by name, when this run writes it (else left out);
    ancient: a newer table does not rerun the step."""

    name: str
    ancient: bool = False
    # left out when this run does not write it (else required: the step waits for it)
    optional: bool = False


@dataclass(frozen=True)
class Step:
    """A rule that reads tables and writes tables or figures (an aggregate, a plot), built by
    rules/families.smk: inputs {name: path under results/<label>/ | JobFiles | TableRef}, outputs
    {name: the name of one of the family's Tables, or the path of one of its Figures}, `entry` the
    function "module:function" called with Snakemake's object (distbench.pipeline.run_rules.run_step),
    params {name: "module:function"} each called with (config, plan)."""

    rule: str
    entry: str
    outputs: Mapping[str, str]
    inputs: Mapping = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    # (config, plan) -> whether this run has the step (its outputs are made); None: whenever the family is active
    when: Callable[[Mapping, Mapping], bool] | None = None
    # the whole host (it measures): threads = every core; else the side threads of table readers
    measures: bool = False
    # also made from the quick target's few jobs (`snakemake quick`), its tables under quick/tables/
    quick: bool = False


@dataclass(frozen=True)
class EstimateDefault:
    """A job's wall time before any was recorded: seconds + per_rank_s x world size, and where the
    figure came from (distbench.pipeline.estimate)."""

    seconds: float
    per_rank_s: float = 0.0
    source: str = ""

    def at(self, world_size: int) -> float:
        return self.seconds + self.per_rank_s * world_size


@dataclass(frozen=True)
class HostNeed:
    """What a family's jobs put on the host that runs them beyond their processes, as its host_needs or
    host_placement hook says (distbench.pipeline.host_fit): buffers per rank at the largest point,
    and, for a family that places its own jobs, their ranks and agents on this host."""

    buffers: float = 0.0  # bytes per rank above its process at the largest point (on the GPU under NCCL)
    at: str = ""  # that point, in words
    # the buffers were every size of the job capped at this one (None: no buffers estimated)
    at_size: Callable[[int], float] | None = field(default=None, compare=False)
    largest: int = 0  # the largest size (bytes)
    keys: str = ""  # the config keys of its sizes, as "What fits" names them against the host's memory
    gpu_keys: str = ""  # the same against a GPU's memory
    # a family that places its own jobs (host_placement): one need for its jobs alike
    backend: str = ""
    world_size: int = 0
    ranks: int = 0  # ranks on this host
    agents: int = 0  # agents (one per node) on this host
    what: str = ""  # how the messages name its jobs (its agents are nodes: "<what> (<backend>, N nodes x ...)")
    spread: str = ""  # the config keys that set how many agents (nodes) run on this host


@dataclass(frozen=True)
class _Reading:
    """The fields a FamilyManifest and a PackageManifest share, and what every registered manifest
    answers from its fields."""

    # who it is
    name: str  # the package's name under distbench/ (distbench.<name>)
    # where it comes among the families (the estimate's message, the report's sections within a place)
    order: int = 100
    # (config, plan) -> whether this run has it at all (its tables and figures are made)
    active: Callable[[Mapping, Mapping], bool] = _always

    # its benchmark jobs (a package's one job, if any): the rule, the job directory and the files each
    # job writes there (the first is its result: a target of `all`, and what `report` alone needs
    # cached), the benchmark tsv
    job_rule: str = ""
    job_dir: str = ""
    job_files: tuple[str, ...] = ()
    benchmark: str = ""
    # its jobs are counted by the time estimate printed before a run (distbench.pipeline.estimate), with
    # these defaults, {(host "gpu"|"cpu", backend): EstimateDefault}
    estimated: bool = False
    estimate_defaults: Mapping[tuple[str, str], EstimateDefault] = field(default_factory=dict)

    # its config's schema: a YAML file in its folder (list it in package_data) holding the schema of the
    # top-level config key named as the package, merged into the central schema's properties
    # (distbench.pipeline.config.load_schema); it may $ref the central definitions
    schema: str = ""
    # "module:function" (config, defaults filled in) -> [problem, each "config key <key>: ..."]: what the
    # schema cannot say (a value against another, a file read now: distbench.pipeline.config.check_config)
    config_check: str = ""

    # what it writes and what reads it
    # the rules that read tables: aggregates and plots (rules/families.smk builds them)
    steps: tuple[Step, ...] = ()
    tables: tuple[Table, ...] = ()
    figures: tuple[Figures, ...] = ()
    # the report sections it registers, as "module:NAME" (imported by distbench.report.sections), by
    # where they go in the report: "top" (before the families: what qualifies every result), "body",
    # "end" (after every family's body section)
    sections: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # files of the package that are not modules (globs under distbench/<name>/): the wheel ships them
    package_data: tuple[str, ...] = ()

    @property
    def step_rules(self) -> tuple[str, ...]:
        return tuple(s.rule for s in self.steps)

    @property
    def benchmark_rules(self) -> tuple[str, ...]:
        """Every rule of this family that measures: its job rule, its steps that measure, and its other
        measuring rules (those written in a rules file of their own)."""
        steps = tuple(s.rule for s in self.steps if s.measures)
        return ((self.job_rule,) if self.job_rule else ()) + steps + self.measuring_rules

    @property
    def job_fields(self) -> tuple[str, ...]:
        """The wildcards of job_dir, in their order."""
        return tuple(f for _, f, _, _ in string.Formatter().parse(self.job_dir) if f)

    @property
    def job_outputs(self) -> dict[str, str]:
        """{output name: file} of its job rule: "csv" for the result, then each other file by its stem
        (the family's name before it dropped): <family>_ranks.csv -> "ranks", placement.json -> "placement"."""
        out = {}
        for i, f in enumerate(self.job_files):
            out["csv" if i == 0 else f.rsplit(".", 1)[0].removeprefix(self.name + "_")] = f
        return out

    @property
    def job_log(self) -> str:
        """Its job's log under results/<label>/, with the job's wildcards."""
        return f"logs/{self.job_dir}.log"

    def output_path(self, name: str) -> str:
        """A step's output: one of its tables by name, or one of its figure directories by path."""
        for t in self.tables:
            if t.name == name:
                return t.path
        for f in self.figures:
            if f.path == name:
                return f.path
        raise KeyError(f"{self.name} has no table or figure directory {name!r}")

    def job_file(self, name: str | None = None) -> str:
        """A job's file (default: its result) under results/<label>/, wildcards left in."""
        return f"{self.job_dir}/{name or self.job_files[0]}"

    def wildcards_of(self, path) -> dict[str, str] | None:
        """The wildcards of the job whose file `path` is (a job file under any results/<label>/), or None
        when it is no file of this family's jobs."""
        parts = str(path).replace("\\", "/").split("/")
        template = self.job_dir.split("/")
        for start in range(len(parts) - len(template)):
            found = _match(template, parts[start:start + len(template)])
            if found is not None and len(parts) == start + len(template) + 1:
                return found
        return None

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"{self.name} writes no table {name!r} (its tables: {[t.name for t in self.tables]})")




@dataclass(frozen=True)
class FamilyManifest(_Reading):
    """A benchmark family: a plan of jobs from the config, each job run by torchrun, its steps, tables,
    figures and report sections. Packages that are no family register a PackageManifest."""

    # the "module:function" fields, each resolved when the manifest registers
    HOOKS = ("plan", "job_params", "job_entry", "job_launch", "job_resources", "quick", "announce",
             "estimate_weight", "host_needs", "host_placement", "config_check")
    # what only a PackageManifest declares, read as none by the code that loops over every manifest
    measuring_rules = ()
    cached = ()

    # its plan and its jobs
    # "module:function" (config, gpus, gpus_source) -> FamilyPlan; "" for a family without a plan
    plan: str = ""
    # "module:function" (config, plan, job) -> the job's parameters as plain JSON data: every value
    # that shapes its measurement (the rule's `job` param: a change reruns it; the job reads them
    # from job.json, which the rule writes)
    job_params: str = ""
    # "module:function" (the job's job.json) -> (what it runs, as the logs name it; a callable that
    # runs it and returns "ok" or why it failed): what the job rule runs
    # (distbench.pipeline.run_rules.run_family_job)
    job_entry: str = ""
    # job outputs made only on request: {output name: (file or directory under the job dir,
    # (config) -> whether this run makes it)}
    job_optional: Mapping[str, tuple[str, Callable[[Mapping], bool]]] = field(default_factory=dict)
    # tables made before its jobs, never beside them (TableRef names): inputs of every job
    job_after: tuple[str, ...] = ()
    # wildcard constraints of its job rule beyond the shared ones
    job_constraints: Mapping[str, str] = field(default_factory=dict)
    # "module:function" (config, plan, job) -> the launch params, as job_resources
    job_launch: str = ""
    # "module:function" (config, plan, job) -> {SLURM resource: value} where its jobs are not placed
    # by (backend, world size); "" for the shared placement (distbench.pipeline.plan.job_resources)
    job_resources: str = ""
    # its jobs' time limit (seconds) where its config section sets no job_timeout_s (a cluster
    # executor's runtime is derived from it)
    job_timeout_s: int = 1800
    # the jobs of one backend and world size may share a launch (distbench.launch.batch)
    shares_launches: bool = False
    # its jobs write a trace directory when the config's `profile` asks (distbench.launch.profiling)
    traced: bool = False
    # "module:function" (config, plan, cores) -> [job]: the few of its planned jobs the quick answer runs
    # (distbench.pipeline.quick: the same job objects); "": none
    quick: str = ""
    # "module:function" (config, plan) -> a message printed before the first job (or None)
    announce: str = ""

    # what the estimate and the host-fit check need from it
    # the fixed cost of a launch that its shared launches pay once ({host: seconds})
    launch_cost_s: Mapping[str, float] = field(default_factory=dict)
    # "module:function" (a job's wildcards and params) -> how much more its measuring part takes than the
    # job the default was measured with (the estimate scales the default's part beyond launch_cost_s);
    # "": every job as the default
    estimate_weight: str = ""
    # "module:function" (config, plan, job) -> HostNeed: one job's buffers per rank, for a family whose
    # jobs are placed by world size (distbench.pipeline.host_fit); "": its processes only
    host_needs: str = ""
    # "module:function" (config, plan, launcher) -> ([HostNeed], [problem]): what a family that places
    # its own jobs (job_resources) puts on this host under that launcher, and why it cannot run here
    host_placement: str = ""


@dataclass(frozen=True)
class PackageManifest(_Reading):
    """A package the workflow and the report read that is no benchmark family (a probe, a check, an
    analysis of other families' tables): no plan, no jobs of a family. It may have one job of its
    own without wildcards of a plan (its job_rule, written in a rules file of its own), steps that
    read tables, rules that measure, a config key's schema and check, tables, figures and sections."""

    HOOKS = ("config_check",)

    # the other rules that measure (a GPU or the host under load): `report` alone never starts them
    measuring_rules: tuple[str, ...] = ()
    # files `snakemake report` alone needs cached (under results/<label>/)
    cached: tuple[str, ...] = ()

    # what only a family declares, read as none by the code that loops over every manifest
    plan = ""
    job_params = ""
    job_entry = ""
    job_optional = MappingProxyType({})
    job_after = ()
    job_constraints = MappingProxyType({})
    job_launch = ""
    job_resources = ""
    job_timeout_s = 1800
    shares_launches = False
    traced = False
    quick = ""
    announce = ""
    launch_cost_s = MappingProxyType({})
    estimate_weight = ""
    host_needs = ""
    host_placement = ""


Manifest = FamilyManifest | PackageManifest




class Registry(dict):
    """Every registered manifest by name, and the file each came from. `register` checks a manifest
    before it is added: its hooks and sections resolve, its files exist, its name is its folder's, and
    no other registered manifest has its name or one of its tables' names."""

    def __init__(self):
        super().__init__()
        self.files: dict[str, str] = {}

    def register(self, manifest: Manifest, file=None) -> Manifest:
        shown = shown_file(file) if file else f"distbench/{getattr(manifest, 'name', '?')}/manifest.py"
        if not isinstance(manifest, (FamilyManifest, PackageManifest)):
            raise ManifestError(shown, f"registers a {type(manifest).__name__}, not a FamilyManifest or "
                                       "PackageManifest")
        folder = Path(file).resolve().parent if file and Path(file).name == "manifest.py" else None
        problems = manifest_problems(manifest, folder)
        if problems:
            raise ManifestError(shown, "; ".join(problems))
        earlier = self.get(manifest.name)
        if earlier is not None and earlier is not manifest and (not file or self.files.get(manifest.name) != shown):
            raise ManifestError(shown, f"registers the name {manifest.name!r}, which "
                                       f"{self.files.get(manifest.name, 'another manifest')} registered first")
        for t in manifest.tables:
            for other in self.values():
                if other.name != manifest.name and t.name in {o.name for o in other.tables}:
                    raise ManifestError(shown, f"tables: {t.name!r} is a table of {other.name} too "
                                               f"({self.files.get(other.name, '?')}): a table's name is one file")
        self[manifest.name] = manifest
        self.files[manifest.name] = shown
        return manifest


# The registry: every family's and package's manifest by name, filled as each manifest module is
# imported (distbench.pipeline.families imports them).
REGISTRY = Registry()


def table_spec(name: str) -> tuple[str, Table] | None:
    """(the family that writes it, its Table) of the registered table `name`; None when no registered
    family writes one of that name (the registry fills as the manifests are imported:
    distbench.pipeline.families.manifests())."""
    for m in REGISTRY.values():
        for t in m.tables:
            if t.name == name:
                return m.name, t
    return None


def rows_reason(name: str, plan: Mapping | None) -> str:
    """Why table `name` must hold rows in a run of this plan, or "" when a header alone is a whole file
    (its Table does not say `rows`, its family has no jobs in the plan, or the plan is not known). The
    plan is the run's (its "jobs": {family: [job, ...]}, as distbench.pipeline.plan.make_plan and
    plan_summary give it): that the family has jobs there is how a reader knows the family ran."""
    found = table_spec(name)
    if found is None or not found[1].rows or not plan:
        return ""
    family, _ = found
    jobs = (plan.get("jobs") or {}).get(family) or ()
    return f"its family ran ({len(jobs)} {family} job(s) in the plan), and each job leaves rows" if jobs else ""


def register(manifest: Manifest, file=None) -> Manifest:
    """Add a manifest to the registry, checked (Registry.register); `file` defaults to the calling
    module's (its manifest.py), which every message names."""
    if file is None:
        file = sys._getframe(1).f_globals.get("__file__")
    return REGISTRY.register(manifest, file)
