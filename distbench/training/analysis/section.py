"""The training family's report section: its findings, the MLP (DDP) table, the language models'
table, its figures, and its Verdict headlines (per model, plain DDP at the largest judged world size:
scaling efficiency against plain DDP on one GPU (one rank under Gloo), healthy from HEALTHY_EFFICIENCY;
the reason names the bottleneck, distbench.training.analysis.findings.bottleneck). A row whose ranks
outnumber its host's cores (Gloo) is a smoke test (distbench.core.section.oversubscribed): the headline
takes the largest world size without one, and reads "measured", its scaling not judged, only when
every world size is one. Fragments: templates/training.*.j2."""

from __future__ import annotations

import math
from dataclasses import replace
from collections import Counter
from pathlib import Path

import pandas as pd

from distbench.core.section import (
    SMOKE_TEST, Headline, Measure, worse, ReportInputs, Section, SummaryPart, judged_world_size, oversubscribed,
    pct_cell, table, time_cell,
)
from distbench.core.layout_spec import BASELINE
from distbench.core.readers import read_json, remake
from distbench.core.units import human_bytes, human_time_us, sig3
from distbench.core.units import pct as _pct
from distbench.training.analysis.findings import (
    bottleneck, one_device, one_device_of, shortfall, training_findings,
)
from distbench.training.analysis.instep_view import instep_context, verdict_clause
from distbench.training.analysis.layout_verdict import layout_rows, layout_verdict
from distbench.training.analysis.layouts import layout_name
from distbench.training.analysis.mfu_reference import mfu_verdict
from distbench.training.analysis.summary import _num, row_split, with_compile
from distbench.training.contract import COMPILE_SUFFIX
from distbench.training.manifest import MANIFEST

TEMPLATES = Path(__file__).parent / "templates"
HEALTHY_EFFICIENCY = 0.90  # scaling efficiency vs one GPU at the largest world size
# Above this, the 1-GPU run was slower per GPU than the multi-GPU one: the baseline, not the scaling, is
# what the number says something about, so it is not called healthy.
SUPERLINEAR_EFFICIENCY = 1.10


def with_host(summary: pd.DataFrame | None, inputs: ReportInputs) -> pd.DataFrame | None:
    """The summary plus `oversubscribed`: '6 ranks on 2 cores' for a row whose ranks outnumber its
    host's cores (Gloo, per env.json); None otherwise, for NCCL, or when env.json is missing."""
    if summary is None or summary.empty:
        return summary
    env, per_node = inputs.env_dict(), ranks_per_node(inputs.placements)
    keys = zip(summary["backend"], summary["model"], summary["world_size"], summary["config"], strict=True)
    # a job without a placement file (its ranks never started) ran, as planned, where its ranks fit
    return summary.assign(oversubscribed=[oversubscribed(per_node.get((str(b), str(m), int(ws), str(c)), int(ws)),
                                                         str(b), env) for b, m, ws, c in keys])


def ranks_per_node(placements) -> dict[tuple[str, str, int, str], int]:
    """(backend, model, world size, config) -> the most ranks one node ran, for every training job
    whose placement file (the ranks as they ran: node and GPU) the report was given."""
    out = {}
    for path in placements or []:
        wc = MANIFEST.wildcards_of(path)
        if wc is None or not Path(path).exists():
            continue
        ranks = read_json(path, remake(path)).get("ranks") or []
        nodes = Counter(r.get("node") or r.get("hostname") for r in ranks)
        if nodes:
            out[(wc["backend"], wc["model"], int(wc["world_size"]), wc["config"])] = max(nodes.values())
    return out


def _sig3_cell(x) -> str | None:
    return None if x is None or pd.isna(x) else sig3(x)


def _ms_cell(ms) -> str | None:
    """A time in ms as a table cell, in the unit that fits (distbench.core.units): 412 µs, 15.3 ms."""
    return None if ms is None or pd.isna(ms) else time_cell(float(ms) * 1e3)


def _lm_table(lm: pd.DataFrame):
    one = one_device_of(lm)
    headers = ["model", "layout", "ws", "tokens/s", "tokens/s per device", "TFLOP/s per device", "MFU", "peak",
               "peak memory", f"efficiency vs plain {one}", "exposed comm", "other", "overlap", "trainable params", "gradients per step",
               "attention", "mode", "compile time", "status"]
    rows = []
    # a layout's eager and compiled rows side by side (training.lm.compile); tables from before it: eager
    for _, r in with_compile(lm).sort_values(["model", "strategy", "world_size", "compile"]).iterrows():
        split = row_split(r)
        peak = f"{r['peak_device']} {r['peak_tflops']:g}" if isinstance(r.get("peak_device"), str) and r["peak_device"] else None
        # TFLOP/s with three significant digits (distbench.core.units): a CPU rank's 0.0000757 is not 0.0
        rows.append([r["model"], layout_name(r), int(r["world_size"]), r["tokens_per_s_median"],
                     r["tokens_per_s_per_device_median"], _sig3_cell(r["tflops_per_device"]), pct_cell(r["mfu"]), peak,
                     None if pd.isna(r.get("peak_mem_allocated_bytes")) else human_bytes(int(r["peak_mem_allocated_bytes"])),
                     pct_cell(r["efficiency_vs_plain_1gpu"]), _ms_cell(split.exposed_comm) if r["world_size"] > 1 else None,
                     _ms_cell(split.other), pct_cell(r["overlap_fraction"]),
                     None if pd.isna(r["params_trainable"]) else f"{int(r['params_trainable']):,}",
                     None if pd.isna(r["grad_bytes"]) else human_bytes(int(r["grad_bytes"])),
                     r["attention_kernel"], "compiled" if _compiled(r) else "eager",
                     _ms_cell(r["compile_time_s"] * 1e3) if "compile_time_s" in r else None, r["status"]])
    return table(headers, rows)


def build(inputs: ReportInputs) -> dict | None:
    """The training family's section: computed findings first, then one row per configuration and
    world size (None when the run had no training jobs)."""
    s = with_host(inputs.table("training_summary"), inputs)
    if s is None or s.empty:
        return None
    one = one_device_of(s)
    if "model" not in s:
        s = s.assign(model="mlp")
    s = s.assign(_not_plain=s["config"] != "plain").sort_values(["model", "_not_plain", "config", "world_size"])  # plain first
    lm, s = s[s["model"] != "mlp"], s[s["model"] == "mlp"]
    headers = ["config", "ws", "step", "compute-only", "exposed comm", "other", "overlap", "samples/s",
               f"efficiency vs plain {one}", f"vs own {one}", "bound", "status"]
    rows = []
    for _, r in s.iterrows():
        label = bottleneck(r)[0] if r["world_size"] > 1 and r["status"] == "ok" else None
        split = row_split(r)
        rows.append([r["config"], int(r["world_size"]), _ms_cell(r["step_time_ms_median"]),
                     _ms_cell(r["compute_only_ms_median"]), _ms_cell(split.exposed_comm), _ms_cell(split.other), pct_cell(r["overlap_fraction"]), r["samples_per_s_median"],
                     pct_cell(r["efficiency_vs_plain_1gpu"]), pct_cell(r["efficiency_vs_own_1gpu"]), label, r["status"]])
    scaling = ", ".join(sorted(set(pd.concat([s, lm])["scaling"].astype(str))))
    return {"findings": training_findings(pd.concat([s, lm])), "table": table(headers, rows) if rows else None,
            "lm_table": _lm_table(lm) if len(lm) else None,
            # training.inspect: inside the step (distbench.training.analysis.instep_view)
            "instep": instep_context(inputs.table("training_instep"), inputs.table("training_split")),
            "lm_note": ("Model FLOPs per token = 6 N + 12 L H Q T (N: parameters except the position embedding; "
                        "lora: 4 per frozen and 6 per trainable parameter), the PaLM/nanoGPT/torchtitan definition; "
                        "MFU = TFLOP/s per device / the device's dense peak for the dtype (distbench/training/analysis/mfu.py), "
                        "empty for a device not in that table. FSDP's compute-only step runs with gradient sync and "
                        "resharding off (no collective at all), and its optimizer then has no gradients to apply."),
            "note": (f"{scaling} scaling: "
                     + ("the per-rank batch is fixed, so the global batch grows with the world size"
                        if scaling == "weak" else "the global batch is fixed and split over the ranks")
                     + ". Efficiency = samples/s at N ranks / (N x samples/s of plain DDP on 1 rank);"
                       " the step splits into compute-only (the same step without gradient sync, no_sync),"
                       " exposed comm = DDP step - compute-only, never more than the gradient all-reduce alone"
                       " (0 on one rank), and other = the rest: neither compute nor the collectives (host-bound"
                       " or idle time, DDP bookkeeping); overlap = 1 - (step - compute-only) / the gradient"
                       " all-reduce alone.")}


def _crowded(rows: pd.DataFrame, ws: int) -> str | None:
    """The `oversubscribed` mark (with_host) of the rows at world size ws, None when they have none."""
    marks = rows.loc[rows["world_size"] == ws, "oversubscribed"] if "oversubscribed" in rows else ()
    return next((m for m in marks if isinstance(m, str)), None)


def model_size(r) -> str:
    """'1.32B parameters' from a row's params_total ('' where it has none)."""
    n = _num(r.get("params_total"))
    if math.isnan(n) or n <= 0:
        return ""
    return f"{sig3(n / 1e9)}B parameters" if n >= 1e9 else f"{sig3(n / 1e6)}M parameters"


def mfu_judgement(r) -> tuple[str, str, str]:
    """(clause, verdict, reason) of a language-model row's MFU against the nearest comparable sourced
    reference row (distbench.training.analysis.mfu_reference, docs/fixtures.md): the clause for the
    headline ('46.0% MFU'), the verdict the row earns ('healthy' normal, 'below expected' low,
    'measured' high or with no comparable row) and the reason naming the row, or saying none exists.
    ('', 'measured', '') where the row has no MFU (a device without a known peak, CPU)."""
    mfu = _num(r.get("mfu"))
    if math.isnan(mfu) or str(r.get("device_name") or "cpu") == "cpu":
        return "", "measured", ""
    seq = _num(r.get("seq_len"))
    verdict, reason = mfu_verdict(mfu, str(r.get("device_name") or ""), _num(r.get("params_total")),
                                  int(seq) if not math.isnan(seq) else 0, str(r.get("dtype") or ""),
                                  strategy=str(r.get("strategy") or BASELINE), world_size=int(r["world_size"]),
                                  compiled=_compiled(r), full_training=_full_training(r))
    return f"{_pct(mfu, 1)} MFU", verdict, reason


def _full_training(r) -> bool:
    """Whether every parameter is trained (LoRA: only its adapters): the reference rows' kind."""
    total, trainable = _num(r.get("params_total")), _num(r.get("params_trainable"))
    return math.isnan(total) or math.isnan(trainable) or trainable >= total


def one_gpu_headlines(t: pd.DataFrame) -> list[Headline]:
    """A node with one GPU (distbench.core.judged.node_gpus): what that GPU does alone, per language
    model: tokens/s and MFU at one rank, judged against the nearest sourced MFU row (mfu_judgement).
    They lead the Verdict (`lead`): there is no scaling to judge on one GPU, and no collective between
    GPUs (the communication row says so)."""
    out = []
    for model, g in t[t["model"] != "mlp"].groupby("model", sort=True):
        one = g[(g["world_size"] == 1)]
        if one.empty:
            continue
        plain = one[(one["config"] == "plain") & (one["strategy"].fillna(BASELINE) == BASELINE)] if "strategy" in one else one
        r = (plain if len(plain) else one).iloc[0]
        size = model_size(r)
        label = f"{model} ({', '.join(x for x in (size, layout_name(r), 'compiled' if _compiled(r) else '') if x)})"
        if str(r["status"]) != "ok":
            out.append(Headline("training", f"{label} on 1 GPU: {r['status']}", "failing",
                                str(r.get("message") or "the job did not complete"), lead=2))
            continue
        clause, verdict, reason = mfu_judgement(r)
        tokens = _num(r.get("tokens_per_s_median"))
        text = f"{label} on 1 GPU: {tokens:,.0f} tokens/s" + (f", {clause}" if clause else "")
        extra = f" (sequence {int(r['seq_len'])} tokens, {r.get('dtype')}, batch {int(r['batch_size'])})"
        twin = compiled_twin(one, r)
        if twin is not None:  # the same job compiled (training.lm.compile: [false, true]): as trainers run it
            extra += (f"; compiled: {_num(twin['tokens_per_s_median']):,.0f} tokens/s"
                      + (f", {_pct(_num(twin['mfu']), 1)} MFU" if not math.isnan(_num(twin.get("mfu"))) else "")
                      + (f" (compile {_num(twin['compile_time_s']):.0f} s, not in tokens/s)"
                         if not math.isnan(_num(twin.get("compile_time_s"))) else ""))
        out.append(Headline("training", text + extra, verdict,
                            reason or "no MFU: the device's dense peak is not known (distbench/training/analysis/mfu.py)",
                            lead=2))
    return out


def compiled_twin(rows: pd.DataFrame, r):
    """The ok compiled row of `r`'s layout among `rows` (its config label plus COMPILE_SUFFIX; `compile`
    as summary.with_compile gives it), or None."""
    if _compiled(r) or "compile" not in rows:
        return None
    twins = rows[(rows["config"].astype(str) == f"{r['config']}{COMPILE_SUFFIX}") & rows["compile"]
                 & (rows["status"].astype(str) == "ok")]
    return twins.iloc[0] if len(twins) else None


def _compiled(r) -> bool:
    """A row of a table passed through summary.with_compile: its `compile` is a boolean."""
    return bool(r.get("compile", False))


def training_headlines(training: pd.DataFrame | None, split: pd.DataFrame | None = None,
                       instep: pd.DataFrame | None = None, gpus: int | None = None) -> list[Headline]:
    """Per model: plain DDP (else its first configuration) at the largest judged world size (the
    largest whose ranks each have a core: distbench.core.judged.judged_world_size, the rule by which
    the quick answer picks its jobs). With training.inspect's tables (`split`, `instep`), the headline
    names the step's largest cost beyond compute, and the reason says when the overlap, not the link,
    is what costs (instep_view.verdict_clause). A language model's MFU is judged against the nearest
    sourced reference row beside its scaling (mfu_judgement); the worse of the two verdicts stands. On a
    node with one GPU (`gpus`), one_gpu_headlines instead: tokens/s and MFU, leading the Verdict."""
    if training is None or training.empty:
        return []
    out = []
    t = training if "model" in training else training.assign(model="mlp")
    t = with_compile(t)  # `compile` as booleans (a table from before training.lm.compile: every row eager)
    if gpus == 1:  # what the GPU does alone, and which layout (eager and compiled) is fastest on it
        return one_gpu_headlines(t) + [replace(h, lead=2) for h in layout_headlines(t, split)]
    for model, g in t.groupby("model", sort=True):
        multi = g[g["world_size"] > 1]
        if multi.empty:
            continue
        ws = judged_world_size(multi["world_size"], lambda w: _crowded(multi, w))  # the quick answer's too
        at = multi[multi["world_size"] == ws]
        plain = at[at["config"] == "plain"]
        r = (plain if len(plain) else at).iloc[0]
        label = f"{model} ({r.get('strategy', 'ddp')}, {r['config']})"
        if str(r["status"]) != "ok":
            out.append(Headline("training", f"{label} at {ws} ranks: {r['status']}", "failing",
                                str(r.get("message") or "the job did not complete")))
            continue
        eff = float(r["efficiency_vs_plain_1gpu"]) if pd.notna(r.get("efficiency_vs_plain_1gpu")) else math.nan
        step_us = float(r["step_time_ms_median"]) * 1e3
        exposed_us = row_split(r).exposed_comm * 1e3  # capped at the collectives alone; NaN: no clause
        text = f"{label} at {ws} ranks: "
        one = one_device(r)
        crowded = r.get("oversubscribed")
        if isinstance(crowded, str):  # a smoke test: its efficiency and bottleneck would mislead
            out.append(Headline("training", text + SMOKE_TEST.format(crowded) + f"; a {human_time_us(step_us)} step",
                                "measured", "the ranks time-share the host's cores, so throughput and exposed "
                                "communication measure that contention, not scaling; judge scaling on a host with "
                                "at least as many cores as ranks"))
            continue
        # a figure that rounds onto the threshold gets a decimal: "89.6%", not "90%" beside "under 90%"
        near = not math.isnan(eff) and round(eff, 2) == HEALTHY_EFFICIENCY and eff != HEALTHY_EFFICIENCY
        text += (f"{_pct(eff, 1 if near else 0)} scaling efficiency vs {one}" if not math.isnan(eff)
                 else f"no {one.replace(' ', '-')} baseline")
        cost, why_cost = verdict_clause(split, instep, r)  # training.inspect: the step split by its traces
        if cost:
            text += cost
        elif not math.isnan(exposed_us):
            text += f", {human_time_us(max(exposed_us, 0.0))} exposed communication of a {human_time_us(step_us)} step"
        kind, _ = bottleneck(r)
        if math.isnan(eff):
            verdict, reason = "measured", f"{kind}; no {one.replace(' ', '-')} run to compare with"
        elif eff > SUPERLINEAR_EFFICIENCY:
            verdict, reason = "measured", (f"above linear scaling: each {one[2:]} ran faster than the "
                                           f"{one.replace(' ', '-')} baseline did, so the baseline is suspect "
                                           "(compare its step time and MFU)")
        elif eff >= HEALTHY_EFFICIENCY:
            verdict, reason = "healthy", f"at least {_pct(HEALTHY_EFFICIENCY)} of linear scaling ({kind})"
        else:
            # why it is below: where the step's time beyond linear scaling goes, never the bound label
            # (a row can be "compute-bound" and still lose its shortfall to exposed communication)
            verdict, reason = "below expected", f"under {_pct(HEALTHY_EFFICIENCY)} of linear scaling: {shortfall(r, eff)}"
        if model != "mlp":  # a language model's MFU, judged against its sourced row too: the worse verdict
            clause, mfu_verdict, mfu_reason = mfu_judgement(r)
            if clause:
                text += f", {clause}"
                reason += f"; {mfu_reason}"
                verdict = worse(verdict, mfu_verdict)
        out.append(Headline("training", text, verdict, f"{reason}; {why_cost}" if why_cost else reason))
    # which layout (training.lm.strategies): the answer first, one row per language model
    return layout_headlines(t, split) + out


def layout_headlines(summary: pd.DataFrame, split: pd.DataFrame | None = None) -> list[Headline]:
    """Per language model with two or more layouts at one world size: the fastest and the others
    beside it, each with the cost that sets it apart, a layout that did not run named with its status
    (layout_verdict.layout_verdict)."""
    return [Headline("training", *layout_verdict(rows, split)) for rows in layout_rows(summary).values()]


def headlines(inputs: ReportInputs) -> list[Headline]:
    return training_headlines(with_host(inputs.table("training_summary"), inputs), inputs.table("training_split"),
                              inputs.table("training_instep"), gpus=inputs.node_gpus())


# Against a baseline run: the median step time per configuration, its p5-p95 as the noise (tables from
# before FSDP had no strategy column: every run was DDP).
STEP_TIME = Measure("training", "training_summary.csv", ("backend", "model", "strategy", "world_size", "config"),
                    "step_time_ms_median", "step_time_ms_p5", "step_time_ms_p95", unit="ms", defaults={"strategy": BASELINE})
# summary.json's results.training: one record per configuration
SUMMARY_FIELDS = ("model", "strategy", "config", "backend", "world_size", "batch_size", "dtype", "step_time_ms_median",
                  "compute_only_ms_median", "exposed_comm_ms", "exposed_comm_capped_ms", "other_ms", "overlap_fraction", "samples_per_s_median",
                  "tokens_per_s_median", "tflops_per_device", "mfu", "efficiency_vs_plain_1gpu", "status")

# The captions of the figures (distbench.training.analysis.plots), each what its figure draws.
FIGURE_TITLES = {
    "training_throughput": "MLP throughput vs world size, per DDP configuration, with ideal scaling",
    "training_lm_throughput": "Language-model tokens/s per model and configuration: vs world size, or bars with "
                              "their MFU where the run has one world size",
    "training_efficiency": "Scaling efficiency vs world size, every model and configuration",
    "training_step_breakdown": "Where an MLP DDP step's time goes, per world size",
    "training_tuning": "DDP tuning results at the largest world size",
    "training_layouts": "Language-model tokens/s by parallel layout at the largest world size, peak memory beside it",
}
TRAINING = Section("training", "Training", TEMPLATES, build, headlines=headlines, figure_dirs=("figures_training",),
                   figure_titles=FIGURE_TITLES, regressions=(STEP_TIME,),
                   summary=SummaryPart("training", "training_summary", SUMMARY_FIELDS,
                                               schema=Path(__file__).with_name("summary.schema.json")))
