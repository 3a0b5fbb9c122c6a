"""The sheet as a document: inline parts, blocks, sections, the header and the sheet itself.

This is the vocabulary shared by the builders (`model`, `memory`, `measured`, `decision`,
`factors`) and the renderers (`markdown`, `html`); it knows nothing about estimates. Every
status is a word in a `Mark`: a renderer may colour it, but the word alone carries it, so the
sheet reads in black and white.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Factor lives with its computation
    from vramtui.sheet.factors import Factor

UNITS_NOTE = (
    "1 GiB = 2^30 B, 1 GB = 10^9 B; memory per GPU (the most loaded) unless stated; exact "
    "bytes in parentheses"
)

# Mark statuses (a renderer's style key) beside the ledger's estimated/measured/unknown and
# the plan's passed/partial/failed/notrun; the text always says the status in words.
WORST = "worst"
FIT = "fit"
VERIFY = "verify"
EXCLUDED = "excluded"
VALID = "valid"
INVALID = "invalid"
WARN = "warn"


@dataclass(frozen=True)
class Mark:
    """A status in words (`status` is a style key: estimated, measured, unknown, fit, ...)."""

    status: str
    text: str


@dataclass(frozen=True)
class Strong:
    text: str


@dataclass(frozen=True)
class Code:
    """A spec field or a command, as the user types it."""

    text: str


@dataclass(frozen=True)
class Cite:
    """A short citation (`text`: a label, a domain and a path tail) of a longer source
    (`full`): HTML keeps the full text as the label's tooltip, Markdown prints the label."""

    text: str
    full: str


Inline = str | Mark | Strong | Code | Cite
Cell = Inline | tuple[Inline, ...]


@dataclass(frozen=True)
class Para:
    parts: tuple[Inline, ...]


@dataclass(frozen=True)
class Facts:
    rows: tuple[tuple[str, Cell], ...]  # (label, value)


@dataclass(frozen=True)
class Bullets:
    items: tuple[Cell, ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    numeric: frozenset[int] = frozenset()  # right-aligned columns


Block = Para | Facts | Bullets | Table


@dataclass(frozen=True)
class Section:
    key: str  # workload | memory | measured | conditions | shortlist | triage | invalidation
    title: str
    blocks: tuple[Block, ...]


@dataclass(frozen=True)
class Header:
    spec_name: str
    description: str
    generated: datetime.date
    version: str
    spec_file: str  # the file name only, never a machine path
    units: str = UNITS_NOTE

    @property
    def title(self) -> str:
        return f"Sizing sheet: {self.spec_name}"


@dataclass(frozen=True)
class Sheet:
    header: Header
    summary: tuple[Cell, ...]  # "at a glance": the peak, the measurements, the shortlist
    sections: tuple[Section, ...]
    factors: tuple[Factor, ...]  # also the last section
    warnings: tuple[str, ...] = ()  # catalogue problems, shown in the shortlist section

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)


def join(parts: list[tuple[Inline, ...]], sep: str = "; ") -> tuple[Inline, ...]:
    """The inline runs `parts`, separated by `sep`."""
    out: list[Inline] = []
    for i, p in enumerate(parts):
        if i:
            out.append(sep)
        out.extend(p)
    return tuple(out)
