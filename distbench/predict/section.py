"""The cluster prediction's report section ("Larger clusters (predicted)"): the check of the model,
the comparison at 8 GPUs with published figures, training at scale, the fits and the model's
assumptions. A CPU run (no NCCL row: distbench.predict.tables.measured_on_gpus) has no GPU-cluster
prediction: the section is then the method on this host's own numbers (the check and the fits), titled
so, and says why in one sentence; a Gloo world size with more ranks than cores is a smoke test and is
left out of the check, which the section says. Fragments: templates/prediction.*.j2."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from distbench.core.readers import read_table, remake
from distbench.core.references import EXPECTED, reference_text
from distbench.core.section import ReportInputs, Section, pct_cell, table
from distbench.predict.model import get_preset
from distbench.predict.tables import measured_on_gpus, smoke_tests, validation_summary
from distbench.core.units import counts_noun

TEMPLATES = Path(__file__).parent / "templates"
TITLE = "Larger clusters (predicted)"
CPU_TITLE = "The prediction method on this host"  # a CPU run: no cluster is predicted; its check, where one can be made


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
    checked_on = validation  # every backend's check: rests_on names a Gloo one as no support for GPU figures
    if not gpus:  # a CPU run: no GPU cluster from it (also from tables written before it said so)
        comm, training = comm.iloc[0:0], training.iloc[0:0]
    else:  # GPU figures rest on GPU measurements only: a check fitted on Gloo supports none of them
        validation = _of_backend(validation, "nccl")
        fits = _of_backend(fits, "nccl")
        training = _of_backend(training, "nccl")
    findings, tables = [], {}
    if not gpus:
        findings += _smoke_note(fits, inputs.env_dict(), len(validation) > 0)
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
            by = g.set_index("gpus")
            rows.append([*key, int(g["ref_world_size"].iloc[0]), check_cell(g.iloc[0]),
                         *[band_cell(by["efficiency"].get(n), by["band_points"].get(n) if "band_points" in by else None,
                                     g.iloc[0]) for n in gpus]])
        tables["training"] = table(["model", "strategy", "config", "measured up to", "in-node check",
                                    *[f"{n} GPUs" for n in gpus]], rows)
    preset = get_preset(comm["preset"].iloc[0]) if len(comm) else None
    note = ("Hockney model per series: t = alpha + S / beta, beta the bus-bandwidth asymptote of the largest sizes and "
            "alpha the small-size floor, split into a fixed per-op cost and a per-hop latency (from the world sizes "
            "measured, or the preset's); ring costs at N ranks, hierarchical (intra-node reduce-scatter, inter-node "
            "all-reduce per rail, intra-node all-gather) beyond one node; training step = compute-only + the modelled "
            "gradient communication less the overlap measured at the largest world size. On one node, an NCCL "
            "collective measured at two or more world sizes is predicted by NCCL's own cost model instead (its "
            "algorithms and LL, LL128 and Simple protocols, the one NCCL would pick at each size, calibrated on this "
            "node's sweep: distbench/predict/nccl_model.py), which holds through the protocol switches (about "
            "512 KiB - 32 MiB) where the envelope alone predicts too fast, with the ring loop's bubble fitted across "
            "the node's ops and, for send_recv, NCCL's p2p channels per peer "
            "(distbench/predict/nccl_p2p.py). "
            "distbench/predict/model.py has every formula.")
    if preset is not None:
        note += f" Preset {preset.name}: {preset.source}"
    # nothing measured at all (e.g. backends [nccl] on a host without a GPU: the plan skipped every comm job)
    nothing = not len(fits) and not len(validation)
    return {"findings": findings, "tables": tables, "note": note, "cpu_only": not gpus and not nothing,
            "nothing_measured": nothing and not gpus,
            "rests_on": rests_on(fits, checked_on, comm, training, preset) if gpus else "",
            "title": TITLE if gpus else CPU_TITLE}


def _smoke_note(fits, env: dict, checked: bool) -> list[str]:
    """Why the CPU check leaves out some world sizes (distbench.predict.tables.validate_all): Gloo ranks
    beyond the host's cores time-share them, so those times measure the contention, not the model."""
    if not len(fits) or not env or "world_size" not in fits:
        return []
    over = smoke_tests(fits, env)
    left = sorted({int(w) for w in pd.to_numeric(fits.loc[over, "world_size"])})
    if not left:
        return []
    ranks = counts_noun(left, "rank", last=" and ")
    why = (f"on this host's {env.get('cpu_count')} cores their Gloo ranks time-share the cores (smoke tests), so "
           "their times measure that contention, not the model")
    if checked:
        return [f"Not checked against {ranks}: {why}."]
    return [f"No check on this host: it needs two world sizes with a core per rank, and at {ranks}, {why}."]


def _of_backend(t, backend: str):
    """The rows of `t` measured on `backend` (all of them where the table names no backend)."""
    if t is None or not len(t) or "backend" not in t:
        return t
    return t[t["backend"].astype(str) == backend]


def check_cell(r) -> str:
    """A configuration's in-node training check: 'fitted at 1,2 ranks, at 4: -0.7 points', or why none."""
    err = r.get("check_error_points")
    if err is None or pd.isna(err):
        ws = str(r.get("measured_world_sizes", ""))
        return "not checked: " + ("one world size" if len(ws.split(",")) < 2 else "no 1-GPU run")
    fitted = str(r["check_fit_world_sizes"]).replace(",", ", ")
    return f"fitted at {fitted} ranks, at {int(r['check_world_size'])}: {err:+.1f} points"


def band_cell(eff, band, r) -> str | None:
    """An efficiency with its band beyond the checked world size: '50.3% ± 9.0 points (in-node check at 4
    ranks: error -9.0 points)'; the efficiency alone within it."""
    cell = pct_cell(eff)
    if cell is None or band is None or pd.isna(band):
        return cell
    return (f"{cell} ± {band:.1f} points (in-node check at {int(r['check_world_size'])} ranks: "
            f"error {r['check_error_points']:+.1f} points)")


def preset_text(preset) -> str:
    """A preset with its figures: 'nvlink4-ib400 (8 GPUs per node; within a node 360 GB/s busbw, 2.0 µs
    per hop; between nodes 46 GB/s per GPU, 5.0 µs per hop)'."""
    return (f"the preset {preset.name} ({preset.gpus_per_node} GPUs per node; within a node "
            f"{preset.intra.beta_gbps:g} GB/s busbw, {preset.intra.alpha_us:g} µs per hop; between nodes "
            f"{preset.inter.beta_gbps:g} GB/s per GPU, {preset.inter.alpha_us:g} µs per hop)")


def _ranks(values) -> str:
    return ", ".join(str(w) for w in sorted({int(w) for w in values}))


def _comm_check(validation) -> str:
    """The collectives' check on this node as rests_on words it: NCCL only (a Gloo check, CPU processes,
    is named as such and never as support for a GPU figure)."""
    nccl = _of_backend(validation, "nccl") if validation is not None and len(validation) else None
    big = nccl[nccl["size_bytes"] >= 2**20]["rel_err_pct"].abs() if nccl is not None and len(nccl) else []
    if len(big):
        return (f"collectives (NCCL) fitted at {int(nccl['fit_world_size'].min())} ranks, checked at "
                f"{_ranks(nccl['check_world_size'])}: median |error| {big.median():.1f}% at >= 1 MiB, "
                f"max {big.max():.1f}%")
    gloo = validation is not None and len(validation) and "backend" in validation and (
        validation["backend"].astype(str) == "gloo").any()
    text = "collectives not checked (that needs NCCL collectives measured at two or more world sizes)"
    if gloo:
        return text + ("; the Gloo check here is CPU processes and supports no GPU figure, so it is not shown as "
                       "support for one")
    return text + "; a check fitted on Gloo (CPU processes) supports no GPU figure, so none is shown"


def _training_check(training) -> tuple[str, float, float]:
    """(words, max |error| in points, checked world size) of the training prediction's in-node check
    (distbench.predict.scaling.check_training_config) from prediction_training's check_* columns."""
    if training is None or not len(training):
        return "", math.nan, math.nan
    t = training.drop_duplicates([c for c in ("backend", "model", "strategy", "config") if c in training])
    checked = t[t["check_error_points"].notna()] if "check_error_points" in t else t.iloc[0:0]
    if not len(checked):
        why = ("one world size" if "measured_world_sizes" not in t
               or all(len(str(w).split(",")) < 2 for w in t["measured_world_sizes"]) else "no 1-GPU run")
        return f"training not checked: {why}", math.nan, math.nan
    err = checked["check_error_points"].astype(float)
    worst = float(err.abs().max())
    ws = int(checked["check_world_size"].max())
    each = ", ".join(f"{r['model']} {r.get('strategy', '')} {r['check_error_points']:+.1f}".replace("  ", " ")
                     for _, r in checked.iterrows())
    fitted = sorted({str(f).replace(",", ", ") for f in checked["check_fit_world_sizes"]})
    return (f"training efficiency fitted at {' or '.join(fitted)} ranks, checked at {ws}: max |error| "
            f"{worst:.1f} points ({each})"), worst, ws


def rests_on(fits, validation, comm, training, preset) -> str:
    """The prediction section's first line: what its GPU figures rest on (the NCCL collectives and the
    training steps measured on this node: the tables and world sizes; else the preset, named with its
    figures), the model's check on this node with its error (collectives and training efficiency; "not
    checked" where one world size leaves nothing to check) and what they do not rest on (a check
    fitted on Gloo: never support for GPU figures)."""
    fits = _of_backend(fits, "nccl")
    measured = sorted({int(w) for w in fits["world_size"]}) if fits is not None and len(fits) else []
    none_here = "no collective between GPUs was measured on this node (it has fewer than two GPUs, or ran no NCCL job)"
    if measured:
        parts = [f"These predictions rest on the NCCL collectives measured on this node at "
                 f"{', '.join(map(str, measured))} ranks (comm_summary)"]
    elif preset is not None:  # the preset first: it is what every link's figure comes from
        parts = [f"These predictions rest on {preset_text(preset)} for every link, since {none_here},"]
    else:
        parts = [f"These predictions rest on no measured link ({none_here})"]
    if training is not None and len(training) and "measured_world_sizes" in training:
        ws = {int(w) for v in training["measured_world_sizes"].dropna() for w in str(v).split(",") if w.strip()}
        if ws:
            parts.append(f"and {'' if measured else 'on '}the training steps measured at {counts_noun(ws, 'rank')} "
                         "(training_summary)")
    uses_preset = comm is not None and len(comm) and "intra_source" in comm and (comm["intra_source"] == "preset").any()
    if measured and preset is not None and (uses_preset or (training is not None and len(training))):
        parts.append("and on " + preset_text(preset) + " for the links between nodes")
    checks = [_comm_check(validation)]
    words, worst, ws = _training_check(training)
    if words:
        checks.append(words)
    text = " ".join(parts).rstrip(",") + "; the model's check on this node: " + "; ".join(checks)
    if not math.isnan(worst):
        text += (f"; the predictions carry at least that error, and those beyond {ws} ranks show it as their "
                 "band")
    return text + "."


# The captions of the figures (distbench.predict.plots), each what its figure draws.
FIGURE_TITLES = {
    "predict_validation": "The model checked: predicted against measured time at the larger measured world sizes",
    "predict_allreduce_busbw": "Predicted all_reduce bus bandwidth vs GPU count, per algorithm",
    "predict_training_efficiency": "Predicted training scaling efficiency vs GPU count",
}
PREDICTION = Section("prediction", TITLE, TEMPLATES, build, figure_dirs=("figures_predict",),
                     figure_titles=FIGURE_TITLES)
