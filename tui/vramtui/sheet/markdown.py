"""The sizing sheet as GitHub-flavoured Markdown: headings, fact lists and pipe tables.

Every string from the spec or the catalogue is escaped where Markdown would misread it, so a
name such as `<script>`, `*bold*` or `a | b` prints as written instead of becoming markup,
while the raw text stays readable: `<` only where it could open a tag or an autolink ("4 < 16"
is left alone), `]` only where a link or a reference would follow ("[cache]" is left alone),
`>` and list markers only at the start of a line. Statuses stay words; the
alarming ones (unknown, excluded, failed, does not validate ...) are in bold. A `Cite` prints
its short label; the full source stays in the catalogue.
"""

from __future__ import annotations

import re

from vramtui.ledger.items import UNKNOWN
from vramtui.safe_text import safe_line, safe_text
from vramtui.sheet.blocks import (
    EXCLUDED,
    INVALID,
    WARN,
    WORST,
    Bullets,
    Cell,
    Cite,
    Code,
    Facts,
    Mark,
    Para,
    Sheet,
    Strong,
    Table,
)

BOLD_MARKS = frozenset({UNKNOWN, EXCLUDED, INVALID, WARN, WORST, "failed"})

_ALWAYS = re.compile(r"([\\`*|~])")
_LINK = re.compile(r"\](?=[(\[:]|$)")  # what may close a link (a part may end one)
_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # what could open an HTML tag, a comment or an autolink
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_ENTITY = re.compile(r"&(?=#?\w+;)")
_SPACE = re.compile(r"\s+")
_BLOCK_START = re.compile(r"^(\s*)(>|(?:[-+=]|\d+[.)]|#{1,6})(?=\s|$))")


def escape(text: str) -> str:
    """Text that Markdown prints as written, on one line (inner and edge spaces kept); control
    characters show as their escapes (ESC as \\x1b), never as raw bytes."""
    text = _SPACE.sub(" ", safe_line(text))
    text = _ALWAYS.sub(r"\\\1", text)
    text = _TAG.sub(r"\\<", text)
    text = _LINK.sub(r"\\]", text)
    text = _UNDERSCORE.sub(r"\\_", text)
    return _ENTITY.sub(r"\\&", text)


def _line(text: str) -> str:
    """A line whose start must not read as a list item or a heading."""
    return _BLOCK_START.sub(r"\1\\\2", text)


def _code(text: str) -> str:
    text = " ".join(safe_line(text).split()).replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _inline(part) -> str:
    if isinstance(part, str):
        return escape(part)
    if isinstance(part, Code):
        return _code(part.text)
    if isinstance(part, Cite):
        return escape(part.text)
    if isinstance(part, Strong):
        return f"**{escape(part.text)}**"
    if isinstance(part, Mark):
        text = escape(part.text)
        return f"**{text}**" if part.status in BOLD_MARKS else text
    raise TypeError(f"not an inline sheet element: {part!r}")


def cell_text(cell: Cell) -> str:
    parts = cell if isinstance(cell, tuple) else (cell,)
    return "".join(_inline(p) for p in parts).strip() or " "


def _table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(escape(c) for c in t.columns) + " |"]
    lines.append(
        "| " + " | ".join("---:" if i in t.numeric else "---" for i in range(len(t.columns))) + " |"
    )
    lines += ["| " + " | ".join(cell_text(c) for c in row) + " |" for row in t.rows]
    return lines


def _block(block) -> list[str]:
    if isinstance(block, Para):
        return [_line(cell_text(block.parts))]
    if isinstance(block, Facts):
        return [f"- **{escape(label)}:** {cell_text(value)}" for label, value in block.rows]
    if isinstance(block, Bullets):
        return [f"- {_line(cell_text(item))}" for item in block.items]
    if isinstance(block, Table):
        return _table(block)
    raise TypeError(f"not a sheet block: {block!r}")


def render_markdown(sheet: Sheet) -> str:
    h = sheet.header
    lines = [f"# {escape(h.title)}", ""]
    if h.description:
        lines += [_line(escape(h.description).strip()), ""]
    source = f" from {_code(h.spec_file)}" if h.spec_file else ""
    lines += [
        (
            f"Generated {h.generated.isoformat()} by vramtui {escape(h.version)}{source}. "
            f"Units: {escape(h.units)}."
        ),
        "",
        "**At a glance**",
        "",
    ]
    lines += [f"- {_line(cell_text(item))}" for item in sheet.summary]
    for section in sheet.sections:
        lines += ["", f"## {escape(section.title)}"]
        for block in section.blocks:
            lines += [""] + _block(block)
    return safe_text("\n".join(lines)) + "\n"  # the last line of defence: no raw control byte
