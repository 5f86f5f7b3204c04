"""The training family's rules that read tables or sweep the GPUs, as its manifest's `steps` name them
(rules/families.smk builds each rule; distbench.pipeline.run_rules.run_step calls these)."""

from __future__ import annotations

from distbench.launch.in_rule import figures_in_rule, run_in_rule


def cost_gpu_hour_usd(config, _plan):
    return config["cost"].get("gpu_hour_usd")


def aggregate(sm) -> None:
    """A corrupt cached job CSV ends the rule with a message naming it (log + stderr, exit 1)."""
    from distbench.training.analysis.summary import aggregate_training

    run_in_rule(sm.log[0], aggregate_training, list(sm.input.jobs), sm.output.raw, sm.output.summary,
                sm.params.cost_gpu_hour_usd)


def plot(sm) -> None:
    from distbench.training.analysis.plots import plot_training

    figures_in_rule(sm, plot_training, "summary")


def instep(sm) -> None:
    """training.inspect's tables: the in-step buckets beside the comm family's standalone figures, the
    four-part split of each multi-rank job's step, MFU against the spec and the achievable peak; the
    traces' per-step figures read from their table (training_trace_split), every input by table name."""
    from distbench.training.analysis.instep_summary import read_trace_split, write_instep_tables

    run_in_rule(sm.log[0], lambda: print(write_instep_tables(
        list(sm.input.inspect), sm.input.summary, sm.input.get("comm_summary"), sm.input.get("training_matmul"),
        sm.output.instep, sm.output.split, read_trace_split(sm.input.trace_split))))


def matmul_sweep(config, plan):
    """training.matmul_sweep's params: the models' own GEMMs on the GPUs the jobs use."""
    from distbench.training.plan import matmul_params

    return matmul_params(config, plan["jobs"]["training"])


def matmul(sm) -> None:
    """The achievable matmul peak of each GPU (distbench.training.matmul), as a benchmark job: one
    measurement at a time on this host (config host_lock)."""
    from distbench.launch.joblock import held
    from distbench.launch.job_rule import run_job_in_rule
    from distbench.training.matmul import run_sweeps

    what = "matmul sweep"
    run_job_in_rule(sm.log[0], what, held(sm, what, lambda: run_sweeps(sm.params.sweep, sm.output.table, sm.log[0])))

