"""`snakemake --cores 1 report` rebuilds the report from cached results and never starts a
benchmark. Missing results stop it while the DAG is built (rules/common.smk
report_from_cache); this module stops it before the first job (the Snakefile's onstart) when cached
results exist but Snakemake would run benchmark jobs again anyway: their params changed (a config
edit), their code changed, or they were never recorded as complete.
Torch-free, Snakemake-free: it is handed the jobs of the DAG."""

from __future__ import annotations

from pathlib import Path

from distbench.pipeline.families import benchmark_rules, families

# Rules that measure (a GPU or the host under load): never started by `report` alone (each family's
# manifest names its own: distbench.core.manifest.FamilyManifest.benchmark_rules).
BENCHMARK_RULES = benchmark_rules()
REPORT_TARGETS = frozenset({"report", "report/report.md", "report/report.html"})


def report_only(targets) -> bool:
    """The invocation asks for the report and nothing else."""
    targets = set(targets or ())
    return bool(targets) and targets <= REPORT_TARGETS


def rerun_message(jobs: list[tuple[str, str]]) -> str | None:
    """jobs: (rule, what Snakemake says about why it runs) of the benchmark jobs about to run;
    the message that stops `report`, or None when there is none."""
    jobs = [(rule, why) for rule, why in jobs if rule in BENCHMARK_RULES]
    if not jobs:
        return None
    shown = "; ".join(f"{rule} ({why[:120]})" for rule, why in jobs[:3])
    more = f" and {len(jobs) - 3} more" if len(jobs) > 3 else ""
    return (f"distbench: `snakemake report` rebuilds the report from cached results and starts no benchmark, but "
            f"Snakemake would run {len(jobs)} benchmark job(s) again: {shown}{more}. To measure them again: "
            "`snakemake --cores 1` (the report included). To report the cached results as they are: "
            "`snakemake --cores 1 report --rerun-triggers mtime`.")


def _family_of(path: str, label: str, families) -> str | None:
    """The family whose job directory holds a result path (results/<label>/<job_dir head>/...)."""
    parts = Path(path).parts
    start = parts.index(label) + 1 if label in parts else 0
    head = parts[start] if start < len(parts) else ""
    return next((m.name for m in families if m.job_dir and m.job_dir.split("/")[0] == head), None)


def missing_message(missing: list[str], n_needed: int, label: str) -> str:
    """The message that stops `report` alone while the DAG is built: `missing` of the plan's `n_needed`
    benchmark jobs and probes have no cached result under results/<label>/. It names the families
    whose results are missing (read off the paths against the manifests' job directories), so the
    command it offers runs what is missing."""
    owners = list(dict.fromkeys(f for f in (_family_of(p, label, families()) for p in missing) if f))
    run_them = (f", or the families missing results: {' and '.join(f'`snakemake --cores 1 {f}`' for f in owners)}"
                if owners else "")
    return (f"distbench: `snakemake report` rebuilds the report from cached results and starts no benchmark, but "
            f"{len(missing)} of the {n_needed} benchmark jobs and probes of this plan have no cached result under "
            f"results/{label}/ (e.g. {missing[0]}). Run them first: `snakemake --cores 1` (everything, the report "
            f"included){run_them}, then `snakemake --cores 1 report`.")
