"""Take a pasted log apart from what was wrapped around it, before anything reads it.

`clean_log(text)` returns the lines as the program printed them, each with the number of the
line it came from in the paste:

- ANSI colour and cursor codes are removed, and a progress bar's carriage returns keep only the
  last segment (what a terminal shows).
- Launcher and logger prefixes are stripped, several in a row when they nest
  ("node-1: [rank0]: ", "(VllmWorker rank=1 pid=572) ERROR 03-20 02:29:07 [x.py:375] "):
  torchrun's `[rank3]:` / `[default0]:` / `[3]:`, OpenMPI's `[1,0]<stdout>:`, vLLM's and Ray's
  `(EngineCore_0 pid=12)` worker tags, vLLM's `INFO 01-15 10:22:11 [x.py:12] ` record header,
  Python logging (`2024-05-01 12:00:00,123 - name - ERROR - `, `ERROR:root:`, transformers'
  `[INFO|trainer.py:2078] 2024-05-01 12:00:00,123 >> `, loguru), ISO timestamps (tracing,
  `docker logs -t`, CI runners), `[2024-05-01 12:00:00,123] [INFO] [x.py:1:f] ` (DeepSpeed),
  glog / c10 (`W0612 10:14:03.118000 140231 api.py:897] `, `[W501 12:00:00.123 x.cpp:1] `),
  syslog / journald (`May 01 12:00:00 host ollama[123]: `), `kubectl logs --prefix`.
  These formats are specific enough to strip wherever they appear.
- Looser prefixes are stripped only where they repeat on most of the lines around them (more
  than half of the non-blank lines within 10 lines either side), so a numbered list or a
  "name: value" line is left alone: srun `--label` (`0: `, ` 3: `), pdsh / DeepSpeed host names
  (`worker-1: `), docker compose (`vllm-1  | `), Markdown quote markers (`> `) and pytest's `E   `.
- Markdown wrappers are unwrapped: code-fence lines (```` ``` ````, `~~~`, with or without an
  info string) and `<details>` / `<summary>` lines are dropped, a fence glued to a line's start
  or end is cut off.
- A ComfyUI error report ("# ComfyUI Error Report", "- **Exception Message:** ...",
  "## Stack Trace") is put back in the order Python prints a traceback: the stack trace under a
  "Traceback (most recent call last):" line (numbered as the "## Stack Trace" line), then
  "<Exception Type>: <Exception Message>" (numbered as the message line).

Mid-line starts and "..." elisions are kept as they are. Every pattern is anchored at the
line's start (or the end of the prefix before it) with bounded quantifiers, at most four
prefixes are stripped from a line, and no line is read past its first MAX_LINE_CHARS
characters: the work is linear in the size of the paste.
"""

from __future__ import annotations

import re

MAX_LINE_CHARS = 20_000  # longer lines are cut: only their first 20,000 characters are read
MAX_PREFIXES = 4  # nested prefixes stripped from one line at most
MAJORITY_WINDOW = 10  # lines either side that vote on a loose prefix
MAX_COMFY_LINES = 5_000  # how far a ComfyUI report's sections are followed

_A = re.ASCII

# ANSI escape sequences: CSI (colours, cursor), OSC (titles, hyperlinks), and two-byte escapes.
ANSI_RE = re.compile(
    r"\x1b(?:\[[0-9;:?<=>!]{0,40}[ -/]{0,4}[@-~]|\][^\x07\x1b]{0,2000}(?:\x07|\x1b\\)?|[@-Z\\-_])"
)

_LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE|NOTICE)"
# 2024-05-01 12:00:00,123 / 2024-05-01T12:00:00.123456789Z / 05/01/2024 12:00:00 (HF examples)
_TS = (
    r"(?:\d{4}-\d\d-\d\d[ T]|\d\d/\d\d/\d{4}[ \t])\d\d:\d\d:\d\d(?:[.,]\d{1,9})?"
    r"(?:Z|[+-]\d\d:?\d\d)?"
)
_SEP = r"[ \t]{1,4}[-|][ \t]"  # one space after: what follows may be indented code

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_LEVEL_INITIALS = "DIWECFTN"

# One prefix each, in the order they are tried, with the characters a line may start with for
# it to apply (a line is only tried against the families its first character allows).
_FAMILIES: tuple[tuple[str, str, str], ...] = (
    # ---- launchers: say which process printed the line (a tag, kept for interleaved ranks)
    ("rank", r"\[[A-Za-z_]{0,24}\d{1,6}\]:[ \t]?", "["),  # torchrun [rank3]: [default0]: [3]:
    ("mpi", r"\[\d{1,6},\d{1,6}\]<std(?:out|err)>:[ \t]?", "["),  # mpirun --tag-output
    (
        "worker",  # vLLM "(VllmWorker rank=1 pid=572) ", "(EngineCore_0 pid=9) ", Ray "(pid=1, ip=x) "
        r"\((?:[\w.:-]{1,64}[ \t])?(?:pid|rank)=\d{1,10}(?:[,\s][^()\n]{0,80})?\)[ \t]?",
        "(",
    ),
    ("pod", r"\[pod/[^\]\n]{1,200}\][ \t]", "["),  # kubectl logs --prefix
    # a process number in brackets, only where a time stamp or a rank tag follows
    # ("[1] 2019-06-13 01:17:08", "[80746] [rank0]:")
    (
        "procno",
        r"\[\d{1,7}\][ \t](?=\d{4}-\d\d-\d\d[ T]\d\d:\d\d|\[(?:rank|default)?\d{1,6}\]:)",
        "[",
    ),
    # ---- record headers: time, level, source
    (
        "vllm",  # "INFO 01-15 10:22:11 [x.py:12] ", older "INFO 09-12 16:40:02 x.py:1008] "
        _LEVEL + r"[ \t]{1,4}\d\d-\d\d[ \t]\d\d:\d\d:\d\d(?:\.\d{1,6})?[ \t]"
        r"(?:\[[^\]\n]{1,100}\][ \t]?|[\w.-]{1,80}:\d{1,6}\][ \t]?)",
        _LEVEL_INITIALS,
    ),
    (
        "tflog",  # TensorFlow / XLA C++ logging "2019-01-08 19:06:11.303639: E path/x.cc:601] "
        _TS + r":[ \t][IWEF][ \t][^\]\n]{1,200}\][ \t]?",
        _DIGITS,
    ),
    (
        "pylog",  # "%(asctime)s - %(name)s - %(levelname)s - ", loguru "ts | LEVEL | m:f:1 - "
        _TS + r"(?:" + _SEP + r"(?:" + _LEVEL + r"[ \t]{0,8}|[\w.<>:-]{1,80})"
        r"(?=" + _SEP + r")){0,3}" + _SEP,
        _DIGITS,
    ),
    (
        "stamp",  # ISO (tracing "ts  INFO target: ", docker logs -t, CI runners,
        # "ts LEVEL pid [file.py:64] ")
        _TS + r"[ \t](?:[ \t]?" + _LEVEL + r"[ \t]{1,4}(?:[\w:.-]{1,80}:[ \t]|"
        r"\d{1,10}[ \t]\[[\w.-]{1,80}:\d{1,6}\][ \t]?)?)?",
        _DIGITS,
    ),
    (
        "bracket",  # DeepSpeed "[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] "
        r"\[" + _TS + r"\][ \t]?(?:\[" + _LEVEL + r"\][ \t]?)?(?:\[[^\]\n]{1,120}\][ \t]?)?",
        "[",
    ),
    (
        "hf",  # transformers "[INFO|trainer.py:2078] 2024-05-01 12:00:00,123 >> "
        r"\[" + _LEVEL + r"\|[\w.-]{1,80}:\d{1,6}\][ \t]{1,4}" + _TS + r"[ \t]{1,4}>>[ \t]?",
        "[",
    ),
    ("basic", _LEVEL + r":[\w.<>-]{1,80}:", _LEVEL_INITIALS),  # logging.basicConfig ERROR:root:
    (
        "padded",  # uvicorn / loguru "LEVEL:" padded to 10 columns ("ERROR:    ", "INFO:     ")
        r"(?:INFO:[ ]{5}|ERROR:[ ]{4}|DEBUG:[ ]{4}|WARNING:[ ]{2}|CRITICAL:[ ])",
        _LEVEL_INITIALS,
    ),
    (
        "level",  # "[info] ", "[ERROR] " (Elixir Logger, many CLIs), "[INFO 2020-05-26 20:08:23] "
        r"\[(?:" + _LEVEL + r"|debug|info|notice|warning|warn|error|critical|fatal|trace)"
        r"(?:[ \t]" + _TS + r")?\][ \t]",
        "[",
    ),
    (
        "glog",  # torch.distributed.elastic, absl "W0612 10:14:03.118000 140231 api.py:897] "
        r"[IWEF]\d{4}[ \t]\d\d:\d\d:\d\d\.\d{1,9}[ \t]{1,4}\d{1,10}[ \t][^\]\n]{1,200}\][ \t]?",
        "IWEF",
    ),
    (
        # "[W501 12:00:00.123 ProcessGroupNCCL.cpp:4115] " (month not zero-padded), older
        # "[E ProcessGroupNCCL.cpp:737] "
        "c10",
        r"\[[IWEF](?:\d{3,4}[ \t]\d\d:\d\d:\d\d\.\d{1,9})?[ \t][\w./-]{1,120}:\d{1,6}\][ \t]?",
        "[",
    ),
    (
        "syslog",  # syslog / journalctl "May 01 12:00:00 host ollama[1234]: "
        r"[A-Z][a-z]{2}[ \t]{1,2}\d{1,2}[ \t]\d\d:\d\d:\d\d[ \t][\w.-]{1,64}+[ \t]"
        r"[\w.@/-]{1,64}+(?:\[\d{1,10}\])?:[ \t]",
        _UPPER,
    ),
    # ---- loose: stripped only where most lines around carry the same family
    ("srun", r"[ \t]{0,6}\d{1,6}:[ \t]", " \t" + _DIGITS),  # srun --label, '${rank}: '
    (
        "host",  # pdsh / DeepSpeed multi-node "worker-1: ", "10.0.0.7: "
        r"(?:[A-Za-z][A-Za-z0-9-]{0,62}+(?:\.[A-Za-z0-9-]{1,62}+){0,4}+"
        r"|\d{1,3}(?:\.\d{1,3}){3}):[ \t]",
        _UPPER + _LOWER + _DIGITS,
    ),
    (
        "compose",  # docker compose "vllm-1  | "
        r"[\w.-]{1,64}+[ \t]{1,20}+\|(?:[ \t]|$)",
        _UPPER + _LOWER + _DIGITS + "_.-",
    ),
    ("quote", r">(?:[ \t]|$)", ">"),  # Markdown quote marker
    ("pytest", r"E[ \t]{2,8}(?=\S)", "E"),  # pytest "E       torch.OutOfMemoryError"
)


def _alternation(names: set[str] | None = None) -> re.Pattern[str]:
    return re.compile(
        "|".join(f"(?P<{n}>{p})" for n, p, _ in _FAMILIES if names is None or n in names), _A
    )


# Named groups are families; inner groups never capture (m.lastgroup names the family).
_PREFIX_RE = _alternation()
_BY_FIRST: dict[str, re.Pattern[str]] = {}
for _c in {c for _n, _p, firsts in _FAMILIES for c in firsts}:
    _BY_FIRST[_c] = _alternation({n for n, _p, firsts in _FAMILIES if _c in firsts})
del _c
_LOOSE = ("srun", "host", "compose", "quote", "pytest")
_LAUNCHERS = ("rank", "mpi", "worker", "pod", "procno", "srun", "host", "compose")
_DIGIT = re.compile(r"\d")

_MARKDOWN_HINTS = ("```", "~~~", "<details", "<summary")
_COMFY_HEAD = "# ComfyUI Error Report"
_FENCE = re.compile(r"[ \t]{0,3}(?:`{3,}|~{3,})[ \t]*[\w+#.-]{0,40}[ \t]*$", _A)
_FENCE_HEAD = re.compile(r"[ \t]{0,3}`{3,}(?=\S)", _A)
_HTML_WRAP = re.compile(r"[ \t]{0,3}</?(?:details|summary)\b[^\n]{0,300}$", re.IGNORECASE | _A)


def clean_line(raw: str) -> str:
    """One line as a terminal shows it: cut to MAX_LINE_CHARS, ANSI codes and CR removed
    (after a progress bar's carriage returns, the last non-empty segment is what shows)."""
    line = raw[:MAX_LINE_CHARS]
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if "\r" in line:
        line = line.rstrip("\r")
        if "\r" in line:
            segments = [s for s in line.split("\r") if s.strip()]
            line = segments[-1] if segments else ""
    return line


def _chain(line: str, m: re.Match[str] | None = None) -> tuple[int, str | None, int]:
    """(end of the prefixes, the first loose family or None, where that family starts).
    `m`: the first prefix's match, when the caller has it."""
    pos, loose, loose_at = 0, None, 0
    for _ in range(MAX_PREFIXES):
        if m is None:
            rx = _BY_FIRST.get(line[pos : pos + 1])
            m = rx.match(line, pos) if rx is not None else None
        if m is None or m.end() == pos:
            break
        family = m.lastgroup
        if family == "host" and not _DIGIT.search(m.group(0)):
            break  # "Error: ", "loss: ": a host name that carries no digit is not told apart
        if family in _LOOSE and loose is None:
            loose, loose_at = family, pos
        pos = m.end()
        m = None
    return pos, loose, loose_at


def strip_prefix(line: str) -> str:
    """Remove launcher and logger prefixes from one line (loose ones too: a single line has
    no neighbours to vote)."""
    return line[_chain(line)[0] :]


def _tag_of(prefix: str) -> str | None:
    """The launcher part of a stripped prefix ("[rank1]:", "(VllmWorker rank=1 pid=7)",
    "0:", "worker-1:"), without timestamps; None when it has none."""
    parts = []
    pos = 0
    for _ in range(MAX_PREFIXES):
        m = _PREFIX_RE.match(prefix, pos)
        if m is None or m.end() == pos:
            break
        if m.lastgroup in _LAUNCHERS:
            parts.append(m.group(0).strip())
        pos = m.end()
    return " ".join(parts) or None


def _has_record_header(prefix: str) -> bool:
    """Whether a stripped prefix holds more than launcher tags (a time stamp, a level): the
    line starts a record of its own, it does not continue the one above."""
    pos = 0
    for _ in range(MAX_PREFIXES):
        m = _PREFIX_RE.match(prefix, pos)
        if m is None or m.end() == pos:
            break
        if m.lastgroup not in _LAUNCHERS:
            return True
        pos = m.end()
    return False


def line_tag(raw: str) -> str | None:
    """The rank / worker tag of a raw line ("[rank1]:", "(VllmWorker rank=1 pid=7)"), or None."""
    line = clean_line(raw[:400])
    return _tag_of(line[: _chain(line)[0]])


class CleanLog:
    """The cleaned lines of a paste. `lines[i]` came from line `line_nos[i]` (1-based) of the
    original; `prefixes[i]` is what was stripped from its start ("" when nothing was)."""

    __slots__ = ("_tags", "line_nos", "lines", "prefixes")

    def __init__(self, lines: list[str], line_nos: list[int], prefixes: list[str]) -> None:
        self.lines = lines
        self.line_nos = line_nos
        self.prefixes = prefixes
        self._tags: dict[int, str | None] = {}

    def __len__(self) -> int:
        return len(self.lines)

    def tag(self, i: int) -> str | None:
        """Which rank / worker / host printed line i (None: not said)."""
        p = self.prefixes[i]
        if not p:
            return None
        t = self._tags.get(i, "")
        if t == "":
            t = self._tags[i] = _tag_of(p)
        return t

    def starts_record(self, i: int) -> bool:
        """Whether line i's prefix carries a record header (time stamp, level) beyond the
        launcher's tag: a logger record of its own."""
        p = self.prefixes[i]
        return bool(p) and _has_record_header(p)

    def line_no(self, i: int) -> int:
        """The 1-based original line number of cleaned line i."""
        return self.line_nos[i]

    def index_of(self, line_no: int) -> int | None:
        """The cleaned line that came from original line `line_no` (None when it was dropped)."""
        nos = self.line_nos
        k = min(max(line_no - 1, 0), len(nos) - 1)
        if k >= 0 and nos[k] == line_no:
            return k
        for j, no in enumerate(nos):
            if no == line_no:
                return j
        return None


def _split(text: str) -> list[str]:
    if "\r" in text and "\n" not in text:
        text = text.replace("\r", "\n")  # old Mac line endings
    return text.split("\n")


def _has_markdown(text: str) -> bool:
    return any(h in text for h in _MARKDOWN_HINTS)


def clean_log(text: str) -> CleanLog:
    """Clean every line of `text` (see the module docstring)."""
    return clean_lines(
        _split(text),
        ansi="\x1b" in text,
        cr="\r" in text,
        markdown=_has_markdown(text),
        comfy=_COMFY_HEAD in text,
    )


def clean_lines(
    raw: list[str],
    *,
    ansi: bool = True,
    cr: bool = True,
    markdown: bool | None = None,
    comfy: bool | None = None,
) -> CleanLog:
    """Clean already split lines. The flags say whether any line may hold an ESC, a CR, a
    Markdown wrapper, a ComfyUI report (None: look)."""
    n = len(raw)
    lines: list[str] = []
    prefixes: list[str] = []
    loose: list[tuple[int, str, int, int]] = []  # (index, family, loose start, prefix end)
    by_first = _BY_FIRST.get
    for i in range(n):
        line = raw[i]
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS]
        if (ansi and "\x1b" in line) or (cr and "\r" in line):
            line = clean_line(line)
        rx = by_first(line[:1])
        m = rx.match(line) if rx is not None else None
        if m is None:
            lines.append(line)
            prefixes.append("")
            continue
        end, family, at = _chain(line, m)
        if family is None:
            lines.append(line[end:])
            prefixes.append(line[:end])
        else:
            loose.append((i, family, at, end))
            lines.append(line[at:])  # loose part kept until the vote below
            prefixes.append(line[:at])
    if loose:
        _vote(lines, prefixes, loose)
    log = CleanLog(lines, list(range(1, n + 1)), prefixes)
    if markdown is None:
        markdown = any(_has_markdown(s) for s in lines)
    if markdown:
        log = _unwrap_markdown(log)
    if comfy is None:
        comfy = any(_COMFY_HEAD in s for s in lines)
    if comfy:
        log = _reorder_comfy(log)
    return log


def _vote(lines: list[str], prefixes: list[str], loose: list[tuple[int, str, int, int]]) -> None:
    """Strip each loose prefix where more than half of the non-blank lines within
    MAJORITY_WINDOW lines either side carry the same family (prefix sums: linear)."""
    n = len(lines)
    nonblank = [0] * (n + 1)
    for i in range(n):
        nonblank[i + 1] = nonblank[i] + (1 if (lines[i].strip() or prefixes[i].strip()) else 0)
    by_family: dict[str, list[int]] = {}
    for i, family, _at, _end in loose:
        counts = by_family.get(family)
        if counts is None:
            counts = by_family[family] = [0] * (n + 1)
        counts[i + 1] = 1
    for counts in by_family.values():
        for i in range(n):
            counts[i + 1] += counts[i]
    w = MAJORITY_WINDOW
    for i, family, at, end in loose:
        lo, hi = max(0, i - w), min(n, i + w + 1)
        mine = by_family[family][hi] - by_family[family][lo]
        if 2 * mine > nonblank[hi] - nonblank[lo]:
            full = prefixes[i] + lines[i]
            prefixes[i] = full[:end]
            lines[i] = full[end:]


def _unwrap_markdown(log: CleanLog) -> CleanLog:
    lines, nos, prefixes = [], [], []
    for s, no, p in zip(log.lines, log.line_nos, log.prefixes, strict=True):
        if "```" in s or "~~~" in s:
            if _FENCE.match(s):
                continue  # a fence line: dropped
            m = _FENCE_HEAD.match(s)
            if m:
                s = s[m.end() :]  # "```Traceback (most recent call last):"
            if s.rstrip().endswith("```"):
                s = s.rstrip()[:-3].rstrip("`")  # "...environment-variables)```"
        elif ("<details" in s or "<summary" in s or "</" in s) and _HTML_WRAP.match(s):
            continue
        lines.append(s)
        nos.append(no)
        prefixes.append(p)
    return CleanLog(lines, nos, prefixes)


_COMFY_ITEM = re.compile(r"- \*\*([A-Za-z][A-Za-z ]{0,40}):\*\* ?(.*)", _A)
# What ComfyUI's execution.py appends to the message of an out-of-memory exception.
_COMFY_TIPS = (
    "This error means you ran out of memory on your GPU.",
    "TIPS: If the workflow worked before you might have accidentally set the batch_size",
)

_Row = tuple[str, int, str]  # cleaned text, original line number, stripped prefix


def _reorder_comfy(log: CleanLog) -> CleanLog:
    """Each ComfyUI error report: frames first, under a Traceback line, then the exception."""
    src: list[_Row] = list(zip(log.lines, log.line_nos, log.prefixes, strict=True))
    out: list[_Row] = []
    i, n = 0, len(src)
    while i < n:
        if not src[i][0].startswith(_COMFY_HEAD):
            out.append(src[i])
            i += 1
            continue
        out.append((_COMFY_HEAD[2:], src[i][1], src[i][2]))
        i += 1
        j = _comfy_report(src, i, out)
        i = max(j, i)
    return CleanLog([o[0] for o in out], [o[1] for o in out], [o[2] for o in out])


def _comfy_report(src: list[_Row], i: int, out: list[_Row]) -> int:
    """Append the report that starts at src[i] (after its title) to `out`, reordered; return
    the index of the first row after its stack trace."""
    n = len(src)
    limit = min(n, i + MAX_COMFY_LINES)
    type_at = msg_at = trace_at = None
    j = i
    while j < limit:  # "## Error Details", up to "## Stack Trace"
        t = src[j][0]
        if t.startswith("## Stack Trace"):
            trace_at = j
            break
        if t.startswith(_COMFY_HEAD) or (t.startswith("## ") and msg_at is not None):
            break
        m = _COMFY_ITEM.match(t)
        if m and msg_at is None:
            if m.group(1) == "Exception Type":
                type_at = j
            elif m.group(1) == "Exception Message":
                msg_at = j
        j += 1
    if msg_at is None or trace_at is None:
        out.extend(_unbullet(src[k]) for k in range(i, j))
        return j
    end = trace_at + 1
    while end < limit and not src[end][0].startswith(("## ", _COMFY_HEAD)):
        end += 1
    exc_type = ""
    if type_at is not None:
        m = _COMFY_ITEM.match(src[type_at][0])
        exc_type = m.group(2).strip() if m else ""
        if exc_type in ("", "N/A"):
            exc_type = ""
    for k in range(i, msg_at):  # the items before the message, the folded type left out
        if k != type_at or not exc_type:
            out.append(_unbullet(src[k]))
    out.append(("Traceback (most recent call last):", src[trace_at][1], src[trace_at][2]))
    out.extend(src[trace_at + 1 : end])
    m = _COMFY_ITEM.match(src[msg_at][0])
    text = m.group(2) if m else src[msg_at][0]
    out.append((f"{exc_type}: {text}" if exc_type else text, src[msg_at][1], src[msg_at][2]))
    rest = src[msg_at + 1 : trace_at]
    if any(r[0].startswith(_COMFY_TIPS[0]) for r in rest):
        rest = [r for r in rest if r[0].strip() and not r[0].startswith(_COMFY_TIPS)]
    out.extend(rest)
    return end


def _unbullet(item: _Row) -> _Row:
    s, no, p = item
    m = _COMFY_ITEM.match(s)
    if m:
        return (f"{m.group(1)}: {m.group(2)}", no, p)
    if s.startswith("## "):
        return (s[3:], no, p)
    return item


__all__ = [
    "ANSI_RE",
    "MAX_LINE_CHARS",
    "CleanLog",
    "clean_line",
    "clean_lines",
    "clean_log",
    "line_tag",
    "strip_prefix",
]
