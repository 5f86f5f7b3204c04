"""How many files outside a benchmark family's folder name it, in a checkout (issue 46's before/after).

A file names family F when a line holds `distbench.F` (an import or a module path), a quoted "F" or a
key or module under it ("F.sizes"), or an identifier starting `F_` (F_jobs, F_summary): the pattern of
tests/workflow/test_family_names.py, applied here to every file of the package outside F's own folder,
every rules/*.smk, the Snakefile and workflow/scripts/. Lines marked "not a family name" (a SLURM
resource called nodes, the cgroup controller called memory) are counted separately.

    python count_family_names.py CHECKOUT [-v]
"""

import re
import sys
from pathlib import Path

FAMILIES = ("comm", "training", "memory", "nodes")
MARK = "not a family name"


def pattern(name: str) -> re.Pattern:
    n = re.escape(name)
    return re.compile(rf"distbench\.{n}\b|[\"']{n}(?:[\"']|\.\w)|\b{n}_\w+")


def files(root: Path) -> list[Path]:
    out = [p for p in root.glob("distbench/**/*") if p.is_file() and p.suffix in (".py", ".yaml", ".json", ".j2")
           and "__pycache__" not in p.parts]
    return out + sorted(root.glob("rules/*.smk")) + [root / "Snakefile"] + sorted(root.glob("workflow/scripts/*.py"))


def main(root: Path, verbose: bool) -> None:
    shared = ("distbench/pipeline/", "distbench/report/", "distbench/core/", "rules/common.smk")
    for name in FAMILIES:
        pat, hits, marked = pattern(name), [], []
        for p in files(root):
            rel = p.relative_to(root).as_posix()
            if rel.startswith(f"distbench/{name}/"):
                continue
            lines = p.read_text(errors="replace").splitlines()
            if any(pat.search(line) and MARK not in line for line in lines):
                hits.append(rel)
            elif any(pat.search(line) for line in lines):
                marked.append(rel)
        in_shared = [h for h in hits if h.startswith(shared)]
        print(f"{name}: {len(hits)} files outside its folder ({len(in_shared)} of them shared: pipeline/, "
              f"report/, core/, rules/common.smk); {len(marked)} more only on lines marked '{MARK}'")
        if verbose:
            print("   ", " ".join(hits))


if __name__ == "__main__":
    main(Path(sys.argv[1]), "-v" in sys.argv)
