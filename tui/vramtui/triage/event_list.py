"""Which event of a paste the triage acts on, and the others, in plain lines.

A paste often holds more than one out-of-memory event: several runs, several ranks, a wrapper
re-raising the error, a clean-up error raised while handling it, a server repeating it, vLLM's
start-up report before the failure. The reader acts on the FIRST out-of-memory error (the
later ones are often its consequences); these lines say so, and list every other event with
its line number, for the CLI and the app alike. Plain strings: the caller strips control
characters before they reach a terminal (the messages are the user's text).
"""

from __future__ import annotations

from vramtui.triage.reader import OomEvent, TriageReading

MAX_EVENT_LINES = 20  # other events listed one by one; the rest are counted
MESSAGE_CHARS = 100  # of each other event's message


def failures_of_their_own(reading: TriageReading) -> list[OomEvent]:
    """The out-of-memory errors that repeat no earlier one, in order."""
    return [e for e in reading.events if e.is_failure and e.echo_of is None]


def headline(e: OomEvent) -> str:
    """What the event is, in a few words: "pytorch out of memory"; for an error named only in
    the reporter's words, that it has no message and so no figures."""
    if e.kind == "reported":
        return (
            "out of memory, in the reporter's words (no error message in the text, so no "
            "figures: paste the job's error output to read them)"
        )
    return f"{e.framework} out of memory"


def reported_event(reading: TriageReading) -> str:
    """Which event the triage acts on: "first of 3 out-of-memory errors, at line 12",
    "the out-of-memory error at line 12; 1 repeat listed below". "" when none."""
    ev = reading.primary
    if ev is None or not reading.is_oom:
        return ""
    if not ev.is_failure:
        return f"the offloading warning at line {ev.line_no} (no out-of-memory error)"
    own = len(failures_of_their_own(reading))
    repeats = sum(1 for e in reading.events if e.echo_of is not None)
    if own > 1:
        out = f"first of {own} out-of-memory errors, at line {ev.line_no}"
    else:
        out = f"the out-of-memory error at line {ev.line_no}"
    if repeats:
        out += f"; {repeats} repeat{'s' if repeats != 1 else ''} listed below"
    return out


def _what(e: OomEvent) -> str:
    if e.echo_of is not None:
        return f"repeats the error at line {e.echo_of}"
    if e.is_failure:
        return f"another {e.framework} out-of-memory error"
    if e.kind == "offload":
        return f"{e.framework} offloading warning"
    return f"{e.framework} start-up memory report"


def other_events(reading: TriageReading) -> list[str]:
    """One line per event other than the reported one, in order ("line 40: repeats the error
    at line 12: RuntimeError: ..."); at most MAX_EVENT_LINES, then a count of the rest."""
    ev = reading.primary
    others = [e for e in reading.events if e is not ev]
    lines = []
    for e in others[:MAX_EVENT_LINES]:
        msg = " ".join(e.message.split())
        if len(msg) > MESSAGE_CHARS:
            msg = msg[: MESSAGE_CHARS - 3] + "..."
        lines.append(f"line {e.line_no}: {_what(e)}: {msg}")
    if len(others) > MAX_EVENT_LINES:
        lines.append(f"... and {len(others) - MAX_EVENT_LINES} more events")
    return lines


__all__ = ["failures_of_their_own", "headline", "other_events", "reported_event"]
