"""Units: GB = 10^9 B, GiB = 2^30 B; parse what catalogues, nvidia-smi and PyTorch print."""

from __future__ import annotations

import pytest

from vramtui.errors import UnitsError
from vramtui.units import (
    bytes_to,
    format_both,
    format_bytes,
    format_bytes_readable,
    gb_to_bytes,
    gib_to_bytes,
    parse_bytes,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24GB", 24 * 10**9),
        ("24 GB", 24 * 10**9),
        ("24gb", 24 * 10**9),
        # 22.35 x 1,073,741,824 = 23,622,320,128 + 375,809,638.4 = 23,998,129,766.4
        ("22.35 GiB", 23_998_129_766),
        ("24564MiB", 24564 * 2**20),  # nvidia-smi's "24564MiB" of a 24 GB card
        # 687 x 1,048,576 = 720,371,712; 0.12 x 1,048,576 = 125,829.12
        ("687.12 MiB", 720_497_541),
        ("14,000,000,000 B", 14 * 10**9),
        ("14000000000", 14 * 10**9),  # a bare number is bytes
        ("14e9", 14 * 10**9),
        ("1 kB", 1000),  # SI, as nvidia-smi and vendors use it
        ("1 KiB", 1024),
        ("2 TB", 2 * 10**12),
        ("1 TiB", 2**40),
        ("0 B", 0),
        ("512 bytes", 512),
        (" 80 GB ", 80 * 10**9),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


def test_parse_numbers():
    assert parse_bytes(1024) == 1024
    assert parse_bytes(2.0) == 2


@pytest.mark.parametrize(
    "bad",
    ["24 GX", "24 gigs", "-1GB", "-5", "GB", "", "abc", "1.2.3 GB", "1e400 GB", "24 G B"],
)
def test_parse_rejects(bad):
    with pytest.raises(UnitsError):
        parse_bytes(bad)


def test_parse_rejects_non_text():
    with pytest.raises(UnitsError):
        parse_bytes(-1)
    with pytest.raises(UnitsError):
        parse_bytes(True)
    with pytest.raises(UnitsError):
        parse_bytes(float("nan"))
    with pytest.raises(UnitsError):
        parse_bytes(-0.5)


def test_units_error_is_one_line():
    with pytest.raises(UnitsError) as info:
        parse_bytes("24 GX")
    assert "\n" not in str(info.value)
    assert "GX" in str(info.value)


def test_format_bytes_seed_examples():
    # 24e9 / 2^30 = 22.3517 ; 14e9 / 2^30 = 13.0385 ; 14e9 + 6 GiB = 19.0385 GiB
    assert format_bytes(24 * 10**9) == "22.35 GiB"
    assert format_bytes(14 * 10**9) == "13.04 GiB"
    assert format_bytes(14 * 10**9 + 6 * 2**30) == "19.04 GiB"
    assert format_bytes(24 * 10**9, "gb") == "24.00 GB"
    assert format_bytes(14 * 10**9, "bytes") == "14,000,000,000 B"
    assert format_bytes(24564 * 2**20, "mib") == "24,564.00 MiB"
    # H100 80GB: nvidia-smi 81,559 MiB = 81559 / 1024 = 79.647 GiB
    assert format_bytes(parse_bytes("81559MiB")) == "79.65 GiB"
    assert format_bytes(2**30, "gib", decimals=0) == "1 GiB"


def test_format_round_trip_of_a_card():
    # a "24 GB" card is 22.35 GiB, not 24 GiB
    assert format_bytes(parse_bytes("24 GB")) == "22.35 GiB"
    assert parse_bytes(format_bytes(14 * 10**9, "bytes")) == 14 * 10**9


def test_format_readable_and_both():
    assert format_bytes_readable(2**20) == "1.00 MiB"  # 0.00098 GiB would print as 0.00
    assert format_bytes_readable(512 * 2**20) == "0.50 GiB"
    assert format_bytes_readable(10**6, "gb") == "1.00 MB"
    assert format_bytes_readable(2**30) == "1.00 GiB"
    assert format_bytes_readable(0) == "0 B"
    assert format_both(14 * 10**9) == "14,000,000,000 B (13.04 GiB)"


def test_conversions():
    assert bytes_to(2**30, "gib") == 1.0
    assert bytes_to(10**9, "GB") == 1.0
    assert bytes_to(3 * 2**20, "mib") == 3.0
    assert bytes_to(7, "bytes") == 7.0
    assert gib_to_bytes(6) == 6 * 2**30
    assert gib_to_bytes(0.5) == 2**29
    assert gb_to_bytes(24) == 24 * 10**9
    with pytest.raises(UnitsError):
        bytes_to(1, "furlongs")
    with pytest.raises(UnitsError):
        format_bytes(1, "furlongs")
