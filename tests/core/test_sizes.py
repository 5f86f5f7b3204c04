import pytest

from distbench.core.sizes import human_bytes, parse_size, size_sweep, sizes_from_config


@pytest.mark.parametrize("text,expected", [
    ("1MB", 10**6), ("10MB", 10**7), ("1GB", 10**9), ("100 MB", 10**8),
    ("1MiB", 2**20), ("1 GiB", 2**30), ("64KiB", 65536), ("1K", 1024), ("1G", 2**30),
    ("8", 8), (8, 8), ("8B", 8), ("1.5KiB", 1536), ("2tib", 2 * 2**40),
])
def test_parse_size_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["1XB", "MB", "-1", "1.3B", "", "1 M B", True, -5])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_sweep_like_nccl_tests():
    sizes = size_sweep(8, "1GiB", 2)
    assert sizes[0] == 8 and sizes[-1] == 2**30 and len(sizes) == 28
    assert size_sweep("1MiB", "16MiB", 4) == [2**20, 2**22, 2**24]
    with pytest.raises(ValueError):
        size_sweep("1GiB", "1MiB")


def test_sizes_from_config_list_is_sorted_unique_bytes():
    assert sizes_from_config({"sizes": ["1GB", "1MB", 1000000, "10MB"]}) == [10**6, 10**7, 10**9]


def test_human_bytes():
    assert human_bytes(8) == "8 B" and human_bytes(2**20) == "1 MiB" and human_bytes(2**30) == "1 GiB"
    assert human_bytes(10**6) == "976.6 KiB" and human_bytes(1536) == "1.5 KiB"
    assert human_bytes(2**27 - 8) == "128 MiB"  # rounded to world-size multiples, printed as the size asked for
