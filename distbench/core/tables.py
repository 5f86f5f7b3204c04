"""Job CSVs -> tidy tables: per family, the raw rows (checked against its contract) and a summary.

Every job CSV is a cached output Snakemake will not remake while it is newer than its inputs, so a
file that was truncated or edited by hand would poison every table after it. Each one is read on
its own, by the one reader's checks (distbench.core.readers) plus its contract's; whatever is wrong
with it (torn rows, renamed columns, values the contract does not allow, an infinite measurement on an
ok row, text that does not parse) becomes one JobCsvError naming the files, what is wrong with each
and how to get a good one back. The workflow scripts end with that message, never a traceback
(distbench.launch.in_rule.run_in_rule).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pandas as pd

from distbench.core.contract import Contract, SchemaError, read_csv
from distbench.core.readers import UnreadableFile, csv_problem, read_text


class JobCsvError(SchemaError):
    """One or more cached job CSVs cannot be read. `problems`: (path, what is wrong, rule) per file;
    the message names each file and what is wrong with it, and says how to remake it."""

    def __init__(self, problems):
        self.problems = [(str(p), what, rule) for p, what, rule in problems]
        super().__init__(self._message())

    def _message(self) -> str:
        n = len(self.problems)
        head = ("a cached job CSV cannot be read:" if n == 1 else f"{n} cached job CSVs cannot be read:")
        lines = [head] + [f"  {p}: {what}" for p, what, _ in self.problems]
        lines.append(("It is" if n == 1 else "Each is") + " a benchmark job's output that was truncated, corrupted "
                     "or edited by hand. Delete it so that Snakemake runs that job again:")
        lines.append("  rm " + " ".join(shlex.quote(p) for p, _, _ in self.problems))
        rules = sorted({rule for _, _, rule in self.problems if rule})  # a contract may name no job rule
        if rules:
            lines.append("or rerun every such job: " + " ".join(f"snakemake -R {r}" for r in rules)
                         + " (add your usual options, e.g. --configfile).")
        return "\n".join(lines)


def _header_problem(contract: Contract):
    """The contract's check of a job CSV's header: columns renamed, added, missing or repeated."""
    def problem(header: list[str]) -> str | None:
        names = contract.names
        fillable = {name for name, _ in contract.filled_when_missing}  # older files lack them: filled on reading
        missing = [c for c in names if c not in header and c not in fillable]
        extra = [c for c in header if c not in names]
        dup = sorted({c for c in header if header.count(c) > 1})
        if missing or extra or dup:
            parts = ([f"missing {missing}"] if missing else []) + ([f"unexpected {extra}"] if extra else []) \
                + ([f"repeated {dup}"] if dup else [])
            return (f"its header does not match the {contract.name} CSV contract: " + ", ".join(parts)
                    + (" (a column renamed?)" if missing and extra else ""))
        return None
    return problem


def _structure_problem(path: Path, contract: Contract) -> str | None:
    """What makes this file unreadable as a CSV of the contract, before pandas guesses around it: no
    text or not text, a torn last row, rows with the wrong number of fields, columns renamed, added or
    missing (the one reader's checks, distbench.core.readers, with the contract's header)."""
    try:
        text = read_text(path, fix="")
    except UnreadableFile as e:
        return e.problem
    return csv_problem(text, _header_problem(contract))


def read_job_csv(path, contract: Contract) -> pd.DataFrame:
    """One job CSV of the contract; anything wrong with it raises JobCsvError (naming the rule that
    remakes it, the contract's job_rule)."""
    rule = contract.job_rule
    path = Path(path)
    try:
        problem = _structure_problem(path, contract)
        if problem is None:
            return read_csv(contract, path)
    except SchemaError as e:
        problem = str(e)
    except (ValueError, KeyError, TypeError, OverflowError, pd.errors.ParserError) as e:
        problem = f"a value does not parse as its column's type in the {contract.name} CSV contract ({e})"
    raise JobCsvError([(path, problem, rule)])


def read_job_csvs(paths, contract: Contract) -> list[pd.DataFrame]:
    """Every file read; the problems of all bad ones together in one JobCsvError."""
    frames, problems = [], []
    for p in paths:
        try:
            frames.append(read_job_csv(p, contract))
        except JobCsvError as e:
            problems += e.problems
    if problems:
        raise JobCsvError(problems)
    return frames


def combine(paths, contract: Contract, sort_by=()) -> pd.DataFrame:
    """Every job CSV of one family in one frame, sorted by the columns of sort_by it has (the
    per-rank CSV has no `nodes`)."""
    frames = read_job_csvs(paths, contract)
    non_empty = [f for f in frames if len(f)]  # pandas warns on concatenating empty frames
    df = pd.concat(non_empty or frames, ignore_index=True)
    return df.sort_values([c for c in sort_by if c in df.columns], kind="stable").reset_index(drop=True)
