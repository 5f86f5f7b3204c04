"""The cluster prediction's report section ("Larger clusters (predicted)"): the check of the model,
the comparison at 8 GPUs with published figures, training at scale, the fits and the model's
assumptions. A CPU run (no NCCL row: distbench.predict.tables.measured_on_gpus) has no GPU-cluster
prediction: the section is then the method checked on this host's own numbers (the check and the
fits), titled so, and says why in one sentence. Fragments: templates/prediction.*.j2."""

from __future__ import annotations

from pathlib import Path

from distbench.comm.analysis.peak import EXPECTED, reference_text
from distbench.core.readers import read_table, remake
from distbench.core.section import ReportInputs, Section, pct_cell, table
from distbench.predict.model import get_preset
from distbench.predict.tables import measured_on_gpus, validation_summary

TEMPLATES = Path(__file__).parent / "templates"
TITLE = "Larger clusters (predicted)"
CPU_TITLE = "The prediction method, checked on this host"  # a CPU run: no cluster is predicted


def published_8gpu_ring() -> dict:
    """What the prediction at 8 GPUs is compared with: the published 8x H100 all_reduce busbw at large
    sizes with NVLS off (ring), from the one table of reference figures with their sources."""
    return next(r for r in EXPECTED if (r["gpu"], r["gpus"], r["op"], r["nvls"]) == ("H100", 8, "all_reduce", False))


def build(inputs: ReportInputs) -> dict | None:
    """The cluster prediction's section (distbench.predict.model), from the four tables written beside
    the validation table: the check of the model, the fits, training at scale, and the assumptions."""
    validation = inputs.table("prediction_validation")
    if validation is None:
        return None
    d = inputs.path("prediction_validation").parent
    fits, comm, training = (read_table(d / f, remake(d / f)) for f in ("alpha_beta.csv", "prediction_comm.csv",
                                                                        "prediction_training.csv"))
    gpus = measured_on_gpus(fits, comm, training)
    if not gpus:  # a CPU run: no GPU cluster from it (also from tables written before it said so)
        comm, training = comm.iloc[0:0], training.iloc[0:0]
    else:  # GPU figures rest on GPU collectives only: a check fitted on Gloo supports none of them
        validation = _of_backend(validation, "nccl")
        fits = _of_backend(fits, "nccl")
    findings, tables = [], {}
    if len(validation):
        vs = validation_summary(validation)
        rows = [[r["op"], r["timing"], r["backend"], f"{int(r['fit_world_size'])} -> {int(r['check_world_size'])}",
                 r["median_abs_err_pct_large"], r["max_abs_err_pct_large"], r["median_abs_err_pct"], r["max_abs_err_pct"]]
                for _, r in vs.sort_values(["backend", "op", "timing"]).iterrows()]
        tables["validation"] = table(["op", "timing", "backend", "fit -> checked ranks", "median |error| >= 1 MiB (%)",
                                       "max >= 1 MiB (%)", "median |error| all sizes (%)", "max all sizes (%)"], rows)
        big = validation[validation["size_bytes"] >= 2**20]["rel_err_pct"].abs()
        if len(big):
            findings.append(f"The model, fitted on the smallest world size and checked against the larger measured ones: "
                            f"median |error| {big.median():.1f}% at >= 1 MiB (max {big.max():.1f}%, {len(big)} points); "
                            f"{validation['rel_err_pct'].abs().median():.1f}% over all sizes.")
    if len(fits):
        rows = [[r["op"], r["timing"], r["backend"], int(r["world_size"]), r.get("alpha_fixed_us"), r.get("alpha_hop_us"),
                 r["link_beta_gbps"], r["max_rel_err_pct"]]
                for _, r in fits.sort_values(["backend", "op", "timing", "world_size"]).iterrows()]
        tables["fits"] = table(["op", "timing", "backend", "ranks", "alpha fixed (µs)", "alpha per hop (µs)",
                                 "busbw asymptote (GB/s)", "max |residual| (%)"], rows)
    ar8 = comm[(comm["op"] == "all_reduce") & (comm["gpus"] == 8) & (comm["intra_source"] == "measured")
               & (comm["backend"] == "nccl") & (comm["algorithm"] == "ring")] if len(comm) else comm
    if len(ar8):
        top = ar8[ar8["size_bytes"] == ar8["size_bytes"].max()]
        findings.append(f"8 GPUs on NVLink, all_reduce at {int(top['size_bytes'].iloc[0]) / 2**20:g} MiB from the measured "
                        f"link: {top['busbw_gbps'].min():.0f}-{top['busbw_gbps'].max():.0f} GB/s busbw predicted "
                        f"(by timing mode and fitted world size); compare {reference_text(published_8gpu_ring())}, "
                        "NVLS off.")
    if len(training):
        t = training[training["efficiency"].notna()]
        gpus = sorted(t["gpus"].unique())
        rows = []
        for key, g in t.groupby(["model", "strategy", "config"], sort=True):
            eff = g.set_index("gpus")["efficiency"]
            rows.append([*key, int(g["ref_world_size"].iloc[0]), *[pct_cell(eff.get(n)) for n in gpus]])
        tables["training"] = table(["model", "strategy", "config", "measured up to", *[f"{n} GPUs" for n in gpus]], rows)
    preset = get_preset(comm["preset"].iloc[0]) if len(comm) else None
    note = ("Hockney model per series: t = alpha + S / beta, beta the bus-bandwidth asymptote of the largest sizes and "
            "alpha the small-size floor, split into a fixed per-op cost and a per-hop latency (from the world sizes "
            "measured, or the preset's); ring costs at N ranks, hierarchical (intra-node reduce-scatter, inter-node "
            "all-reduce per rail, intra-node all-gather) beyond one node; training step = compute-only + the modelled "
            "gradient communication less the overlap measured at the largest world size. It breaks between about "
            "512 KiB and 32 MiB (NCCL's protocol switches), where it predicts too fast, and for send_recv. "
            "distbench/predict/model.py has every formula.")
    if preset is not None:
        note += f" Preset {preset.name}: {preset.source}"
    # nothing measured at all (e.g. backends [nccl] on a host without a GPU: the plan skipped every comm job)
    nothing = not len(fits) and not len(validation)
    return {"findings": findings, "tables": tables, "note": note, "cpu_only": not gpus and not nothing,
            "nothing_measured": nothing and not gpus,
            "rests_on": rests_on(fits, validation, comm, training, preset) if gpus else "",
            "title": TITLE if gpus else CPU_TITLE}


def _of_backend(t, backend: str):
    """The rows of `t` measured on `backend` (all of them where the table names no backend)."""
    if t is None or not len(t) or "backend" not in t:
        return t
    return t[t["backend"].astype(str) == backend]


def preset_text(preset) -> str:
    """A preset with its figures: 'nvlink4-ib400 (8 GPUs per node; within a node 360 GB/s busbw, 2.0 µs
    per hop; between nodes 46 GB/s per GPU, 5.0 µs per hop)'."""
    return (f"the preset {preset.name} ({preset.gpus_per_node} GPUs per node; within a node "
            f"{preset.intra.beta_gbps:g} GB/s busbw, {preset.intra.alpha_us:g} µs per hop; between nodes "
            f"{preset.inter.beta_gbps:g} GB/s per GPU, {preset.inter.alpha_us:g} µs per hop)")


def rests_on(fits, validation, comm, training, preset) -> str:
    """The prediction section's first line: what its GPU figures rest on (the NCCL collectives measured
    on this node, at which world sizes, and how well the model held here; else the preset, named with
    its figures) and what they do not (a check fitted on Gloo: never support for GPU figures)."""
    measured = sorted({int(w) for w in fits["world_size"]}) if fits is not None and len(fits) else []
    link = (f"the NCCL collectives measured on this node at {', '.join(map(str, measured))} ranks"
            if measured else "no collective between GPUs measured on this node (it has fewer than two GPUs, "
                             "or ran no NCCL job)")
    parts = [f"These predictions rest on {link}"]
    uses_preset = comm is not None and len(comm) and "intra_source" in comm and (comm["intra_source"] == "preset").any()
    if preset is not None and (uses_preset or not measured or (training is not None and len(training))):
        parts.append("and on " + preset_text(preset)
                     + (" for the links between nodes" if measured else " for every link"))
    big = validation[validation["size_bytes"] >= 2**20]["rel_err_pct"].abs() if validation is not None and len(validation) else []
    if len(big):
        check = (f"the model's check on this node (fitted at {int(validation['fit_world_size'].min())} ranks, "
                 f"checked at {', '.join(map(str, sorted({int(w) for w in validation['check_world_size']})))}): "
                 f"median |error| {big.median():.1f}% at >= 1 MiB, max {big.max():.1f}%; the predictions carry "
                 "at least that error")
    else:
        check = ("the model was not checked on this node: that needs NCCL collectives measured at two or more "
                 "world sizes; a check fitted on Gloo (CPU processes) supports no GPU figure, so none is shown")
    return " ".join(parts) + "; " + check + "."


# The captions of the figures (distbench.predict.plots), each what its figure draws.
FIGURE_TITLES = {
    "predict_validation": "The model checked: predicted against measured time at the larger measured world sizes",
    "predict_allreduce_busbw": "Predicted all_reduce bus bandwidth vs GPU count, per algorithm",
    "predict_training_efficiency": "Predicted training scaling efficiency vs GPU count",
}
PREDICTION = Section("prediction", TITLE, TEMPLATES, build, figure_dirs=("figures_predict",),
                     figure_titles=FIGURE_TITLES)
