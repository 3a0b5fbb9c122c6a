"""Where did it run out of memory? Read the traceback (and the log around it) and name the phase.

`phase_of(log, event_idx)` decides, in this order, and says why:

1. The traceback that ends at the error line (`tracebacks.collect_frames`): the DEEPEST frame
   that says something decides (frames nearer the error win over outer ones), so an AdamW
   state initialisation (`_init_group`) reached from `training_step` is an optimizer step.
   Two outer frames change what a deeper one means: an engine's start-up (vLLM's
   `profile_run`, TGI's `warmup`) makes its forward a start-up (`load`), and an evaluation loop
   (`evaluate`, `prediction_step`, `_do_eval`) makes a forward or a `generate()` inside it
   evaluation (`other`). A code line left without its header (a paste cut mid-traceback)
   counts as a frame: `loss.backward()`, `optimizer.step()`, `torch._foreach_sqrt(...)`.
2. The error line itself and the few lines after it (a vLLM KV-cache error, a llama.cpp
   context, TensorFlow's failed op name).
3. The lines printed after the error as the program unwound ("Shard 0 failed to start",
   "Method Prefill encountered an error", "Total training time").
4. The log lines and code lines before the traceback, nearest first, at most
   LOG_CONTEXT_LINES of them ("Loading checkpoint shards", "Epoch [2][250/267]", a ComfyUI
   node type, a reproduction snippet's `model.quantize(...)`).
5. When none of these decides, `phase_fallback` reads the whole paste as words: a TensorFlow
   node named anywhere, inference named in code with no training anywhere, a model's forward
   in a whole traceback (or a quoted model call) with no training anywhere, or a forward in a
   run that trains.

It reads the lines `log_prefixes.clean_log` left (prefixes, colours and wrappers gone) and
answers with the original line numbers. Everything is plain `re`, line by line, with bounded
quantifiers and a cap on the length of a line that is looked at, so a hostile paste cannot make
a pattern backtrack for long.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from vramtui.triage import phase_log_rules as log_rules
from vramtui.triage import phase_rules as rules
from vramtui.triage.log_prefixes import CleanLog, clean_lines
from vramtui.triage.phase_fallback import fallback_phase
from vramtui.triage.tracebacks import (
    MAX_TRACEBACK_LINES,
    TB_HEADER,
    Frame,
    collect_frames,
    collect_frames_after,
    parse_header,
)

PHASES = ("load", "generate", "train_forward", "backward", "optimizer_step", "other", "unknown")

LOG_CONTEXT_LINES = 300  # how far back from the traceback the log is read for a phase hint
AFTER_CONTEXT_LINES = 40  # how far after the error the log is read for what had just failed
EVENT_TAIL_LINES = 6  # lines after the error line read with it (llama.cpp, TensorFlow)
# an engine's own words for the step that failed ("Error during forward propagation:")
_FORWARD_WORDS = re.compile(r"\bforward (?:propagation|pass|computation)\b", re.ASCII)

__all__ = [
    "LOG_CONTEXT_LINES",
    "MAX_TRACEBACK_LINES",
    "PHASES",
    "Frame",
    "PhaseVerdict",
    "collect_frames",
    "localise_phase",
    "phase_of",
]


@dataclass(frozen=True)
class PhaseVerdict:
    phase: str
    evidence: str  # the line that decided it (stripped)
    line_no: int | None  # 1-based
    reason: str  # one line: why this line means this phase


def _unknown(reason: str) -> PhaseVerdict:
    return PhaseVerdict(phase="unknown", evidence="", line_no=None, reason=reason)


def localise_phase(lines: Sequence[str], event_line_no: int | None) -> PhaseVerdict:
    """Decide the phase of the error at 1-based `event_line_no` in `lines` (the pasted text split
    on newlines, as pasted: prefixes, colours and wrappers are cleaned here). `None`: the end of
    the text. The verdict's line number is a line of `lines`."""
    log = clean_lines(list(lines))
    idx = None if event_line_no is None else log.index_of(event_line_no)
    return phase_of(log, idx)


def _line_verdict(log: CleanLog, j: int, phase: str, why: str) -> PhaseVerdict:
    return PhaseVerdict(
        phase=phase, evidence=log.lines[j].strip()[:500], line_no=log.line_nos[j], reason=why
    )


def phase_of(log: CleanLog, event_idx: int | None) -> PhaseVerdict:
    """Decide the phase of the error on cleaned line `event_idx` of `log` (None: the last
    non-blank line). The verdict gives the original line number."""
    lines = log.lines
    if not lines:
        return _unknown("the text is empty")
    if event_idx is None or not 0 <= event_idx < len(lines):
        # No event line given: the last non-blank line (the exception that ends a traceback)
        event_idx = len(lines) - 1
        while event_idx > 0 and not lines[event_idx].strip():
            event_idx -= 1
    frames = collect_frames(log, event_idx, 0)
    verdict = _from_frames(frames, log)
    if verdict is None or verdict[1] == "weak":
        # The frames above the error say nothing (only the model's own layers): a traceback
        # printed after it (the message quoted first, a chained exception) holds the outer
        # frames of the same failure.
        seen = {fr.header_no for fr in frames}
        after = [fr for fr in collect_frames_after(log, event_idx) if fr.header_no not in seen]
        found = _from_frames(after, log) if after else None
        if found is not None and found[1] != "weak":
            verdict = found
            frames = after + frames
    if verdict is not None and verdict[1] == "context" and verdict[0].phase == "train_forward":
        if any(rules.is_graph_training_frame(fr) for fr in frames):
            # Keras / TensorFlow: the step is one graph call; only the failed op's name tells.
            return _from_event_line(log, event_idx) or PhaseVerdict(
                "unknown",
                verdict[0].evidence,
                verdict[0].line_no,
                "a Keras / TensorFlow training loop runs forward, backward and the optimizer "
                "update in one graph call, and the error names no op that tells them apart",
            )
    if verdict is not None and verdict[1] != "weak":
        return verdict[0]
    weak = verdict[0] if verdict is not None else None
    found = _from_event_line(log, event_idx)
    if found:
        return found  # the error itself names the step (an op, an engine's phase)
    start = event_idx + 1
    caffe = log_rules.caffe_stack_rule(log.lines[start : start + AFTER_CONTEXT_LINES])
    if caffe is not None:  # the stack names the step itself
        return _line_verdict(log, start + caffe[0], caffe[1], caffe[2])
    found = _from_log_after(log, event_idx)
    if found:
        return _training_step(found, frames, log, event_idx)
    if weak:
        return weak
    headed = [fr for fr in frames if fr.func]  # a cut-off code line is read again as context
    top = headed[0].header_no if headed else event_idx
    found = _from_log_before(log, top)
    if found:
        return _training_step(found, frames, log, event_idx)
    found = _from_code_after(log, event_idx)
    if found:
        return found
    found = _from_training_script(headed, log)
    if found:
        return found
    found = _from_engine_frames(headed, log)
    if found:
        return found
    found = _from_construction(headed, log)
    if found:
        return found
    found = _from_executor_line(log)
    if found:
        return found
    guess = fallback_phase(log, event_idx, frames)
    if guess is not None:
        return _line_verdict(log, guess.line_idx, guess.phase, guess.reason)
    if headed:
        return _unknown(
            f"no frame of the {len(headed)}-frame traceback names a load, "
            "generation, training or optimizer step"
        )
    return _unknown("no traceback and no log line says what was running")


def _from_training_script(frames: list[Frame], log: CleanLog) -> PhaseVerdict | None:
    """Last resort: a training script (by its file name) calls the model and the traceback
    ends in module forwards, or computes a loss (a function or a variable named for one), with
    nothing else saying what ran: the training forward."""
    scripts = [fr for fr in frames if rules.is_training_script(fr)]
    if not scripts or not any(
        rules.is_module_forward(fr) or _computes_a_loss(fr) for fr in frames
    ):
        return None
    return _frame_verdict(
        scripts[-1],
        (
            "train_forward",
            "weak",
            (
                "a training script (by its file name) runs the model and the traceback ends "
                "in its forward, with no backward, optimizer, evaluation or loading frame"
            ),
            False,
        ),
        log,
    )


_LOSS_STATEMENT = re.compile(r"\b\w{0,40}loss\w{0,40}\s{0,4}[-+*/]?=[^=]", re.ASCII)


def _computes_a_loss(fr: Frame) -> bool:
    """The frame's function is named for a loss (compute_content_loss), or its statement
    assigns one (content_loss = ...)."""
    return "loss" in fr.func.lower() or bool(fr.code and _LOSS_STATEMENT.search(fr.code[:400]))


def _from_engine_frames(frames: list[Frame], log: CleanLog) -> PhaseVerdict | None:
    """Last resort: the traceback runs in a serving engine's code (vLLM, SGLang, TGI...) and
    nothing says it was starting up (no start-up frame, no start-up log line): the engine was
    running a request's forward."""
    inside = [fr for fr in frames if rules.is_engine_frame(fr)]
    if not inside or any(rules.is_startup_frame(fr) for fr in frames):
        return None
    return _frame_verdict(
        inside[-1],
        (
            "generate",
            "weak",
            (
                "the traceback runs in a serving engine's code, and no frame or log line says "
                "the engine was starting up: serving a request"
            ),
            False,
        ),
        log,
    )


_BUILDS_AN_OBJECT = re.compile(r"^\s{0,16}[\w.]{1,60}\s{0,2}=\s{0,2}[\w.]{0,80}[A-Z]\w{0,60}\(", re.ASCII)


def _from_construction(frames: list[Frame], log: CleanLog) -> PhaseVerdict | None:
    """Last resort: the traceback ends in constructors (`__init__`, each calling the next)
    entered from a top-level statement that builds an object (`encoding = tcnn.Encoding(...)`):
    the model or its parameters were being created, before any step."""
    if len(frames) < 2 or frames[0].func not in ("<module>", "main", "<cell>"):
        return None
    entry, below = frames[0], frames[1:]
    if not all(fr.func.rsplit(".", 1)[-1] == "__init__" for fr in below):
        return None
    if not (entry.code and _BUILDS_AN_OBJECT.search(entry.code[:400])):
        return None
    why = (
        "the traceback ends inside constructors entered from a statement that builds an "
        "object: the model (or its parameters) was being created, before any step"
    )
    return _frame_verdict(below[-1], ("load", "weak", why, False), log)


def _from_executor_line(log: CleanLog) -> PhaseVerdict | None:
    """An application's executor line that says the OOM was caught while running a workflow
    (`phase_log_rules.EXECUTOR_RULES`), anywhere in the paste."""
    for j, raw in enumerate(log.lines[:_EXECUTOR_LINES]):
        hit = log_rules.executor_rule(raw[:_EXECUTOR_LINE_CHARS])
        if hit:
            return _line_verdict(log, j, hit[0], hit[1])
    return None


_EXECUTOR_LINES = 3_000
_EXECUTOR_LINE_CHARS = 600


def _training_step(
    found: PhaseVerdict, frames: list[Frame], log: CleanLog, event_idx: int
) -> PhaseVerdict:
    """A log line that only says training was running names no step: it is the forward pass
    when the frames are module forwards (or the error names a forward op), unknown otherwise."""
    if found.phase != "train_forward":
        return found
    for fr in frames:
        func = fr.func.rsplit(".", 1)[-1]
        if func in ("forward", "_call_impl", "_wrapped_call_impl", "__call__", "_conv_forward"):
            why = f"{found.reason}; the traceback's frames are module forwards ({fr.func})"
            return PhaseVerdict("train_forward", found.evidence, found.line_no, why)
    tail = " ".join(log.lines[event_idx : event_idx + EVENT_TAIL_LINES])[:4_000]
    if "Forward" in tail or _FORWARD_WORDS.search(tail):
        why = f"{found.reason}; the error names a forward operation"
        return PhaseVerdict("train_forward", found.evidence, found.line_no, why)
    return PhaseVerdict(
        "unknown",
        found.evidence,
        found.line_no,
        f"{found.reason}, but no frame or line says whether it was the forward pass, the "
        "backward pass or the optimizer step",
    )


def _from_frames(frames: list[Frame], log: CleanLog) -> tuple[PhaseVerdict, str] | None:
    """(verdict, strength) from the deepest deciding frame, or None."""
    context_hit: tuple[int, rules.Rule] | None = None
    weak_hit: tuple[int, rules.Rule] | None = None
    for pos in range(len(frames) - 1, -1, -1):  # deepest first
        rule = rules.classify_frame(frames[pos])
        if pos == len(frames) - 1:
            rule = rules.deepest_code_rule(frames[pos], rule)
        if rule is None:
            continue
        strength = rule[1]
        if strength == "strong":
            return _scoped(frames, pos, rule, log), "strong"
        if strength == "context" and context_hit is None:
            context_hit = (pos, rule)
        elif strength == "weak" and weak_hit is None:
            weak_hit = (pos, rule)
    if context_hit:
        return _scoped(frames, *context_hit, log), "context"
    if weak_hit:
        return _scoped(frames, *weak_hit, log), "weak"
    return None


def _scoped(frames: list[Frame], pos: int, rule: rules.Rule, log: CleanLog) -> PhaseVerdict:
    """The frame's verdict, unless an outer frame puts it in an engine's start-up or in an
    evaluation loop (the nearest such frame above it decides)."""
    phase = rule[0]
    if phase in ("generate", "train_forward"):
        for outer in range(pos - 1, -1, -1):
            fr = frames[outer]
            func = fr.func.rsplit(".", 1)[-1]
            if phase == "generate" and rules.is_startup_frame(fr):
                why = (
                    f"the inference forward below it runs inside the engine's start-up ({func}: "
                    "memory profiling, KV-cache sizing or warm-up), before any request"
                )
                return _frame_verdict(fr, ("load", "strong", why, False), log)
            if func in rules.EVAL_SCOPE_FUNCS:
                why = (
                    f"the forward below it ({frames[pos].func or 'a model call'}) runs inside "
                    "the evaluation loop: evaluation, not a training or generation step"
                )
                return _frame_verdict(fr, ("other", "strong", why, False), log)
    return _frame_verdict(frames[pos], rule, log)


def _frame_verdict(fr: Frame, rule: rules.Rule, log: CleanLog) -> PhaseVerdict:
    phase, _strength, why, on_code = rule
    if on_code and fr.code_no is not None:
        evidence, idx = fr.code, fr.code_no
    else:
        evidence, idx = log.lines[fr.header_no].strip(), fr.header_no
    if not fr.func:
        reason = f"a code line left of a cut-off traceback: {why}"
    else:
        reason = f"the deepest deciding frame is {fr.func} ({_short(fr.file)}): {why}"
    return PhaseVerdict(
        phase=phase, evidence=evidence[:500], line_no=log.line_nos[idx], reason=reason
    )


def _short(file: str) -> str:
    if not file:
        return "file cut off"
    parts = [p for p in file.split("/") if p]
    for anchor in ("site-packages", "dist-packages"):
        if anchor in parts:
            k = parts.index(anchor)
            return "/".join(parts[k + 1 :])
    return "/".join(parts[-2:]) if len(parts) > 2 else file


def _from_event_line(log: CleanLog, event_idx: int) -> PhaseVerdict | None:
    """The error line and, for llama.cpp / TensorFlow logs, the few lines after it."""
    lines = log.lines
    if not lines[event_idx]:
        return None
    # a line that heads the message (TensorFlow 2's "Node: 'x'", onnxruntime's "... Status
    # Message:" before the allocator's line) is part of the error
    first = (
        event_idx - 1 if event_idx and log_rules.heads_message(lines[event_idx - 1]) else event_idx
    )
    for j in range(first, min(len(lines), event_idx + EVENT_TAIL_LINES)):
        text = lines[j][:2_000]
        if j > event_idx and not text.strip():
            break
        hit = log_rules.caller_rule(text)
        if hit:
            return _line_verdict(log, j, *hit)
    for j in range(first, min(len(lines), event_idx + EVENT_TAIL_LINES)):
        text = lines[j][:2_000]
        if j > event_idx and not text.strip():
            break
        hit = log_rules.event_line_rule(text)
        if hit is None and j == event_idx:
            hit = log_rules.logger_prefix_rule(log.prefixes[j])
        if hit:
            return _line_verdict(log, j, *hit)
    return None


def _from_log_after(log: CleanLog, event_idx: int) -> PhaseVerdict | None:
    """Lines printed after the error as the program unwound, nearest first; a new traceback
    (another error) ends the search."""
    lines = log.lines
    for j in range(event_idx + 1, min(len(lines), event_idx + 1 + AFTER_CONTEXT_LINES)):
        text = lines[j][:600]
        if TB_HEADER.match(text):
            break
        hit = log_rules.after_line_rule(text)
        if hit:
            return _line_verdict(log, j, *hit)
    return None


def _from_code_after(log: CleanLog, event_idx: int) -> PhaseVerdict | None:
    """A reproduction snippet quoted after the error (issue templates put the error first).
    Which of its lines failed is not shown, so it decides only when every line of it that says
    something says the same stage (a snippet that loads and then trains or generates does not
    decide). Read until a new traceback."""
    lines = log.lines
    first: tuple[int, str, str] | None = None
    for j in range(event_idx + 1, min(len(lines), event_idx + 1 + AFTER_CONTEXT_LINES)):
        text = lines[j][:600]
        if TB_HEADER.match(text):
            break
        if parse_header(text):
            continue
        hit = rules.snippet_rule(text)
        if hit is None and rules.RE_TRAIN_LOOP_CODE.search(text):
            hit = ("train_forward", "")
        if hit is None:
            continue
        if first is None:
            first = (j, *hit)
        elif hit[0] != first[1]:
            return None
    if first is None:
        return None
    j, phase, why = first
    return _line_verdict(
        log, j, phase, f"{why} (the only stage the code quoted after the error names)"
    )


def _from_log_before(log: CleanLog, top: int) -> PhaseVerdict | None:
    """Log lines and code lines above the traceback, nearest first (LOG_CONTEXT_LINES)."""
    lines = log.lines
    lowest = max(-1, top - 1 - LOG_CONTEXT_LINES)
    for j in range(min(top, len(lines)) - 1, lowest, -1):
        text = lines[j][:600]  # a log line says what it is doing near its start
        if not text or parse_header(text):
            continue
        if log_rules.is_inference_progress(text):
            return _progress_verdict(log, j, lowest)
        hit = log_rules.log_line_rule(text) or rules.snippet_rule(text)
        if hit:
            return _line_verdict(log, j, *hit)
    return None


def _progress_verdict(log: CleanLog, j: int, lowest: int) -> PhaseVerdict:
    """An mmcv test-loop progress bar: evaluation when training lines precede it in the window
    read, a stand-alone test (inference) otherwise."""
    for k in range(j - 1, lowest, -1):
        if log_rules.is_training_line(log.lines[k][:600]):
            return _line_verdict(
                log,
                j,
                "other",
                "an mmcv test-loop progress bar after training lines: the evaluation run "
                "between training epochs",
            )
    return _line_verdict(
        log,
        j,
        "generate",
        "an mmcv test-loop progress bar ('task/s') with no training before it: inference over "
        "a test set",
    )
