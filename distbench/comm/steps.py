"""The comm family's rules that read tables, as its manifest's `steps` name them (rules/families.smk
builds each rule; distbench.pipeline.run_rules.run_step calls these with Snakemake's object)."""

from __future__ import annotations

from pathlib import Path

from distbench.launch.in_rule import run_in_rule


def aggregate(sm) -> None:
    """The comm tables, written once: the summary with the probes joined onto every point (% of the
    link peak, NCCL's algorithm per size) and the advice beside it. A corrupt cached job CSV or probe
    file ends the rule with a message naming it (log + stderr, exit 1), no traceback."""
    from distbench.comm.analysis.diagnose import diagnose
    from distbench.comm.analysis.summary import aggregate as aggregate_summary

    def join(summary):
        return diagnose(summary, sm.input.env, sm.input.topology, sm.input.nccl, list(sm.input.placement),
                        sm.output.advice)

    run_in_rule(sm.log[0], aggregate_summary, list(sm.input.jobs), list(sm.input.ranks), sm.output.raw,
                sm.output.ranks, sm.output.summary, sm.output.largest, sm.output.stragglers, join)


def plot(sm) -> None:
    """The bus-bandwidth and latency figures, with the link peak (comm_advice.json) and the GPU's name.
    The summary and the advice were checked before this runs (distbench.pipeline.run_rules.run_step);
    the probe's env.json is read through the one reader too: a damaged file ends the rule with its
    message, no traceback."""
    from distbench.comm.analysis.plots import make_all
    from distbench.core.readers import read_json, remake

    def main():
        Path(sm.output.figures).mkdir(parents=True, exist_ok=True)
        peak = read_json(sm.input.advice, remake(sm.input.advice)).get("peak")
        gpus = read_json(sm.input.env, remake(sm.input.env)).get("gpus") or [{}]
        first = gpus[0] if isinstance(gpus, list) and isinstance(gpus[0], dict) else {}
        for f in make_all(sm.input.summary, sm.output.figures, peak=peak, gpu_name=first.get("name")):
            print(f)

    run_in_rule(sm.log[0], main)


def aggregate_pairs(sm) -> None:
    """The GPU-pair matrix (comm.pairs): every job's pairs.csv, with each pair's link class."""
    from distbench.comm.analysis.pairs import write_pairs_table

    run_in_rule(sm.log[0], write_pairs_table, list(sm.input.pairs), sm.input.topology, sm.output.table)


def plot_pairs(sm) -> None:
    from distbench.comm.analysis.pairs_plots import write_pairs_figures

    Path(sm.output.figures).mkdir(parents=True, exist_ok=True)  # also when there is nothing to draw
    run_in_rule(sm.log[0], write_pairs_figures, sm.input.pairs, sm.output.figures)


def nccl_tests(sm) -> None:
    """The comm series as nccl-tests -J documents (one file per series), with every rank's time per
    trial and its host from the jobs' placement files (each job known by its file's path)."""
    from distbench.comm.analysis.findings import read_summary
    from distbench.comm.analysis.nccl_tests_json import placements_of, write_nccl_tests
    from distbench.comm.manifest import MANIFEST
    from distbench.core.section import ReportInputs

    def main():
        paths = list(sm.input.placements)
        placements = placements_of([MANIFEST.wildcards_of(p) for p in paths], paths)
        # read as the report reads it: an unreadable table ends the rule with its message and fix
        summary = ReportInputs(tables={"comm_summary": sm.input.summary}).table("comm_summary", read_summary)
        for path in write_nccl_tests(summary, sm.output.documents, sm.input.ranks, placements):
            print(path)

    run_in_rule(sm.log[0], main)
