"""An out-of-memory error named only in the reporter's words.

Many real reports hold no error message at all: an issue title ("CUDA out of memory at
inference time with decoder_explain"), a sentence ("at step 4 during `loss.backward()` I
encounter a CUDA out-of-memory error"), a retyped line ("CUDA out of the memory"). No message
form reads them, and answering "not an out-of-memory error" would be wrong: the reporter says
it was one. `reported_oom` finds such a sentence, so the reader can say "an out-of-memory error,
in the reporter's words: no message, no figures" and ask for the error output.

It is read only when the text holds no error message of any kind (no exception line, no
out-of-memory message, no host-RAM kill or other near miss), and only for words that name the
GPU's memory: "CUDA out of memory", "GPU OOM", "out of GPU memory", "the GPU memory is
insufficient", or "OOM" / "out of memory" with a GPU word (CUDA, GPU, VRAM, a card's name) in
the same sentence. A negation just before ("no OOM", "without running out of GPU memory"),
host-memory words in the sentence (RAM, CPU, swap, killed) and a machine's line (a source
location or an error tag before the words: a message no form reads) keep a sentence out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_A = re.ASCII
_I = re.IGNORECASE | re.ASCII

MAX_PROSE_CHARS = 20_000  # of the text read for a sentence
SENTENCE_CHARS = 300  # of the sentence kept as the event's message

# Words that name the GPU's memory running out by themselves.
_GPU_OOM = re.compile(
    r"\b(?:cuda|gpu|vram|hbm|hip|device)[ -](?:out[ -]of[ -](?:the[ -])?memory|oom)\b|"
    r"\bout[ -]of[ -](?:gpu|video|device|cuda|vram)[ -]?memory\b|"
    r"\b(?:gpu|vram|video|cuda)[ -]memory (?:is|was|gets|got|runs?|ran) "
    r"(?:insufficient|not enough|exhausted|full|out)\b|"
    r"\bnot enough (?:gpu|vram|video|cuda)[ -]memory\b",
    _I,
)
# "OOM" / "out of memory" that needs a GPU word in the same sentence.
_BARE_OOM = re.compile(r"\bOOM(?:s|ed|ing)?\b|\bout[ -]of[ -]memory\b", _A | re.IGNORECASE)
_GPU_WORD = re.compile(
    r"\b(?:cuda|gpus?|vram|hbm|[AHLB]\d{2,3}|RTX|GTX|Tesla|V100|T4|3090|4090|A6000|MI\d{3}X?)\b",
    _A,
)
_GPU_WORD_LOWER = re.compile(r"\b(?:cuda|gpus?|vram)\b", _I)
# A host's memory, not the GPU's: the sentence is about RAM.
_HOST_WORDS = re.compile(
    r"\b(?:RAM|CPU|swap|host memory|system memory|killed|oom[- ]killer|cgroup|dmesg)\b", _I
)
_NEGATION = re.compile(
    r"\b(?:no|not|without|never|isn'?t|wasn'?t|doesn'?t|didn'?t|won'?t|instead of|rather than)"
    r"\b[^.\n]{0,30}$",
    _I,
)
# A machine's line, not a sentence: a source location ("ggml-cuda.cu:444:") or an error tag
# before the words ("HipVMM Failure: out of memory"). A message no form reads is not prose.
_MACHINE_LINE = re.compile(
    r"\.[A-Za-z]{1,4}:\d{1,6}\b|\b\w{0,40}(?:Error|Failure|Exception|FAILED|[Ff]ailed|error)\s?:\s",
    _A,
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n", _A)


@dataclass(frozen=True)
class ReportedOom:
    line_idx: int  # 0-based index of the line in the text given
    sentence: str  # the reporter's sentence, bounded


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence (or line) around text[start:end]."""
    left = max(0, start - SENTENCE_CHARS)
    before = text[left:start]
    cut = max(before.rfind("\n"), *(before.rfind(p + " ") for p in ".!?"))
    s = left + cut + 1 if cut >= 0 else left
    m = _SENTENCE_END.search(text, end, min(len(text), end + SENTENCE_CHARS))
    e = m.end() if m else min(len(text), end + SENTENCE_CHARS)
    return s, e


def reported_oom(lines: list[str]) -> ReportedOom | None:
    """The first sentence of `lines` that names a GPU out-of-memory error in words, or None.
    The caller has found no error message in the text."""
    text = "\n".join(lines)[:MAX_PROSE_CHARS]
    candidates: list[re.Match[str]] = []
    candidates += list(_GPU_OOM.finditer(text))
    candidates += list(_BARE_OOM.finditer(text))
    for m in sorted(candidates, key=lambda m: m.start()):
        s, e = _sentence(text, m.start(), m.end())
        if _NEGATION.search(text[max(s, m.start() - 40) : m.start()]):
            continue
        sentence = text[s:e]
        line_start = text.rfind("\n", 0, m.start()) + 1
        if _MACHINE_LINE.search(text, line_start, m.start()):
            continue
        if _HOST_WORDS.search(sentence):
            continue
        if not _GPU_OOM.match(text, m.start()) and not (
            _GPU_WORD.search(sentence) or _GPU_WORD_LOWER.search(sentence)
        ):
            continue
        line_idx = text.count("\n", 0, m.start())
        return ReportedOom(line_idx, " ".join(sentence.split())[:SENTENCE_CHARS])
    return None


__all__ = ["MAX_PROSE_CHARS", "ReportedOom", "reported_oom"]
