"""Which parallel layout to train with (issue 49): per language model, its layouts at one world size
(layout_rows) and the Verdict row that answers it (layout_verdict), the fastest first."""

from __future__ import annotations

import math

import pandas as pd

from distbench.core.section import SMOKE_TEST
from distbench.core.units import human_bytes
from distbench.core.units import pct as _pct
from distbench.training.analysis.findings import _int_or, crowded, workload_name
from distbench.training.analysis.layouts import FAILED_AS, layout_costs, layout_name, level_with, slower_because
from distbench.training.analysis.summary import PLAIN, _num


def model_size_name(r) -> str:
    """'gpt 1.3b' where the shape is a named size (distbench.core.choices.GPT_SIZES), 'lora r16 on gpt
    1.3b'; else workload_name's shape."""
    from distbench.core.choices import GPT_SIZES

    shape = (_int_or(r.get("num_layers")), _int_or(r.get("n_heads")), _int_or(r.get("hidden_dim")))
    named = next((n for n, s in GPT_SIZES.items() if tuple(map(str, s)) == shape), None)
    if named is None:
        return workload_name(r)
    return f"lora r{_int_or(r.get('lora_rank'))} on gpt {named}" if str(r.get("model")) == "lora" else f"gpt {named}"


def _on(r, ws: int) -> str:
    if str(r.get("backend")) == "nccl":
        device = str(r.get("device_name") or "GPU").removeprefix("NVIDIA ")
        return f"{ws}x {device}"
    return f"{ws} ranks ({str(r.get('backend') or 'gloo').capitalize()}, CPU)"


def layout_rows(summary: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per language model: its layouts' rows (one per strategy: ddp's plain config) at the largest
    world size > 1 where at least two layouts were planned."""
    out = {}
    if summary is None or summary.empty or "strategy" not in summary:
        return out
    lm = summary[(summary["model"].fillna("mlp") != "mlp") & (summary["world_size"] > 1)]
    lm = lm[(lm["strategy"].fillna("ddp") != "ddp") | (lm["config"] == PLAIN)]
    for model, g in lm.groupby("model", sort=True):
        sizes = [ws for ws, at in g.groupby("world_size") if at["strategy"].nunique() > 1]
        if sizes:
            out[str(model)] = g[g["world_size"] == max(sizes)].drop_duplicates("strategy")
    return out


def layout_verdict(rows: pd.DataFrame, split: pd.DataFrame | None = None) -> tuple[str, str, str]:
    """(headline, verdict, reason) of one model's layouts at one world size: the fastest by median
    tokens/s, the layouts level with it (layouts.level_with: their steps' spreads overlap, so the run does
    not tell them apart), how much faster than DDP, each other layout's shortfall with the cost that sets
    it apart (layouts.layout_costs: from training.inspect's `split` where it has the layout, else the
    timed phases), and a layout that did not run named with its status ('out of memory'), never dropped."""
    ran = rows[rows["tokens_per_s_median"].notna() & (rows["status"] == "ok")].sort_values(
        "tokens_per_s_median", ascending=False)
    first = rows.iloc[0]
    ws = int(first["world_size"])
    head = f"{model_size_name(first)} on {_on(first, ws)}: "
    failed = [f"{layout_name(r)} {FAILED_AS.get(str(r['status']), str(r['status']))}"
              for _, r in rows.iterrows() if r.name not in ran.index]
    if ran.empty:
        return head + "; ".join(failed), "failing", "no layout completed its timed steps"
    best = ran.iloc[0]
    tok = float(best["tokens_per_s_median"])
    costs = layout_costs(ran, split)
    best_cost = costs.get(str(best["strategy"]))
    level = [r for _, r in ran.iloc[1:].iterrows() if level_with(r, best)]
    level_names = {layout_name(r) for r in level}
    parts = [f"{layout_name(best)}, {tok:,.0f} tokens/s"]
    if level:
        parts[0] += f", level with {', '.join(layout_name(r) for r in level)} (within their steps' spread)"
    ddp = ran[ran["strategy"].fillna("ddp") == "ddp"]
    if str(best["strategy"]) != "ddp" and len(ddp) and "DDP" not in level_names:
        parts[0] += f", {_pct(tok / float(ddp.iloc[0]['tokens_per_s_median']) - 1)} faster than DDP"
    for _, r in ran.iloc[1:].iterrows():
        if layout_name(r) in level_names:
            continue
        if str(r["strategy"]) != "ddp" or str(best["strategy"]) == "ddp" or not len(ddp):
            parts.append(f"{layout_name(r)} {_pct(1 - float(r['tokens_per_s_median']) / tok)} slower"
                         + slower_because(costs.get(str(r["strategy"])), best_cost, layout_name(best)))
    text = head + "; ".join(parts + failed)
    gbs, seq = _int_or(first.get("global_batch_size")), _int_or(first.get("seq_len"))
    reason = (f"the fastest layout by median tokens/s, every layout at the same global batch ({gbs} sequences of "
              f"{seq} tokens per step)")
    if level:
        reason += ("; level: a slower layout's 5th-percentile step within the fastest one's 95th (" + ", ".join(
            f"{layout_name(r)} {_pct(1 - float(r['tokens_per_s_median']) / tok)} below by median, steps "
            f"{_num(r['step_time_ms_p5']):,.1f}-{_num(r['step_time_ms_p95']):,.1f} ms" for r in level)
            + f", against {_num(best['step_time_ms_p5']):,.1f}-{_num(best['step_time_ms_p95']):,.1f} ms)")
    same = [r for _, r in ran.iterrows() if str(r["strategy"]) == "hsdp" and _num(r.get("shard_size")) == ws]
    if same and (ran["strategy"] == "fsdp").any():
        reason += (f"; {layout_name(same[0])} at {ws} ranks shards as FSDP2 full shard does, with one replica: "
                   "the two differ by this run's noise only")
    mem = [(layout_name(r), _num(r.get("peak_mem_allocated_bytes"))) for _, r in ran.iterrows()]
    mem = [(n, b) for n, b in mem if not math.isnan(b)]
    reason += ("; peak memory per GPU " + ", ".join(f"{n} {human_bytes(int(b))}" for n, b in mem) if mem
               else "; peak memory is not measured on CPU")
    unknown = [layout_name(r) for _, r in ran.iterrows() if str(r["strategy"]) not in costs]
    if unknown:
        reason += (f"; no step split for {', '.join(unknown)} (training.inspect: true reads its exposed communication "
                   "off the step's GPU timeline)")
    crowd = crowded(best)
    if crowd:
        reason += f"; {SMOKE_TEST.format(crowd)}: the ranking measures that contention"
    return text, "measured", reason
