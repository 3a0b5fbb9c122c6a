"""Read what a user copies from a terminal after an out-of-memory error, and return the facts.

`read_log(text)` finds every out-of-memory event in the text (PyTorch CUDA/ROCm/XPU/MPS
allocator errors, CUDA/cuBLAS error codes, vLLM and text-generation-inference KV-cache and
warm-up errors, accelerate offloading, DeepSpeed, llama.cpp and ollama), reads the figures
each one carries into bytes (`units.parse_bytes`, the text as written kept beside it), and says
in which phase the run failed (`phase.localise_phase`).

Robust to what pastes look like: a whole traceback or a log tail, ANSI colours, CRLF, progress
bars, launcher and logger prefixes ("[rank0]: ", vLLM's "INFO 01-15 10:22:11 [x.py:1] "),
Markdown and ComfyUI wrappers (all cleaned first by `log_prefixes.clean_log`, which keeps each
line's original number: events and verdicts give those), messages wrapped by the terminal (cut
mid-word at a fixed width) or by hard newlines (cut at spaces), several errors in one paste. Linear in the size of the text: candidate lines are found with plain
substring searches, and only those lines (and their few continuation lines) meet a regex; every
quantifier is bounded and no line is read past its first 20,000 characters.

Units: PyTorch's MPS allocator (before it switched to GiB) and vLLM write "GB"/"MB" for powers
of two (they divide by 2^30); for those two the figures are read as GiB/MiB. Everywhere else
"GB" is 10^9 bytes, as `parse_bytes` reads it.
"""

from __future__ import annotations

import re
from dataclasses import replace

from vramtui.triage.log_prefixes import CleanLog, clean_log, line_tag
from vramtui.triage.not_oom import HOST_RAM_ALLOC, host_error_beside_retries, near_miss
from vramtui.triage.oom_event import FAILURE_KINDS, FRAMEWORKS, KINDS, OomEvent, TriageReading
from vramtui.triage.oom_forms import (
    ANCHORS,
    ANY_KEY,
    BLOCK_LIMIT,
    FIGURE_KEYS,
    FORMS,
    LISTED_FIGURE_KEYS,
    Facts,
    Form,
    ascii_re,
    read_tgi_span,
)
from vramtui.triage.oom_prose import reported_oom
from vramtui.triage.phase import PhaseVerdict, collect_frames, phase_of

_A = re.ASCII
MAX_CONTINUATION_LINES = 40
MAX_MESSAGE_CHARS = 8_000

# A line that begins something new: a continuation of a wrapped message never looks like this.
_STRUCTURAL = ascii_re(
    r"(?:Traceback \(most recent|File \"|During handling of|The above exception|\[rank\d|"
    r"\[default\d|\(\w[\w.:-]{0,60} (?:pid|rank)=\d|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d |"
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\[\d{4}-\d\d-\d\d|[A-Za-z_][\w.]{0,80}(?:Error|Exception|Warning):\s|"
    r"Exception raised from|frame #\d|CUDA kernel errors|For debugging consider|Compile with|"
    r"\$ |>>> |\w{1,40}: (?:loaded|llama_|ggml_|error)|[a-z_]{2,40}_\w{1,40}: )"
)
_CODE_LINE = ascii_re(
    r"\s*(?:if|elif|while|raise|except|assert|return|print|logger|logging|log|"
    r"warnings|yield|def|#(?!\d)|//|\*|-{1,8}>\s?\d)\b"
)
_EXC_PREFIX = ascii_re(r"([A-Za-z_][\w.]{0,100}(?:Error|Exception)):\s{0,4}$")
_EXCEPTION_START = ascii_re(
    r"\s{0,16}(?:[A-Za-z_]\w{0,40}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception):\s"
)
_PY_HEADER = ascii_re(r'\s{0,16}File "[^"\n]{1,1000}", line \d{1,9}, in ')
_CONTINUATION_HINT = ascii_re(
    r"Tried to allocate|total capacity|reserved by PyTorch|is allocated by "
    r"PyTorch|allocated memory|reserved in total|memory in use|already "
    r"allocated|max seq len|KV cache|cache blocks|allowed: |other allocations"
)
_VLLM_TAG = ascii_re(r"\((?:VllmWorker|EngineCore|RayWorkerWrapper|APIServer|Worker)\w{0,40}\s")


# ------------------------------------------------------------------------------ reading


class _Reader:
    """Reads the cleaned lines of a paste; line indices here are indices into `log.lines`."""

    def __init__(self, log: CleanLog) -> None:
        self.log = log
        self.lines = log.lines
        self.n = len(self.lines)

    def clean(self, i: int) -> str:
        return self.lines[i]

    norm = clean  # prefixes were stripped by clean_log: one cleaned form

    def is_code_line(self, i: int) -> bool:
        """A source line: a statement ("raise", "if"...), or the line under a frame header,
        unless that line is an exception ("RuntimeError: ..."): a frame whose source Python
        cannot show (File "<stdin>"), or interleaved output, has none."""
        text = self.norm(i)
        if _CODE_LINE.match(text):
            return True
        # Under a frame header comes its source line, except where Python has none to show
        # (<stdin>, a frozen or missing file): then the exception line follows the header.
        return (
            i > 0
            and bool(_PY_HEADER.match(self.norm(i - 1)))
            and not _EXCEPTION_START.match(self.norm(i))
        )

    # -- one message starting at line i, column col
    def gather(self, i: int, col: int, form: Form) -> tuple[str, int, Facts]:
        first = self.clean(i)
        prefix = self.log.prefixes[i]
        pieces = [first[col:]]
        widths = [len(prefix) + len(first)]
        ended = form.end is None or bool(form.end.search(pieces[0]))
        if not ended:
            size = len(pieces[0])
            blanks = 0
            for j in range(i + 1, min(self.n, i + 1 + MAX_CONTINUATION_LINES)):
                cont = self.clean(j)
                if not cont.strip():
                    if blanks >= form.blank_lines:
                        break
                    blanks += 1
                    pieces.append("")
                    widths.append(0)
                    continue
                pj = self.log.prefixes[j]
                if (
                    pj
                    and pj != prefix
                    and not prefix.startswith(pj)
                    and (self.log.tag(j) != self.log.tag(i) or self.log.starts_record(j))
                ):
                    # another rank's line, or another record (a new time stamp); a prefix that
                    # begins the first line's ("svc | " under "svc | 2025-03-14 11:05:29 ") is
                    # the same record: the logger stamps only a record's first line
                    break
                if _STRUCTURAL.match(cont.lstrip()) or self.is_code_line(j):
                    break
                hit = self.match_start(self.norm(j))
                if hit is not None and form.name not in hit[0].continues:
                    break  # the next line starts a message of its own (a repeated OOM line)
                pieces.append(cont)
                widths.append(len(pj) + len(cont))
                size += len(cont)
                tail = pieces[-2][-80:]
                if form.end.search(tail + cont) or form.end.search(
                    tail.rstrip() + " " + cont.strip()
                ):
                    ended = True
                    break
                if size > MAX_MESSAGE_CHARS:
                    break
        terminal_wrap = (
            len(widths) > 1 and widths[0] >= 40 and all(w == widths[0] for w in widths[:-1])
        )
        if ended:
            text, facts = self._best_join(pieces, form, terminal_wrap)
            return text, i + len(pieces) - 1, facts
        # No end marker: keep the shortest run of lines that carries the most figures.
        best: tuple[int, int, str, Facts] | None = None
        for k in range(1, len(pieces) + 1):
            text, facts = self._best_join(pieces[:k], form, terminal_wrap)
            score = len(facts.figures) + len(facts.tokens)
            if best is None or score > best[0]:
                best = (score, k, text, facts)
        assert best is not None
        return best[2], i + best[1] - 1, best[3]

    def _best_join(self, pieces: list[str], form: Form, terminal_wrap: bool) -> tuple[str, Facts]:
        if len(pieces) == 1:
            text = pieces[0]
            facts = Facts(form.binary_si)
            form.extract(text, facts)
            return text, facts
        joined_cut = "".join(pieces)  # a terminal's hard wrap cuts anywhere, even mid-number
        joined_space = " ".join([pieces[0].rstrip()] + [p.strip() for p in pieces[1:]])
        f_cut, f_space = Facts(form.binary_si), Facts(form.binary_si)
        form.extract(joined_cut, f_cut)
        form.extract(joined_space, f_space)
        s_cut = len(f_cut.figures) + len(f_cut.tokens)
        s_space = len(f_space.figures) + len(f_space.tokens)
        if s_cut > s_space or (s_cut == s_space and terminal_wrap):
            return joined_cut, f_cut
        return joined_space, f_space

    def match_start(self, text: str, limit: int | None = None) -> tuple[Form, re.Match[str]] | None:
        if not ANY_KEY.search(text):
            return None
        for form in FORMS:
            if form.keys and not any(k in text for k in form.keys):
                continue
            m = form.start.search(text)
            if m is None or (limit is not None and m.start() >= limit):
                continue
            if form.needs is not None and not form.needs.search(text):
                continue
            return form, m
        return None

    def event_at(self, i: int, consumed_until: int = -1) -> tuple[OomEvent, int] | None:
        """The event whose message starts on line i (or up to 3 lines above, when the terminal
        cut its first words), and the last line it spans; None when it would start on a line
        up to `consumed_until`, already read as part of an earlier message (not gathered again:
        overlapping windows are never re-joined)."""
        text = self.norm(i)
        hit = self.match_start(text)
        start_line = i
        if hit is None:
            if not _CONTINUATION_HINT.search(text):
                return None
            for j in range(i - 1, max(-1, i - 4), -1):
                if not self.clean(j).strip() or len(self.clean(j)) > 1_000:
                    break  # a wrapped message's lines are short
                window = [self.norm(j)] + [self.clean(k) for k in range(j + 1, i + 1)]
                for joined in (
                    "".join(window),
                    " ".join([window[0].rstrip()] + [w.strip() for w in window[1:]]),
                ):
                    hit = self.match_start(joined, limit=len(window[0].rstrip()))
                    if hit:
                        break
                if hit:
                    start_line = j
                    break
            if hit is None:
                return None
        form, m = hit
        if start_line <= consumed_until or self.is_code_line(start_line):
            return None
        col = m.start()
        if form.exception_prefix:
            before = self.norm(start_line)[max(0, col - 120) : col]
            pm = _EXC_PREFIX.search(before)
            if pm:
                col -= len(before) - pm.start()
        if form.end is None:  # a one-line message: the whole line, prefixes removed
            text_out = self.norm(start_line).strip()
            facts = Facts(form.binary_si)
            form.extract(text_out, facts)
            last = start_line
        else:
            text_out, last, facts = self.gather(start_line, col, form)
        # The logger's prefix can name the framework ("W tensorflow/.../bfc_allocator.cc:479] ")
        framework = (
            form.framework
            if isinstance(form.framework, str)
            else form.framework(m, f"{self.log.prefixes[start_line]} {text_out}")
        )
        if form.tail is not None:
            for k in range(last + 1, min(self.n, last + 1 + form.tail_lines)):
                form.tail(self.norm(k)[:2_000], facts)
        kind = form.kind
        if kind == "auto":
            low = text_out.lower()
            kind = "kv_cache" if ("kv cache" in low or "kv_cache" in low) else "allocation"
        elif kind == "startup" and facts.figures.get("kv_cache_bytes", 0) < 0:
            kind = "kv_cache"  # a negative KV-cache budget: the engine cannot start
        if form.name == "cuda_error":
            # llama.cpp: "CUDA error: out of memory" then "  current device: 0, in function ggml_..."
            for k in range(start_line + 1, min(self.n, start_line + 4)):
                nxt = self.norm(k)
                dm = re.search(r"current device: (\d{1,3})", nxt, _A)
                if dm:
                    facts.set_gpu(dm.group(1))
                    if "ggml" in nxt or "llama" in nxt:
                        framework = "llama.cpp"
                    break
        if form.name == "tgi":
            read_tgi_span(self.clean(start_line), facts)
        message = re.sub(r"\s{2,}", " ", text_out).strip()[:MAX_MESSAGE_CHARS]
        event = OomEvent(
            framework=framework,
            kind=kind,
            message=message,
            line_no=start_line + 1,
            gpu_index=facts.gpu,
            figures={k: facts.figures[k] for k in FIGURE_KEYS if k in facts.figures},
            as_written={k: facts.written[k] for k in FIGURE_KEYS if k in facts.written},
            tokens=dict(facts.tokens),
            figure_lists={k: tuple(facts.lists[k]) for k in LISTED_FIGURE_KEYS if k in facts.lists},
            lists_as_written={
                k: tuple(facts.lists_written[k]) for k in LISTED_FIGURE_KEYS if k in facts.lists
            },
        )
        return event, last


def _candidate_lines(text: str) -> list[int]:
    """0-based indices of lines holding an anchor substring, in order (linear, C-speed finds)."""
    starts: set[int] = set()
    for anchor in ANCHORS:
        pos = text.find(anchor)
        while pos != -1:
            line_start = text.rfind("\n", 0, pos) + 1
            starts.add(line_start)
            nl = text.find("\n", pos)
            if nl == -1:
                break
            pos = text.find(anchor, nl)
    out: list[int] = []
    line_no, prev = 0, 0
    for s in sorted(starts):
        line_no += text.count("\n", prev, s)
        prev = s
        out.append(line_no)
    return out


def _merge(a: OomEvent, b: OomEvent, kind: str | None = None) -> OomEvent:
    figures = dict(a.figures)
    written = dict(a.as_written)
    for k, v in b.figures.items():
        if k not in figures:
            figures[k] = v
            written[k] = b.as_written.get(k, "")
    tokens = dict(a.tokens)
    for k, v in b.tokens.items():
        tokens.setdefault(k, v)
    lists, lists_written = dict(a.figure_lists), dict(a.lists_as_written)
    if "other_processes_total_bytes" not in a.figures:  # lists go with the sum they add up to
        for k, v in b.figure_lists.items():
            lists.setdefault(k, v)
            lists_written.setdefault(k, b.lists_as_written.get(k, ()))
    message = a.message if b.message in a.message else f"{a.message} | {b.message}"
    return OomEvent(
        framework=a.framework,
        kind=kind or a.kind,
        message=message[:MAX_MESSAGE_CHARS],
        line_no=a.line_no,
        gpu_index=a.gpu_index if a.gpu_index is not None else b.gpu_index,
        figures={k: figures[k] for k in FIGURE_KEYS if k in figures},
        as_written={k: written[k] for k in FIGURE_KEYS if k in written},
        tokens=tokens,
        figure_lists=lists,
        lists_as_written=lists_written,
    )


_ALLOCATOR_FRAMEWORKS = ("pytorch", "rocm", "xpu", "mps", "cuda", "cublas")


def _with_framework(ev: OomEvent, framework: str) -> OomEvent:
    return OomEvent(
        framework=framework,
        kind=ev.kind,
        message=ev.message,
        line_no=ev.line_no,
        gpu_index=ev.gpu_index,
        figures=ev.figures,
        as_written=ev.as_written,
        tokens=ev.tokens,
        figure_lists=ev.figure_lists,
        lists_as_written=ev.lists_as_written,
    )


# CUDA / HIP runtime error names of a failed device allocation
_DEVICE_ERROR_NAMES = ("cudaErrorMemoryAllocation", "hipErrorOutOfMemory")


def _postprocess(
    events: list[tuple[OomEvent, int]], reader: _Reader, ollama: bool
) -> list[OomEvent]:
    out: list[OomEvent] = []
    ends: list[int] = []  # last line (0-based) of each kept event
    prev_end = -1
    for ev, last in events:
        if ev.framework == "llama.cpp" and ollama:
            ev = _with_framework(ev, "ollama")
        if ev.framework in _ALLOCATOR_FRAMEWORKS:
            idx = ev.line_no - 1
            frames = collect_frames(reader.log, idx, prev_end + 1)
            files = " ".join(fr.file.lower() for fr in frames)
            if "deepspeed/" in files:
                ev = _with_framework(ev, "deepspeed")
            elif "/vllm/" in files or _VLLM_TAG.search(reader.log.prefixes[idx]):
                ev = _with_framework(ev, "vllm")
            elif "text_generation_server" in files:
                ev = _with_framework(ev, "tgi")
        if out:
            p = out[-1]
            gap = ev.line_no - 1 - ends[-1]
            # vLLM start-up lines: one event per start-up block
            if (
                ev.kind == "startup"
                and p.kind == "startup"
                and p.framework == ev.framework
                and (
                    gap <= 2
                    or (
                        gap <= 200
                        and not (set(p.figures) & set(ev.figures))
                        and not (set(p.tokens) & set(ev.tokens))
                    )
                )
            ):
                out[-1] = _merge(p, ev)
                ends[-1] = last
                prev_end = last
                continue
            # llama.cpp / ollama report one failure on several consecutive lines
            if (
                ev.framework in ("llama.cpp", "ollama")
                and p.framework == ev.framework
                and ev.kind != "startup"
                and p.kind != "startup"
                and gap <= 3
            ):
                kind = "kv_cache" if "kv_cache" in (p.kind, ev.kind) else "allocation"
                out[-1] = _merge(p, ev, kind)
                ends[-1] = last
                prev_end = last
                continue
            # text-generation-inference echoes its warm-up error (shard, router, launcher)
            if ev.framework == "tgi" and ev.kind == "kv_cache":
                echo = next(
                    (
                        k
                        for k in range(len(out) - 1, -1, -1)
                        if out[k].framework == "tgi"
                        and out[k].kind == "kv_cache"
                        and out[k].tokens.get("prefill_tokens") == ev.tokens.get("prefill_tokens")
                        and ev.line_no - out[k].line_no <= 400
                    ),
                    None,
                )
                if echo is not None:
                    out[echo] = _merge(out[echo], ev)
                    prev_end = last
                    continue
        out.append(ev)
        ends.append(last)
        prev_end = last
    return out


# ------------------------------------------------------------------------------ echoes

_CHAIN_MARKERS = (
    "During handling of the above exception",
    "The above exception was the direct cause",
)
_EXC_HEAD = ascii_re(r"(?:[A-Za-z_][\w.]{0,100}(?:Error|Exception)|[Ee]rror):\s{0,4}")
_WS = re.compile(r"\s+")

# How two lines are linked, scanned from the first towards the second: (a chained-exception
# marker waits for its traceback, a marker was seen, a traceback of its own started).
_Link = tuple[bool, bool, bool]
_UNLINKED: _Link = (False, False, False)


def _core(message: str) -> str:
    """The message without the exception name in front, white space collapsed."""
    m = _EXC_HEAD.match(message)
    return _WS.sub(" ", message[m.end() :] if m else message).strip().strip("'\"")


def _scan(log: CleanLog, start: int, stop: int, link: _Link) -> _Link:
    """Carry `link` over cleaned lines start..stop-1: a traceback that no chained-exception
    marker ("During handling of the above exception", "The above exception was the direct
    cause") announces starts a failure of its own."""
    pending, chained, fresh = link
    for i in range(start, stop):
        if fresh:
            break
        s = log.lines[i].lstrip()
        if s.startswith(_CHAIN_MARKERS):
            pending = chained = True
        elif s.startswith("Traceback (most recent call last)"):
            fresh = not pending
            pending = False
    return pending, chained, fresh


def _echoes(log: CleanLog, a: OomEvent, b: OomEvent, link: _Link) -> bool:
    """Whether failure b repeats the earlier failure a (line_no: 1 + cleaned index), the lines
    between them scanned into `link`."""
    if a.gpu_index is not None and b.gpu_index is not None and a.gpu_index != b.gpu_index:
        return False
    if log.tag(a.line_no - 1) != log.tag(b.line_no - 1):
        return False  # another rank / worker failed too: a failure of its own
    _pending, chained, fresh = link
    if chained and not fresh:
        return True  # re-raised by a wrapper, or a clean-up error while handling the first
    core_a = _core(a.message)
    same = bool(a.figures) and a.figures == b.figures and core_a == _core(b.message)
    if fresh:
        return same  # printed again whole (a launcher relaying a shard's traceback)
    if same or (b.figures and all(a.figures.get(k) == v for k, v in b.figures.items())):
        return True  # the same figures: a logger or a server repeating the message
    return len(core_a) >= 12 and core_a[:160] in _WS.sub(" ", b.message)


def _mark_echoes(events: list[OomEvent], log: CleanLog) -> list[OomEvent]:
    """Each failure that repeats an earlier one gets `echo_of` (the original's line_no, in
    cleaned numbering like line_no). A failure is compared with the failure just before it
    and with that one's original; the lines between are scanned once for each: linear."""
    out: list[OomEvent] = []
    prev: OomEvent | None = None  # the last failure
    root: OomEvent | None = None  # the original that `prev` is or repeats
    root_link = _UNLINKED  # the lines from root up to prev, scanned
    for ev in events:
        if not ev.is_failure or ev.echo_of is not None:  # a heading: already marked
            out.append(ev)
            continue
        if prev is not None and root is not None:
            start, stop = prev.line_no, ev.line_no - 1  # the lines strictly between
            link = _scan(log, start, stop, _UNLINKED)
            from_root = _scan(log, start, stop, root_link) if root is not prev else link
            if _echoes(log, prev, ev, link) or (
                root is not prev and _echoes(log, root, ev, from_root)
            ):
                ev = replace(ev, echo_of=root.line_no)
                root_link = from_root
            else:
                root, root_link = ev, _UNLINKED
        else:
            root = ev
        prev = ev
        out.append(ev)
    return out


_RUNTIME_ONLY = ("cuda", "hip")  # the framework of a message that names only the device runtime
MAX_HEADING_GAP = 3  # lines between a figure-less mention and the message it announces
MAX_JUPYTER_TRACEBACK = 3_000  # lines between IPython's heading and the exception's message
_JUPYTER_HEADING = ascii_re(r"\s{0,16}([\w.]{1,120})\s{1,80}Traceback \(most recent call last\)")


def _mark_headings(events: list[OomEvent], log: CleanLog) -> list[OomEvent]:
    """A failure without figures right before a failure of the same framework that has them
    ("but now I get CUDA out of memory error:" above the message, a logger's one-line summary
    above the traceback's last line), with no traceback between: the same failure, said
    twice. The first gets `echo_of` the second, which is acted on."""
    out = list(events)
    for k in range(len(out) - 1):
        a, b = out[k], out[k + 1]
        if not (a.is_failure and b.is_failure) or a.echo_of is not None:
            continue
        jupyter = _JUPYTER_HEADING.match(a.message)
        if jupyter and not a.figures and b.line_no - a.line_no <= MAX_JUPYTER_TRACEBACK:
            # IPython heads its traceback with the exception's name; the message itself,
            # with the figures, is the traceback's last line: one failure
            if jupyter.group(1).rsplit(".", 1)[-1] in b.message:
                out[k] = replace(a, echo_of=b.line_no)
            continue
        if a.figures or a.tokens or not b.figures:
            continue
        if a.framework != b.framework and not (
            a.framework in _RUNTIME_ONLY and b.line_no - a.line_no == 1
        ):
            # a device runtime's bare "out of memory" (TensorRT's "Error Code 1: Cuda Runtime
            # (out of memory)") with the engine's own line and its figures right under it
            continue
        if b.line_no - a.line_no > MAX_HEADING_GAP + 1:
            continue
        if log.tag(a.line_no - 1) != log.tag(b.line_no - 1):
            continue
        if _scan(log, a.line_no, b.line_no - 1, _UNLINKED) != _UNLINKED:
            continue  # a traceback or a chained-exception marker between them
        out[k] = replace(a, echo_of=b.line_no)
    return out


def _primary_index(events: list[OomEvent]) -> int | None:
    """The first failure (not a repeat of another); else the first offloading warning; else
    the last event."""
    for k, e in enumerate(events):
        if e.kind in FAILURE_KINDS and e.echo_of is None:
            return k
    for k, e in enumerate(events):
        if e.kind == "offload":
            return k
    return len(events) - 1 if events else None


# ------------------------------------------------------------------------------ not an OOM

_EXCEPTION_LINE = ascii_re(
    r"(?:[A-Za-z_][\w.]{0,100}\.)?[A-Z]\w{0,80}(?:Error|Exception|Exit|Interrupt|"
    r"Failure)\b(?::\s?.{0,400})?\s*$|Error: .{1,400}$"
)
_UNREADABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


def _last_exception(reader: _Reader) -> int | None:
    """0-based index of the last exception line ("ValueError: ...") in the last 5,000 lines."""
    for i in range(reader.n - 1, max(-1, reader.n - 5_000), -1):
        line = reader.norm(i).strip()
        if line and _EXCEPTION_LINE.match(line) and not reader.is_code_line(i):
            return i
    return None


def _host_error_beside_retries(reader: _Reader, failures: list[str]) -> bool:
    last = _last_exception(reader)
    return host_error_beside_retries(failures, reader.norm(last) if last is not None else None)


def _reported_in_words(reader: _Reader) -> list[OomEvent]:
    """An out-of-memory error the reporter names in words, when the text holds no error
    message of any kind (no exception line, no near miss): one event with no figures."""
    if _last_exception(reader) is not None or near_miss(reader.log) is not None:
        return []
    said = reported_oom(reader.log.lines)
    if said is None:
        return []
    return [
        OomEvent(
            framework="unknown",
            kind="reported",
            message=said.sentence,
            line_no=said.line_idx + 1,
            gpu_index=None,
        )
    ]


def _not_oom_reason(text: str, reader: _Reader, events: list[OomEvent]) -> str:
    if not text.strip():
        return (
            "the text is empty: paste the error output of the failing run (the traceback "
            "or the last lines of its log)"
        )
    sample = text[:100_000]
    bad = len(_UNREADABLE.findall(sample))
    if bad > 0.1 * len(sample):
        return (
            f"this does not look like a log ({bad * 100 // max(1, len(sample))}% of the "
            "characters are not text): paste the error output of the failing run as text"
        )
    last = _last_exception(reader)
    last_exc = reader.norm(last).strip() if last is not None else None
    tail = f"it ends with {last_exc[:240]}" if last_exc else None
    notes = []
    startup = [e for e in events if e.kind == "startup"]
    seen = near_miss(reader.log)
    if seen is not None and not (seen[0] == "notice" and startup):
        notes.append(seen[1])
    if "[deepspeed] OVERFLOW!" in text:
        notes.append(
            "'[deepspeed] OVERFLOW!' is an fp16 loss-scale overflow (the step is "
            "skipped), not a memory error"
        )
    window = "\n".join(reader.clean(i) for i in range(max(0, reader.n - 200), reader.n))
    limit = BLOCK_LIMIT.search(window)
    if limit:
        notes.insert(
            0,
            f"'{limit.group(0)}' is the XPU platform's limit on one allocation, not exhausted "
            "memory: split the tensor (or enable allocations over 4 GB where the driver allows)",
        )
    if startup:
        frameworks = sorted({e.framework for e in startup})
        notes.append(f"only {'/'.join(frameworks)} start-up memory lines were found, no failure")
    parts = [p for p in (*notes[:1], tail, *notes[1:]) if p]
    if not parts:
        parts = [f"no error line in its {reader.n:,} lines"]
    return (
        "no out-of-memory error in this text: "
        + "; ".join(parts)
        + "; paste the traceback of the failing run"
    )


# ------------------------------------------------------------------------------ entry point


def read_log(text: str) -> TriageReading:
    """Everything out-of-memory in `text` (a traceback, a log tail, a whole log)."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = str(text)
    log = clean_log(text)
    reader = _Reader(log)
    cleaned = "\n".join(log.lines)
    found: list[tuple[OomEvent, int]] = []
    consumed_until = -1
    for i in _candidate_lines(cleaned):
        if i <= consumed_until or i >= reader.n:
            continue
        hit = reader.event_at(i, consumed_until)
        if hit is None:
            continue
        event, last = hit
        if event.line_no - 1 <= consumed_until:
            continue
        found.append(hit)
        consumed_until = last
    ollama = any(ev.framework == "llama.cpp" for ev, _ in found) and (
        "ollama" in text or "llama runner" in text or ("source=" in text and ".go:" in text)
    )
    events = _postprocess(found, reader, ollama)  # line_no: 1 + index in the cleaned lines
    # the host's RAM, not the GPU's: said by not_oom_reason (not_oom.near_miss), not an event
    # (RMM and thrust throw a device's failure as a std::bad_alloc: "std::bad_alloc:
    # cudaErrorMemoryAllocation: out of memory" names the device's error)
    events = [
        e
        for e in events
        if e.framework == "rmm"
        or any(mark in e.message for mark in _DEVICE_ERROR_NAMES)
        or not any(mark in e.message for mark in HOST_RAM_ALLOC)
    ]
    events = _mark_echoes(_mark_headings(events, log), log)
    failures = [e.message for e in events if e.is_failure]
    if failures and _host_error_beside_retries(reader, failures):
        events = [e for e in events if not e.is_failure]
    if not events:
        events = _reported_in_words(reader)
    is_oom = any(e.kind != "startup" for e in events)
    primary_at = _primary_index(events)
    if is_oom and primary_at is not None:
        phase = phase_of(log, events[primary_at].line_no - 1)
    elif text.strip():
        last = _last_exception(reader)
        phase = (
            phase_of(log, last)
            if last is not None
            else PhaseVerdict("unknown", "", None, "no error line in the text")
        )
    else:
        phase = PhaseVerdict("unknown", "", None, "the text is empty")
    events = [
        replace(
            e,
            line_no=log.line_nos[e.line_no - 1],
            echo_of=None if e.echo_of is None else log.line_nos[e.echo_of - 1],
        )
        for e in events
    ]
    primary = events[primary_at] if primary_at is not None else None
    return TriageReading(
        is_oom=is_oom,
        events=tuple(events),
        primary=primary,
        phase=phase,
        framework=primary.framework if primary else None,
        not_oom_reason="" if is_oom else _not_oom_reason(text, reader, events),
    )


__all__ = [
    "FAILURE_KINDS",
    "FIGURE_KEYS",
    "FRAMEWORKS",
    "KINDS",
    "LISTED_FIGURE_KEYS",
    "OomEvent",
    "TriageReading",
    "line_tag",
    "read_log",
]
