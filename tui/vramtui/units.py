"""Bytes and their units, as nvidia-smi, PyTorch and catalogues write them.

GB, MB, kB are powers of 10 (1 GB = 10^9 B); GiB, MiB, KiB are powers of 2 (1 GiB = 2^30 B).
Every quantity inside vramtui is an integer number of bytes; units only appear at the edges,
when text is read (`parse_bytes`) or printed (`format_bytes`).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from vramtui.errors import UnitsError

KB_BYTES = 10**3
MB_BYTES = 10**6
GB_BYTES = 10**9
TB_BYTES = 10**12
KIB_BYTES = 2**10
MIB_BYTES = 2**20
GIB_BYTES = 2**30
TIB_BYTES = 2**40

# Lower-cased unit spellings -> bytes per unit. "KB" is read as 10^3 (SI), as nvidia-smi and
# vendors' sheets use it; the binary units always carry the "i".
_UNIT_BYTES: dict[str, int] = {
    "": 1,
    "b": 1,
    "byte": 1,
    "bytes": 1,
    "kb": KB_BYTES,
    "mb": MB_BYTES,
    "gb": GB_BYTES,
    "tb": TB_BYTES,
    "kib": KIB_BYTES,
    "mib": MIB_BYTES,
    "gib": GIB_BYTES,
    "tib": TIB_BYTES,
}

# Display units accepted by --units and the app's toggle.
DISPLAY_UNITS = ("gib", "gb", "mib", "bytes")
_DISPLAY_SYMBOL = {"gib": "GiB", "gb": "GB", "mib": "MiB", "mb": "MB", "tib": "TiB", "tb": "TB"}

_QUANTITY = re.compile(
    r"^\s*(?P<num>[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][+-]?\d+)?|[+-]?\.\d+)"
    r"\s*(?P<unit>[A-Za-z]*)\s*$"
)

_PLAIN_DECIMAL = re.compile(r"^\+?\d{1,40}(?:\.\d{0,40})?$")  # no exponent: exact and bounded


def parse_bytes(text: str | float) -> int:
    """Read a quantity such as "24GB", "22.35 GiB", "24564MiB" or "14,000,000,000 B" as bytes.

    A bare number is bytes. The result is rounded to the nearest byte; negative quantities
    and unknown units raise `UnitsError` with a one-line message.
    """
    if isinstance(text, bool):
        raise UnitsError(f"not a quantity of memory: {text!r}; write e.g. '24GB' or '22.35 GiB'")
    if isinstance(text, int):
        value, unit = float(text), ""
        if text < 0:
            raise UnitsError(f"negative memory quantity {text}; memory sizes are >= 0 bytes")
        return text
    if isinstance(text, float):
        value, unit = text, ""
    else:
        match = _QUANTITY.match(text)
        if not match:
            raise UnitsError(
                f"cannot read {text!r} as memory; write a number and a unit, e.g. '24GB', "
                "'22.35 GiB', '24564MiB' or '14000000000' (bytes)"
            )
        digits = match["num"].replace(",", "")
        value = float(digits)
        unit = match["unit"]
    factor = _UNIT_BYTES.get(unit.lower())
    if factor is None:
        raise UnitsError(
            f"unknown memory unit {unit!r} in {text!r}; use B, kB, MB, GB, TB (powers of 10) "
            "or KiB, MiB, GiB, TiB (powers of 2)"
        )
    if not math.isfinite(value) or value < 0 or not math.isfinite(value * factor):
        raise UnitsError(f"memory quantity {text!r} must be a finite number >= 0")
    if isinstance(text, str) and _PLAIN_DECIMAL.match(digits):
        # Exact decimal arithmetic: "17179869184.00 GiB" is 2^64 B to the byte, and a half
        # byte rounds to even, as `round` does, without a float's error on large figures.
        return round(Fraction(digits) * factor)
    return round(value * factor)


def bytes_to(n_bytes: float, unit: str) -> float:
    """Convert bytes to a float in `unit` (gib, gb, mib, mb, kib, kb, tib, tb, bytes)."""
    key = unit.lower()
    if key == "bytes":
        return float(n_bytes)
    factor = _UNIT_BYTES.get(key)
    if factor is None:
        raise UnitsError(f"unknown display unit {unit!r}; use one of {', '.join(DISPLAY_UNITS)}")
    return n_bytes / factor


def format_bytes(n_bytes: float, unit: str = "gib", decimals: int = 2) -> str:
    """Print a byte count with its unit: 24e9 -> "22.35 GiB" (unit="gib"), "24.00 GB" ("gb").

    unit="bytes" prints the exact integer with thousands separators: "14,000,000,000 B".
    """
    key = unit.lower()
    if key == "bytes":
        return f"{round(n_bytes):,} B"
    value = bytes_to(n_bytes, key)
    symbol = _DISPLAY_SYMBOL.get(key) or {"kib": "KiB", "kb": "kB"}[key]
    return f"{value:,.{decimals}f} {symbol}"


def format_bytes_readable(n_bytes: float, unit: str = "gib") -> str:
    """Like format_bytes, but figures under 0.1 GiB (GB) are shown in MiB (MB), and zero as 0 B."""
    key = unit.lower()
    if n_bytes == 0:
        return "0 B"
    if key in ("gib", "gb") and 0 < n_bytes < 0.1 * _UNIT_BYTES[key]:
        return format_bytes(n_bytes, "mib" if key == "gib" else "mb")
    return format_bytes(n_bytes, key)


def format_both(n_bytes: float) -> str:
    """Exact bytes and GiB together: "14,000,000,000 B (13.04 GiB)"."""
    return f"{format_bytes(n_bytes, 'bytes')} ({format_bytes(n_bytes, 'gib')})"


def gib_to_bytes(gib: float) -> int:
    return round(gib * GIB_BYTES)


def gb_to_bytes(gb: float) -> int:
    return round(gb * GB_BYTES)
