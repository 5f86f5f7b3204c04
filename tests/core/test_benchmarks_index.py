"""benchmarks/ stays sorted (issue 23): every committed result folder follows the naming rule of
benchmarks/README.md and has its note, and every result folder and investigation is in that
README's index, so a run committed without a line there (or under an off-rule name) fails here."""

import re

from tests.conftest import REPO

BENCH = REPO / "benchmarks"
# <family or topic>-<gpu>x<n>-<date>, or a run without a GPU: [<topic>-]cpu-<n>core-<date>
NAME = re.compile(r"^(?:[a-z][a-z0-9]*(?:-[a-z][a-z0-9]*)*-)?(?:[a-z]\d+x\d+|cpu-\d+core)-\d{4}-\d{2}-\d{2}$")


def _dirs(under: str) -> list[str]:
    return sorted(p.name for p in (BENCH / under).iterdir() if p.is_dir())


def test_every_result_folder_is_named_by_the_rule_and_has_its_note():
    results = _dirs("results")
    assert results, "no committed results"
    assert [n for n in results if not NAME.match(n)] == []
    assert [n for n in results if not (BENCH / "results" / n / "README.md").exists()] == []


def test_every_result_folder_and_investigation_is_in_the_index():
    index = (BENCH / "README.md").read_text()
    assert [n for n in _dirs("results") if f"(results/{n}/README.md)" not in index] == []
    assert [n for n in _dirs("investigations") if f"(investigations/{n}/README.md)" not in index] == []
    assert [n for n in _dirs("investigations") if not (BENCH / "investigations" / n / "README.md").exists()] == []


def test_the_name_rule_rejects_what_the_readme_forbids():
    assert NAME.match("training-h100x4-2026-11-26") and NAME.match("cpu-2core-2026-11-26")
    assert NAME.match("time-to-answer-closing-h200x2-2026-11-27")
    for bad in ("time-to-answer-2026-11-27", "time-to-answer-h200x2-2026-11-27b", "Comm-h100x4-2026-11-26",
                "comm-h100-2026-11-26"):
        assert not NAME.match(bad), bad
