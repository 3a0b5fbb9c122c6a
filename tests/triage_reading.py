"""Helpers the triage round tests share: read a hand-written excerpt that must be an OOM."""

from __future__ import annotations

from vramtui.triage.reader import TriageReading, read_log


def reading(text: str) -> TriageReading:
    """The reader's answer for `text`, which must be read as an out-of-memory error."""
    r = read_log(text)
    assert r.is_oom, r.not_oom_reason
    return r


def stage(text: str) -> str:
    """The stage the reader gives the OOM in `text`."""
    return reading(text).phase.phase
