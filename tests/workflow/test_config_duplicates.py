"""A list of the config that gives one value twice, spelt two ways, is refused at config check (issue 47).

The schema's uniqueItems compares the text: `comm.traffic: [uniform, "zipf:1.0", "zipf:1"]` measured one
matrix twice, as two series; `comm.sizes: ["1M", 1048576]` was quietly one size; NCCL settings written
twice ("04" and 4 channels, Ring,Tree and Tree,Ring) named two job directories measuring one thing.
Each case names the key, both entries and why they are one; the controls are values that only look alike.
"""

from __future__ import annotations

import pytest

from distbench.pipeline.config import ConfigError, check_config

CASES = [  # (config, the message's words: key and index, both entries, what they are)
    ({"comm": {"traffic": ["uniform", "zipf:1.0", "zipf:1"]}},
     ["config key comm.traffic: entries 1 ('zipf:1.0') and 2 ('zipf:1') are one matrix (zipf:1)", "measured twice"]),
    ({"comm": {"traffic": ["zipf:2", "uniform", "zipf:2e0"]}}, ["entries 0 ('zipf:2') and 2 ('zipf:2e0')"]),
    ({"comm": {"sizes": ["1M", "8", 1048576]}},
     ["config key comm.sizes[2]: 1048576 is comm.sizes[0] ('1M') again, written another way",
      "both are 1,048,576 bytes"]),
    ({"comm": {"sizes": [8, 8]}}, ["config key comm.sizes[1]: 8 is comm.sizes[0] (8) again (both are 8 bytes)"]),
    ({"comm": {"pairs_sizes": [8, "8B"]}}, ["config key comm.pairs_sizes[1]: '8B' is comm.pairs_sizes[0] (8) again"]),
    ({"nodes": {"sizes": ["64MiB", "67108864B"]}}, ["config key nodes.sizes[1]", "both are 67,108,864 bytes"]),
    ({"comm": {"nccl_env": [{}, {"NCCL_MIN_NCHANNELS": 4}, {"NCCL_MIN_NCHANNELS": "04"}]}},
     ["config key comm.nccl_env[2]: {'NCCL_MIN_NCHANNELS': '04'} is comm.nccl_env[1]",
      "both set NCCL_MIN_NCHANNELS=4"]),
    ({"training": {"tune_space": {"nccl_env": [{"NCCL_ALGO": "Ring,Tree"}, {"NCCL_ALGO": "Tree,Ring"}]}}},
     ["config key training.tune_space.nccl_env[1]", "both set NCCL_ALGO=Ring,Tree"]),
]


@pytest.mark.parametrize("config,words", CASES, ids=[str(i) for i in range(len(CASES))])
def test_a_value_given_twice_is_refused_naming_the_key_both_entries_and_why(config, words):
    with pytest.raises(ConfigError) as e:
        check_config(config)
    text = str(e.value)
    assert all(w in text for w in words), text
    assert text.count("\n  - ") == 1, text  # one problem: the second entry, not the first


@pytest.mark.parametrize("config", [
    {"comm": {"traffic": ["uniform", "zipf:1", "zipf:1.2"]}},
    {"comm": {"sizes": ["1M", "1MB", "1KiB", "1KB"]}},  # binary and decimal: two sizes
    # a path level's name and NCCL's legacy number are not taken for one another (NCCL renumbered them)
    {"comm": {"nccl_env": [{}, {"NCCL_P2P_LEVEL": "NVL"}, {"NCCL_P2P_LEVEL": 1}, {"NCCL_ALGO": "^Ring"},
                           {"NCCL_ALGO": "Ring"}]}},
])
def test_values_that_only_look_alike_pass(config):
    check_config(config)


def test_a_matrix_file_named_two_ways_is_one_matrix(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.csv").write_text("1,2\n3,4\n")
    with pytest.raises(ConfigError) as e:
        check_config({"comm": {"traffic": ["file:m.csv", "uniform", "file:./m.csv"]}})
    assert "entries 0 ('file:m.csv') and 2 ('file:./m.csv') are one matrix" in str(e.value)
