"""Honest labels outside the app: the seed's simple mode follows the display unit (GB mode
has no GiB; exact bytes only in the bytes column)."""

from __future__ import annotations

from vramtui.cli import main


def _simple(capsys, *units: str) -> str:
    args = ["estimate", "--params", "7e9", "--bits", "16", "--headroom-gib", "6"]
    assert main([*args, *units]) == 0
    return capsys.readouterr().out


def test_simple_mode_in_gb_has_no_gib(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    out = _simple(capsys, "--units", "gb")
    # weights 7e9 x 2 B = 14.00 GB; the 6 GiB reserve = 6 x 2^30 = 6,442,450,944 B = 6.44 GB;
    # rough range 14e9 + 6,442,450,944 = 20.44 GB
    assert "weights only: 14,000,000,000 B (14.00 GB)" in out
    assert "rough range: 20.44 GB = weights + 6.44 GB reserve" in out
    assert "format table (same 6.44 GB reserve)" in out
    # the 4-bit row: 3.5e9 B = 3.50 GB, + 6.44 GB = 9.94 GB; the 32-bit row 28.00 / 34.44 GB
    assert "3,500,000,000 B │  3.50 GB │     9.94 GB" in out
    assert "28,000,000,000 B │ 28.00 GB │    34.44 GB" in out
    assert "GiB" not in out and "MiB" not in out


def test_simple_mode_in_gib_keeps_the_seed_figures(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    out = _simple(capsys)
    # 14e9 / 2^30 = 13.04 GiB; + 6 GiB = 19.04 GiB
    assert "weights only: 14,000,000,000 B (13.04 GiB)" in out
    assert "rough range: 19.04 GiB = weights + 6.00 GiB reserve" in out
    assert " GB" not in out.replace("GB = 10^9", "")
