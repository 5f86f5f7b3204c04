"""Which parallel layout to train with: per language model, its layouts at one world size
(layout_rows) and the Verdict row that answers it (layout_verdict), the fastest first: in the mode trainers
run where the run has compiled jobs (training.lm.compile), each figure with its eager one beside it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from distbench.core.judged import judged_world_size
from distbench.core.layout_spec import BASELINE, SPECS, layout_of
from distbench.core.section import SMOKE_TEST
from distbench.core.units import human_bytes
from distbench.core.units import pct as _pct
from distbench.training.analysis.findings import _int_or, crowded, workload_name
from distbench.training.analysis.layouts import FAILED_AS, layout_costs, layout_name, level_with, slower_because
from distbench.training.analysis.summary import PLAIN, _num, compiled, with_compile
from distbench.training.contract import COMPILE_FAILED, COMPILE_SUFFIX


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
    """Per language model: its layouts' rows (one per strategy and compile value: ddp's plain config, eager
    and compiled) at the world size the Verdict judges among those > 1 where at least two layouts were
    planned in one mode: the largest whose ranks each have a core (distbench.core.judged.judged_world_size;
    every NCCL one), so a CPU host ranks its layouts where the ranking is not the cores' contention.
    `compile` comes back boolean (a table from before training.lm.compile: every row eager)."""
    out = {}
    if summary is None or summary.empty or "strategy" not in summary:
        return out
    lm = with_compile(summary[(summary["model"].fillna("mlp") != "mlp") & (summary["world_size"] > 1)])
    base = lm["config"].astype(str).str.removesuffix(COMPILE_SUFFIX)  # 'plain+compile': compiled plain DDP
    lm = lm[(lm["strategy"].fillna(BASELINE) != BASELINE) | (base == PLAIN)]
    for model, g in lm.groupby("model", sort=True):
        sizes = [ws for ws, at in g.groupby("world_size") if at.groupby("compile")["strategy"].nunique().max() > 1]
        if sizes:
            ws = judged_world_size(sizes, lambda w, g=g: _crowded_at(g, w))
            out[str(model)] = g[g["world_size"] == ws].drop_duplicates(["strategy", "compile"])
    return out


def _crowded_at(rows: pd.DataFrame, ws: int) -> str | None:
    """'6 ranks on 2 cores' where the rows at `ws` were oversubscribed (findings.crowded), else None."""
    return next(filter(None, (crowded(r) for _, r in rows[rows["world_size"] == ws].iterrows())), None)


@dataclass(frozen=True)
class Ranking:
    """One mode's layouts (eager or compiled) at one world size: those that ran, fastest first by median
    tokens/s, and the others named with their status."""

    rows: pd.DataFrame  # every layout row of the mode
    ran: pd.DataFrame  # the ok rows with tokens/s, fastest first

    @classmethod
    def of(cls, rows: pd.DataFrame) -> Ranking:
        ran = rows[rows["tokens_per_s_median"].notna() & (rows["status"] == "ok")].sort_values(
            "tokens_per_s_median", ascending=False)
        return cls(rows, ran)

    @property
    def best(self):
        return self.ran.iloc[0] if len(self.ran) else None

    def tokens(self, name: str) -> float:
        """Median tokens/s of the layout so named (layout_name), NaN where it did not run."""
        hit = [float(r["tokens_per_s_median"]) for _, r in self.ran.iterrows() if layout_name(r) == name]
        return hit[0] if hit else math.nan

    def status(self, name: str) -> str:
        """How the layout so named ended, in words ('out of memory', 'compile failed'); '' when it ran or
        the mode has no such row."""
        hit = [r for _, r in self.rows.iterrows() if layout_name(r) == name and r.name not in self.ran.index]
        return FAILED_AS.get(str(hit[0]["status"]), str(hit[0]["status"])) if hit else ""

    def failed(self) -> list:
        return [r for _, r in self.rows.iterrows() if r.name not in self.ran.index]


def layout_verdict(rows: pd.DataFrame, split: pd.DataFrame | None = None) -> tuple[str, str, str]:
    """(headline, verdict, reason) of one model's layouts at one world size (layout_rows). Eager rows only:
    eager_verdict. With compiled rows (training.lm.compile), the mode trainers run: compiled_verdict,
    the compiled ranking with each eager figure beside it."""
    compiled_rows = compiled(rows)
    if not compiled_rows.any():
        return eager_verdict(rows, split)
    return compiled_verdict(rows[~compiled_rows], rows[compiled_rows], split)


def eager_verdict(rows: pd.DataFrame, split: pd.DataFrame | None = None, mode: str = "") -> tuple[str, str, str]:
    """(headline, verdict, reason) of one model's layouts in one mode at one world size: the fastest by
    median tokens/s, the layouts level with it (layouts.level_with: their steps' spreads overlap, so the
    run does not tell them apart), how much faster than DDP, each other layout's shortfall with the cost
    that sets it apart (layouts.layout_costs: from training.inspect's `split` where it has the layout, else
    the timed phases), and a layout that did not run named with its status ('out of memory'), never
    dropped. `mode` (', compiled') follows the place in the headline."""
    rank = Ranking.of(rows)
    ran, first = rank.ran, rows.iloc[0]
    ws = int(first["world_size"])
    head = f"{model_size_name(first)} on {_on(first, ws)}{mode}: "
    failed = [f"{layout_name(r)} {FAILED_AS.get(str(r['status']), str(r['status']))}" for r in rank.failed()]
    if ran.empty:
        return head + "; ".join(failed), "failing", "no layout completed its timed steps"
    parts, level = _ranking_parts(rank, split)
    return head + "; ".join(parts + failed), "measured", _reason(rank, split, level)


def _ranking_parts(rank: Ranking, split, beside=None) -> tuple[list[str], list]:
    """The headline's clauses of one mode's ranking: the fastest (with its level layouts and its gain over
    DDP), then each slower layout with its shortfall and cost; with `beside` (another mode's Ranking: the
    eager one), each figure's eager counterpart in brackets, against the same layouts. And the rows level
    with the fastest."""
    ran, best = rank.ran, rank.best
    tok = float(best["tokens_per_s_median"])
    costs = layout_costs(ran, split)
    best_cost, best_name = costs.get(str(best["strategy"])), layout_name(best)
    level = [r for _, r in ran.iloc[1:].iterrows() if level_with(r, best)]
    level_names = {layout_name(r) for r in level}
    parts = [f"{best_name}, {tok:,.0f} tokens/s"]
    if level:
        parts[0] += f", level with {', '.join(layout_name(r) for r in level)} (within their steps' spread)"
    ddp = ran[ran["strategy"].fillna(BASELINE) == BASELINE]
    ddp_name = SPECS[BASELINE].title
    if str(best["strategy"]) != BASELINE and len(ddp) and ddp_name not in level_names:
        parts[0] += f", {_pct(tok / float(ddp.iloc[0]['tokens_per_s_median']) - 1)} faster than {ddp_name}"
        if beside is not None:
            parts[0] += f" ({_eager_gap(beside, ddp_name, best_name, faster=True)})"
    for _, r in ran.iloc[1:].iterrows():
        if layout_name(r) in level_names:
            continue
        if str(r["strategy"]) != BASELINE or str(best["strategy"]) == BASELINE or not len(ddp):
            parts.append(f"{layout_name(r)} {_pct(1 - float(r['tokens_per_s_median']) / tok)} slower"
                         + (f" ({_eager_gap(beside, layout_name(r), best_name)})" if beside is not None else "")
                         + slower_because(costs.get(str(r["strategy"])), best_cost, best_name))
    return parts, level


def _eager_gap(eager: Ranking, name: str, against: str, faster: bool = False) -> str:
    """'eager: 42% slower': the layout `name` against the layout `against` in the eager ranking (faster=True:
    `against` against `name`, as '12% faster than DDP' reads); 'eager: out of memory' where one did not
    run eager, 'no eager run' where it has no eager row."""
    a, b = eager.tokens(name), eager.tokens(against)
    if math.isnan(a) or math.isnan(b):
        why = eager.status(name if math.isnan(a) else against)
        return f"eager: {why}" if why else "no eager run"
    ratio = b / a - 1 if faster else 1 - a / b  # > 0: `against` faster (faster=True) / `name` slower
    if faster:
        return f"eager: {_pct(ratio)} faster" if ratio >= 0 else f"eager: {_pct(-ratio)} slower"
    return f"eager: {_pct(ratio)} slower" if ratio >= 0 else f"eager: {_pct(-ratio)} faster"


def _reason(rank: Ranking, split, level: list) -> str:
    """The Verdict row's reason for one mode's ranking: the global batch, the level layouts' spreads, HSDP's
    one-replica case, peak memory per GPU, the layouts without a step split, and a smoke test said so."""
    ran, best, first = rank.ran, rank.best, rank.rows.iloc[0]
    ws, tok = int(first["world_size"]), float(best["tokens_per_s_median"])
    costs = layout_costs(ran, split)
    gbs, seq = _int_or(first.get("global_batch_size")), _int_or(first.get("seq_len"))
    reason = (f"the fastest layout by median tokens/s, every layout at the same global batch ({gbs} sequences of "
              f"{seq} tokens per step)")
    if level:
        reason += ("; level: a slower layout's 5th-percentile step within the fastest one's 95th (" + ", ".join(
            f"{layout_name(r)} {_pct(1 - float(r['tokens_per_s_median']) / tok)} below by median, steps "
            f"{_num(r['step_time_ms_p5']):,.1f}-{_num(r['step_time_ms_p95']):,.1f} ms" for r in level)
            + f", against {_num(best['step_time_ms_p5']):,.1f}-{_num(best['step_time_ms_p95']):,.1f} ms)")
    same = [(r, SPECS[spec.full_group_is]) for _, r in ran.iterrows()
            if (spec := layout_of(r["strategy"])) is not None and spec.full_group_is
            and _num(r.get(spec.group)) == ws and (ran["strategy"] == spec.full_group_is).any()]
    if same:
        r, other = same[0]
        reason += (f"; {layout_name(r)} at {ws} ranks shards as {other.title} does, with one replica: "
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
    return reason


def compiled_verdict(eager: pd.DataFrame, comp: pd.DataFrame, split: pd.DataFrame | None = None) -> tuple[str, str, str]:
    """The layouts Verdict in the mode trainers run (compile moves the gaps: on 2x H200, gpt 1.3b, 2D (TP 2) was 42% slower
    than FSDP2 eager and 17% compiled): the compiled ranking as eager_verdict words it, each figure with its
    eager counterpart beside it ('2D (TP 2) 17% slower (eager: 42% slower)'), then whether compile changes
    the ranking ('eager ranks DDP first (100,688 tokens/s): compile changes the ranking'; else 'FSDP2 full
    shard first eager too'). A layout whose compile failed is named with torch's reason, and its eager
    figure stands; where no layout compiled, the eager Verdict stands, the failures named. The reason adds
    each compiled job's compile time (warm-up, never in tokens/s)."""
    c_rank, e_rank = Ranking.of(comp), Ranking.of(eager)
    first = comp.iloc[0]
    ws = int(first["world_size"])
    fails = [_compile_failure(r, e_rank) for r in c_rank.failed()]
    if c_rank.ran.empty:  # nothing compiled: the eager result stands, the compiled failures beside it
        if eager.empty:
            head = f"{model_size_name(first)} on {_on(first, ws)}, compiled: "
            return head + "; ".join(fails), "failing", "no layout completed its timed steps, compiled or eager"
        text, verdict, reason = eager_verdict(eager, split, ", eager")
        return text + "; compiled: " + "; ".join(fails), verdict, reason + "; no layout ran compiled"
    head = f"{model_size_name(first)} on {_on(first, ws)}, compiled: "
    parts, level = _ranking_parts(c_rank, split, beside=e_rank if len(e_rank.ran) else None)
    c_best = layout_name(c_rank.best)
    if len(e_rank.ran):
        e_best = e_rank.best
        e_order = [layout_name(r) for _, r in e_rank.ran.iterrows()]
        c_order = [layout_name(r) for _, r in c_rank.ran.iterrows() if layout_name(r) in e_order]
        if layout_name(e_best) != c_best:
            parts.append(f"eager ranks {layout_name(e_best)} first ({float(e_best['tokens_per_s_median']):,.0f} "
                         "tokens/s): compile changes the ranking")
        elif [n for n in e_order if n in c_order] != c_order:
            parts.append(f"{c_best} first eager too ({float(e_best['tokens_per_s_median']):,.0f} tokens/s); compile "
                         f"changes the order behind it (eager: {', '.join(n for n in e_order if n in c_order)})")
        else:
            parts.append(f"{c_best} first eager too ({float(e_best['tokens_per_s_median']):,.0f} tokens/s)")
    else:
        parts.append("no eager run to compare" if eager.empty else "no layout ran eager")
    reason = _reason(c_rank, split, level)
    times = [(layout_name(r), _num(r.get("compile_time_s"))) for _, r in c_rank.ran.iterrows()]
    times = [(n, t) for n, t in times if not math.isnan(t)]
    if times:
        reason += ("; compile time per job (its warm-up, never in tokens/s): "
                   + ", ".join(f"{n} {t:,.1f} s" for n, t in times))
    return head + "; ".join(parts + fails), "measured", reason


def _compile_failure(r, eager: Ranking) -> str:
    """A compiled layout that did not run: 'HSDP (shard 2) compile failed (torch.compile failed: InductorError:
    ...); its eager run stands: 95,000 tokens/s', or its other status ('out of memory')."""
    name, status = layout_name(r), str(r["status"])
    text = f"{name} {FAILED_AS.get(status, status)}"
    if status == COMPILE_FAILED:
        why = str(r.get("message") or "").removeprefix("torch.compile failed: ")
        text += f" ({why[:160]})" if why else ""
        tok = eager.tokens(name)
        text += (f"; its eager run stands: {tok:,.0f} tokens/s" if not math.isnan(tok)
                 else f"; eager: {eager.status(name) or 'no run'}")
    return text
