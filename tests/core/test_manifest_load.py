"""A manifest and the files it declares are checked when they load, each problem naming the file (and
the field): its hooks and sections resolve (without importing a hook's module: it may import torch),
its name is an identifier equal to its folder's, a folder that looks like a package that registers
does register, its config schema fragment is a mapping, a valid JSON Schema whose defaults meet their
own constraints and that adds a key of its own, a table's name is one family's, and a name is
registered by one file. The bad cases are built on a registry of their own, in tmp_path files, or in a
copy of the package, never in the tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distbench.core.manifest import (
    FamilyManifest,
    ManifestError,
    PackageManifest,
    Registry,
    Step,
    Table,
)
from distbench.core.manifest_check import ref_problem
from distbench.core.config_schema import check_fragment_defaults, merge_fragments, read_fragment
from distbench.pipeline.families import folder_problem
from tests.conftest import REPO, copy_workflow

# a hook every test may name: a module of the tree that is loaded (the check reads the module itself)
GOOD = "distbench.core.manifest:config_flag"


def _family(name="widgets", **fields) -> FamilyManifest:
    return FamilyManifest(name=name, **fields)


def _error(registry: Registry, manifest, file=None) -> str:
    with pytest.raises(ManifestError) as e:
        registry.register(manifest, file)
    return str(e.value)


# ---------------------------------------------------------------- hooks and sections
def test_a_misspelled_hook_is_refused_naming_the_file_and_the_field(tmp_path):
    file = tmp_path / "widgets" / "manifest.py"
    text = _error(Registry(), _family(job_entry="distbench.core.manifest:config_flagg"), file)
    assert text.startswith(f"{file}: job_entry: ") and "has no 'config_flagg'" in text, text
    assert "no module distbench.core.nothing" in _error(Registry(), _family(plan="distbench.core.nothing:plan"))
    assert "not \"module:name\"" in _error(Registry(), _family(host_needs="distbench.core.manifest.config_flag"))


def test_a_hook_naming_a_value_is_not_callable():
    assert "is not callable" in _error(Registry(), _family(quick="distbench.core.manifest_check:SECTION_PLACES"))


def test_a_hook_is_checked_without_importing_its_module(tmp_path, monkeypatch):
    """A hook's module that imports torch (here: a module that does not exist) is read, not imported:
    the Snakefile reads the manifests while the DAG is built."""
    (tmp_path / "heavy_hooks.py").write_text("import not_a_module_at_all\n\n\ndef plan(config):\n    return 1\n\n"
                                            "VALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    Registry().register(_family(plan="heavy_hooks:plan"))
    assert "heavy_hooks" not in sys.modules
    assert ref_problem("heavy_hooks:VALUE") == "'heavy_hooks:VALUE': heavy_hooks.VALUE is not callable"
    assert ref_problem("heavy_hooks:VALUE", callable_=False) == ""
    assert ref_problem("heavy_hooks:plann") == "'heavy_hooks:plann': heavy_hooks has no 'plann'"


def test_a_steps_entry_and_params_and_a_section_resolve():
    steps = (Step("aggregate_widgets", "distbench.core.manifest:nothing", outputs={"t": "widgets"},
                  params={"p": "distbench.core.manifest:nope"}),)
    text = _error(Registry(), _family(steps=steps, tables=(Table("widgets", "tables/widgets.csv"),)))
    assert "steps[aggregate_widgets].entry: " in text and "steps[aggregate_widgets].params['p']: " in text, text
    bad_out = (Step("aggregate_widgets", GOOD, outputs={"t": "widgetz"}),)
    assert "'widgetz' is none of its tables" in _error(Registry(), _family(steps=bad_out))
    text = _error(Registry(), PackageManifest("widgets", sections={"body": ("distbench.core.manifest:NO_SECTION",)}))
    assert "sections['body']: " in text and "has no 'NO_SECTION'" in text, text
    assert "place 'middle'" in _error(Registry(), PackageManifest("widgets", sections={"middle": ()}))


def test_the_real_manifests_resolve():
    from distbench.pipeline.families import manifests

    assert len(manifests()) >= 4  # each registered through the checks above


# ---------------------------------------------------------------- names and folders
def test_a_name_is_an_identifier_equal_to_its_folder(tmp_path):
    assert "name 'my-fam' is not a Python identifier" in _error(Registry(), _family("my-fam"))
    text = _error(Registry(), _family("widgets"), tmp_path / "gadgets" / "manifest.py")
    assert "name 'widgets' is not its folder's ('gadgets')" in text


def test_a_folder_that_looks_like_a_package_and_cannot_register_is_named(tmp_path):
    fam = tmp_path / "widgets"
    fam.mkdir()
    (fam / "manifest.py").write_text("")
    assert "manifest.py without __init__.py" in folder_problem(fam)
    (fam / "__init__.py").write_text("")
    assert folder_problem(fam) == ""
    schema_only = tmp_path / "gadgets"
    schema_only.mkdir()
    (schema_only / "config.schema.yaml").write_text("type: object\n")
    assert "config.schema.yaml without a manifest.py" in folder_problem(schema_only)
    dashed = tmp_path / "my-fam"
    dashed.mkdir()
    assert "'my-fam' is not a Python identifier" in folder_problem(dashed) and "'my_fam'?" in folder_problem(dashed)
    shared = tmp_path / "helpers"
    shared.mkdir()
    (shared / "__init__.py").write_text("")
    assert folder_problem(shared) == ""  # a package of the shared layers: no manifest, no schema


def test_the_files_a_manifest_declares_exist(tmp_path):
    file = tmp_path / "widgets" / "manifest.py"
    file.parent.mkdir()
    m = _family(schema="config.schema.yaml", package_data=("templates/*.j2",),
                tables=(Table("widgets", "tables/widgets.csv", caption="report/widgets.rst"),))
    text = _error(Registry(), m, file)
    assert all(w in text for w in ("schema: no file 'config.schema.yaml'", "caption 'report/widgets.rst'",
                                   "package_data: 'templates/*.j2' matches no file")), text


def test_a_package_manifest_holds_no_family_field():
    with pytest.raises(TypeError):
        PackageManifest("widgets", plan="distbench.core.manifest:config_flag")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        FamilyManifest("widgets", cached=("probe/x.json",))  # type: ignore[call-arg]
    p = PackageManifest("widgets")
    assert (p.plan, p.job_entry, p.shares_launches, dict(p.launch_cost_s)) == ("", "", False, {})


# ---------------------------------------------------------------- one table, one name, one file
def test_a_table_name_declared_by_two_families_is_refused_naming_both(tmp_path):
    r = Registry()
    r.register(_family("widgets", tables=(Table("shared", "tables/a.csv"),)), tmp_path / "widgets/manifest.py")
    text = _error(r, _family("gadgets", tables=(Table("shared", "tables/b.csv"),)), tmp_path / "gadgets/manifest.py")
    assert text.startswith(f"{tmp_path / 'gadgets/manifest.py'}: tables: 'shared' is a table of widgets too "
                           f"({tmp_path / 'widgets/manifest.py'})"), text
    twice = _family("gizmos", tables=(Table("t", "tables/t.csv"), Table("t", "tables/t2.csv")))
    assert "tables: 't' is declared twice" in _error(Registry(), twice)


def test_a_name_registered_by_two_files_names_both(tmp_path):
    r = Registry()
    first, second = tmp_path / "a" / "widgets" / "manifest.py", tmp_path / "b" / "widgets" / "manifest.py"
    r.register(_family(), first)
    text = _error(r, _family(order=5), second)
    assert text == f"{second}: registers the name 'widgets', which {first} registered first", text
    again = _family(order=6)
    assert r.register(again, first) is again  # the same file again (a reload) replaces its own


# ---------------------------------------------------------------- schema fragments
CENTRAL_FILE = Path("distbench/pipeline/config.schema.yaml")
CENTRAL = {"type": "object", "properties": {"gpus": {"type": "integer"}},
           "definitions": {"size": {"type": "integer", "minimum": 1}}}


def _central() -> dict:
    return {**CENTRAL, "properties": dict(CENTRAL["properties"])}


def _fragment(tmp_path, text: str):
    path = tmp_path / "widgets" / "config.schema.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("text,words", [
    ("", "is empty: it must hold the schema of config key 'widgets'"),
    ("# only a comment\n", "is empty"),
    ("type: object\nproperties: {a: [1, 2\n", "is not valid YAML ("),
    ("- type: object\n", "holds a list, not a mapping"),
    ("just text\n", "holds a string, not a mapping"),
    ("type: objekt\n", "is not a valid JSON Schema: at type: 'objekt' is not valid under any of the given schemas"),
    ("type: object\nproperties: {n: {type: integer, minimum: one}}\n",
     "is not a valid JSON Schema: at properties/n/minimum"),
])
def test_a_bad_fragment_is_refused_naming_its_file(tmp_path, text, words):
    path = _fragment(tmp_path, text)
    with pytest.raises(ManifestError) as e:
        read_fragment(path, "widgets")
    assert str(e.value).startswith(f"{path}: ") and words in str(e.value), str(e.value)
    assert "\n" not in str(e.value)  # one line: the Snakefile prints it as is


@pytest.mark.parametrize("text,where", [
    ("type: object\nproperties: {iters: {type: integer, minimum: 1, default: 0}}\n", "config key widgets.iters (0)"),
    # at any depth, through the central definitions, and in the defaults a default gets filled in
    ("type: object\nproperties:\n  inner:\n    type: object\n    default: {}\n    properties:\n"
     "      size: {$ref: '#/definitions/size', default: -1}\n", "config key widgets.inner.size (-1)"),
    ("type: object\nproperties:\n  inner:\n    type: object\n    default: {}\n"
     "    properties: {n: {type: integer, maximum: 3, default: 9}}\n", "config key widgets.inner.n (9)"),
    ("type: object\nproperties: {xs: {type: array, items: {enum: [a, b]}, default: [a, c]}}\n",
     "config key widgets.xs (['a', 'c'])"),
])
def test_a_default_below_its_own_minimum_is_refused(tmp_path, text, where):
    path = _fragment(tmp_path, text)
    schema = merge_fragments(_central(), {"widgets": path}, CENTRAL_FILE)
    with pytest.raises(ManifestError) as e:
        check_fragment_defaults(schema, "widgets", path)
    assert str(e.value).startswith(f"{path}: the default of {where}") and "does not meet its own schema" in str(e.value)


def test_a_fragment_whose_defaults_hold_passes(tmp_path):
    path = _fragment(tmp_path, "type: object\ndefault: {}\n"
                               "properties:\n  size: {$ref: '#/definitions/size', default: 4}\n")
    schema = merge_fragments(_central(), {"widgets": path}, CENTRAL_FILE)
    check_fragment_defaults(schema, "widgets", path)
    assert list(schema["properties"]) == ["gpus", "widgets"]


def test_a_fragment_may_not_redefine_a_key_the_shared_schema_or_another_family_owns(tmp_path):
    path = _fragment(tmp_path, "type: integer\n")
    central = _central()
    with pytest.raises(ManifestError) as e:
        merge_fragments(central, {"gpus": path}, central=tmp_path / "config.schema.yaml")
    assert str(e.value) == (f"{path}: is the schema of config key 'gpus', which {tmp_path / 'config.schema.yaml'} "
                            "defines already (a package may only add a key of its own)")


def test_the_real_schema_merges_every_fragment_checked():
    from distbench.pipeline.config import family_schemas, load_schema

    schema = load_schema()
    assert set(family_schemas()) <= set(schema["properties"])


# ---------------------------------------------------------------- in a copy of the package and workflow
def _copy(tmp_path):
    root = copy_workflow(tmp_path / "checkout")
    shutil.copytree(REPO / "distbench", root / "distbench", ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return root, env


def _load(root, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from distbench.pipeline.families import manifests; manifests()"],
                          cwd=root, capture_output=True, text=True, env=env, timeout=120)


def test_a_manifest_without_manifest_and_folders_that_cannot_register_are_named(tmp_path):
    root, env = _copy(tmp_path)
    probes = root / "distbench/probes/manifest.py"
    probes.write_text(probes.read_text().replace("MANIFEST = register(", "NOT_IT = register("))
    r = _load(root, env)
    assert "distbench/probes/manifest.py: defines no MANIFEST" in r.stderr, r.stderr[-2000:]
    probes.write_text(probes.read_text().replace("NOT_IT = register(", "MANIFEST = register("))
    (root / "distbench/my-fam").mkdir()
    (root / "distbench/my-fam/manifest.py").write_text("")
    r = _load(root, env)
    assert "distbench/my-fam: the folder name 'my-fam' is not a Python identifier" in r.stderr, r.stderr[-2000:]


def test_snakemake_dry_run_refuses_a_misspelled_hook_naming_the_manifest(tmp_path):
    root, env = _copy(tmp_path)
    comm = root / "distbench/comm/manifest.py"
    comm.write_text(comm.read_text().replace(":rule_job\"", ":rule_jbo\"", 1))
    r = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1"], cwd=root, capture_output=True,
                       text=True, env=env, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "distbench error: distbench/comm/manifest.py: job_entry: " in out and "has no 'rule_jbo'" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
