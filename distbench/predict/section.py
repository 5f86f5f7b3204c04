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
            "nothing_measured": nothing,
            "title": TITLE if gpus else CPU_TITLE}


# The captions of the figures (distbench.predict.plots), each what its figure draws.
FIGURE_TITLES = {
    "predict_validation": "The model checked: predicted against measured time at the larger measured world sizes",
    "predict_allreduce_busbw": "Predicted all_reduce bus bandwidth vs GPU count, per algorithm",
    "predict_training_efficiency": "Predicted training scaling efficiency vs GPU count",
}
PREDICTION = Section("prediction", TITLE, TEMPLATES, build, figure_dirs=("figures_predict",),
                     figure_titles=FIGURE_TITLES)
