"""The prediction's rules, as its manifest's `steps` name them (rules/families.smk builds each rule;
distbench.pipeline.run_rules.run_step calls these with Snakemake's object)."""

from __future__ import annotations

from pathlib import Path

from distbench.launch.in_rule import run_in_rule


def preset(config, _plan) -> str:
    return config["predict"]["preset"]


def gpu_counts(config, _plan) -> list[int]:
    return list(config["predict"]["gpu_counts"])


def predict(sm) -> None:
    """Alpha-beta fits of the measured collectives, their check against the larger measured world
    sizes, and collective times and training scaling at predict.gpu_counts GPUs."""
    from distbench.predict.tables import main

    argv = [sm.input.comm, "--preset", sm.params.preset, "--gpus", ",".join(map(str, sm.params.gpu_counts)),
            "--out-dir", str(Path(sm.output.fits).parent)]
    if sm.input.get("env"):
        argv += ["--env", sm.input.env]
    if sm.input.get("training_summary"):
        argv += ["--training", sm.input.training_summary]
    run_in_rule(sm.log[0], main, argv)


def plot(sm) -> None:
    from distbench.predict.plots import write_predict_figures

    run_in_rule(sm.log[0], write_predict_figures, sm.input.validation, sm.input.comm, sm.input.training,
                sm.output.figures)
