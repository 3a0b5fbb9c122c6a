"""Texts with byte figures in them, rendered in the display unit the user chose.

The domain builds sentences such as "... = 14,000,000,000 B (13.04 GiB)" or "Manual reserve
(6 GiB)" once, when an estimate, a shortlist or a triage is worked out; the user picks GiB,
GB, MiB or bytes later (`--units`, the app's unit key). A `UnitText` keeps each figure as
bytes (`Figure`) beside the words, so that the edge renders it in the chosen unit:

    text = UnitText("peak ", Figure(14 * 10**9), " per GPU")
    str(text)            -> "peak 13.04 GiB per GPU"   (GiB: what every str use sees)
    text.render("gb")    -> "peak 14.00 GB per GPU"

`UnitText` is a `str` (its GiB rendering), so JSON, sorting, comparisons and prefixes keep
working unchanged; `in_unit(text, unit)` renders any text, plain or not. Joining and `+` keep
the figures; an f-string turns the text into a plain GiB string, so build with parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self

from vramtui.units import format_bytes

# The unit a small figure ("512 MiB", "100s of MiB") is shown in, per display unit: the
# decimal display unit keeps decimal small units, the others binary ones.
_SMALL_UNIT = {"gib": "mib", "gb": "mb", "mib": "mib", "bytes": "mib"}
_SMALL_SYMBOL = {"mib": "MiB", "mb": "MB"}


@dataclass(frozen=True)
class Figure:
    """A byte figure inside a text; `render(unit)` prints it in a display unit.

    high: the upper end of a range ("0.4-1 GiB"), in bytes. trim: no trailing zeros ("6 GiB",
    "6.44 GB"). small: of the order of megabytes, shown in MiB (MB in GB mode).
    gib_in_bytes_mode: the exact bytes are written beside it already, or it is a rough figure
    ("typically 0.4-1 GiB"), so in bytes mode it stays in GiB.
    """

    n_bytes: int
    high: int | None = None
    decimals: int = 2
    trim: bool = False
    small: bool = False
    gib_in_bytes_mode: bool = False

    def render(self, unit: str) -> str:
        key = unit.lower()
        if key == "bytes":
            if not self.gib_in_bytes_mode:
                low = format_bytes(self.n_bytes, "bytes")
                return low if self.high is None else f"{low} to {format_bytes(self.high, 'bytes')}"
            key = "gib"
        if self.small:
            key = _SMALL_UNIT[key]
        low = format_bytes(self.n_bytes, key, self.decimals)
        number, symbol = low.rsplit(" ", 1)
        if self.trim:
            number = _trimmed(number)
        if self.high is None:
            return f"{number} {symbol}"
        high = format_bytes(self.high, key, self.decimals).rsplit(" ", 1)[0]
        return f"{number}-{_trimmed(high) if self.trim else high} {symbol}"


@dataclass(frozen=True)
class SmallUnit:
    """Just the symbol of a small unit, for prose such as "100s of MiB": MiB, or MB in GB mode."""

    def render(self, unit: str) -> str:
        return _SMALL_SYMBOL[_SMALL_UNIT[unit.lower()]]


def _trimmed(number: str) -> str:
    return number.rstrip("0").rstrip(".") if "." in number else number


Part = str | Figure | SmallUnit


class UnitText(str):
    """A text whose byte figures follow the display unit; as a `str`, it reads in GiB."""

    parts: tuple[Part, ...]

    def __new__(cls, *parts: Part | UnitText) -> Self:
        flat: list[Part] = []
        for p in parts:
            if isinstance(p, UnitText):
                flat.extend(p.parts)
            elif isinstance(p, (Figure, SmallUnit)):
                flat.append(p)
            else:
                flat.append(str(p))
        obj = super().__new__(cls, _render(flat, "gib"))
        obj.parts = tuple(flat)
        return obj

    def __getnewargs__(self):  # pickle and copy rebuild from the parts
        return self.parts

    def render(self, unit: str) -> str:
        """The text with every figure in `unit` (gib, gb, mib or bytes)."""
        return _render(self.parts, unit)

    def __add__(self, other):
        if isinstance(other, str):
            return UnitText(self, other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, str):
            return UnitText(other, self)
        return NotImplemented

    def join(self, items: Iterable[str]) -> UnitText:
        """Like str.join, keeping the figures of the items (and of the separator)."""
        parts: list[Part | UnitText] = []
        for i, item in enumerate(items):
            if i:
                parts.append(self)
            parts.append(item)
        return UnitText(*parts)


def _render(parts: Iterable[Part], unit: str) -> str:
    return "".join(p if isinstance(p, str) else p.render(unit) for p in parts)


def in_unit(text: str, unit: str) -> str:
    """Any text in `unit`: a `UnitText` re-rendered, a plain string as it is."""
    return text.render(unit) if isinstance(text, UnitText) else str(text)


__all__ = ["Figure", "SmallUnit", "UnitText", "in_unit"]
