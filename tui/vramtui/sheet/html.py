"""The sizing sheet as one self-contained HTML5 page: inline CSS, no script, no external asset.

It reads in a browser (system fonts, one bounded column) and prints on one A4 or Letter page:
`@page` keeps the printer's paper size with small margins, and the print rules set the body in
two columns at about 7pt with tight tables (`bench/sheet_pages.py` prints every sample and
counts the pages). Every status is a word inside a bordered label; its colour only repeats the
word, so the page reads in black and white. A citation keeps its full source as a tooltip.
Every string is escaped with `html.escape`, after its control characters are made visible
(`vramtui.safe_text`), so no raw ESC or C1 byte reaches the file.
"""

from __future__ import annotations

import html as _html
import re

from vramtui.safe_text import safe_line, safe_text
from vramtui.sheet.blocks import (
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

CSS = """\
:root { color-scheme: light; --fg: #1b1b1b; --muted: #555; --line: #c8c8c8; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; }
main { max-width: 64rem; margin: 0 auto; padding: 1.5rem 1.25rem 2rem; }
h1 { font-size: 1.45rem; margin: 0 0 .25rem; line-height: 1.2; }
h2 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; padding-bottom: .15rem;
  border-bottom: 1px solid var(--line); }
p { margin: .35rem 0; }
ul { margin: .3rem 0; padding-left: 1.2rem; }
li { margin: .12rem 0; }
.meta { color: var(--muted); font-size: .9em; }
.glance { border: 1px solid var(--line); border-radius: .35rem; padding: .4rem .8rem;
  margin: .7rem 0; }
.glance h2 { border: 0; margin: .2rem 0; font-size: .95rem; }
table { border-collapse: collapse; width: 100%; margin: .35rem 0 .5rem; font-size: .9em; }
th, td { border: 1px solid var(--line); padding: .2rem .4rem; text-align: left;
  vertical-align: top; }
th { font-weight: 600; background: #f2f2f2; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: .1rem .9rem;
  margin: .3rem 0; }
dl.facts dt { font-weight: 600; }
dl.facts dd { margin: 0; }
code { font: .9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.cite { text-decoration: underline dotted; text-underline-offset: .15em; }
.st { padding: 0 .25em; border: 1px solid currentColor; border-radius: .25em;
  font-size: .86em; font-weight: 600; -webkit-box-decoration-break: clone;
  box-decoration-break: clone; }
.st-estimated { color: #0b5394; }
.st-measured, .st-fit, .st-passed, .st-valid { color: #17692c; }
.st-unknown { color: #8a5a00; border-style: dashed; }
.st-verify, .st-partial, .st-warn { color: #8a5a00; }
.st-excluded, .st-failed, .st-invalid { color: #b3261e; border-width: 2px; }
.st-notrun { color: var(--muted); border-style: dotted; }
.st-worst { color: var(--fg); border-width: 2px; }
/* Print: one page, A4 or Letter (the printer's paper), the body in two columns. */
@page { size: portrait; margin: 6mm 7mm; }
@media print {
  html, body { font-size: 7pt; line-height: 1.13; }
  main { max-width: none; margin: 0; padding: 0; }
  header p { margin: .1em 0; }
  h1 { font-size: 11pt; margin: 0; }
  h2 { font-size: 8.2pt; margin: .45em 0 .15em; padding-bottom: 0; border-bottom-width: .5pt;
    break-after: avoid; page-break-after: avoid; }
  p { margin: .15em 0; }
  ul { margin: .1em 0; padding-left: .9em; list-style: none; }
  li { margin: 0; position: relative; }
  li::before { content: "\\2022"; position: absolute; left: -.75em; }
  .glance { margin: .3em 0 .2em; padding: .1em .5em; border-radius: 0; }
  .glance h2 { display: none; }
  .cols { column-count: 2; column-gap: 4mm; column-rule: .5pt solid var(--line); }
  .cols > section:first-child h2 { margin-top: 0; }
  table { margin: .15em 0 .25em; font-size: 1em; }
  th, td { padding: 0 .25em; border-width: .5pt; overflow-wrap: break-word; }
  td.num { white-space: normal; }
  th { background: none; }
  dl.facts { gap: 0 .6em; margin: .1em 0; }
  code { font-size: .92em; }
  .st { padding: 0 .15em; border-width: .5pt; font-size: .95em; color: #000; }
  .st-excluded, .st-failed, .st-invalid, .st-worst { border-width: 1.2pt; }
  .cite { text-decoration: none; }
  tr, dl.facts, .glance { break-inside: avoid; page-break-inside: avoid; }
  thead { display: table-header-group; }
}
"""


def escape(text: str) -> str:
    """HTML-escaped text whose control characters show as their escapes (ESC as \\x1b)."""
    return _html.escape(safe_line(text))


SHORT_CELL = 16  # a table cell this short (in characters) is not broken across lines
_TAG = re.compile(r"<[^>]*>")
_TAG_OR_SPACE = re.compile(r"(<[^>]*>)| (?!\()")


def _inline(part) -> str:
    if isinstance(part, str):
        return escape(part)
    if isinstance(part, Code):
        return f"<code>{escape(part.text)}</code>"
    if isinstance(part, Cite):
        return f'<span class="cite" title="{escape(part.full)}">{escape(part.text)}</span>'
    if isinstance(part, Strong):
        return f"<strong>{escape(part.text)}</strong>"
    if isinstance(part, Mark):
        return f'<span class="st st-{escape(part.status)}">{escape(part.text)}</span>'
    raise TypeError(f"not an inline sheet element: {part!r}")


def cell_html(cell: Cell) -> str:
    parts = cell if isinstance(cell, tuple) else (cell,)
    return "".join(_inline(p) for p in parts)


def _number(html: str) -> str:
    """A figure kept with its unit ("23.76&nbsp;USD", "prefill,&nbsp;decode"): a narrow
    column breaks only before an aside in parentheses."""
    return _TAG_OR_SPACE.sub(lambda m: m.group(1) or "&nbsp;", html)


def _table(t: Table) -> list[str]:
    def cls(i: int) -> str:
        return ' class="num"' if i in t.numeric else ""

    def cell(i: int, c: Cell) -> str:
        html = cell_html(c)
        if i in t.numeric or len(_TAG.sub("", html)) <= SHORT_CELL:
            return _number(html)
        return html

    head = "".join(f"<th{cls(i)}>{escape(c)}</th>" for i, c in enumerate(t.columns))
    lines = ["<table>", f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for row in t.rows:
        cells = "".join(f"<td{cls(i)}>{cell(i, c)}</td>" for i, c in enumerate(row))
        lines.append(f"<tr>{cells}</tr>")
    return lines + ["</tbody>", "</table>"]


def _block(block) -> list[str]:
    if isinstance(block, Para):
        return [f"<p>{cell_html(block.parts)}</p>"]
    if isinstance(block, Facts):
        rows = [
            f"<dt>{escape(label)}</dt><dd>{cell_html(value)}</dd>" for label, value in block.rows
        ]
        return ['<dl class="facts">', *rows, "</dl>"]
    if isinstance(block, Bullets):
        return ["<ul>", *(f"<li>{cell_html(i)}</li>" for i in block.items), "</ul>"]
    if isinstance(block, Table):
        return _table(block)
    raise TypeError(f"not a sheet block: {block!r}")


def render_html(sheet: Sheet) -> str:
    h = sheet.header
    source = f" from <code>{escape(h.spec_file)}</code>" if h.spec_file else ""
    lines = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="vramtui {escape(h.version)}">',
        f"<title>{escape(h.title)}</title>",
        "<style>",
        CSS.rstrip("\n"),
        "</style>",
        "</head>",
        "<body>",
        "<main>",
        "<header>",
        f"<h1>{escape(h.title)}</h1>",
    ]
    if h.description:
        lines.append(f"<p>{escape(h.description)}</p>")
    lines += [
        (
            f'<p class="meta">Generated {escape(h.generated.isoformat())} by vramtui '
            f"{escape(h.version)}{source}. Units: {escape(h.units)}.</p>"
        ),
        "</header>",
        '<section class="glance" id="glance">',
        "<h2>At a glance</h2>",
        "<ul>",
        *(f"<li>{cell_html(item)}</li>" for item in sheet.summary),
        "</ul>",
        "</section>",
        '<div class="cols">',
    ]
    for section in sheet.sections:
        lines += [f'<section id="{escape(section.key)}">', f"<h2>{escape(section.title)}</h2>"]
        for block in section.blocks:
            lines += _block(block)
        lines.append("</section>")
    lines += ["</div>", "</main>", "</body>", "</html>"]
    return safe_text("\n".join(lines)) + "\n"  # the last line of defence: no raw control byte
