"""The config schema is built in one place (distbench.core.config_schema): the pipeline checks a
config with it and every family's ranks check their job.json with it, so the two must be the same
schema, whoever builds it and in whatever order the packages' fragments come."""

import json

import pytest

from distbench.core import config_schema as core
from distbench.core.manifest_check import ManifestError
from distbench.pipeline import config
from distbench.workloads import job_fields
from distbench.workloads.registry import WORKLOADS


def test_the_pipelines_schema_is_the_builders():
    schema = config.load_schema()
    assert schema == core.build_config_schema(list(WORKLOADS))  # the fragments found by their files
    # given the manifests' order, the builder's properties come in it too (the order messages list keys in)
    ordered = core.build_config_schema(list(WORKLOADS), config.family_schemas())
    assert json.dumps(ordered) == json.dumps(schema)


def test_the_ranks_schema_is_the_pipelines():
    assert job_fields.config_schema() == config.load_schema()
    assert job_fields.config_schema() is job_fields.config_schema()  # the records cache their schemas by it


def test_a_workload_registered_at_run_time_is_in_both(monkeypatch):
    monkeypatch.setitem(WORKLOADS, "widget", WORKLOADS["mlp"])
    assert "widget" in config.load_schema()["definitions"]["workload"]["enum"]
    assert "widget" in job_fields.config_schema()["definitions"]["workload"]["enum"]
    assert job_fields.config_schema() == config.load_schema()


def test_the_fragments_found_by_their_files_are_the_ones_the_manifests_name():
    assert set(core.fragment_files()) == set(config.family_schemas())
    assert core.CENTRAL == config.SCHEMA_PATH.resolve()


def test_fragment_files_finds_each_packages_file_and_not_the_central_one(tmp_path):
    for folder in ("pipeline", "widgets", "gadgets", "__pycache__", ".hidden", "plain"):
        (tmp_path / folder).mkdir()
    for folder in ("pipeline", "widgets", "gadgets", "__pycache__", ".hidden"):
        (tmp_path / folder / "config.schema.yaml").write_text("type: object\n")
    assert core.fragment_files(tmp_path) == {"gadgets": tmp_path / "gadgets/config.schema.yaml",
                                             "widgets": tmp_path / "widgets/config.schema.yaml"}


def test_a_manifest_schema_the_ranks_would_not_find_is_refused(tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text("type: object\n")
    with pytest.raises(ManifestError) as e:
        config._same_fragments({**config.family_schemas(), "comm": other})
    assert str(e.value).startswith(f"{other}: is not config.schema.yaml in the folder of package 'comm'")
    fragments = config.family_schemas()
    dropped = next(iter(fragments))
    with pytest.raises(ManifestError) as e:
        config._same_fragments({k: p for k, p in fragments.items() if k != dropped})
    assert "is named by no manifest's schema" in str(e.value)
