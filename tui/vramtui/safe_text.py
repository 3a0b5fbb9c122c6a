"""Terminal-safe text: user strings lose every character a terminal would obey.

A spec, a catalogue file, a log or a remote host can carry bytes that a terminal reads as
commands: ESC starts CSI/OSC sequences (clear the screen, set the clipboard through OSC 52,
retitle the window), the C1 controls U+0080-U+009F are single-character CSI/OSC/DCS on some
terminals, BEL, backspace and carriage return rewrite what was printed, and the bidi overrides
U+202A-U+202E / U+2066-U+2069 make text display in an order other than the one it has.

Each such character is replaced by its visible escape (ESC -> ``\\x1b``, U+202E -> ``\\u202e``),
so the text stays readable and nothing is lost silently; a backslash is left alone, so cleaning
twice changes nothing. Single-line fields also turn tab, newline and the other line breaks into
a space; multi-line text keeps newline and tab and turns a carriage return into a newline.

Applied where user strings enter (spec parser, catalogue loader, config) and again where text
leaves (the CLI's console, its error lines, the app's widgets, the sizing sheet).
"""

from __future__ import annotations

import re

__all__ = ["has_unsafe", "safe_line", "safe_text"]

_BIDI = (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
_CONTROLS = (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0))
# Line breaks that become a space in a single-line field (str.splitlines' set, minus the C1 NEL
# which is escaped like any C1 control).
_LINE_SPACES = "\t\n\r\x0b\x0c\u2028\u2029"


def _escape(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_MULTI: dict[int, str] = {code: _escape(code) for code in (*_CONTROLS, *_BIDI)}
_MULTI[ord("\n")] = "\n"
_MULTI[ord("\t")] = "\t"
_MULTI[ord("\r")] = "\n"
_MULTI[0x2028] = "\n"
_MULTI[0x2029] = "\n"
_SINGLE: dict[int, str] = {code: _escape(code) for code in (*_CONTROLS, *_BIDI)}
for _ch in _LINE_SPACES:
    _SINGLE[ord(_ch)] = " "

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def has_unsafe(text: str, *, multiline: bool = True) -> bool:
    """Whether `text` holds a character that `safe_text` (or `safe_line`) would change."""
    return (_UNSAFE if multiline else _UNSAFE_LINE).search(text) is not None


def safe_line(text: str) -> str:
    """`text` for a single-line field: line breaks and tabs become spaces, controls escaped."""
    if not isinstance(text, str):
        text = str(text)
    if _UNSAFE_LINE.search(text) is None:
        return text
    return text.replace("\r\n", "\n").translate(_SINGLE)


def safe_text(text: str) -> str:
    """`text` that may span lines: newline and tab kept (CR/CRLF become newline), controls
    escaped."""
    if not isinstance(text, str):
        text = str(text)
    if _UNSAFE.search(text) is None:
        return text
    return text.replace("\r\n", "\n").translate(_MULTI)
