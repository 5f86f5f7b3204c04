"""The files a report links: its figures (inlined in the HTML) and full tables, copied beside the
Markdown so the report directory can be copied or archived on its own, each copy atomic."""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from distbench.core.io import atomic_write_bytes
from distbench.core.section import Section


def figures_of(figures, figures_dir: Path, out_md: Path, sections: Sequence[Section]) -> list[dict]:
    """One entry per figure stem: PNG for display (inlined in HTML), SVG offered as a link, in the
    section naming its directory (Section.figure_dirs; "other" when none does) under that section's title
    for it.

    The Markdown links point into figures_dir (beside the report: the copies publish_files puts
    there), so the report directory can be copied or archived on its own.
    """
    def link(p: Path) -> str:  # where the copy will be, relative to the report
        return Path(os.path.relpath(figures_dir / p.name, out_md.parent)).as_posix()

    section_of = {d: s.name for s in sections for d in s.figure_dirs}
    titles = {stem: title for s in sections for stem, title in s.figure_titles.items()}
    by_stem: dict[str, dict[str, Path]] = {}
    for f in map(Path, figures):
        if f.exists():
            by_stem.setdefault(f.stem, {})[f.suffix.lower().lstrip(".")] = f
    out = []
    for stem, files in by_stem.items():
        img = files.get("png") or files.get("svg")
        if img is None:
            continue
        mime = "image/png" if img.suffix.lower() == ".png" else "image/svg+xml"
        svg = files.get("svg") if files.get("svg") != img else None
        out.append({"name": stem, "title": titles.get(stem, stem.replace("_", " ")), "md_src": link(img),
                    "section": section_of.get(img.parent.name, "other"),
                    "svg": link(svg) if svg else None, "files": [img, *([svg] if svg else [])],
                    "data_uri": f"data:{mime};base64," + base64.b64encode(img.read_bytes()).decode("ascii")})
    return out


def publish_files(files: list[Path], target_dir: Path) -> None:
    """Put the linked files (the figures, or the full tables) into target_dir, replacing what was
    there, never half-way (publish_report with this directory alone)."""
    publish_report({Path(target_dir): files}, {})


def publish_report(directories: Mapping[Path, Sequence[Path]], texts: Mapping[Path, str]) -> None:
    """Put a report in place whole: each directory of `directories` ({target: the files it holds})
    and each text file of `texts` ({path: text}), or nothing of it.

    Everything is staged first, beside its target: each directory's copies in a temporary directory,
    each text in a temporary file. Only once every one is staged are they swapped in, one rename each,
    so a failure while staging (a file that cannot be read, a full disk) removes the stages and leaves
    the last good report, its page and the figures and tables it links, as it was.
    Files that already live in a target directory (publish_run renders beside its own figures/ and
    tables/) stay put, and that directory is not replaced: only the missing files are added.
    """
    staged_dirs: list[tuple[Path, Path]] = []  # (stage, target)
    staged_texts: list[tuple[Path, Path]] = []
    try:
        for target, files in directories.items():
            target = Path(target)
            here = target.resolve() if target.is_dir() else None
            if here is not None and any(Path(f).resolve().parent == here for f in files):
                for f in map(Path, files):  # added only: nothing of the last report is removed
                    if f.resolve().parent != here:
                        atomic_write_bytes(target / f.name, f.read_bytes())
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            stage = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
            staged_dirs.append((stage, target))
            for f in map(Path, files):
                shutil.copyfile(f, stage / f.name)
            os.chmod(stage, 0o777 & ~_umask())  # mkdtemp creates 0700; reports are meant to be shared
        for path, text in texts.items():
            path = Path(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged_texts.append((Path(tmp), path))
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())
    except BaseException:
        for stage, _ in staged_dirs:
            shutil.rmtree(stage, ignore_errors=True)
        for tmp, _ in staged_texts:
            tmp.unlink(missing_ok=True)
        raise
    # every part is staged: the swaps are renames, the texts last (a page never links figures or
    # tables that are not there yet)
    try:
        for stage, target in staged_dirs:
            _swap_in(stage, target)
        for tmp, path in staged_texts:
            os.replace(tmp, path)
    finally:  # a stage swapped in is gone already; one left over by a failed rename is removed
        for stage, _ in staged_dirs:
            shutil.rmtree(stage, ignore_errors=True)
        for tmp, _ in staged_texts:
            tmp.unlink(missing_ok=True)


def _swap_in(new: Path, target: Path) -> None:
    """Rename directory new to target; an existing target is moved aside first (rename cannot replace a
    non-empty directory), put back if the rename fails, and deleted once new is in place."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    if not target.exists():
        os.replace(new, target)
        return
    aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
    os.replace(target, aside / target.name)
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(aside / target.name, target)
        aside.rmdir()
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def full_tables_of(paths, out_md: Path, tables_dir: Path, sections: Sequence[Section]) -> list[dict]:
    """[{name, what, link, source}] of the tables that exist, linked relative to out_md; `what` is what
    the section owning the table says it holds (Section.full_tables)."""
    what = {name: text for s in sections for name, text in s.full_tables.items()}
    out = []
    for path in map(Path, paths or []):
        if path.is_file():
            link = Path(os.path.relpath(Path(tables_dir) / path.name, Path(out_md).parent)).as_posix()
            out.append({"name": path.name, "what": what.get(path.name, ""), "link": link, "source": str(path)})
    return out


def figures_dir_of(out_md, figures_dir=None) -> Path:
    return Path(figures_dir) if figures_dir is not None else Path(out_md).parent / "figures"


def tables_dir_of(out_md, tables_dir=None) -> Path:
    return Path(tables_dir) if tables_dir is not None else Path(out_md).parent / "tables"
