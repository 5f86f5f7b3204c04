"""The training family's sentences, from the summary rows of distbench.training.analysis.summary:
`bottleneck` (what bounds one row's step: compute or communication), `training_findings` and `lora_findings` (the report's
lines, each citing its numbers) and `best_config` (the tuning winner).

A row may carry `oversubscribed` ('6 ranks on 2 cores', distbench.core.section.oversubscribed; the
report's section adds it from env.json): its ranks time-share the host, so it is a smoke test and
no sentence judges its scaling or names a bound. Gloo rows say "rank" where NCCL rows say "GPU"."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from distbench.training.contract import COMPILE_SUFFIX, TRAINING_SEVERITY
from distbench.core.layout_spec import BASELINE, SPECS, layout_of, layout_or_baseline
from distbench.core.section import SMOKE_TEST
from distbench.core.units import human_bytes
from distbench.core.units import pct as _pct
from distbench.training.analysis.layouts import layout_name
from distbench.training.analysis.summary import NAN, PLAIN, compiled, _ms, _num, _time_ms, add_scaling, row_allowance_ms, row_split

COMM_BOUND_FRACTION = 0.25  # exposed communication at least this share of the step: communication-bound
# What the part of a step that is neither compute nor the collectives is, said once for every sentence:
# the summary measures that it exists, not which of these it is.
OTHER = SPECS[BASELINE].other_words  # 'host-bound or idle time, DDP bookkeeping': a row without a known layout


def _other(row) -> str:
    """OTHER in the row's layout's words ('FSDP bookkeeping' under FSDP2)."""
    return layout_or_baseline(row.get("strategy")).other_words


def _sig(x: float, digits: int = 3) -> str:
    """Significant digits without scientific notation: 0.0000757, 0.0125, 3.2."""
    return np.format_float_positional(float(x), precision=digits, unique=False, fractional=False, trim="-")


def _with_scaling(summary: pd.DataFrame) -> pd.DataFrame:
    return summary if "efficiency_vs_plain_1gpu" in summary else add_scaling(summary)


# ---------------------------------------------------------------- verdict
def _ranks(row) -> str:
    ws = int(row["world_size"])
    unit = ("GPU" if ws == 1 else "GPUs") if str(row.get("backend")) == "nccl" else ("rank" if ws == 1 else "ranks")
    return f"{ws} {unit}"


def one_device(row) -> str:
    """What the efficiency baseline ran on: '1 rank' under Gloo (CPU processes), '1 GPU' otherwise."""
    return "1 rank" if str(row.get("backend")) == "gloo" else "1 GPU"


def one_device_of(rows: pd.DataFrame) -> str:
    """What the efficiency baselines of several rows (a table, a figure) ran on: '1 rank' when every
    row ran on Gloo, '1 GPU' when none did (and for a table without a backend column, written before
    CPU runs existed), and both, each with its backend, when a run mixes the two; so a CPU run's
    labels never say GPU."""
    backends = set(rows["backend"].astype(str)) if "backend" in rows and len(rows) else set()
    if not backends or "gloo" not in backends:
        return "1 GPU"
    return "1 rank" if backends == {"gloo"} else "1 GPU (NCCL) or 1 rank (Gloo)"


def crowded(row) -> str | None:
    """'6 ranks on 2 cores' when the row's Gloo ranks outnumbered its host's cores, else None."""
    x = row.get("oversubscribed")
    return x if isinstance(x, str) and x else None


def bottleneck(row) -> tuple[str, str]:
    """(label, sentence) for one summary row, from seed 003's bottleneck reading. Labels:

    - host-bound: step > compute_only + comm_alone + noise allowance (the compared phases' spreads,
      distbench.training.analysis.summary.row_allowance_ms), i.e. slower than compute plus all
      gradient communication done one after the other: the excess (other_ms) is neither. Checked
      first, since such a step also shows a large step − compute that communication cannot explain.
    - communication-bound: exposed communication (capped at comm_alone, exposed_comm_capped_ms) ≥
      COMM_BOUND_FRACTION of the step (world size > 1).
    - compute-bound: otherwise.
    - unknown: the job is not ok or its step times are missing.
    - smoke test: more Gloo ranks than the host has cores, `crowded`: the step measures the
      ranks' contention for the host, so no bound is named.
    """
    row = dict(row)
    status = str(row.get("status") or "ok")
    who = _ranks(row)
    if status != "ok":
        msg = str(row.get("message") or "").strip()
        return "unknown", f"{who} ({row.get('config')}): {status}" + (f" — {msg}" if msg else "") + "."
    if crowded(row) and int(row["world_size"]) > 1:
        return "smoke test", f"{who}: {SMOKE_TEST.format(crowded(row))}."
    split = row_split(row)
    step, comp = split.step, split.compute
    if math.isnan(step) or math.isnan(comp):
        return "unknown", f"{who} ({row.get('config')}): no ddp or compute_only step times to judge."
    ar = _num(row.get("comm_alone_ms_median"))
    allowance = row_allowance_ms(row)
    ws = int(row["world_size"])
    if ws > 1 and not math.isnan(ar) and step > comp + ar + allowance:
        return "host-bound", (
            f"{who}: each {_time_ms(step)} step takes {_time_ms(step - comp - ar)} more than compute alone "
            f"({_time_ms(comp)}) plus the whole gradient all-reduce done serially ({_time_ms(ar)}), beyond the "
            f"{_time_ms(allowance)} noise allowance: that time is neither compute nor the collectives ({_other(row)}: "
            f"launches, Python, synchronisation, a straggling rank), not the "
            f"{'GPU' if one_device(row) == '1 GPU' else 'computation'} or the network.")
    if ws == 1:  # one rank: DDP has nobody to talk to; what it adds over no_sync is not communication
        other = split.other
        return "compute-bound", (
            f"{who}: no communication between ranks; each {_time_ms(step)} step spends {_time_ms(max(other, 0.0))} "
            f"({_pct(max(other / step, 0.0))}) that is neither compute nor communication ({_other(row)}: DDP's copy "
            f"of the gradients into its buckets); compute ({_time_ms(comp)} under no_sync) dominates.")
    exposed = split.exposed_comm if not math.isnan(split.exposed_comm) else max(split.beyond_compute, 0.0)
    share = exposed / step
    what = "is exposed communication" if not math.isnan(split.exposed_comm) else \
        "is beyond compute alone (no all-reduce time to tell communication from the rest)"
    parts = [f"{who}: {_time_ms(exposed)} of each {_time_ms(step)} step ({_pct(share)}) {what}"]
    overlap = _num(row.get("overlap_fraction"))
    if not math.isnan(overlap):
        parts.append(f"{_pct(overlap)} of the gradient all-reduce ({_time_ms(ar)} alone) overlaps backward")
    if exposed > 0 and not math.isnan(split.tail):
        parts.append(f"of the exposed time, {_time_ms(split.tail)} is the last bucket's all-reduce after backward "
                     f"ends and {_time_ms(split.other_buckets)} the other buckets' all-reduces not hidden behind it")
    if split.other > 0 and _ms(split.other) != "0":
        parts.append(f"{_time_ms(split.other)} is neither compute nor the collectives ({_other(row)}; within the "
                     f"{_time_ms(allowance)} noise allowance)")
    if share >= COMM_BOUND_FRACTION:
        return "communication-bound", "; ".join(parts) + "."
    parts.append(f"compute ({_time_ms(comp)} under no_sync) dominates")
    return "compute-bound", "; ".join(parts) + "."


def shortfall(row, efficiency: float) -> str:
    """Why a row misses linear scaling, in words, for a "below expected" verdict. Efficiency is
    throughput against N x the 1-rank baseline, so step x efficiency is the step linear scaling
    would give (the ideal), and step - ideal is what the row loses. The step's parts beyond compute
    (exposed communication, time that is neither compute nor the collectives) and compute's own
    excess over the ideal (compute_only - ideal: each rank computing slower than the baseline did)
    add up to that loss; the largest is named first, the others after it. Never a bound label: a
    row can be "compute-bound" (exposed communication under COMM_BOUND_FRACTION of the step) and
    still lose most of its shortfall to communication."""
    split = row_split(row)
    step, one = split.step, one_device(row)
    if math.isnan(step) or math.isnan(efficiency):
        return "no step time to say where the time goes"
    ideal = step * efficiency
    head = (f"the {_time_ms(step)} step is {_time_ms(step - ideal)} over the {_time_ms(ideal)} that linear scaling from "
            f"{one} gives")
    parts = []
    if not math.isnan(split.exposed_comm):
        parts.append((split.exposed_comm, f"exposed communication, {_time_ms(split.exposed_comm)} "
                                          f"({_pct(split.exposed_comm / step)} of the step)"))
        if not math.isnan(split.other):
            parts.append((split.other, f"time that is neither compute nor the collectives ({_other(row)}), "
                                       f"{_time_ms(split.other)} ({_pct(split.other / step)} of the step)"))
    elif not math.isnan(split.beyond_compute):
        parts.append((split.beyond_compute, f"time beyond compute alone, {_time_ms(split.beyond_compute)} "
                                            f"({_pct(split.beyond_compute / step)} of the step; no all-reduce "
                                            "time to tell communication from the rest)"))
    if not math.isnan(split.compute):
        parts.append((split.compute - ideal, f"compute itself, {_time_ms(split.compute)} under no_sync, "
                                             f"{_time_ms(split.compute - ideal)} over the linear step (each rank "
                                             f"computes slower than the {one.replace(' ', '-')} run did)"))
    costs = sorted((p for p in parts if p[0] > 0), key=lambda p: -p[0])
    if not costs:
        return head + "; no part of the step (compute, exposed communication, the rest) accounts for it: noise"
    text = f"{head}; the largest cost is {costs[0][1]}"
    if len(costs) > 1:
        text += "; then " + ", ".join(c[1] for c in costs[1:])
    return text


# ---------------------------------------------------------------- best configuration and findings
@dataclass(frozen=True)
class BestConfig:
    config: str
    world_size: int
    efficiency: float  # efficiency_vs_plain_1gpu of the winner (fraction)
    plain_efficiency: float  # the plain config's at the same world size (NaN if it did not run ok)
    gain_points: float  # 100 × (efficiency − plain_efficiency): percentage points over plain DDP
    row: dict


def mlp_ddp_rows(s: pd.DataFrame) -> pd.DataFrame:
    """The MLP's DDP rows: the tuning sweep's configurations (its FSDP rows, config `fsdp`, are a
    strategy, not a DDP configuration: their own findings lines say how they scale)."""
    if "model" in s:
        s = s[s["model"].fillna("mlp") == "mlp"]
    sharded = [name for name, spec in SPECS.items() if spec.sharded]
    return s[~s["strategy"].isin(sharded)] if "strategy" in s else s


def best_config(summary: pd.DataFrame) -> BestConfig | None:
    """At the largest world size (among ok rows with an efficiency), the ok DDP configuration of the
    MLP (the tuning sweep's) with the highest efficiency_vs_plain_1gpu, and its gain over plain DDP
    in percentage points."""
    s = mlp_ddp_rows(_with_scaling(summary))
    ok = s[(s["status"] == "ok") & s["efficiency_vs_plain_1gpu"].notna() & (s["world_size"] > 1)]
    if ok.empty:
        return None
    ws = int(ok["world_size"].max())
    at = ok[ok["world_size"] == ws].sort_values(["efficiency_vs_plain_1gpu", "config"], ascending=[False, True])
    win = at.iloc[0]
    plain = at[at["config"] == PLAIN]["efficiency_vs_plain_1gpu"]
    p = float(plain.iloc[0]) if len(plain) else NAN
    e = float(win["efficiency_vs_plain_1gpu"])
    return BestConfig(str(win["config"]), ws, e, p, 100 * (e - p), win.to_dict())


def _config_name(config) -> str:
    return "plain DDP" if str(config) == PLAIN else str(config)


def _failures(s: pd.DataFrame) -> list[str]:
    bad = s[s["status"] != "ok"].copy()
    if bad.empty:
        return []
    bad["_rank"] = bad["status"].map(lambda x: TRAINING_SEVERITY.get(x, -1))
    out = []
    for _, r in bad.sort_values(["_rank", "world_size", "config"]).iterrows():
        msg = str(r["message"] or "").strip()
        line = f"ws{int(r['world_size'])} config {r['config']}: {r['status']}" + (f" — {msg}" if msg else "")
        if r["status"] == "wrong":
            line = f"⚠ CORRECTNESS FAILURE: {line}; do not trust its numbers"
        out.append(line + ".")
    return out


def workload_name(r) -> str:
    """'MLP 4096x8', 'gpt 24L/32H/2048d seq 1024', 'lora r16 on gpt 24L/...'."""
    model = str(r.get("model") or "mlp")
    if model == "mlp":
        return f"MLP {int(r['hidden_dim'])}x{int(r['num_layers'])}"
    shape = f"gpt {int(r['num_layers'])}L/{_int_or(r.get('n_heads'))}H/{int(r['hidden_dim'])}d seq {_int_or(r.get('seq_len'))}"
    return f"lora r{_int_or(r.get('lora_rank'))} on {shape}" if model == "lora" else shape


def _int_or(v) -> str:
    x = _num(v)
    return "?" if math.isnan(x) else str(int(x))


def _strategy_name(r) -> str:
    spec = layout_of(r.get("strategy"))
    if spec is not None and spec.group:
        return layout_name(r)
    if spec is not None and spec.sharded:
        return spec.short
    return _config_name(str(r["config"]).removesuffix(COMPILE_SUFFIX))  # compiled: ", torch.compile" says so


def lm_throughput(r) -> str | None:
    """'12,345 tokens/s (6,172 per GPU), 123 TFLOP/s per GPU, MFU 45.1% of the H100 SXM bfloat16
    peak (989.4 TFLOP/s)' for a gpt/lora row; None for the MLP."""
    if str(r.get("model") or "mlp") == "mlp":
        return None
    tok, tok_dev = _num(r.get("tokens_per_s_median")), _num(r.get("tokens_per_s_per_device_median"))
    if math.isnan(tok):
        return None
    unit = "GPU" if str(r.get("backend")) == "nccl" else "rank"
    text = f"{tok:,.0f} tokens/s ({tok_dev:,.0f} per {unit})"
    tflops, m = _num(r.get("tflops_per_device")), _num(r.get("mfu"))
    if not math.isnan(tflops):
        text += f", {_sig(tflops)} TFLOP/s per {unit}"
    if not math.isnan(m):
        text += f", MFU {_pct(m, 1)} of the {r.get('peak_device')} {r.get('dtype')} peak ({_sig(_num(r.get('peak_tflops')))} TFLOP/s)"
    return text  # no MFU: training_findings says why once


def _finding(r) -> str | None:
    compiled = ", torch.compile" if str(r.get("compile")).lower() == "true" else ""
    head = f"{workload_name(r)}, {_ranks(r)} ({_strategy_name(r)}{compiled}, {r['scaling']} scaling)"
    parts = []
    lm = lm_throughput(r)
    if lm:
        parts.append(lm)
    compile_s = _num(r.get("compile_time_s"))
    if compiled and not math.isnan(compile_s):  # beside the throughput, never in it
        parts.append(f"compiled in {compile_s:,.1f} s of warm-up (not in the timed steps)")
    eff, own = _num(r.get("efficiency_vs_plain_1gpu")), _num(r.get("efficiency_vs_own_1gpu"))
    split = row_split(r)
    step, beyond = split.step, split.beyond_compute
    if crowded(r) and int(r["world_size"]) > 1:  # ranks time-sharing cores: no efficiency, overlap or bound
        parts.insert(0, SMOKE_TEST.format(crowded(r)))
        if not math.isnan(step):
            parts.append(f"{_time_ms(step)} per step")
        return f"{head}: " + "; ".join(parts) + "."
    one = one_device(r).replace(" ", "-")
    if int(r["world_size"]) == 1:  # nothing to communicate: the throughput (and MFU) is the finding
        # no scaling at one rank: the baseline itself says nothing more, another layout its throughput
        # against the baseline's (FSDP2 on one GPU: 98.2% of plain DDP's samples/s)
        if not math.isnan(eff) and str(r["config"]) != PLAIN:
            parts.append(f"{_pct(eff, 1)} of plain DDP's throughput on {one_device(r)}")
        return f"{head}: " + "; ".join(parts) + "." if parts else None
    if not math.isnan(eff):
        text = f"{_pct(eff, 1)} scaling efficiency against the plain {one} run"
        if str(r["config"]) != PLAIN and not math.isnan(own):
            text += f" ({_pct(own, 1)} against its own {one} run)"
        parts.append(text)
    if not (math.isnan(step) or math.isnan(beyond)):
        parts += _split_clauses(split, row_allowance_ms(r), _other(r))
    overlap = _num(r.get("overlap_fraction"))
    if not math.isnan(overlap):
        parts.append(f"{_pct(overlap)} of gradient communication overlaps compute")
    cost = _num(r.get("cost_usd_per_1k_samples"))
    if not math.isnan(cost):
        parts.append(f"${_sig(cost)} per 1K samples")
    energy = _num(r.get("energy_j_per_1k_samples"))
    if not math.isnan(energy):
        parts.append(f"{_sig(energy / 1e3)} kJ per 1K samples" if energy >= 999.5 else f"{_sig(energy)} J per 1K samples")
    bounds = r.get("bounds_ok")
    if bounds is not None and not pd.isna(bounds) and not bool(bounds):
        parts.append(f"timing check failed: {r['bounds_note']}")
    return f"{head}: " + "; ".join(parts) + "." if parts else None


def _split_clauses(split, allowance: float, other: str = OTHER) -> list[str]:
    """The step split of a world-size > 1 row in words: its exposed communication (never more than
    the collectives alone) and the rest, named as neither compute nor the collectives."""
    step, beyond = split.step, split.beyond_compute
    if beyond <= 0:
        return [f"no exposed communication (the {_time_ms(step)} step is {_time_ms(-beyond)} faster than "
                f"compute alone, within noise)"]
    if math.isnan(split.exposed_comm):  # no all-reduce time: nothing to tell communication from the rest
        return [f"{_time_ms(beyond)} of each {_time_ms(step)} step is beyond compute alone (no all-reduce time "
                f"to split it into communication and the rest)"]
    out = [f"{_time_ms(split.exposed_comm)} of each {_time_ms(step)} step is exposed communication"]
    if split.other > 0 and _ms(split.other) != "0":
        noise = "within" if split.other <= allowance else "beyond"
        out.append(f"{_time_ms(split.other)} of the step is neither compute nor the collectives: {other} "
                   f"({noise} the {_time_ms(allowance)} noise allowance)")
    return out


def training_findings(summary: pd.DataFrame) -> list[str]:
    """Sentences for the report, each from numbers in the table (missing numbers: no clause):
    failures first (worst status first), then one per ok (world size > 1, config), plain first,
    then the best configuration at the largest world size when several were measured there."""
    if summary is None or len(summary) == 0:
        return []
    s = _with_scaling(summary)
    out = _failures(s)
    if "model" not in s:
        s = s.assign(model="mlp")
    # the language models' 1-GPU rows carry the MFU headline; the MLP's say nothing new
    ok = s[(s["status"] == "ok") & ((s["world_size"] > 1) | (s["model"] != "mlp"))].copy()
    ok["_plain"] = ok["config"] != PLAIN
    ok["_model"] = ok["model"].map({m: i for i, m in enumerate(("mlp", "gpt", "lora"))})
    for _, r in ok.sort_values(["_model", "_plain", "config", "world_size"]).iterrows():
        line = _finding(r.to_dict())
        if line:
            out.append(line)
    lm = ok[(ok["model"] != "mlp") & ok["mfu"].isna()] if "mfu" in ok else ok.iloc[0:0]
    for note in sorted(set(lm["mfu_note"].dropna().astype(str)) - {"", "nan"}):
        out.append(f"MFU: {note}.")
    out += lora_findings(s)
    best = best_config(s)
    if best is not None:
        mlp = mlp_ddp_rows(s)
        n_configs = mlp[(mlp["status"] == "ok") & (mlp["world_size"] == best.world_size)]["config"].nunique()
        who = _ranks({'world_size': best.world_size, 'backend': best.row.get('backend')})
        if n_configs > 1 and crowded(best.row):  # ranking configurations by contention would mislead
            out.append(f"{who}: configurations not ranked ({SMOKE_TEST.format(crowded(best.row))}).")
        elif n_configs > 1:
            line = f"{who}, best: {_config_name(best.config)} at {_pct(best.efficiency, 1)}"
            if not math.isnan(best.gain_points):
                line += f", {best.gain_points:+.1f} points over plain DDP ({_pct(best.plain_efficiency, 1)})"
            out.append(line + ".")
    return out


def lora_findings(summary: pd.DataFrame) -> list[str]:
    """Per world size > 1 and strategy where both ran ok: what adapter-only sync does to the bytes
    and the exposed communication, against the full fine-tune of the same model."""
    s = _with_scaling(summary)
    if "model" not in s:
        return []
    ok = s[s["status"] == "ok"]
    out = []
    for _, lora in ok[(ok["model"] == "lora") & (ok["world_size"] > 1)].iterrows():
        same = (ok["model"] == "gpt") & (ok["world_size"] == lora["world_size"]) & (ok["strategy"] == lora["strategy"])
        for col in ("num_layers", "hidden_dim", "seq_len", "backend", "dtype"):
            same &= ok[col] == lora[col]
        same &= compiled(ok) == bool(compiled(ok.loc[[lora.name]]).iloc[0])  # eager beside eager, compiled beside compiled
        full = ok[same]
        if full.empty:
            continue
        full = full.iloc[0]
        tb, fb = _num(lora["grad_bytes"]), _num(full["grad_bytes"])
        tp, fp = _num(lora["params_trainable"]), _num(full["params_trainable"])
        if math.isnan(tb) or math.isnan(fb) or fb <= 0:
            continue
        text = (f"lora vs full fine-tune, {_ranks(lora)} ({_strategy_name(lora)}): {_sig(tp / 1e6)}M of "
                f"{_sig(_num(lora['params_total']) / 1e6)}M parameters trainable ({_pct(tp / fp, 2)} of the full "
                f"model's {_sig(fp / 1e6)}M); {human_bytes(tb)} of gradients synced per step instead of "
                f"{human_bytes(fb)}")
        if crowded(lora):  # the bytes are counted, not timed; the times measure contention
            out.append(text + f"; {SMOKE_TEST.format(crowded(lora))}.")
            continue
        le, fe = row_split(lora).exposed_comm, row_split(full).exposed_comm
        if not (math.isnan(le) or math.isnan(fe)):
            text += (f"; exposed communication {_time_ms(le)} of a {_time_ms(_num(lora['step_time_ms_median']))} "
                     f"step, against {_time_ms(fe)} of {_time_ms(_num(full['step_time_ms_median']))}")
        le, fe = _num(lora["efficiency_vs_plain_1gpu"]), _num(full["efficiency_vs_plain_1gpu"])
        if not (math.isnan(le) or math.isnan(fe)):
            text += f"; scaling efficiency {_pct(le, 1)} against {_pct(fe, 1)}"
        out.append(text + ".")
    return out
