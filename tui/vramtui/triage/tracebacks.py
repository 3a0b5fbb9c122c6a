"""Find the traceback that belongs to an error line and take its frames apart.

`collect_frames(log, event_idx)` reads the cleaned lines (`log_prefixes.clean_log`) above the
error, or just below it when the message comes first (logger.exception, ComfyUI, a paste that
quotes the message before the trace). Real pastes are often cut: a frame header may start in
the middle of a sentence (`Load "x" show the error:   File "...", line 9, in f`), lose its
file (`line 3479, in cross_entropy`), or be missing altogether, leaving only the code line
below it (`return Variable._execution_engine.run_backward(`). Such a code line becomes a frame
with no file and no function: its code still says what was running.

Everything is plain `re`, line by line, with bounded quantifiers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from vramtui.triage.log_prefixes import CleanLog

MAX_TRACEBACK_LINES = 3_000  # how far back from the error a traceback is followed
MESSAGE_FIRST_GAP = 12  # lines between a message and a traceback printed after it

_A = re.ASCII


@dataclass(frozen=True)
class Frame:
    file: str  # as written, "/" separators ("" when the paste cut it off)
    func: str  # "" for a code line whose header was cut off
    code: str  # the source line shown under the frame ("" when none)
    header_no: int  # index in the cleaned lines of the 'File "...", line N, in f' line
    code_no: int | None  # index in the cleaned lines of the code line


_PY_FRAME = re.compile(
    r'\s{0,16}File "(?P<file>[^"\n]{1,1000})", line (?P<ln>\d{1,9}), in (?P<func>\S{1,200})', _A
)
# The same header after other text on the line ("Load "x" show the error:   File ...").
_PY_FRAME_ANY = re.compile(
    r'File "(?P<file>[^"\n]{1,1000})", line (?P<ln>\d{1,9}), in (?P<func>[\w<>.]{1,200})', _A
)
# A header whose start was cut: 'line 3479, in cross_entropy' or 'al.py", line 9, in f'.
_CUT_FRAME = re.compile(
    r'\s{0,16}(?:(?P<file>[^"\s]{1,1000})",? )?line (?P<ln>\d{1,9}), in '
    r"(?P<func>[\w<>.]{1,200})\s{0,8}$",
    _A,
)
_IPY_FRAME = re.compile(
    r"\s{0,16}File (?P<file>[^\s\"][^\n]{0,1000}?):(?P<ln>\d{1,9}), in (?P<func>[^\s(]{1,200})", _A
)
_IPY_CELL = re.compile(r"\s{0,16}Cell In\s?\[\d{1,6}\], line (?P<ln>\d{1,9})", _A)
_IPY_OLD = re.compile(
    r"(?P<file>(?:/|~|[A-Za-z]:\\|<ipython-input)\S{0,1000}) in (?P<func>[\w<>.]{1,200})\(", _A
)
_IPY_ARROW = re.compile(r"\s{0,8}-{1,8}>\s?\d{1,9}\s(?P<code>.*)", _A)
TB_HEADER = re.compile(r".{0,200}?Traceback \(most recent call last\)", _A)
_CARET = re.compile(r"\s*[\^~\-+ ]+\s*$")
_ELISION = re.compile(r"\s*(?:\.{3,}|…|\[\.\.\. skipping.*|\.\.\.<\d{1,9} lines>\.\.\.)\s*$", _A)
_TB_MISC = re.compile(
    r"(?:\s|-{1,8}>|-{3,}|\[\.\.\. skipping|\.\.\.<\d+ lines>\.\.\.|Cell In\s?\[|Traceback \(|"
    r"File \"|File [~/]|[A-Za-z]:\\|<ipython-input)",
    _A,
)
_LINE_CAP = 4_000  # a header is looked for in a line's first 4,000 characters


def parse_header(line: str) -> tuple[str, str] | None:
    """(file, function) when the line is a traceback frame header, else None."""
    line = line[:_LINE_CAP]
    m = _PY_FRAME.match(line)
    if m:
        return m["file"].replace("\\", "/"), m["func"]
    m = _IPY_FRAME.match(line)
    if m:
        return m["file"].replace("\\", "/"), m["func"]
    m = _IPY_CELL.match(line)
    if m:
        return "<cell>", "<cell>"
    m = _IPY_OLD.match(line)
    if m:
        return m["file"].replace("\\", "/"), m["func"]
    if "line " in line:
        m = _CUT_FRAME.match(line)
        if m:
            return (m["file"] or "").replace("\\", "/"), m["func"]
        if 'File "' in line:
            m = _PY_FRAME_ANY.search(line)
            if m:
                return m["file"].replace("\\", "/"), m["func"]
    return None


def _in_block(lines: Sequence[str], i: int, below_header: bool) -> bool:
    text = lines[i]
    if text.strip() == "" or _TB_MISC.match(text) or parse_header(text):
        return True
    if _ELISION.match(text):  # a paste that cut frames out: "..." on a line of its own
        return True
    # An unindented code line right under its header (PyInstaller, ComfyUI's old reports)
    return below_header


def collect_frames(log: CleanLog, event_idx: int, floor_idx: int = 0) -> list[Frame]:
    """The frames of the traceback that ends just above cleaned line `event_idx`, outermost
    first (as Python prints them), not looking above `floor_idx`. Only lines with the same
    rank / worker tag as the error line are read, so interleaved ranks do not mix. When nothing
    precedes the error, a traceback that starts just after it is read (logger.exception style,
    or a message quoted before its trace). When only a code line is left of the traceback (its
    header cut off), that line is returned as a frame with no file and no function.
    """
    lines = log.lines
    n = len(lines)
    if not 0 <= event_idx < n:
        return []
    tag = log.tag(event_idx)
    block: list[int] = []
    i = event_idx - 1
    lowest = max(floor_idx, event_idx - MAX_TRACEBACK_LINES)
    while i >= lowest:
        if tag is not None and log.tag(i) != tag:
            i -= 1
            continue
        text = lines[i]
        if TB_HEADER.match(text):
            break
        above = i - 1 >= lowest and parse_header(lines[i - 1]) is not None
        if _in_block(lines, i, above):
            block.append(i)
            i -= 1
            continue
        break
    block.reverse()
    if any(parse_header(lines[j]) for j in block):
        return _frames_of(block, lines)
    after = _block_after(lines, event_idx)
    if after:
        return _frames_of(after, lines)
    return _orphan_code(block, lines)


def _block_after(lines: Sequence[str], event_idx: int) -> list[int]:
    """A traceback printed after the message: a 'Traceback' line or a frame header within
    MESSAGE_FIRST_GAP lines, then its frames up to the first line that is not part of one."""
    n = len(lines)
    start = None
    for j in range(event_idx + 1, min(n, event_idx + 1 + MESSAGE_FIRST_GAP)):
        text = lines[j]
        if TB_HEADER.match(text):
            start = j + 1
            break
        if parse_header(text):
            start = j
            break
    if start is None:
        return []
    block: list[int] = []
    j = start
    stop = min(n, start + MAX_TRACEBACK_LINES)
    while j < stop:
        below = j > start and parse_header(lines[j - 1]) is not None
        if not _in_block(lines, j, below):
            break
        block.append(j)
        j += 1
    return block if any(parse_header(lines[k]) for k in block) else []


def collect_frames_after(log: CleanLog, event_idx: int) -> list[Frame]:
    """The frames of a traceback printed AFTER the error line (within MESSAGE_FIRST_GAP lines):
    the outer frames of the same failure when the paste shows the message first, or a chained
    exception raised from the frames that caught it. Those outer frames say which step was
    running (a training loop's validation, a `loss.backward()` call) when the frames above
    the error are only the model's own layers."""
    lines = log.lines
    if not 0 <= event_idx < len(lines):
        return []
    block = _block_after(lines, event_idx)
    return _frames_of(block, lines) if block else []


def _orphan_code(block: list[int], lines: Sequence[str]) -> list[Frame]:
    """The code line nearest the error when no header is left above it."""
    for j in reversed(block):
        text = lines[j]
        if not text.strip() or _CARET.match(text) or _ELISION.match(text):
            continue
        if TB_HEADER.match(text) or text.lstrip().startswith(("File ", "Cell In")):
            continue
        return [Frame(file="", func="", code=text.strip(), header_no=j, code_no=j)]
    return []


def _frames_of(block: list[int], lines: Sequence[str]) -> list[Frame]:
    frames: list[Frame] = []
    first_header = True
    for pos, j in enumerate(block):
        text = lines[j]
        parsed = parse_header(text)
        if not parsed:
            continue
        if first_header:
            first_header = False
            # Code left above the first header: the end of a frame whose header was cut off.
            frames.extend(_orphan_code(block[:pos], lines))
        file, func = parsed
        code, code_no = "", None
        ipython = not (
            _PY_FRAME.match(text) or _CUT_FRAME.match(text) or _PY_FRAME_ANY.search(text)
        )
        for k in block[pos + 1 : pos + 40]:
            nxt = lines[k]
            if parse_header(nxt) or TB_HEADER.match(nxt):
                break
            if ipython:
                m = _IPY_ARROW.match(nxt)
                if m:
                    code, code_no = m["code"].strip(), k
                    break
                continue
            if not nxt.strip() and k - j <= 2:
                continue  # a double-spaced paste: a blank line between header and code
            if nxt.strip() and not _CARET.match(nxt) and not _ELISION.match(nxt):
                code, code_no = nxt.strip(), k
            break
        frames.append(Frame(file=file, func=func, code=code, header_no=j, code_no=code_no))
    return frames
